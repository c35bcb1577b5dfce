"""A third suite added by one folder (test/suites/toy) and one registration runs an episode in process
through the one episode loop (issue 16, acceptance 3, in-process half)."""

from __future__ import annotations

import numpy as np
import pytest
from scripted import Script
from suites.toy import SUITE

from r3.episode_loop import Decider, SimulatedSuite, run_loop
from r3.reasoning.prompts import ReasonerInput
from r3.safety.goals import canonical_task
from r3.suites import register_suite, reload_suites

RIGHT = "Reasoning: the goal cell is to the right.\nInstruction: Step  RIGHT"
NONSENSE = "Reasoning: let us fly.\nInstruction: fly to the goal"


@pytest.fixture
def toy():
    reload_suites()
    register_suite(SUITE)
    yield SUITE
    reload_suites()


def _episode(answers, seed=0, max_steps=10):
    env = SUITE.make_sim()
    env.reset(canonical_task(SUITE.name, "reach"), seed)
    backend = Script(answers)
    decider = Decider(backend, history=SUITE.default_history)
    return run_loop(SimulatedSuite(SUITE.name, env, seed), decider, "reach", seed, max_steps), env, backend


def test_an_unregistered_suite_is_refused():
    with pytest.raises(ValueError, match="unknown suite 'toy_line'"):
        ReasonerInput(SUITE.name, "move the marker to cell 2", [np.zeros((4, 4, 3), np.uint8)])


def test_the_toy_suite_runs_an_episode_through_the_one_loop(toy):
    trajectory, env, backend = _episode([RIGHT, NONSENSE, RIGHT])
    assert trajectory.success and env.state() == 2 and trajectory.goal == "move the marker to cell 2"
    assert [s.valid for s in trajectory.steps] == [True, False, True]
    assert trajectory.instructions == ["step right", "", "step right"]  # the toy grammar's canonical text
    assert trajectory.steps[1].error.startswith("instruction_outside_grammar: not a number-line instruction")
    # the refusal reaches the model at the next step, after its whole previous answer (history "response")
    assert backend.inputs[2].history_text.startswith(NONSENSE + "\n[Your previous answer was refused")
    assert [i.suite for i in backend.inputs] == ["toy_line"] * 3
    assert [s.progress for s in trajectory.steps] == [0.5, 0.5, 1.0]


def test_three_refusals_in_a_row_end_the_toy_episode(toy):
    trajectory, env, _ = _episode([NONSENSE] * 5, max_steps=5)
    assert len(trajectory.steps) == 3 and trajectory.aborted and not trajectory.success
    assert env.state() == 0


def test_what_the_toy_suite_lacks_is_refused_with_the_reason(toy):
    from r3.rewards.judge import RuleJudge

    with pytest.raises(ValueError, match="suite 'toy_line' has no judge hook"):
        RuleJudge().judge("step right", "step right", suite=SUITE.name)


def test_collection_and_evaluation_refuse_a_suite_they_cannot_run(toy, tmp_path):
    """r3 collect and r3 eval run their suites through the built-in episode code, so a suite without a
    collection split or evaluation tasks is refused by name, not run as Language Table."""
    from r3.data.collect import CollectConfig
    from r3.eval.runner import EvalConfig, EvalError

    with pytest.raises(ValueError, match="r3 collect runs language_table, packing, not 'toy_line'"):
        CollectConfig(out=str(tmp_path), suite=SUITE.name)
    with pytest.raises(EvalError, match="suite 'toy_line' unknown; known: language_table, packing"):
        EvalConfig(suite=SUITE.name)
