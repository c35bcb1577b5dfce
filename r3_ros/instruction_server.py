"""The FollowInstruction action as a low-level policy serves it, whatever carries its commands.

``r3_lowlevel_node`` drives a simulator or a robot over topics: a pusher command out, the state it
produced back. ``r3_sim_node`` with a ``controller`` runs the policy inside the simulator's process,
as ros2_control runs a controller beside its hardware interface, so the lock-step control loop
never crosses DDS. Both serve the action through :class:`InstructionServer`: the goal's checks, one
goal at a time (a new goal preempts the running one), the policy's loop, feedback, the stops
(``r3_ros.stop.MotionGuard``: cancel, ``/r3/stop_motion``, the reasoner's heartbeat) and the
results. What differs is the node's :class:`Plant`: how it has the first state, how it carries out
one action and has the state it produced, and what it does once an instruction has ended.
"""

from __future__ import annotations

import time
from typing import Protocol

import numpy as np
from builtin_interfaces.msg import Time

from r3.graph import names
from r3.instructions.language_table import ParseError, parse
from r3.lowlevel import make_policy
from r3.safety.goals import GoalRefused, check_instruction_goal
from r3.tasks.language_table.board import BoardState
from r3_msgs.action import FollowInstruction
from r3_ros.executor import InlineCallbackGroup
from r3_ros.goals import PREEMPTED, SingleGoal
from r3_ros.heartbeat import HeartbeatPublisher
from r3_ros.stop import MotionGuard, end_stopped

#: Feedback goes out at most this often (wall seconds): one per control step would wake the client at each.
FEEDBACK_PERIOD_S = 0.1
SUITE = "language_table"  # the suite whose instructions are carried out


class Ended(Exception):
    """The instruction ends now, for ``reason``. ``stopped``: it was stopped (the goal ends canceled
    once its cancel arrives, ``end_stopped``); otherwise it ends aborted."""

    def __init__(self, reason: str, stopped: bool = False):
        super().__init__(reason)
        self.reason, self.stopped = reason, stopped


class Plant(Protocol):
    """What the policy acts on. ``begin`` and ``step`` raise :class:`Ended` to end the instruction."""

    def begin(self, handle) -> tuple[BoardState, Time]:
        """The state to start from, with its stamp, once commands can be carried out."""

    def step(self, handle, action: np.ndarray, stamp: Time) -> tuple[BoardState, Time]:
        """Carry out one action (decided on the state stamped ``stamp``); the state it produced."""

    def end(self, handle) -> None:
        """After every instruction that began, before its goal ends, however it ended."""


def instruction_refusal(goal) -> str:
    """Why a FollowInstruction goal is refused before anything moves ("" = it is not)."""
    try:
        check_instruction_goal(goal, SUITE, served=("instruction",))
    except GoalRefused as exc:
        return f"error: invalid goal: {exc}"
    parsed = parse(goal.instruction)
    return f"parse_error: {parsed.reason}" if isinstance(parsed, ParseError) else ""


def check_going(handle, guard: MotionGuard) -> None:
    """Raise :class:`Ended` when ``handle`` was preempted by a newer goal, or cancelled or stopped."""
    if not handle.is_active:
        raise Ended(PREEMPTED)
    if guard.stopping(handle):
        raise Ended("canceled", stopped=True)


class InstructionServer:
    """FollowInstruction on ``node``, the policy named ``policy`` acting on ``plant``."""

    def __init__(
        self,
        node,
        plant: Plant,
        policy: str,
        default_max_steps: int,
        guard: MotionGuard,
        heartbeat: HeartbeatPublisher,
    ):
        self.plant, self.guard, self.heartbeat = plant, guard, heartbeat
        self.policy = make_policy(policy)
        self.default_max_steps = default_max_steps
        self.goals = SingleGoal(node, instruction_refusal)
        self.server = self.goals.serve(
            FollowInstruction,
            names.FOLLOW_INSTRUCTION,
            self.execute,
            # Goal, cancel and result requests one at a time, in the order they came, in the spinning
            # thread (each instruction's loop runs as a task of its own in the pool): handled on two
            # pool threads at once, an earlier goal's acceptance could run after a later one's and
            # preempt it, and a pool hand-off per request cost the reply a millisecond or two.
            InlineCallbackGroup(),
        )

    def execute(self, handle) -> FollowInstruction.Result:
        """One instruction; a goal that preempted a running one moves only once that one's loop has
        ended (before, for a control step or so, both could send commands)."""
        result = FollowInstruction.Result()
        if reason := instruction_refusal(handle.request):
            return self._finish(handle, result, False, reason)
        with self.goals.turn(handle) as has_turn:
            try:
                if not has_turn:  # preempted, cancelled or stopped while it waited: raises, saying which
                    check_going(handle, self.guard)
                return self._carry_out(handle, result)
            except Ended as end:
                return self._ended(handle, result, end)

    def _carry_out(self, handle, result) -> FollowInstruction.Result:
        """From the plant's first state to the result; the plant's ``end`` however the loop ends."""
        goal = handle.request
        board, stamp = self.plant.begin(handle)
        ended = None
        self.heartbeat.state = "busy"
        try:
            reason = self._follow(handle, parse(goal.instruction), board, stamp, result)
        except Ended as end:
            ended = end
        finally:
            self.heartbeat.state = "idle"
            self.plant.end(handle)
        return self._ended(handle, result, ended) if ended else self._finish(handle, result, True, reason)

    def _follow(self, handle, parsed, board: BoardState, stamp: Time, result) -> str:
        """The policy's loop; why it ended ("done" or "step_budget"); ``result``'s steps and stamp."""
        goal = handle.request
        self.policy.reset(parsed, board, np.random.default_rng(goal.seed))
        reason, fed_back = "step_budget", time.monotonic()
        for step in range(goal.max_steps or self.default_max_steps):
            check_going(handle, self.guard)
            action = self.policy.act(board)
            if action is None:
                reason = "done"
                break
            board, stamp = self.plant.step(handle, action, stamp)
            result.steps = step + 1
            if time.monotonic() - fed_back >= FEEDBACK_PERIOD_S:
                handle.publish_feedback(FollowInstruction.Feedback(step=result.steps))
                fed_back = time.monotonic()
        result.finished = stamp
        return reason

    def _ended(self, handle, result, end: Ended) -> FollowInstruction.Result:
        if not end.stopped:
            return self._finish(handle, result, False, end.reason)
        result.success, result.reason = False, end.reason
        end_stopped(handle, end.reason, self.goals.end)
        return result

    def _finish(self, handle, result, success: bool, reason: str) -> FollowInstruction.Result:
        result.success, result.reason = success, reason
        self.goals.end(handle, "succeeded" if success else "aborted")
        return result
