"""Dataset rows -> TRL rows, and reasoning-context imputation, on hand-written rows."""

from __future__ import annotations

import numpy as np
import pytest

from r3.reasoning.prompts import PROMPT_FILE, PromptSettings, ReasonerInput, prompt_text
from r3.train.grpo import ResponseStats
from r3.train.impute import impute_history
from r3.train.rows import DatasetError, previous_instruction, prompt_messages, prompt_settings, sft_target

GOAL = "make a vertical line with the blue blocks"


PREVIOUS = "Reasoning: the blue cube sits low on the board.\nInstruction: move the blue cube up"
RESPONSE = "Reasoning: the blue moon is right of the line, far from it.\nInstruction: move the blue moon left"
IMAGE = np.zeros((4, 4, 3), np.uint8)


def _row(step, history="", kind="none", expert="move the blue cube up", episode="e0"):
    return {
        "images": ["a.png"],
        "goal": GOAL,
        "note": "",
        "suite": "language_table",
        "history": history,
        "history_kind": kind,
        "expert_instruction": expert,
        "step": step,
        "episode_id": episode,
        "instruction": "move the blue moon left",
        "response": RESPONSE,
    }


def _text(messages) -> str:
    return messages[0]["content"][-1]["text"]


def test_training_prompt_is_the_inference_prompt():
    row = _row(1, "Reasoning: it is low.\nInstruction: move the blue cube up", "response")
    messages = prompt_messages(row)
    image = np.zeros((4, 4, 3), np.uint8)
    inference = ReasonerInput(
        "language_table", GOAL, [image], history_text=row["history"], history="response"
    )
    assert messages[0]["role"] == "user" and messages[0]["content"][0] == {"type": "image"}
    assert messages[0]["content"][1] == {"type": "text", "text": prompt_text(inference)}


def test_previous_instruction_reads_either_history_kind():
    assert previous_instruction(
        _row(1, "Reasoning: x.\nInstruction: **touch the red moon.**", "response")
    ) == ("touch the red moon")
    assert previous_instruction(_row(1, "touch the red moon", "instruction")) == "touch the red moon"
    assert previous_instruction(_row(0)) == ""


def test_imputation_keeps_a_matching_sample_else_falls_back():
    rows = [
        _row(0, expert="move the blue cube up"),
        _row(1, "move the blue cube up", "instruction", expert="move the blue moon left"),
        _row(2, "move the blue moon left", "instruction", expert="touch the red moon"),
        _row(4, "push the red moon into the blue cube", "instruction", expert="touch the red moon"),
    ]
    answers = {
        0: "Reasoning: the cube is low.\nInstruction: slide the blue cube upwards",
        1: "Instruction: nothing",
    }
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
    assert (
        by_step[4]["tried"] == 0
        and by_step[4]["history"] == "Instruction: push the red moon into the blue cube"
    )


def test_response_stats_log_length_validity_and_repeats():
    logged = {}
    stats = ResponseStats()
    out = stats(
        [
            "Reasoning: a b.\nInstruction: touch the red moon",
            "Reasoning: c.\nInstruction: touch the blue cube",
            "junk",
        ],
        suite=["language_table"] * 3,
        previous_instruction=["touch the red moon"] * 3,
        log_metric=logged.__setitem__,
    )
    assert out == [0.0, 0.0, 0.0]
    assert logged["response/valid_fraction"] == 2 / 3
    assert logged["response/repeated_instruction_fraction"] == 1 / 3
    assert logged["response/words"] == (8 + 7 + 1) / 3


def test_instruction_only_sft_trains_on_the_instruction_alone():
    row = _row(1, PREVIOUS, "response")
    assert sft_target(row, "instruction_only") == "Instruction: move the blue moon left"
    assert sft_target(row, "reason") == RESPONSE


def test_instruction_only_prompt_shows_the_previous_answer_as_the_model_would_have_written_it():
    """An instruction-only model never writes reasoning, so its history holds none either."""
    prompt = PromptSettings("instruction_only", "response")
    shown = _text(prompt_messages(_row(1, PREVIOUS, "response"), prompt))
    own = ReasonerInput(
        "language_table",
        GOAL,
        [IMAGE],
        history_text="Instruction: move the blue cube up",
        history="response",
        mode="instruction_only",
    )
    assert shown == prompt_text(own) and "sits low" not in shown
    first = _text(prompt_messages(_row(0), prompt))  # a first step: an empty history of the model's kind
    assert "None: this is the first step." in first and first == prompt_text(
        ReasonerInput("language_table", GOAL, [IMAGE], history="response", mode="instruction_only")
    )


def test_prompt_settings_recast_an_input_to_the_checkpoint_s_history():
    given = ReasonerInput("language_table", GOAL, [IMAGE], history_text=PREVIOUS, history="response")
    by_instruction = PromptSettings("reason", "instruction").apply(given)
    assert (by_instruction.history, by_instruction.history_text) == ("instruction", "move the blue cube up")
    assert PromptSettings("reason", "response").apply(given) == given
    assert PromptSettings("reason", "none").apply(given).history_text == ""
    as_instruction = ReasonerInput(
        "language_table", GOAL, [IMAGE], history_text="touch the red moon", history="instruction"
    )
    with pytest.raises(ValueError, match="trained with history='response'.*run it with history 'response'"):
        PromptSettings("reason", "response").apply(as_instruction)


def test_prompt_settings_travel_in_the_model_folder(tmp_path):
    assert PromptSettings.load(tmp_path) is None
    PromptSettings("instruction_only", "instruction", thinking=True).save(tmp_path)
    assert PromptSettings.load(tmp_path) == PromptSettings("instruction_only", "instruction", True)
    (tmp_path / PROMPT_FILE).write_text('{"mode": "think", "history": "response"}')
    with pytest.raises(ValueError, match=f"{PROMPT_FILE}: not valid prompt settings"):
        PromptSettings.load(tmp_path)


def test_a_run_takes_its_rows_history_kind_and_refuses_a_mix():
    assert prompt_settings(["none", "response", "response"], "reason", False) == PromptSettings(
        "reason", "response"
    )
    assert prompt_settings(["none"], "instruction_only", False).history == "none"
    with pytest.raises(DatasetError, match="mix history kinds"):
        prompt_settings(["response", "instruction"], "reason", False)


def test_response_stats_judge_validity_in_the_run_s_mode():
    logged = {}
    ResponseStats(mode="instruction_only")(
        ["Instruction: touch the red moon"], suite=["language_table"], log_metric=logged.__setitem__
    )
    assert logged["response/valid_fraction"] == 1.0


def test_imputation_shows_its_progress_episode_by_episode(tmp_path, monkeypatch, capsys):
    """Found by a first-time user: `r3 train impute` sampled every row (48 samples a step, hours on a
    real model) without a word until its closing line. It now draws a bar, one tick per episode."""
    from types import SimpleNamespace

    from r3.reasoning import backends
    from r3.train import impute
    from r3.train.config import ImputeConfig

    rows = [_row(0, episode=e) for e in ("e0", "e1")] + [
        _row(1, "move the blue cube up", "instruction", expert="touch the red moon", episode="e1")
    ]
    answer = "Reasoning: the cube is low.\nInstruction: move the blue cube up"

    class Model:
        load = close = lambda self: None

        def decide(self, inp):
            return SimpleNamespace(raw_text=answer)

    monkeypatch.setattr(impute, "open_dataset", lambda *args: rows)
    monkeypatch.setattr(backends, "make_backend", lambda spec, **options: Model())
    monkeypatch.setattr("PIL.Image.open", lambda path: SimpleNamespace(convert=lambda mode: IMAGE))
    cfg = ImputeConfig(backend="expert", dataset="data", output=str(tmp_path / "impute.jsonl"))
    assert impute.run_impute(cfg) == {"rows": 3, "needed": 1, "imputed": 1, "fallback": 0}
    err = capsys.readouterr().err
    assert "impute: 100%" in err and "2/2" in err, err
