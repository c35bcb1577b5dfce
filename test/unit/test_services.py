"""Resending service calls whose answer was lost, and the simulators' record that makes a resent
ResetScene safe (r3_ros/services.py)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from r3_ros import services
from r3_ros.services import ResetRecord, ServiceTimeout, call_resending


class _Future:
    def __init__(self) -> None:
        self._result, self._done, self._callbacks = None, threading.Event(), []

    def done(self) -> bool:
        return self._done.is_set()

    def result(self):
        return self._result

    def add_done_callback(self, callback) -> None:
        self._callbacks.append(callback)
        if self.done():
            callback(self)

    def answer(self, result) -> None:
        self._result = result
        self._done.set()
        for callback in self._callbacks:
            callback(self)


class _Client:
    """Answers only the copies listed in ``answered`` (0-based), as a server whose first answers
    were dropped by the middleware."""

    srv_name = "/sim/reset_scene"

    def __init__(self, answered: set[int]) -> None:
        self.answered, self.sent, self.removed = answered, [], []

    def call_async(self, request) -> _Future:
        future = _Future()
        if len(self.sent) in self.answered:
            future.answer(f"answer to copy {len(self.sent)}")
        self.sent.append(request)
        return future

    def remove_pending_request(self, future) -> None:
        self.removed.append(future)


@pytest.fixture(autouse=True)
def fast_resend(monkeypatch):
    monkeypatch.setattr(services, "RESEND_S", 0.05)


def test_a_lost_answer_is_asked_for_again_and_the_unanswered_copy_forgotten():
    client = _Client(answered={1})
    assert call_resending(client, "reset", timeout_s=5.0) == "answer to copy 1"
    assert client.sent == ["reset", "reset"] and len(client.removed) == 1


def test_no_answer_at_all_times_out_naming_the_service_and_a_stop_ends_the_wait():
    with pytest.raises(ServiceTimeout, match="/sim/reset_scene did not answer within 0.3 s"):
        call_resending(_Client(answered=set()), "reset", timeout_s=0.3)
    assert call_resending(_Client(answered=set()), "reset", timeout_s=5.0, keep_waiting=lambda: False) is None


def _request(**fields):
    first = {"episode_id": "V-s3-x", "suite": "language_table", "task": "V", "seed": 3}
    return SimpleNamespace(**{**first, **fields})


def test_a_reset_repeated_for_the_same_episode_gets_the_first_answer_and_nothing_else_does():
    record = ResetRecord()
    assert record.repeat(_request(), SimpleNamespace()) is None  # nothing reset yet
    record.remember(_request(), SimpleNamespace(goal="make a V", task_instance_json="{}"))
    again = record.repeat(_request(), SimpleNamespace(ok=False, goal="", task_instance_json=""))
    assert (again.ok, again.goal, again.task_instance_json) == (True, "make a V", "{}")
    others = [_request(episode_id="V-s3-y"), _request(seed=4), _request(task="L"), _request(episode_id="")]
    assert all(record.repeat(other, SimpleNamespace()) is None for other in others)


def test_a_reset_is_served_once_and_refused_with_the_reason_moving_nothing():
    record, resets = ResetRecord(), []
    instance = SimpleNamespace(goal="make a V", to_dict=lambda: {"task": "V"})

    def reset(task, seed):
        resets.append((task, seed))
        return instance

    def answer(**fields):
        response = SimpleNamespace(ok=False, reason="", goal="", task_instance_json="")
        return record.answer(_request(**fields), response, "language_table", reset), response

    refused = [
        answer(suite="packing"),
        answer(task="no such task"),
        answer(seed=-1),
        answer(suite="p" * 10**6),
    ]
    assert [task for task, _ in refused] == [None] * 4 and resets == []
    suite, task, seed, huge = (r.reason for _, r in refused)
    assert suite == "suite 'packing' is not simulated by this node"
    assert huge == f"suite {'p' * 80!r} is not simulated by this node"  # a field is quoted 80 long
    assert task.startswith("cannot reset task 'no such task': unknown language_table task 'no such task'")
    assert seed == "cannot reset task 'V': seed must be in 0..9223372036854775807, got -1"
    task, response = answer(suite="")  # "" is the default suite
    assert task == "V" and resets == [("V", 3)]
    assert (response.ok, response.goal, response.task_instance_json) == (True, "make a V", '{"task": "V"}')
    again, response = answer(suite="")  # resent: answered as the first time, not reset again
    assert again is None and resets == [("V", 3)] and (response.ok, response.goal) == (True, "make a V")
