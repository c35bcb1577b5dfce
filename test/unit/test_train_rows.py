"""Dataset rows -> TRL rows, and reasoning-context imputation, on hand-written rows."""

from __future__ import annotations

import numpy as np

from r3.reasoning.prompts import ReasonerInput, prompt_text
from r3.train.grpo import ResponseStats
from r3.train.impute import impute_history
from r3.train.rows import previous_instruction, prompt_messages

GOAL = "make a vertical line with the blue blocks"


def _row(step, history="", kind="none", expert="move the blue cube up", episode="e0"):
    return {
        "images": ["a.png"], "goal": GOAL, "note": "", "suite": "language_table", "history": history,
        "history_kind": kind, "expert_instruction": expert, "step": step, "episode_id": episode,
    }


def test_training_prompt_is_the_inference_prompt():
    row = _row(1, "Reasoning: it is low.\nInstruction: move the blue cube up", "response")
    messages = prompt_messages(row)
    image = np.zeros((4, 4, 3), np.uint8)
    inference = ReasonerInput("language_table", GOAL, [image], history_text=row["history"], history="response")
    assert messages[0]["role"] == "user" and messages[0]["content"][0] == {"type": "image"}
    assert messages[0]["content"][1] == {"type": "text", "text": prompt_text(inference)}


def test_previous_instruction_reads_either_history_kind():
    assert previous_instruction(_row(1, "Reasoning: x.\nInstruction: **touch the red moon.**", "response")) == (
        "touch the red moon")
    assert previous_instruction(_row(1, "touch the red moon", "instruction")) == "touch the red moon"
    assert previous_instruction(_row(0)) == ""


def test_imputation_keeps_a_matching_sample_else_falls_back():
    rows = [
        _row(0, expert="move the blue cube up"),
        _row(1, "move the blue cube up", "instruction", expert="move the blue moon left"),
        _row(2, "move the blue moon left", "instruction", expert="touch the red moon"),
        _row(4, "push the red moon into the blue cube", "instruction", expert="touch the red moon"),
    ]
    answers = {0: "Reasoning: the cube is low.\nInstruction: slide the blue cube upwards", 1: "Instruction: nothing"}
    seen = []

    def sample(inp):
        seen.append((inp.step, inp.history, inp.history_text))
        return answers[inp.step]

    records = impute_history(rows, sample, samples=3, load_images=lambda row: [np.zeros((4, 4, 3), np.uint8)])
    by_step = {r["step"]: r for r in records}
    # step 1: the first sample for step 0 matches the expert's "move the blue cube up" (a paraphrase)
    assert by_step[1]["imputed"] and by_step[1]["tried"] == 1 and by_step[1]["history"] == answers[0]
    # step 2: three samples for step 1 miss; the bare previous instruction stands in, as a response
    assert not by_step[2]["imputed"] and by_step[2]["tried"] == 3
    assert by_step[2]["history"] == "Instruction: move the blue moon left"
    assert {r["history_kind"] for r in records} == {"response"}
    # step 1 was prompted with its own imputed history when step 2 was resampled
    assert seen[1] == (1, "response", answers[0])
    # step 4: step 3 is not in the data, so nothing can be resampled
    assert by_step[4]["tried"] == 0 and by_step[4]["history"] == "Instruction: push the red moon into the blue cube"


def test_response_stats_log_length_validity_and_repeats():
    logged = {}
    stats = ResponseStats()
    out = stats(
        ["Reasoning: a b.\nInstruction: touch the red moon", "Reasoning: c.\nInstruction: touch the blue cube", "junk"],
        suite=["language_table"] * 3,
        previous_instruction=["touch the red moon"] * 3,
        log_metric=logged.__setitem__,
    )
    assert out == [0.0, 0.0, 0.0]
    assert logged["response/valid_fraction"] == 2 / 3
    assert logged["response/repeated_instruction_fraction"] == 1 / 3
    assert logged["response/words"] == (8 + 7 + 1) / 3
