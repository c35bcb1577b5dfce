"""The reasoner's side of the recorder's protocol: an episode that a graph records is never run
unrecorded, and a finished episode's result names a closed bag (an error's comes at once, naming
the bag the recorder opened for it, which it closes right after).

The protocol (``r3_recorder_node``): between episodes the recorder's heartbeat says "idle" once it
subscribes to every configured topic (``names.RECORDER_WAITING`` before); START opens a bag and the
heartbeat says "recording:<id>"; END closes the bag and the heartbeat leaves that state. The
reasoner's ``recorder_node`` parameter says which recorder the graph has ("" = none). Without that
word a reasoner that had not yet heard a slow recorder's first heartbeat took the graph for one
without a recorder and ran the episode unrecorded (seen under CPU load).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from rclpy.node import Node
from std_msgs.msg import String

from r3.graph import names
from r3_ros.conversions import publisher_gid
from r3_ros.heartbeat import HeartbeatMonitor
from r3_ros.node import endpoint_node, matchable_subscribers, named_publishers
from r3_ros.qos import BAGS_HEARD
from r3_ros.senders import NAME_WAIT_S, Senders

#: How often the waits below look at the recorder's heartbeat (taken when looked at, not pushed): at
#: each episode's start and end the reasoner waits for it, so a look every 10 ms cost 5 ms on average
#: twice per episode. A look takes the heartbeats received; the graph is asked only once they answer.
LOOK_S = 0.001


class RecordingError(RuntimeError):
    """The episode cannot be recorded, or its bag cannot be closed; the message names the recorder."""


class RecorderHandshake:
    """Waits, always bounded, on the recorder named by ``param["recorder_node"]``.

    ``param`` is the node's live parameter mapping (``recorder_node``, ``startup_timeout_s``,
    ``recorder_timeout_s``, ``heartbeat_timeout_s``), read at each use. ``record`` lists the
    publishers whose messages the bag must hold from the first step on.
    """

    def __init__(
        self, node: Node, monitor: HeartbeatMonitor, param: Mapping, record: list, callback_group=None
    ):
        self.node, self.monitor, self.param, self.record = node, monitor, param, record
        self._bag = ""  # the last bag the recorder said it opened
        self._bags = Senders(self.bag_publishers, NAME_WAIT_S)  # bag names, by who sent them
        self._bags_lock = threading.Lock()
        node.create_subscription(
            String, names.RECORDER_BAGS, self._on_bag, BAGS_HEARD, callback_group=callback_group
        )

    def bag_publishers(self) -> dict[bytes, str]:
        return named_publishers(self.node, names.RECORDER_BAGS, qualified=True)

    def _on_bag(self, msg: String, info) -> None:
        with self._bags_lock:
            if gid := publisher_gid(info):
                self._bags.add(msg.data, info, gid, time.monotonic())
            else:  # an rmw that gives no publisher: nothing to check it by
                self._bag = msg.data

    @property
    def bag(self) -> str:
        """The last bag the recorder said it opened. A bag name from any other node is refused and
        logged (one answering each START with a path of its own made the episode's result name it)."""
        with self._bags_lock:
            for decided in self._bags.decided(time.monotonic()) if self._bags.pending else []:
                if decided.sender == self.recorder:
                    self._bag = decided.message
                else:
                    self.node.get_logger().error(
                        f"refused a bag name {decided.message[:80]!r} from "
                        f"{decided.sender or 'an unknown node'!r}: only {self.recorder} names its bags",
                        throttle_duration_sec=1.0,
                    )
            return self._bag

    @property
    def recorder(self) -> str:
        return self.param["recorder_node"]

    def not_up(self) -> str:
        """Why an episode cannot be recorded from its first step yet ("" = it can, or the graph has
        no recorder): the recorder must be heard, subscribed to every topic it records, and reached
        by this node's publishers. Discovery can take many seconds on a loaded machine, so it is
        waited for here, before START, under the startup bound, not in the episode's handshake."""
        if not self.recorder:
            return ""
        state = self.monitor.state(self.recorder)
        if state is None:
            return f"{self.recorder} is not running"
        if state == names.RECORDER_WAITING:
            return f"{self.recorder} still waits for publishers of the topics it records (its log names them)"
        unmatched = self.unmatched()
        return f"{self.recorder} is not reached yet ({'; '.join(unmatched)})" if unmatched else ""

    def wait_recording(self, episode_id: str, check: Callable[[], None]) -> str:
        """After START: the absolute path of the episode's bag once the recorder records every topic
        and every publisher of ``record`` reaches it ("" when the graph has no recorder). ``check()``
        goes first at each look: a reasoner frozen through the deadline wakes to its own freeze's
        verdict, not to the recorder's, whose word it has not heard yet."""
        if not self.recorder:
            return ""
        timeout = self.param["recorder_timeout_s"]
        deadline = time.monotonic() + timeout
        while missing := self.not_yet_recording(episode_id):
            check()
            if time.monotonic() > deadline:
                raise RecordingError(
                    f"{self.recorder} did not start recording {episode_id} within {timeout:.1f} s "
                    f"({'; '.join(missing)})"
                )
            time.sleep(LOOK_S)
        return self.bag

    def not_yet_recording(self, episode_id: str) -> list[str]:
        """What still keeps the episode from being recorded from its first step ([] = nothing)."""
        missing = []
        state = self.monitor.state(self.recorder)
        if state != names.recording_state(episode_id):
            missing.append(f"its heartbeat says {state!r}")
        if not self.bag_of(episode_id):
            missing.append(f"its last bag is {self.bag!r}")
        return missing or self.unmatched()  # the graph's matching asked once the recorder answered

    def bag_of(self, episode_id: str) -> str:
        """The bag the recorder named for ``episode_id`` ("" while it has named none)."""
        bag = self.bag
        return bag if bag.endswith(f"/{episode_id}") else ""

    def unmatched(self) -> list[str]:
        """How the episode's record does not yet reach the recorder: the recorder must subscribe to
        the decision frames, and each publisher of ``record`` must have matched every subscriber this
        node has discovered that can match it (the recorder sees the reasoner's publishers before
        they see it, and a step published in between would miss the bag)."""
        frames = self.node.get_subscriptions_info_by_topic(names.REASONER_FRAMES)
        if not any(endpoint_node(s) == self.recorder for s in frames):
            return [f"no subscription of it to {names.REASONER_FRAMES} is known here"]
        missing = []
        for pub in self.record:
            matched = pub.get_subscription_count()
            known = len(matchable_subscribers(self.node, pub))
            if matched < known:
                missing.append(f"{pub.topic_name} matched {matched} of {known} subscribers")
        return missing

    def wait_closed(self, episode_id: str, exits: Callable[[], list[str]]) -> None:
        """After END, until the recorder has closed the episode's bag. A recorder that is gone
        meanwhile (its exit among ``exits``, a process manager's lines; or its silence) is a
        RecordingError, since the bag lacks the episode's end (the reasoner then sends END again
        with the error, which the bag of a recorder that was only frozen takes); one still
        recording after ``recorder_timeout_s`` is logged and left to finish."""
        deadline = time.monotonic() + self.param["recorder_timeout_s"]
        while self.monitor.state(self.recorder) == names.recording_state(episode_id):
            if gone := self.gone(exits):
                raise RecordingError(gone)
            if time.monotonic() > deadline:
                self.node.get_logger().warning(
                    f"{self.recorder} still records {episode_id}; not waiting longer"
                )
                return
            time.sleep(LOOK_S)

    def wait_named(self, episode_id: str, exits: Callable[[], list[str]]) -> str:
        """After END of an episode that ended before the recorder named its bag (an error while the
        reasoner waited for its "recording"): the bag the recorder names for ``episode_id``, waited for
        while it lives, at most ``recorder_timeout_s`` as :meth:`wait_closed`. The recorder took that
        START, or will, and closes the bag incomplete with END's reason; without its name the
        result left the client no way to its own episode's data. "" when none comes (no recorder,
        or one gone or that never took the START), logged."""
        if not self.recorder:
            return ""
        deadline = time.monotonic() + self.param["recorder_timeout_s"]
        while not (bag := self.bag_of(episode_id)):
            if (gone := self.gone(exits)) or time.monotonic() > deadline:
                self.node.get_logger().warning(
                    f"{self.recorder} named no bag for {episode_id}" + (f" ({gone})" if gone else "")
                )
                return ""
            time.sleep(LOOK_S)
        return bag

    def gone(self, exits: Callable[[], list[str]]) -> str:
        """Why the recorder is gone: its exit among ``exits`` (a process manager's lines), or its
        silence for ``heartbeat_timeout_s`` ("" while it lives)."""
        for member_exit in exits():
            if member_exit.split(" ", 1)[0] == self.recorder.rsplit("/", 1)[-1]:
                return member_exit
        timeout = self.param["heartbeat_timeout_s"]
        if self.monitor.dead([self.recorder], timeout):
            return f"{self.recorder} stopped responding (no heartbeat for {timeout:.1f} s)"
        return ""
