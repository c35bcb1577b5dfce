"""The Language Table expert: always a parseable answer, budgets, determinism, retry after failure."""

from __future__ import annotations

import numpy as np
import pytest

from r3.reasoning import BackendError, ReasonerInput, ReasoningBudget, decide, make_backend
from r3.reasoning.expert import ExpertView, LanguageTableExpert, read_previous
from r3.sim.language_table.env import LanguageTableEnv
from r3.tasks.language_table.tasks import TASKS

IMAGE = np.zeros((8, 8, 3), np.uint8)


@pytest.fixture(scope="module")
def env():
    return LanguageTableEnv()


def _inp(env, seed, step=0, history_text="", **kw):
    return ReasonerInput(
        "language_table",
        env.task_instance.goal,
        [IMAGE],
        history_text=history_text,
        step=step,
        extra={"privileged": ExpertView(env.state(), env.task_instance), "seed": seed},
        **kw,
    )


@pytest.mark.parametrize("task", list(TASKS))
def test_answer_parses_for_random_states(env, task):
    expert = LanguageTableExpert()
    for seed in range(2):
        env.reset(seed=seed, options={"task": task})
        first = decide(expert, _inp(env, seed))
        assert first.valid, first.parsed
        assert first.parsed.reasoning and first.output.raw_text.endswith(first.parsed.instruction_text)
        # Same state again with the first answer as history: the "did my last push work?" path.
        second = decide(expert, _inp(env, seed, 1, first.output.raw_text))
        assert second.valid, second.parsed


def test_budget_caps_reasoning_and_keeps_the_instruction(env):
    env.reset(seed=5, options={"task": "T"})
    expert = LanguageTableExpert()
    full = decide(expert, _inp(env, 5))
    assert full.output.reasoning_tokens is None and not full.output.reasoning_truncated
    for n in (0, 7, 40):
        d = decide(expert, _inp(env, 5), ReasoningBudget(n))
        assert d.valid and d.parsed.instruction_text == full.parsed.instruction_text
        assert d.output.reasoning_tokens == len(d.parsed.reasoning.split()) == n
        assert d.output.reasoning_truncated == (n > 0)
    assert decide(expert, _inp(env, 5), ReasoningBudget(0)).output.raw_text.startswith("Instruction: ")
    only = decide(expert, _inp(env, 5, mode="instruction_only"))
    assert only.valid and only.output.raw_text == f"Instruction: {full.parsed.instruction_text}"


def test_wording_is_a_function_of_seed_and_step(env):
    env.reset(seed=2, options={"task": "line"})
    expert = LanguageTableExpert()
    texts = {decide(expert, _inp(env, seed, step)).output.raw_text for seed in (0, 1) for step in (0, 1)}
    assert len(texts) > 1  # wording varies
    assert decide(expert, _inp(env, 0, 1)).output.raw_text == decide(expert, _inp(env, 0, 1)).output.raw_text
    assert len({t.splitlines()[-1] for t in texts}) == 1  # the instruction does not


def test_a_repeated_instruction_that_did_nothing_is_replaced(env):
    expert, replaced = LanguageTableExpert(), 0
    for seed in range(6):
        env.reset(seed=seed, options={"task": "V"})
        first = decide(expert, _inp(env, seed))
        # Nothing moved: the same answer as history describes a push that did not work.
        again = decide(expert, _inp(env, seed, 1, first.output.raw_text))
        if first.parsed.instruction.type.value != "block_direction":
            assert again.parsed.instruction_text != first.parsed.instruction_text
            assert first.parsed.instruction_text in again.parsed.reasoning
            replaced += 1
    assert replaced


def test_previous_answer_is_read_from_either_history_kind():
    ins, dist = read_previous(
        "Reasoning: The red moon is about 7 cm from its spot.\nInstruction: move the red moon up"
    )
    assert ins.block == "red moon" and dist == pytest.approx(0.07)
    assert read_previous("move the red moon up")[0] == ins
    assert read_previous("") == (None, None) and read_previous("touch the red moon") == (None, None)


def test_backend_specs_outputs_and_errors(env):
    assert (
        make_backend("expert").model_id
        == make_backend("expert:language_table").model_id
        == "expert:language_table"
    )
    assert make_backend("expert:packing").model_id == "expert:language_table"  # one backend, both suites
    with pytest.raises(ValueError):
        make_backend("expert:chess")
    env.reset(seed=0, options={"task": "mid"})
    chunks = []
    out = LanguageTableExpert().decide(_inp(env, 0), ReasoningBudget(), chunks.append)
    assert "".join(chunks) == out.raw_text and out.completion_tokens == len(out.raw_text.split())
    assert out.prompt_tokens is None and out.latency_s > 0 and out.finish_reason == "stop"
    with pytest.raises(BackendError, match="privileged"):
        LanguageTableExpert().decide(ReasonerInput("language_table", "goal", [IMAGE]))
