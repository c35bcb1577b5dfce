"""Batched judging: the same verdicts as one-by-one judging, each rollout run once, on workers too."""

from __future__ import annotations

import numpy as np
import pytest

from r3.instructions import language_table as lt
from r3.rewards import JudgeReward, OutcomeSimulator, RuleJudge
from r3.rewards.agreement import load_cases


@pytest.fixture(scope="module")
def sim_cases():
    cases = [c for c in load_cases() if c.snapshot is not None][:24]
    return [(c.candidate, c.reference, "language_table", c.snapshot.read_bytes()) for c in cases]


def test_judge_many_equals_judging_one_by_one(sim_cases):
    one_by_one = [RuleJudge().judge(*pair) for pair in sim_cases]
    batched = RuleJudge().judge_many(sim_cases)
    assert [r.to_dict() for r in batched] == [r.to_dict() for r in one_by_one]
    assert any(r.tier.value == "semantic_match" for r in batched)  # the semantic tier was exercised


def test_worker_rollouts_give_the_same_verdicts(sim_cases):
    simulator = OutcomeSimulator(workers=2)
    try:
        on_workers = RuleJudge(simulator).judge_many(sim_cases)
    finally:
        simulator.close()
    in_process = RuleJudge().judge_many(sim_cases)
    assert [r.to_dict() for r in on_workers] == [r.to_dict() for r in in_process]


def test_a_group_rolls_out_its_reference_and_each_distinct_candidate_once(sim_cases):
    _, reference, _, snapshot = sim_cases[0]
    rng = np.random.default_rng(0)
    distinct = {
        lt.format_instruction(lt.sample_instruction(rng, types=("block_direction",))) for _ in range(6)
    }
    distinct -= {lt.format_instruction(lt.parse(reference))}
    candidates = sorted(distinct) * 2  # every candidate twice, as repeated samples in a group
    simulator = OutcomeSimulator()
    runs = []
    rollout = simulator.rollout
    simulator.rollout = lambda snap, instr: runs.append(instr) or rollout(snap, instr)
    reward = JudgeReward(RuleJudge(simulator))
    scores = reward(
        [f"Instruction: {c}" for c in candidates],
        expert_instruction=[reference] * len(candidates),
        snapshot=[snapshot] * len(candidates),
    )
    assert len(scores) == len(candidates) and all(s is not None for s in scores)
    assert (
        len(runs) == len(set(runs)) == len(distinct) + 1
    )  # each distinct candidate once, the reference once


def test_a_reference_outside_the_grammar_skips_only_its_sample(sim_cases):
    _, reference, _, snapshot = sim_cases[0]
    with pytest.warns(RuntimeWarning, match="sample skipped"):
        scores = JudgeReward()(
            ["Instruction: " + reference] * 2,
            expert_instruction=[reference, "fly away"],
            snapshot=[snapshot, snapshot],
        )
    assert scores == [1.0, None]
