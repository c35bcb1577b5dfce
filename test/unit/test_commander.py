"""The RunTask task handle when an answer is lost (rmw_fastrtps drops a service response the server
has not matched within 100 ms): the action's latched status topic stands in for a lost acceptance,
and a goal that has ended is asked for its result again until it comes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from action_msgs.msg import GoalStatus

from r3_msgs.action import RunTask
from r3_ros import commander, goals
from r3_ros.commander import TaskHandle, TaskStatus
from r3_ros.stop import new_goal_id


class _Future:
    def __init__(self, value=None) -> None:
        self.value = value

    def done(self) -> bool:
        return self.value is not None

    def result(self):
        return self.value


class _ActionClient:
    """Stands in for rclpy's ActionClient where a ClientGoalHandle asks it for a result."""

    def __init__(self) -> None:
        self.result_requests: list[_Future] = []

    def _get_result_async(self, goal_handle) -> _Future:
        self.result_requests.append(_Future())
        return self.result_requests[-1]


@pytest.fixture
def handle(monkeypatch):
    monkeypatch.setattr(commander.rclpy, "spin_once", lambda node, timeout_sec=None: None)
    monkeypatch.setattr(goals, "RESULT_RESEND_S", 0.0)
    monkeypatch.setattr(commander, "ANSWER_GRACE_S", 0.0)
    goal_id, client, statuses = new_goal_id(), _ActionClient(), {}
    task = TaskHandle(None, _Future(), None, None, client, goal_id, statuses)  # its acceptance never comes
    return task, client, lambda state: statuses.__setitem__(bytes(goal_id.uuid), state)


def _result(reason: str):
    """A GetResult answer: the goal's final status and its result."""
    return SimpleNamespace(status=GoalStatus.STATUS_SUCCEEDED, result=RunTask.Result(reason=reason))


def test_a_lost_acceptance_is_read_from_the_status_topic(handle):
    task, client, set_status = handle
    assert task.spin_once() is TaskStatus.PENDING  # the status does not list the goal: still waiting
    set_status(GoalStatus.STATUS_EXECUTING)
    assert task.spin_once() is TaskStatus.RUNNING
    assert len(client.result_requests) == 1
    assert task.spin_once() is TaskStatus.RUNNING and len(client.result_requests) == 1  # running: no re-ask


def test_a_lost_result_is_asked_for_again_once_the_goal_has_ended(handle):
    task, client, set_status = handle
    set_status(GoalStatus.STATUS_EXECUTING)
    task.spin_once()
    set_status(GoalStatus.STATUS_SUCCEEDED)  # the first result response was dropped
    assert task.spin_once() is TaskStatus.RUNNING
    assert len(client.result_requests) == 2
    client.result_requests[1].value = _result("success")
    assert task.spin_once() is TaskStatus.DONE and task.result.reason == "success"


def test_an_acceptance_that_comes_back_is_used_as_before(handle):
    task, client, _ = handle
    task._send_future.value = SimpleNamespace(accepted=False)
    assert task.spin_once() is TaskStatus.REJECTED and client.result_requests == []
