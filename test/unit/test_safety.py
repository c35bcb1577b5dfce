"""Safety of the decision path: hostile model outputs never move the robot, refusals are fed back,
three in a row stop the episode, and replaying recorded outputs repeats every decision."""

from __future__ import annotations

import collections
import json

import numpy as np
import pytest
from scripted import Script

from r3.episode import run_episode
from r3.episode_loop import next_history
from r3.reasoning import ReasonerInput, make_backend
from r3.reasoning.parsing import ParsedResponse, parse_response
from r3.reasoning.reasoner import decide
from r3.safety import MAX_CONSECUTIVE_INVALID, ResponseGuard, refusal_note
from r3.safety.fuzz import CATEGORIES, hostile_outputs
from r3.sim.language_table.env import LanguageTableEnv

IMAGE = np.zeros((8, 8, 3), dtype=np.uint8)


class CountingPolicy:
    """Wraps the scripted policy and counts every motion command it is asked for."""

    def __init__(self):
        from r3.lowlevel.pushing import ScriptedPushingPolicy

        self.policy, self.resets, self.actions = ScriptedPushingPolicy(), 0, 0

    def reset(self, *args):
        self.resets += 1
        self.policy.reset(*args)

    def act(self, state):
        self.actions += 1
        return self.policy.act(state)


def test_ten_thousand_hostile_outputs_through_the_reasoner_are_all_refused(tmp_path):
    outputs = hostile_outputs(10_000, seed=7)
    assert {c for c, _, _ in outputs} == set(CATEGORIES)
    source = tmp_path / "hostile.jsonl"
    source.write_text("".join(json.dumps({"text": t, "finish_reason": f}) + "\n" for _, t, f in outputs))
    backend = make_backend(f"replay:{source}")
    backend.load()
    accepted, kinds = [], collections.Counter()
    for step, (category, _, _) in enumerate(outputs):
        decision = decide(backend, ReasonerInput("language_table", "goal", [IMAGE], step=step))
        if decision.valid:
            accepted.append((category, decision.parsed.instruction_text))
        else:
            assert decision.parsed.reason, category
            kinds[decision.parsed.kind.value] += 1
    assert accepted == []
    print(f"\n10,000 hostile outputs, 0 accepted; refusals by kind: {dict(kinds)}")


def test_hostile_outputs_through_the_episode_loop_command_no_motion():
    env, policy = LanguageTableEnv(), CountingPolicy()
    outputs = hostile_outputs(300, seed=11, huge_every=50)
    backend = Script(outputs)
    for episode in range(len(outputs) // MAX_CONSECUTIVE_INVALID):
        env.reset(seed=episode, options={"task": "group"})
        before = env.state()
        t = run_episode("group", episode, backend, env=env, policy=policy, render=False)
        assert len(t.steps) == MAX_CONSECUTIVE_INVALID and t.aborted and not any(s.valid for s in t.steps)
        assert env.state().blocks == before.blocks and env.state().pusher == before.pusher
    assert (policy.resets, policy.actions) == (0, 0)


def test_a_valid_answer_resets_the_refusal_count():
    guard = ResponseGuard()
    assert not guard.observe(False, "a") and not guard.observe(False, "b") and not guard.observe(True)
    assert not guard.observe(False, "c") and not guard.observe(False, "d") and guard.observe(False, "e")
    assert guard.abort_reason == "3 consecutive invalid reasoner outputs (last: e); the robot holds still"


@pytest.mark.parametrize(
    "history, expected",
    [
        ("response", "raw\n" + refusal_note("why")),
        ("instruction", refusal_note("why")),
        ("none", refusal_note("why")),
    ],
)
def test_the_model_reads_why_it_was_refused(history, expected):
    assert next_history(history, False, "raw", "", "why") == expected
    assert (
        next_history(history, True, "raw", "move the red moon up")
        == {"response": "raw", "instruction": "move the red moon up", "none": ""}[history]
    )


def test_refusal_notes_are_bounded():
    assert len(refusal_note("x" * 100_000)) < 400


def test_replaying_recorded_outputs_repeats_every_decision(tmp_path):
    """Valid answers between hostile ones of every kind, recorded to a bag as the graph records them:
    a replay from the bag accepts and refuses each alike. The bag carries each answer's finish
    reason: a truncated answer that parses was refused for its "length", and replayed from the text
    alone it was taken and moved the pusher."""
    from r3.data.bags import read_messages
    from r3.data.episode_bag import record_episode
    from r3.graph import names

    hostile = hostile_outputs(len(CATEGORIES) - 1, seed=3, huge_every=0)  # each kind but "huge"
    # Cut off by the token limit, and the part before the cut is a valid instruction of its own.
    cut = ("cut", "Reasoning: ok.\nInstruction: move the red moon up", "length")
    valid = ("valid", "Reasoning: ok.\nInstruction: move the red moon up slightly", "stop")
    answers = [a for h in [cut, *hostile] for a in (valid, h)]
    steps, env = len(answers), LanguageTableEnv()
    bag = record_episode("line", 5, Script(answers), env, "recorded", tmp_path, max_steps=steps)
    recorded = sorted((m for *_, m in read_messages(bag, {names.REASONER_STEPS})), key=lambda m: m.step)
    assert len(recorded) == steps and {m.valid for m in recorded} == {True, False}
    parsed_alone = parse_response(recorded[1].raw_response, "language_table")  # as if it had stopped
    assert not recorded[1].valid and isinstance(parsed_alone, ParsedResponse), recorded[1].error
    replay = make_backend(f"replay:{bag}")
    replay.load()
    second = run_episode("line", 5, replay, env=env, render=False, max_steps=steps)
    assert [(s.valid, s.error, s.instruction) for s in second.steps] == [
        (m.valid, m.error, m.instruction) for m in recorded
    ]


@pytest.mark.parametrize(("valid", "finish"), [(True, "stop"), (False, "not recorded")])
def test_a_step_recorded_before_finish_reasons_replays_refused_where_it_was_refused(valid, finish):
    """Bags recorded before ReasonerStep carried the finish reason: the replay cannot know it, so a
    step refused then is replayed with one the guard refuses, never "stop" (which may parse)."""
    from types import SimpleNamespace

    from r3.reasoning.backends.replay import recorded_answer

    text = "Reasoning: ok.\nInstruction: move the red moon up"
    older_step = SimpleNamespace(raw_response=text, valid=valid)  # no finish_reason field
    assert recorded_answer(older_step) == (text, finish)
    verdict = parse_response(text, "language_table", finish_reason=finish)
    assert isinstance(verdict, ParsedResponse) == valid
