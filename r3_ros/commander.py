"""A task-handle facade over RunTask for callers (the `r3 run` command, tests, notebooks).

Shaped after nav2's BasicNavigator: start a task, poll it, read the result, or cancel it. The
caller owns the node and spins it through :meth:`TaskHandle.spin_once`. A cancel publishes a stop
naming the task on ``/r3/stop_motion`` first (the fast path, see ``r3_ros/stop.py``), then cancels the
RunTask goal through its action.

A response can be lost (``r3_ros.goals.GoalStatuses``), so a task handle reads the action's latched
status topic: a goal whose acceptance never came back counts as accepted once the status lists it,
and a goal the status says has ended is asked for its result again until the result comes
(``r3_ros.goals.ResultRequests``; the server answers every request). Without this, a lost answer
left the caller waiting for good.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable

import rclpy
from action_msgs.msg import GoalStatus
from rclpy.node import Node

from r3.graph import names
from r3_msgs.action import RunTask
from r3_msgs.msg import ReasonerStep
from r3_ros.action_client import ActionClient
from r3_ros.goals import ANSWER_GRACE_S, GoalStatuses, ResultRequests, accepted_handle
from r3_ros.stop import StopPublisher, goal_key, new_goal_id


class TaskStatus(enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    REJECTED = "rejected"


class TaskHandle:
    def __init__(
        self,
        node: Node,
        send_future,
        stop: StopPublisher | None = None,
        key: str | None = None,
        client: ActionClient | None = None,
        goal_id=None,
        statuses: dict | None = None,
    ):
        self._node = node
        self._send_future = send_future
        self._stop, self._key = stop, key
        self._client, self._goal_id = client, goal_id
        self._statuses = {} if statuses is None else statuses  # .get(goal uuid): its latest GoalStatus
        self._goal_handle = None
        self._results: ResultRequests | None = None
        self._sent_at = time.monotonic()
        self._cancel_when_accepted = False
        self.result: RunTask.Result | None = None
        self.result_status = GoalStatus.STATUS_UNKNOWN  # how the goal ended: succeeded, aborted, ...
        self.status = TaskStatus.PENDING

    def spin_once(self, timeout_s: float = 0.05) -> TaskStatus:
        rclpy.spin_once(self._node, timeout_sec=timeout_s)
        if self.status is TaskStatus.PENDING:
            if self._send_future.done():
                self._goal_handle = self._send_future.result()
                if not self._goal_handle.accepted:
                    self.status = TaskStatus.REJECTED
                    return self.status
            elif self._accepted_by_status():  # the acceptance was lost; the server has the goal
                self._goal_handle = accepted_handle(self._client, self._goal_id, RunTask)
            else:
                return self.status
            self.status = TaskStatus.RUNNING
            self._results = ResultRequests(self._goal_handle, lambda: self.goal_status)
            if self._cancel_when_accepted:
                self._goal_handle.cancel_goal_async()
        if self.status is TaskStatus.RUNNING and (answer := self._results.answer()) is not None:
            self.result, self.result_status = answer.result, answer.status
            self.status = TaskStatus.DONE
        return self.status

    @property
    def goal_status(self) -> int:
        """The goal's latest state on the action's status topic (unknown until it is listed)."""
        if self._goal_id is None:
            return GoalStatus.STATUS_UNKNOWN
        return self._statuses.get(bytes(self._goal_id.uuid), GoalStatus.STATUS_UNKNOWN)

    def _accepted_by_status(self) -> bool:
        late = time.monotonic() - self._sent_at >= ANSWER_GRACE_S
        return self.goal_status != GoalStatus.STATUS_UNKNOWN and late

    def cancel(self, stop: bool = True) -> None:
        """Stop the task's motion (``stop``: a stop on /r3/stop_motion, at once), then cancel the goal
        (once it is accepted, when it is not yet). ``stop=False`` sends the action cancel only, as a
        plain ROS 2 action client does."""
        if self.status in (TaskStatus.DONE, TaskStatus.REJECTED):
            return
        if stop and self._stop is not None:
            self._stop.stop(self._key)
        if self.status is TaskStatus.RUNNING:
            self._goal_handle.cancel_goal_async()
        else:
            self._cancel_when_accepted = True


class R3Commander:
    """Sends RunTask goals and relays ReasonerStep messages and feedback to callbacks."""

    def __init__(self, node: Node, on_step: Callable[[ReasonerStep], None] | None = None):
        self.node = node
        self.client = ActionClient(node, RunTask, names.RUN_TASK)
        self.stop = StopPublisher(node)
        self.statuses = GoalStatuses(node, names.RUN_TASK, RunTask)
        if on_step is not None:
            node.create_subscription(ReasonerStep, names.REASONER_STEPS, on_step, 50)

    def wait_until_ready(self, timeout_s: float, still_waiting: Callable[[], bool] = lambda: True) -> bool:
        """True once the RunTask server is up; False after ``timeout_s`` or when ``still_waiting()``
        is False."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and still_waiting():
            if self.client.wait_for_server(timeout_sec=0.2):
                return True
        return False

    def start_task(
        self, goal: RunTask.Goal, on_feedback: Callable[[RunTask.Feedback], None] | None = None
    ) -> TaskHandle:
        goal_id = new_goal_id()
        future = self.client.send_goal_async(
            goal,
            feedback_callback=None if on_feedback is None else lambda f: on_feedback(f.feedback),
            goal_uuid=goal_id,
        )
        return TaskHandle(
            self.node, future, self.stop, goal_key(goal_id), self.client, goal_id, self.statuses
        )
