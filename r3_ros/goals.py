"""Single-goal action servers: a newly accepted goal aborts the running one (as in ros2/examples'
single-goal server), unless the server will refuse it; and every terminal transition goes through
one lock, so a goal that finishes at the moment a new one preempts it is never ended twice (rclpy
raises on an invalid transition).

For action clients, :class:`GoalStatuses`: rmw_fastrtps drops a service response when the server has
not matched the caller's response reader within 100 ms, or cannot send it within that time on a
loaded machine, and an action's goal and result answers are service responses. The action's status
topic is latched (a late match still delivers it), so a client reads it: a goal whose acceptance
never came back counts as accepted once the status lists it (:meth:`GoalStatuses.accepted_handle`),
and a goal it lists as ended is asked for its result again until one comes (:class:`ResultRequests`;
the server answers every request)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from action_msgs.msg import GoalStatus, GoalStatusArray
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.client import ClientGoalHandle
from rclpy.node import Node
from rclpy.qos import qos_profile_action_status_default

from r3.graph import names
from r3_ros.refusals import refusing_action
from r3_ros.shutdown import unless_shut_down

#: The states of a goal that has ended, as its action's status topic reports them.
ENDED = (GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_CANCELED, GoalStatus.STATUS_ABORTED)
#: The result's reason of a goal that a newer one preempted.
PREEMPTED = "preempted: a newer goal took over"
#: Seconds between looks, while a goal waits for its turn, at whether it is still wanted.
TURN_CHECK_S = 0.05
#: A client gives a goal's answer this long to come back before it goes by the status topic.
ANSWER_GRACE_S = 1.0
#: Seconds between requests for the result of an ended goal that has not come back.
RESULT_RESEND_S = 1.0


class GoalStatuses:
    """The state of each goal the action's server holds, by goal uuid (bytes), as its status topic
    last listed them (the list is whole each time, so goals the server let go drop out)."""

    def __init__(self, node: Node, action_name: str, action_type, callback_group=None):
        self.action_type = action_type
        self._latest: dict[bytes, int] = {}
        node.create_subscription(
            GoalStatusArray,
            names.action_status(action_name),
            self._on_status,
            qos_profile_action_status_default,
            callback_group=callback_group,
        )

    def _on_status(self, msg: GoalStatusArray) -> None:
        self._latest = {bytes(s.goal_info.goal_id.uuid): s.status for s in msg.status_list}

    def get(self, uuid: bytes, default: int = GoalStatus.STATUS_UNKNOWN) -> int:
        return self._latest.get(uuid, default)

    def of(self, goal_id) -> int:
        """The goal's latest state (unknown while the status does not list it)."""
        return self.get(bytes(goal_id.uuid))

    def accepted_handle(self, client, goal_id) -> ClientGoalHandle | None:
        """A handle for goal ``goal_id`` of ``client`` once the status lists it (the server accepted
        it), for a caller whose acceptance has not come back; None while it is not listed."""
        if self.of(goal_id) == GoalStatus.STATUS_UNKNOWN:
            return None
        return accepted_handle(client, goal_id, self.action_type)


def accepted_handle(client, goal_id, action_type) -> ClientGoalHandle:
    """The handle ``client.send_goal_async`` would have given for goal ``goal_id`` of ``action_type``,
    accepted, had its answer come back."""
    return ClientGoalHandle(client, goal_id, action_type.Impl.SendGoalService.Response(accepted=True))


class ResultRequests:
    """The result of an accepted goal (``handle``), asked again every :data:`RESULT_RESEND_S` once
    ``status()`` (its state on the status topic) says it has ended and no answer has come: the first
    answer back is the result."""

    def __init__(self, handle: ClientGoalHandle, status: Callable[[], int]):
        self._handle, self._status = handle, status
        self.futures = [handle.get_result_async()]
        self._asked_at = time.monotonic()

    def answer(self):
        """The first answer back (the action's GetResult response), else None; asks again when due."""
        done = next((f for f in self.futures if f.done()), None)
        if done is not None:
            return done.result()
        if self._status() in ENDED and time.monotonic() - self._asked_at >= RESULT_RESEND_S:
            self.futures.append(self._handle.get_result_async())
            self._asked_at = time.monotonic()
        return None


class SingleGoal:
    """``refusal(request)`` is the server's own check of a goal's fields, the reason it will refuse
    the goal ("" = none): a goal it refuses is carried out (that is, refused, with the reason) beside
    the running one and preempts nothing, so bad input never stops good work."""

    def __init__(self, node: Node, refusal: Callable[[object], str] = lambda request: ""):
        self._node, self._logger = node, node.get_logger()
        self.refusal = refusal
        self._lock = threading.Lock()
        self._active = None
        self._running = threading.Lock()  # held by the execute callback whose goal has the turn

    def serve(
        self,
        action_type,
        name: str,
        execute: Callable,
        callback_group,
        cancel: Callable = lambda _: CancelResponse.ACCEPT,
    ) -> ActionServer:
        """The action server of these goals: every goal accepted (one ``refusal`` names is carried out
        as its refusal), each preempting the running one (:meth:`accept`), and an ``execute`` whose
        exceptions end the goal aborted with the reason (``refusing_action``)."""
        return ActionServer(
            self._node,
            action_type,
            name,
            execute_callback=refusing_action(self._node, execute, action_type.Result, self.end),
            goal_callback=lambda _: GoalResponse.ACCEPT,
            handle_accepted_callback=self.accept,
            cancel_callback=cancel,
            callback_group=callback_group,
        )

    def accept(self, handle) -> None:
        """``handle_accepted_callback`` of the action server."""
        if not self.refusal(handle.request):
            with self._lock:
                if self._active is not None and self._active.is_active:
                    self._logger.info("a new goal preempts the running one")
                    self._active.abort()
                self._active = handle
        handle.execute()

    @contextmanager
    def turn(self, handle) -> Iterator[bool]:
        """One goal carried out at a time: a goal that preempted a running one waits here until that
        one's execute has returned (its wrap-up done: an episode's END sent, its bag closed). Yields
        False when the goal was preempted or cancelled itself while it waited."""
        while not self._running.acquire(timeout=TURN_CHECK_S):
            if not handle.is_active or handle.is_cancel_requested:
                yield False
                return
        try:
            yield True
        finally:
            self._running.release()

    @property
    def running(self) -> bool:
        """A goal has the turn: its execute callback has not returned yet."""
        return self._running.locked()

    def end(self, handle, outcome: str) -> None:
        """Finish ``handle`` as "succeeded", "aborted" or "canceled", unless it is already over."""
        with self._lock, unless_shut_down(self._node):  # the state is set before the status is sent
            if handle.is_active:
                {"succeeded": handle.succeed, "aborted": handle.abort, "canceled": handle.canceled}[outcome]()
