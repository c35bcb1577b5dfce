"""An action goal whose acceptance never came back (rmw_fastrtps drops a service response it cannot
send within 100 ms): the action's latched status topic stands in for it (``r3_ros.goals.GoalStatuses``),
and the reasoner's wait for an instruction's acceptance takes the goal from there
(``wait_future(..., instead=...)``, ``r3_ros/follow_client.py``). A lost result: the goal the status
lists as ended is asked for it again (``r3_ros.goals.ResultRequests``), by the reasoner and by
``R3Commander`` alike."""

from __future__ import annotations

import pytest
from action_msgs.msg import GoalInfo, GoalStatus, GoalStatusArray

from r3.graph import names
from r3_msgs.action import FollowInstruction
from r3_ros import goals
from r3_ros.episode_watch import EpisodeError, wait_future
from r3_ros.goals import GoalStatuses, ResultRequests
from r3_ros.stop import new_goal_id


class _NeverAnswered:
    def done(self) -> bool:
        return False

    def add_done_callback(self, callback) -> None:
        pass


class _Node:
    """Takes the one subscription GoalStatuses makes."""

    def create_subscription(self, msg_type, topic, callback, qos, callback_group=None):
        self.topic, self.on_status = topic, callback


def _status(goal_id, state: int) -> GoalStatusArray:
    return GoalStatusArray(status_list=[GoalStatus(goal_info=GoalInfo(goal_id=goal_id), status=state)])


def test_a_goal_the_status_lists_counts_as_accepted_when_its_answer_is_lost():
    node, client, goal_id = _Node(), object(), new_goal_id()
    statuses = GoalStatuses(node, names.FOLLOW_INSTRUCTION, FollowInstruction)
    assert node.topic == names.action_status(names.FOLLOW_INSTRUCTION)
    assert statuses.accepted_handle(client, goal_id) is None  # not listed: nothing to go by
    node.on_status(_status(new_goal_id(), GoalStatus.STATUS_EXECUTING))  # another goal
    assert statuses.accepted_handle(client, goal_id) is None
    node.on_status(_status(goal_id, GoalStatus.STATUS_EXECUTING))
    handle = statuses.accepted_handle(client, goal_id)
    assert handle.accepted and handle.goal_id == goal_id
    assert statuses.of(goal_id) == GoalStatus.STATUS_EXECUTING
    node.on_status(_status(new_goal_id(), GoalStatus.STATUS_EXECUTING))  # the server let it go
    assert statuses.of(goal_id) == GoalStatus.STATUS_UNKNOWN  # nothing kept of goals no longer listed


def test_a_wait_for_an_answer_that_never_comes_takes_it_from_instead():
    asked = []

    def instead():
        asked.append(1)
        return "from the status topic" if len(asked) >= 3 else None

    found = wait_future(_NeverAnswered(), "the test's action", lambda: True, timeout_s=30.0, instead=instead)
    assert found == "from the status topic" and len(asked) == 3


def test_without_instead_a_lost_answer_is_still_a_timeout():
    with pytest.raises(EpisodeError, match="the test's action did not answer within 0.0 s"):
        wait_future(_NeverAnswered(), "the test's action", lambda: True, timeout_s=0.0)


class _Answered:
    def __init__(self, value):
        self.value = value

    def done(self) -> bool:
        return True

    def result(self):
        return self.value

    def add_done_callback(self, callback) -> None:
        callback(self)


class _GoalHandle:
    """A goal whose first result request is lost; every later one is answered."""

    def __init__(self):
        self.asked = 0

    def get_result_async(self):
        self.asked += 1
        return _NeverAnswered() if self.asked == 1 else _Answered(f"result of request {self.asked}")


def test_a_lost_result_is_asked_for_again_once_the_goal_has_ended(monkeypatch):
    monkeypatch.setattr(goals, "RESULT_RESEND_S", 0.0)
    handle, status = _GoalHandle(), [GoalStatus.STATUS_EXECUTING]
    results = ResultRequests(handle, lambda: status[0])
    assert [results.answer() for _ in range(3)] == [None] * 3
    assert handle.asked == 1  # still running: its result is not due, nothing asked again
    status[0] = GoalStatus.STATUS_SUCCEEDED
    found = wait_future(results.futures[0], "the test's action", lambda: True, 30.0, instead=results.answer)
    assert found == "result of request 2" and handle.asked == 2


def test_an_ended_goal_is_asked_again_only_every_resend_period(monkeypatch):
    monkeypatch.setattr(goals, "RESULT_RESEND_S", 3600.0)
    handle = _GoalHandle()
    results = ResultRequests(handle, lambda: GoalStatus.STATUS_ABORTED)
    assert [results.answer() for _ in range(5)] == [None] * 5 and handle.asked == 1
