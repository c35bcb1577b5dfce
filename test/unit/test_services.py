"""Resending service calls whose answer was lost, and the simulators' record that makes a resent
ResetScene safe (r3_ros/services.py)."""

from __future__ import annotations

import threading
import time
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


def _guarded(events=None, publishers=None):
    """A record whose take_events() hands over ``events`` (a list of (episode_id, start, gid)), one
    per call, as DDS would deliver them while a reset waits."""
    pending = list(events or [])
    resets: list[tuple[str, int]] = []
    record = ResetRecord(
        lambda: pending and record.on_event(*pending.pop(0)),
        None if publishers is None else lambda: publishers,
    )
    instance = SimpleNamespace(goal="make a V", to_dict=lambda: {"task": "V"})

    def reset(task, seed):
        resets.append((task, seed))
        return instance

    def answer(**fields):
        response = SimpleNamespace(ok=False, reason="", goal="", task_instance_json="")
        return record.answer(_request(**fields), response, "language_table", reset), response

    return record, answer, resets


def test_a_reset_is_served_once_and_refused_with_the_reason_moving_nothing():
    _, answer, resets = _guarded()
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


def test_a_reset_during_a_running_episode_is_refused_naming_it_and_moves_nothing(monkeypatch):
    """Services carry no caller: any DDS client could reset the scene under the reasoner's episode.
    Once the episode has started and its scene is reset, every other reset is refused until its END."""
    monkeypatch.setattr(services, "CATCH_UP_S", 0.0)
    record, answer, resets = _guarded()
    record.on_event("V-s3-x", True, b"reasoner")
    assert answer()[0] == "V" and resets == [("V", 3)]  # the episode's own reset
    others = [answer(episode_id="V-s9-z"), answer(seed=4), answer(episode_id="")]
    for task, response in others:
        assert task is None and response.ok is False
        assert response.reason.startswith("episode 'V-s3-x' is running on this scene"), response.reason
    assert resets == [("V", 3)]
    again, response = answer()  # the reasoner's resend is answered as the first time
    assert again is None and response.ok and resets == [("V", 3)]
    record.on_event("forged", True, b"someone else")  # a START from another publisher frees nothing
    assert answer(episode_id="forged")[0] is None and resets == [("V", 3)]
    record.on_event("V-s3-x", False, b"someone else")  # an END forged by another publisher
    assert answer(episode_id="V-s9-z")[0] is None
    record.on_event("V-s3-x", False, b"reasoner")  # its END: resets are served again
    assert answer(episode_id="V-s9-z", seed=9)[0] == "V" and resets == [("V", 3), ("V", 9)]
    assert answer(episode_id="", seed=1)[0] == "V"  # between episodes, anyone's reset


def test_the_next_episodes_start_ends_the_last_one_even_when_it_comes_after_the_reset(monkeypatch):
    """START and ResetScene leave the reasoner on two writers: its next episode's reset may come before
    its START (and the last END); the reset waits for them, bounded, instead of being refused."""
    record, answer, resets = _guarded(events=[("V-s4-y", True, b"reasoner")])
    record.on_event("V-s3-x", True, b"reasoner")
    assert answer()[0] == "V"
    assert answer(episode_id="V-s4-y", seed=4)[0] == "V" and resets == [("V", 3), ("V", 4)]


def test_a_reasoner_gone_without_an_end_or_restarted_frees_the_scene(monkeypatch):
    monkeypatch.setattr(services, "CATCH_UP_S", 0.0)
    publishers = {b"reasoner": "r3_reasoner_node", b"hostile": "r3_reasoner_client"}
    record, answer, resets = _guarded(publishers=publishers)
    record.on_event("V-s3-x", True, b"reasoner")
    assert answer()[0] == "V"
    record.on_event("by-hand", True, b"hostile")  # a START forged by another node frees nothing
    assert answer(episode_id="by-hand")[0] is None
    publishers[b"restarted"] = "r3_reasoner_node"  # a reasoner started again, its START first
    record.on_event("V-s4-y", True, b"restarted")
    assert answer(episode_id="V-s4-y", seed=4)[0] == "V"
    assert answer(episode_id="by-hand")[0] is None  # the new episode's scene is its own now
    del publishers[b"restarted"]  # killed: no END will come
    assert answer(episode_id="by-hand")[0] == "V" and resets == [("V", 3), ("V", 4), ("V", 3)]


def test_refused_resets_wait_for_events_at_most_once_a_second(monkeypatch):
    """A flood of resets during an episode cannot stall the simulator: one looks for its START until
    CATCH_UP_S has passed, the next ones within CATCH_UP_EVERY_S are refused after one look."""
    clock = [1000.0]
    # The fake clock replaces the time module in services only: patched on the time module itself, a
    # thread an earlier test left sleeping moved it too (886 s between two looks of one call).
    fake_time = SimpleNamespace(
        monotonic=lambda: clock[0], sleep=lambda s: clock.__setitem__(0, clock[0] + s)
    )
    monkeypatch.setattr(services, "time", fake_time)
    looks = []
    record, answer, _ = _guarded()
    record._take_events = lambda: looks.append(clock[0])
    record.on_event("V-s3-x", True, b"reasoner")
    answer()
    looks.clear()
    assert answer(episode_id="flood-0")[0] is None
    assert looks[-1] - looks[0] >= services.CATCH_UP_S and len(looks) > 2  # it waited, looking
    for i in range(1, 20):
        looks.clear()
        assert answer(episode_id=f"flood-{i}")[0] is None
        assert len(looks) == 1  # refused after one look
    clock[0] += services.CATCH_UP_EVERY_S
    looks.clear()
    assert answer(episode_id="flood-20")[0] is None and len(looks) > 2  # a second later, one waits again


def test_an_episode_that_goes_on_with_the_scene_owns_it_too(monkeypatch):
    """``reset_scene=false``: the next episode sends no ResetScene but acts on the scene the last one
    reset; no one else's reset may move it either. The reset may also have come before its START."""
    monkeypatch.setattr(services, "CATCH_UP_S", 0.0)
    record, answer, resets = _guarded()
    assert answer()[0] == "V"  # the reset before its START (two writers)
    record.on_event("V-s3-x", True, b"reasoner")
    record.on_event("V-s3-x", False, b"reasoner")
    record.on_event("V-s3-go-on", True, b"reasoner")  # continues the scene: no reset of its own
    task, response = answer(episode_id="hostile-1", seed=8)
    assert task is None and response.reason.startswith("episode 'V-s3-go-on' is running on this scene")
    record.on_event("by-hand", True, b"someone else")  # a START from another publisher owns nothing
    assert answer(episode_id="by-hand", seed=8)[0] is None
    record.on_event("V-s3-go-on", False, b"reasoner")
    assert answer(episode_id="by-hand", seed=8)[0] == "V" and resets == [("V", 3), ("V", 8)]


def test_a_reset_for_an_episode_that_has_ended_is_refused_and_moves_nothing(monkeypatch):
    """Found by freezing a simulator (SIGSTOP) during an episode's reset: the reasoner ended the
    episode with an error naming it, and the simulator, woken, carried out the reset still waiting
    for it, moving the scene after the error. A reset naming an episode its reasoner has ended is
    refused; an END forged by another publisher ends nothing."""
    monkeypatch.setattr(services, "CATCH_UP_S", 0.0)
    record, answer, resets = _guarded()
    record.on_event("V-s3-x", True, b"reasoner")
    record.on_event("V-s3-x", False, b"someone else")
    record.on_event("V-s3-x", False, b"reasoner")
    task, response = answer()
    assert task is None and resets == []
    assert (response.ok, response.reason) == (
        False,
        "episode 'V-s3-x' has ended; its reset would move the scene after it",
    )
    assert answer(episode_id="V-s4-y", seed=4)[0] == "V" and resets == [("V", 4)]  # the next episode's
    record.on_event("V-s5-z", True, b"reasoner")
    record.on_event("V-s5-z", False, b"someone else")  # not its END
    assert answer(episode_id="V-s5-z", seed=5)[0] == "V" and resets == [("V", 4), ("V", 5)]


def test_a_reset_that_waited_through_a_freeze_of_the_simulator_is_refused_and_moves_nothing():
    """The same freeze, as the simulator woke in 4 of 7 runs: the reset came before the END the
    reasoner sent meanwhile (before its START, or just after it), so nothing said the episode had
    ended. A reset that comes within RESEND_S of a freeze of the simulator (``FreezeWatch``) is
    refused as stale; the caller's next copy, if it still waits, is served."""
    freeze_ended = [time.monotonic()]
    freezes = SimpleNamespace(frozen_since=lambda t: 6.0 if freeze_ended[0] > t else 0.0)
    resets: list[tuple[str, int]] = []
    record = ResetRecord(freezes=freezes)
    instance = SimpleNamespace(goal="make a V", to_dict=lambda: {"task": "V"})

    def answer():
        response = SimpleNamespace(ok=False, reason="", goal="", task_instance_json="")
        task = record.answer(
            _request(), response, "language_table", lambda t, s: resets.append((t, s)) or instance
        )
        return task, response

    task, response = answer()
    assert task is None and resets == [] and response.ok is False
    assert response.reason.startswith("this simulator was frozen or starved for 6.0 s just before"), (
        response.reason
    )
    freeze_ended[0] -= services.RESEND_S  # the caller's next copy, a RESEND_S later
    assert answer()[0] == "V" and resets == [("V", 3)]
