"""Heartbeats: every r3 node says it is alive at a fixed wall-clock rate; watchers notice silence.

DDS discovery takes many seconds to drop a killed participant, so liveness is decided here, from
heartbeats received on the watcher's wall clock.
"""

from __future__ import annotations

import threading
import time

from rclpy._rclpy_pybind11 import InvalidHandle
from rclpy.clock import Clock, ClockType
from rclpy.node import Node

from r3.graph import names
from r3_msgs.msg import Heartbeat
from r3_ros.executor import InlineCallbackGroup, PolledCallbackGroup, deliver_pending
from r3_ros.qos import HEARTBEAT, HEARTBEATS_WATCHED
from r3_ros.shutdown import unless_shut_down

#: Wall seconds between beats. Each beat is a message to every watcher (a DDS receive and a take,
#: though no executor wake-up since ``HeartbeatMonitor`` takes them when asked). The shortest
#: watchdog, ``client_timeout_s`` (1 s), still spans four beats.
PERIOD_S = names.HEARTBEAT_PERIOD_S

#: Nodes a watcher remembers: anyone may publish beats under any name, and each new name held more.
REMEMBERED_NODES = 1024
#: A beat whose node name is longer than this is dropped: no ROS node's fully qualified name is (a
#: name is the key a watcher keeps, and 1,024 names of a megabyte each held a gigabyte).
NODE_NAME_CHARS = 512
#: A state is kept this long at most (r3's states are a few words: "idle", "recording:<episode id>").
STATE_CHARS = 200
#: A periodic beat this many seconds late is logged: the whole process stood still (no CPU, or a
#: call that holds the GIL blocked), and its watchers may have declared it dead meanwhile.
LATE_S = 1.0
#: How long ``r3 run`` on a graph it did not start waits out the reasoner's silence before it counts
#: it dead, stops its task and exits; a reasoner that stood still longer ends the episode it runs.
RUN_CLIENT_TIMEOUT_S = 3.0


class HeartbeatPublisher:
    """Publishes ``node``'s heartbeat every ``period_s`` of wall time, even under sim time, and logs a
    beat that comes ``LATE_S`` late (``warn_late``; off for a client that spins only now and then)."""

    def __init__(self, node: Node, period_s: float = PERIOD_S, state: str = "idle", warn_late: bool = True):
        self._state = state
        self._node = node
        self._pub = node.create_publisher(Heartbeat, names.HEARTBEAT, HEARTBEAT)
        self._wall = Clock(clock_type=ClockType.STEADY_TIME)
        self._period_s, self._warn_late = period_s, warn_late
        self._last_tick: float | None = None  # none before the node spins (it may take long to build)
        self._longest_gap_s = 0.0  # between two periodic beats, since ``mark_stillness``
        # A group of its own: a node's long callbacks (an action's execute) never delay its beat.
        self._timer = node.create_timer(
            period_s, self._tick, clock=self._wall, callback_group=InlineCallbackGroup()
        )

    @property
    def state(self) -> str:
        return self._state

    @state.setter
    def state(self, value: str) -> None:
        """A new state is announced at once, not at the next period (watchers may be waiting on it)."""
        changed, self._state = value != self._state, value
        if changed:
            self._beat()

    def mark_stillness(self) -> None:
        """From now on, :meth:`stood_still_s` measures (an episode's start)."""
        self._longest_gap_s = 0.0

    def stood_still_s(self) -> float:
        """The longest this process went without its periodic beat since :meth:`mark_stillness`,
        beyond the period, the gap still open now included: how long it stood still (frozen,
        starved, a call holding the GIL) as its watchers saw it."""
        open_gap = 0.0 if self._last_tick is None else time.monotonic() - self._last_tick
        return max(0.0, max(self._longest_gap_s, open_gap) - self._period_s)

    def _tick(self) -> None:
        now, last = time.monotonic(), self._last_tick
        self._last_tick = now
        self._beat()
        if last is not None:
            self._longest_gap_s = max(self._longest_gap_s, now - last)
        late_s = 0.0 if last is None else now - last - self._period_s
        if self._warn_late and late_s > LATE_S:
            self._node.get_logger().warning(
                f"heartbeat {late_s:.1f} s late: this process stood still (starved of CPU, or a call "
                "holding Python's GIL blocked); its watchers may have counted it silent"
            )

    def _beat(self) -> None:
        """One beat; none once the node's context has shut down (a state set while the node stops,
        as a recorder stopped mid-episode does when it has closed the bag: nobody is left to tell)."""
        with unless_shut_down(self._node):
            msg = Heartbeat(node=self._node.get_fully_qualified_name(), state=self._state)
            msg.header.stamp = Clock(clock_type=ClockType.SYSTEM_TIME).now().to_msg()
            self._pub.publish(msg)


class HeartbeatMonitor:
    """Tracks when each node was last heard from (this process's monotonic clock, from the time DDS
    received the beat).

    Every watcher asks often (a watchdog at each control step, a wait in 10 ms sleeps), so beats are
    taken when asked (``r3_ros.executor.PolledCallbackGroup``) rather than by an executor woken for
    each: a graph's beats woke every watcher some 20 times a second, about 0.5 ms of CPU each. A
    timer takes them every ``DRAIN_S`` as well, so that a watcher nobody asks never holds more than
    its queue (``HEARTBEATS_WATCHED``)."""

    #: Seconds between takes when nobody asks.
    DRAIN_S = 1.0

    def __init__(self, node: Node):
        self._self = node.get_fully_qualified_name()
        self._last: dict[str, float] = {}
        self._resumed = float("-inf")  # when this process was heard again after standing still
        self._states: dict[str, str] = {}
        self._lock = threading.RLock()  # each query holds it and takes the beats, which takes it too
        polled = PolledCallbackGroup()
        self._beats = node.create_subscription(
            Heartbeat, names.HEARTBEAT, self._on_beat, HEARTBEATS_WATCHED, callback_group=polled
        )
        wall = Clock(clock_type=ClockType.STEADY_TIME)
        node.create_timer(self.DRAIN_S, self._take, clock=wall, callback_group=InlineCallbackGroup())

    def _take(self) -> None:
        """Every beat received until now (none once the node is being destroyed)."""
        with self._lock:
            try:
                deliver_pending([self._beats])
            except InvalidHandle:
                pass

    def _on_beat(self, msg: Heartbeat, info) -> None:
        """Heard when DDS received it, however much later it is taken (now, if the rmw does not say)."""
        if len(msg.node) > NODE_NAME_CHARS:
            return
        received_ns = info.get("received_timestamp") or time.time_ns()
        heard = time.monotonic() - max(0.0, (time.time_ns() - received_ns) / 1e9)
        if msg.node == self._self and heard - self._last.get(self._self, heard) > LATE_S:
            self._resumed = heard  # this process stood still; its peers' beats are still on their way
        self._last.pop(msg.node, None)  # re-inserted last: the dict stays ordered by when each was heard
        self._last[msg.node] = heard
        self._states[msg.node] = msg.state[:STATE_CHARS]
        if len(self._last) > REMEMBERED_NODES:  # the one heard longest ago is forgotten
            forgotten = next(iter(self._last))
            del self._last[forgotten], self._states[forgotten]

    def state(self, node_name: str) -> str | None:
        """The state ``node_name`` last announced (None if never heard)."""
        with self._lock:
            self._take()
            return self._states.get(node_name)

    def silent_for(self, node_name: str) -> float:
        """Seconds since ``node_name`` (fully qualified) was last heard; inf if never."""
        with self._lock:
            self._take()
            last = self._last.get(node_name)
        return float("inf") if last is None else time.monotonic() - last

    def dead(self, node_names: list[str], timeout_s: float) -> list[str]:
        """Nodes heard from before whose heartbeat has been silent longer than ``timeout_s``.

        A verdict needs proof that this process still receives: its own node's heartbeats (which
        come back over DDS) must be recent. A starved watcher hears nobody and so declares nobody
        dead; a killed node stays silent while the watcher keeps hearing itself. A watcher that stood
        still (frozen, starved) gives every node a whole ``timeout_s`` from when it was heard again:
        its own beat comes back first, its peers' arrive later (retransmitted after its socket
        overflowed), and it blamed a live node for its own freeze.
        """
        with self._lock:
            self._take()
            now = time.monotonic()
            if now - self._last.get(self._self, float("-inf")) > timeout_s / 2:
                return []
            heard = {n: max(self._last[n], self._resumed) for n in node_names if n in self._last}
            return [n for n, last in heard.items() if now - last > timeout_s]
