"""r3_lowlevel_node: executes one instruction closed-loop as the FollowInstruction action.

Each control step: act on the latest state, publish the pusher command, wait for the state that
command produced. Every command goes out through ``r3_ros.stop.MotionGuard``: none once the goal
is cancelled, once a stop of its family arrives on ``/r3/stop_motion`` (the fast path: the client's
stop of the RunTask it runs for, or the reasoner's, sent before the action cancel reaches this node),
or once the reasoner that sent the goal falls silent (watchdog: no heartbeat for ``client_timeout_s``).
Parse failures, unknown policies, a refused command (the simulator's answer on ``/pusher/refusals``)
and a silent simulator end as ordinary results with a reason; a wait for the state that timed out
while this process itself was frozen or starved names this node's freeze, not the simulator (which
was not heard meanwhile). An instruction's first command waits
until the graph shows a command subscriber in the participant whose state this node acts on, and
every subscriber the graph shows on the command topic has matched this node's publisher: DDS
discovers and matches each endpoint on its own, so on a loaded machine the simulator's state can
arrive seconds before its command subscription is even known (a recorder's reader alone then looks
like a listener), and a command published then is lost. One goal at a time: a new goal aborts the
running one (single-goal server).

States are kept per publishing participant (process), and the node acts on one: the simulator, the
participant that both publishes states and subscribes to the commands. It keeps acting on that one
while it stays in the graph (a simulator restarted is a new participant, found the same way). A
peer that publishes states of its own, between instructions or during one, is never acted on; two
participants that both look like the simulator, with neither acted on before, end the instruction
with an error that says so, before any command.

The policy is the one the ``policy`` parameter names (``r3.lowlevel.POLICIES``). The ``scripted`` one
reads the privileged simulator state; it stands in for R^3's learned Language Table policy, which would
act from camera images instead.
"""

from __future__ import annotations

import threading
import time
from functools import partial

from geometry_msgs.msg import Vector3Stamped

from r3.graph import names
from r3.graph.node_params import NODE_PARAMETERS
from r3.safety.freeze import FreezeWatch, stale_goal
from r3_msgs.msg import CommandRefusal, PrivilegedState
from r3_ros.conversions import msg_to_board_state, publisher_gid, stamp_to_ns
from r3_ros.executor import InlineCallbackGroup
from r3_ros.heartbeat import HeartbeatMonitor, HeartbeatPublisher
from r3_ros.instruction_server import Ended, InstructionServer, check_going
from r3_ros.node import R3Node, matchable_subscribers
from r3_ros.params import declare_parameters
from r3_ros.qos import REFUSALS, STATES_HEARD, recorded
from r3_ros.refusals import refusing_message
from r3_ros.spin import run_node
from r3_ros.stop import MotionGuard

#: Heartbeat state until the first simulator state arrives: the node cannot act yet.
WAITING_FOR_STATE = "waiting_for_state"
#: A DDS GUID's first 12 bytes name its participant (one per process); the last 4 its endpoint.
GUID_PREFIX_BYTES = 12
#: A refusal's reason is passed on this long at most (anyone can publish on the refusals topic).
REASON_CHARS = 300
#: The latest state of this many publishing participants is kept, the simulator's always.
STATE_SOURCES = 8
#: A wake-up of this process this late means it stood still (SIGSTOP, starvation): a state timeout
#: that ran out across such a freeze is the freeze's, not the simulator's.
FREEZE_DEADLINE_S = 0.5


def choose_simulator(
    sources: list[bytes], listening: set[bytes], acted_on: bytes
) -> tuple[bytes | None, str]:
    """The participant to act on among ``sources`` (those that published states; b"": an rmw that
    gives no GUID) by ``listening`` (the participants subscribed to the commands): the one
    ``acted_on`` before while it listens, else the only source that listens; None and why when there
    is none or more than one."""
    candidates = [s for s in sources if (s in listening if s else listening)]
    if acted_on in candidates:
        return acted_on, ""
    if len(candidates) == 1:
        return candidates[0], ""
    if not sources:
        return None, "no state from the simulator"
    if candidates:
        return None, (
            f"{len(candidates)} participants publish {names.PRIVILEGED_STATE} and subscribe to "
            f"{names.PUSHER_COMMAND}: not acting on either"
        )
    return None, f"no simulator subscribes to {names.PUSHER_COMMAND}"


class CommandRefused(Exception):
    """The simulator refused the command this node waits on; the message is its reason."""


class LowLevelNode(R3Node):
    """``r3_ros.instruction_server.InstructionServer`` acting over topics (the :class:`Plant` here)."""

    def __init__(self):
        super().__init__("r3_lowlevel_node")
        p = declare_parameters(self, NODE_PARAMETERS["r3_lowlevel_node"])
        self.state_timeout_s = p["state_timeout_s"]
        self.freezes = FreezeWatch(FREEZE_DEADLINE_S)

        self.state_cv = threading.Condition()
        #: The latest state of each participant that publishes states (by GUID prefix; b"" where the
        #: rmw gives none), and the monotonic time it arrived.
        self.states: dict[bytes, tuple[PrivilegedState, float]] = {}
        self.simulator = b""  # the GUID prefix of the participant acted on (the simulator)
        self.refusal: tuple[int, str] = (-1, "")  # the last refused command's stamp and the reason
        self.sent: tuple[int, bytes] = (-1, b"")  # the last command's stamp, and the state source it went to
        self.command_pub = self.create_publisher(Vector3Stamped, names.PUSHER_COMMAND, recorded(10))
        self.create_subscription(
            PrivilegedState,
            names.PRIVILEGED_STATE,
            refusing_message(self, self.on_state),
            STATES_HEARD,
            callback_group=InlineCallbackGroup(),
        )
        self.create_subscription(
            CommandRefusal,
            names.PUSHER_REFUSALS,
            refusing_message(self, self.on_refusal),
            REFUSALS,
            callback_group=InlineCallbackGroup(),
        )
        self.heartbeat = HeartbeatPublisher(self, state=WAITING_FOR_STATE)
        self.guard = MotionGuard(self, HeartbeatMonitor(self), p["client_timeout_s"], p["reasoner_node"])
        self.server = InstructionServer(
            self, self, p["policy"], p["default_max_steps"], self.guard, self.heartbeat
        )

    def on_state(self, msg: PrivilegedState, info) -> None:
        source = publisher_gid(info)[:GUID_PREFIX_BYTES]
        with self.state_cv:
            self.states.pop(source, None)  # re-inserted last: the dict runs from the stalest source
            self.states[source] = (msg, time.monotonic())
            if len(self.states) > STATE_SOURCES:
                del self.states[next(s for s in self.states if s != self.simulator)]
            self.state_cv.notify_all()
        if self.heartbeat.state == WAITING_FOR_STATE:
            self.heartbeat.state = "idle"

    def on_refusal(self, msg: CommandRefusal) -> None:
        with self.state_cv:
            self.refusal = (stamp_to_ns(msg.header.stamp), msg.reason[:REASON_CHARS])
            self.state_cv.notify_all()

    # -- the plant: commands out on /pusher/command, states back on /sim/privileged/state -------------
    def begin(self, handle):
        """The simulator's state after the last command sent, when that command's answer is still on
        its way (a preempted goal's last command: the next goal decides on the state it produced);
        else its latest state (and at once when the simulator refused that command, or restarted)."""
        why_not = self.wait_for_simulator(handle)
        if why_not:
            check_going(handle, self.guard)
            raise Ended(f"error: {why_not}")
        state_msg = self.wait_for_state_after(-1)
        sent_ns, sent_to = self.sent
        if stamp_to_ns(state_msg.header.stamp) <= sent_ns and sent_to == self.simulator:
            try:
                state_msg = self.wait_for_state_after(sent_ns, handle) or state_msg
            except CommandRefused:
                pass
        return msg_to_board_state(state_msg), state_msg.header.stamp

    def step(self, handle, action, stamp):
        command = Vector3Stamped()
        command.header.stamp, command.header.frame_id = stamp, "board"
        command.vector.x, command.vector.y = float(action[0]), float(action[1])
        stop = self.guard.command(handle, partial(self.command_pub.publish, command))
        if stop is not None:
            raise Ended(stop, stopped=True)
        with self.state_cv:
            self.sent = (stamp_to_ns(stamp), self.simulator)
        sent_at = time.monotonic()
        try:  # a stop does not cut this wait short: the goal ends once nothing it sent can still move
            state_msg = self.wait_for_state_after(stamp_to_ns(stamp))
        except CommandRefused as refused:
            raise Ended(f"error: the simulator {refused}") from None
        if state_msg is None:
            check_going(handle, self.guard)
            if frozen_s := self.freezes.frozen_since(sent_at):
                raise Ended(stale_goal(self.get_fully_qualified_name(), frozen_s, FREEZE_DEADLINE_S))
            self.get_logger().error(self._silence(stamp))
            raise Ended("error: the simulator stopped publishing state")
        return msg_to_board_state(state_msg), state_msg.header.stamp

    def end(self, handle) -> None:
        """Nothing to do: the simulator marks the decision point when the goal's status ends."""

    def shutdown(self) -> None:
        self.freezes.close()

    def wait_for_state_after(self, stamp_ns: int, handle=None) -> PrivilegedState | None:
        """The simulator's first state stamped after ``stamp_ns`` (-1: any), or None after the timeout
        or when ``handle`` is canceled, stopped or preempted; :class:`CommandRefused` when the command
        stamped ``stamp_ns`` was refused. Stamps never go back (not even across resets), so a state
        from another episode can never be taken for the answer to this one's command. Without a
        ``handle`` only the answer or the timeout ends the wait: ``state_timeout_s`` is above the
        simulator's command deadline, so a command unanswered that long can no longer be carried out.
        An answer this node heard only after the timeout counts as none, however soon this thread
        looks: which of the two a node that stood still through its wait saw first (its timeout or the
        answer that came as it woke) was a race of its threads."""
        deadline = time.monotonic() + self.state_timeout_s
        with self.state_cv:
            while (latest := self.states.get(self.simulator)) is None or stamp_to_ns(
                latest[0].header.stamp
            ) <= stamp_ns:
                if stamp_ns >= 0 and self.refusal[0] == stamp_ns:
                    raise CommandRefused(self.refusal[1])
                left = deadline - time.monotonic()
                if left <= 0 or (handle is not None and self.guard.stopping(handle)):
                    return None
                self.state_cv.wait(min(left, 0.01))
            return latest[0] if latest[1] <= deadline else None

    def wait_for_simulator(self, handle) -> str:
        """Until one participant both publishes states and, in the graph view, subscribes to the
        commands (the simulator: the one acted on before, while it does) and every subscriber of the
        command topic (the simulator, a recorder) whose QoS can match has matched this node's
        publisher, at most ``state_timeout_s``; then "", else why not. (A subscriber whose QoS or
        message type cannot match, say a transient-local echo, never will.) An rmw that reports no
        publisher GUID leaves only the count to go by."""
        deadline = time.monotonic() + self.state_timeout_s
        while True:
            listening = {
                bytes(s.endpoint_gid[:GUID_PREFIX_BYTES])
                for s in matchable_subscribers(self, self.command_pub)
            }
            with self.state_cv:
                sources = list(self.states)
                chosen, why_not = choose_simulator(sources, listening, self.simulator)
                if chosen is not None and len(listening) <= self.command_pub.get_subscription_count():
                    self.simulator = chosen
                    return ""
            if time.monotonic() > deadline or self.guard.stopping(handle) or not handle.is_active:
                return why_not or f"not every subscriber of {names.PUSHER_COMMAND} has matched this node"
            time.sleep(0.01)

    def _silence(self, command_stamp) -> str:
        """What the node knows when no state followed a command (the log line that explains a timeout)."""
        with self.state_cv:
            last, received = self.states[self.simulator]
        sent, stamped = stamp_to_ns(command_stamp) / 1e9, stamp_to_ns(last.header.stamp) / 1e9
        return (
            f"no state after the command stamped {sent:.3f} s within {self.state_timeout_s:.1f} s; "
            f"the last state, stamped {stamped:.3f} s, arrived {time.monotonic() - received:.2f} s ago"
        )


def main(args=None) -> None:
    run_node(LowLevelNode, args)


if __name__ == "__main__":
    main()
