"""The reasoner's FollowInstruction client: one instruction at a time per RunTask, stopped with it.

The moment a RunTask is cancelled (its cancel callback, :meth:`FollowClient.on_cancel`) or a stop
naming it arrives on ``/r3/stop_motion``, the FollowInstruction running for it is stopped with a
stop of its own on that topic, then cancelled through its action as well (``r3_ros/stop.py``); no
later instruction is sent. An instruction whose acceptance never came back (a lost service response,
``r3_ros.goals.GoalStatuses``) counts as accepted once the action's status topic lists it, and one
the status lists as ended whose result did not come back is asked for it again
(``r3_ros.goals.ResultRequests``).

A stopped instruction is waited for until its goal has ended (:meth:`FollowClient.stop_sent`): the
server ends it only after its last control step, so the RunTask's result, sent after that, comes
after every motion of the episode; a client that sees it can trust nothing moves any more.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from rclpy.action import CancelResponse
from rclpy.node import Node

from r3.graph import names
from r3_msgs.action import FollowInstruction
from r3_ros.action_client import ActionClient
from r3_ros.episode_watch import EpisodeError, EpisodeWatch, wait_future
from r3_ros.executor import InlineCallbackGroup
from r3_ros.goals import ANSWER_GRACE_S, ENDED, GoalStatuses, ResultRequests
from r3_ros.services import Completion
from r3_ros.shutdown import shutting_down, unless_shut_down
from r3_ros.stop import StopListener, StopPublisher, goal_key, new_goal_id


@dataclass
class Run:
    """A RunTask goal being executed: stopped or not, and the goal key of the FollowInstruction it runs."""

    stopped: bool = False
    follow: str | None = None


class FollowClient:
    """Sends the instructions of the RunTask goals being executed (``begin`` .. ``end``). ``param`` is
    the node's live parameter mapping (``lowlevel_node``, ``service_timeout_s``,
    ``instruction_timeout_s``, ``steps_per_instruction``); ``watch`` bounds every wait."""

    def __init__(self, node: Node, param: Mapping, watch: EpisodeWatch, callback_group=None):
        self.node, self.param, self.watch = node, param, watch
        self.runs_lock = threading.Lock()
        self.runs: dict[str, Run] = {}  # by RunTask goal key
        self.stop_pub = StopPublisher(node)
        self.stops = StopListener(node, on_stop=self.stop_run)
        self.client = ActionClient(
            node, FollowInstruction, names.FOLLOW_INSTRUCTION, callback_group=callback_group
        )
        self.statuses = GoalStatuses(
            node, names.FOLLOW_INSTRUCTION, FollowInstruction, callback_group=InlineCallbackGroup()
        )

    def begin(self, handle) -> None:
        """RunTask ``handle`` starts executing (stopped already when a stop naming it came first)."""
        key = goal_key(handle.goal_id)
        with self.runs_lock:
            self.runs[key] = Run(stopped=self.stops.requested(key))

    def end(self, handle) -> bool:
        """RunTask ``handle`` is done executing; whether it was stopped."""
        with self.runs_lock:
            return self.runs.pop(goal_key(handle.goal_id)).stopped

    def on_cancel(self, handle) -> CancelResponse:
        """Runs as the cancel request arrives, before the execute loop polls: stop the motion now."""
        self.stop_run(goal_key(handle.goal_id))
        return CancelResponse.ACCEPT

    def stop_run(self, key: str) -> None:
        """Stop RunTask ``key``: no instruction after this, and a stop for the one running now."""
        with self.runs_lock:
            run = self.runs.get(key)
            if run is None or run.stopped:
                return
            run.stopped, follow = True, run.follow
        if follow is not None:
            self.stop_pub.stop(follow)

    def stopping(self, handle) -> bool:
        """The RunTask ``handle`` was cancelled, stopped or preempted."""
        if handle.is_cancel_requested or not handle.is_active:
            return True
        with self.runs_lock:
            run = self.runs.get(goal_key(handle.goal_id))
        return run is not None and run.stopped

    def waiting(self, handle) -> bool:
        """False once the RunTask ``handle`` is stopping; raises when a watched node is gone."""
        return self.watch.waiting(self.stopping(handle))

    def follow(
        self,
        instruction: str,
        suite: str,
        interface: str,
        seed: int,
        steps_left: int,
        handle,
        while_sent: Callable[[], None] = lambda: None,
    ):
        """Send one instruction to the low-level policy; its result, or None when the episode was canceled.
        ``while_sent()`` runs once the goal is on its way, before its answer is awaited: work that
        need not hold the motion up (the decision's record) overlaps it."""
        if self.stopping(handle):
            return None  # canceled while deciding: no new motion
        if not self.client.wait_for_server(timeout_sec=self.param["service_timeout_s"]):
            raise EpisodeError(f"{self.param['lowlevel_node']} does not offer {names.FOLLOW_INSTRUCTION}")
        goal = FollowInstruction.Goal(
            instruction=instruction,
            suite=suite,
            max_steps=self.param["steps_per_instruction"],
            seed=seed,
            interface=interface,
            steps_left=steps_left,
        )
        # The goal id is chosen here and recorded before the goal goes out, so that from now on a
        # stop of the RunTask stops this instruction (stop_run), even before it is accepted.
        run_key = goal_key(handle.goal_id)
        follow_id = new_goal_id(parent=run_key)  # of the RunTask's family: a stop of it stops this too
        follow_key = goal_key(follow_id)
        with self.runs_lock:
            run = self.runs[run_key]
            if run.stopped:
                return None
            run.follow = follow_key
        sending = self.client.send_goal_async(goal, goal_uuid=follow_id)
        # The instruction's budget runs from here, end to end: the goal's acceptance counts too (a
        # low-level node that stalls before accepting must not get the longer service timeout).
        sent_at, budget = time.monotonic(), self.param["instruction_timeout_s"]
        try:
            while_sent()
        except BaseException:
            self.stop_unanswered(follow_key, sending)
            raise
        accept_s = min(self.param["service_timeout_s"], budget)
        waiting = functools.partial(self.waiting, handle)

        def accepted_by_status():  # the answer has had its time: the status topic may list the goal
            late = time.monotonic() - sent_at >= ANSWER_GRACE_S
            return self.statuses.accepted_handle(self.client, follow_id) if late else None

        try:
            sent = wait_future(
                sending,
                names.FOLLOW_INSTRUCTION,
                waiting,
                accept_s,
                since=sent_at,
                instead=accepted_by_status,
            )
        except EpisodeError:  # not accepted in time: a goal accepted later must not move anything
            self.stop_unanswered(follow_key, sending)
            raise
        if sent is None:  # canceled before the low-level node answered: cancel the goal once it does
            self.stop_unanswered(follow_key, sending)
            return None
        if not sent.accepted:
            raise EpisodeError(f"{self.param['lowlevel_node']} rejected the instruction {instruction!r}")
        results = ResultRequests(sent, lambda: self.statuses.of(follow_id))  # a lost result is asked again
        try:
            done = wait_future(
                results.futures[0],
                names.FOLLOW_INSTRUCTION,
                waiting,
                budget,
                since=sent_at,
                instead=results.answer,
            )
        except EpisodeError as exc:
            if unconfirmed := self.stop_sent(follow_key, sent, results):
                raise EpisodeError(f"{exc}; {unconfirmed}") from None
            raise
        if done is None:  # RunTask canceled, stopped or preempted: stop the motion too
            if unconfirmed := self.stop_sent(follow_key, sent, results):
                self.node.get_logger().warning(unconfirmed)
            return None
        if done.result.reason.startswith("error"):
            raise EpisodeError(f"{self.param['lowlevel_node']}: {done.result.reason[len('error: ') :]}")
        return done.result

    def stop_sent(self, follow_key: str, sent, results: ResultRequests) -> str:
        """Stop an accepted FollowInstruction goal: the stop first (the fast path), then the cancel;
        then wait until the goal has ended, its motion with it. Neither goes out once this node is
        shutting down; the low-level node's watchdog then stops the motion when this node's heartbeat
        ends. The low-level node ends it once its last command has been answered, so a simulator
        gone or silent ends the wait too (it moves nothing more: a command it did not step before its
        deadline, it refuses). Returns why the stop is unconfirmed ("" once the goal has ended)."""
        self.stop_pub.stop(follow_key)
        with unless_shut_down(self.node):
            sent.cancel_goal_async()
        lowlevel, sim, timeout_s = (self.param[k] for k in ("lowlevel_node", "sim_node", "service_timeout_s"))
        deadline = time.monotonic() + timeout_s
        completion = Completion(results.futures[0])
        while results.answer() is None and self.statuses.of(sent.goal_id) not in ENDED:
            if shutting_down(self.node) or self.watch.gone(lowlevel) or self.watch.gone(sim):
                return ""  # nothing to wait for: a node frozen or gone stops its goal itself (SAFETY.md)
            if time.monotonic() > deadline:
                return f"{lowlevel} did not end its stopped instruction within {timeout_s:.1f} s"
            completion.wait()
        return ""

    def stop_unanswered(self, follow_key: str, sending) -> None:
        """Stop a FollowInstruction goal that has not been accepted yet, and cancel it once it is."""
        self.stop_pub.stop(follow_key)
        sending.add_done_callback(lambda f: f.result().cancel_goal_async() if f.result().accepted else None)
