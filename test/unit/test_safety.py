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
    """Mixed valid and invalid answers: a replay from their recording accepts and refuses alike."""
    rng = np.random.default_rng(3)
    answers = []
    for i in range(12):
        if i % 3 == 2:
            answers.append(hostile_outputs(1, seed=int(rng.integers(1 << 30)))[0])
        else:
            answers.append(("valid", "Reasoning: ok.\nInstruction: move the red moon up slightly", "stop"))
    env = LanguageTableEnv()
    first = run_episode("line", 5, Script(answers), env=env, render=False, max_steps=12)
    source = tmp_path / "recorded.jsonl"
    source.write_text(
        "".join(
            json.dumps({"text": s.raw_response, "finish_reason": a[2]}) + "\n"
            for s, a in zip(first.steps, answers)
        )
    )
    replay = make_backend(f"replay:{source}")
    replay.load()
    second = run_episode("line", 5, replay, env=env, render=False, max_steps=12)
    assert [(s.valid, s.error, s.instruction) for s in second.steps] == [
        (s.valid, s.error, s.instruction) for s in first.steps
    ]
    assert [s.snapshot for s in second.steps] == [s.snapshot for s in first.steps]
