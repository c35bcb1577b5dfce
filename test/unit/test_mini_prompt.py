"""The learned reasoner of `r3 mini` sees the camera image, the goal and its previous step, nothing else:
its prompt holds no privileged simulator state; and R^3's random baselines draw what they say."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

from r3.episode import run_episode
from r3.instructions.language_table import parse
from r3.reasoning import make_backend
from r3.reasoning.backends.base import Generation, ReasonerBackend
from r3.reasoning.constrained import canonical_instructions
from r3.reasoning.prompts import PROMPT_FILE, PromptSettings, ReasonerInput, build_messages, prompt_text
from r3.tasks.language_table.board import BLOCKS

#: What `r3 mini`'s checkpoints declare (config/mini/*.yaml: compact prompt, previous instruction).
MINI_PROMPT = PromptSettings("reason", "instruction", variant="compact", constrained=True, temperature=0.0)


class RecordingCheckpoint(ReasonerBackend):
    """A stand-in for a trained checkpoint: prompted as its folder says (the transformers backend's
    ``prompt_input``), it records every message it is sent and answers one fixed instruction."""

    model_id = "recording"

    def __init__(self, settings: PromptSettings):
        self.settings, self.inputs, self.messages = settings, [], []

    def prompt_input(self, inp: ReasonerInput) -> ReasonerInput:
        self.inputs.append(inp)
        return self.settings.apply(inp)

    def _generate(self, messages, prefix, max_tokens, stop, on_text):
        self.messages.append(messages)
        return Generation("Reasoning: it is close.\nInstruction: move the red moon left", "stop", 1, 1, 0.0)


def test_the_mini_reasoners_prompt_is_the_image_the_goal_and_the_previous_instruction_only():
    backend = RecordingCheckpoint(MINI_PROMPT)
    trajectory = run_episode("group", 1_000_003, backend, max_steps=3, render=False)
    assert len(backend.messages) == 3
    for step, (inp, messages) in enumerate(zip(backend.inputs, backend.messages)):
        assert inp.extra["privileged"] is not None  # the loop did hand the state over; the prompt drops it
        (message,) = messages
        images = [c["image"] for c in message["content"] if c["type"] == "image"]
        (text,) = [c["text"] for c in message["content"] if c["type"] == "text"]
        assert len(images) == 1 and np.array_equal(np.asarray(images[0]), inp.images[0])
        previous = trajectory.instructions[step - 1] if step else ""
        bare = ReasonerInput(
            "language_table",
            inp.goal,
            inp.images,
            history_text=previous,
            history="instruction",
            variant="compact",
        )
        assert text == prompt_text(bare)
        assert not re.search(r"\d", text), text  # no position, distance or any other number
        assert trajectory.goal in text and (previous in text if previous else "first step" in text)


def test_a_step_records_the_history_the_checkpoint_was_given_not_the_loops():
    """The loop keeps whole previous responses (its default history); a checkpoint trained on the
    previous instruction is given that instruction, and the record (ReasonerStep.history) says so."""
    trajectory = run_episode("group", 1_000_003, RecordingCheckpoint(MINI_PROMPT), max_steps=3, render=False)
    assert [s.history for s in trajectory.steps] == ["", "move the red moon left", "move the red moon left"]


def test_no_input_field_but_the_image_goal_and_previous_step_reaches_the_prompt():
    image = np.full((24, 32, 3), 7, np.uint8)
    base = {"suite": "language_table", "goal": "group the red moon and blue cube", "images": [image]}
    a = MINI_PROMPT.apply(ReasonerInput(**base, history_text="touch the red moon", history="instruction"))
    b = MINI_PROMPT.apply(
        ReasonerInput(
            **base,
            history_text="touch the red moon",
            history="instruction",
            note="the red moon is at (0.12, -0.03)",
            step=7,
            extra={"privileged": "STATE", "seed": 5},
        )
    )
    assert build_messages(a)[0]["content"][1] == build_messages(b)[0]["content"][1]
    changed = MINI_PROMPT.apply(
        ReasonerInput(**base, history_text="touch the blue cube", history="instruction")
    )
    assert build_messages(changed)[0]["content"][1] != build_messages(a)[0]["content"][1]


def test_random_valid_draws_canonical_instructions_and_random_goal_block_names_a_goal_block():
    goal = "put the red moon and blue cube next to each other, apart from all the other blocks"
    image = np.zeros((8, 8, 3), np.uint8)
    valid, goal_block = make_backend("random_valid"), make_backend("random_goal_block,seed=1")
    canonical = set(canonical_instructions("language_table"))
    seen_valid, seen_goal = set(), set()
    for step in range(200):
        inp = ReasonerInput("language_table", goal, [image], step=step, extra={"seed": 3})
        seen_valid.add(valid.decide(inp).raw_text.split("Instruction: ")[1])
        seen_goal.add(goal_block.decide(inp).raw_text.split("Instruction: ")[1])
    assert seen_valid <= canonical and len(seen_valid) > 150  # uniform over 1,467: nearly all distinct
    assert seen_goal <= canonical and {parse(t).block for t in seen_goal} == {"red moon", "blue cube"}
    assert {parse(t).block for t in seen_valid} - {None} > {"red moon", "blue cube"}
    again = ReasonerInput("language_table", goal, [image], step=4, extra={"seed": 3})
    assert valid.decide(again).raw_text == valid.decide(again).raw_text


@pytest.mark.parametrize("spec", ["random_valid", "random_goal_block"])
def test_a_baselines_answer_parses_in_either_mode(spec):
    from r3.reasoning.parsing import ParsedResponse, parse_response

    image = np.zeros((8, 8, 3), np.uint8)
    for mode in ("reason", "instruction_only"):
        inp = ReasonerInput("language_table", "clear every block out of the bottom half", [image], mode=mode)
        parsed = parse_response(make_backend(spec).decide(inp).raw_text, "language_table", mode)
        assert isinstance(parsed, ParsedResponse) and parsed.instruction.block in (*BLOCKS, None)


def test_a_folder_declares_its_constraint_and_temperature_and_a_spec_overrides_them(tmp_path):
    from r3.reasoning import ReasoningBudget
    from r3.reasoning.parsing import ParsedResponse, parse_response
    from r3.reasoning.tiny import build_tiny_model

    folder = build_tiny_model("idefics3", tmp_path / "m")
    MINI_PROMPT.save(folder)
    image = np.zeros((24, 32, 3), np.uint8)
    inp = ReasonerInput("language_table", "group the red moon and blue cube", [image], history="instruction")
    budget = ReasoningBudget(max_reasoning_tokens=4)  # the answer stage starts after "Instruction:"

    def answer(options: str = "") -> str:
        backend = make_backend(f"transformers:{folder},device=cpu,max_new_tokens=24{options}")
        backend.load()
        return backend.decide(inp, budget).raw_text

    as_declared = answer()
    assert isinstance(parse_response(as_declared, "language_table"), ParsedResponse), as_declared
    assert not isinstance(parse_response(answer(",constrained=false"), "language_table"), ParsedResponse)
    assert as_declared == answer(",temperature=0") != answer(",temperature=1.0")


def test_a_folder_declaring_a_whole_number_temperature_samples_at_it(tmp_path):
    """Found by a hostile user: a checkpoint whose settings said ``"temperature": 2`` (as training
    wrote from a config's ``inference_temperature: 2``) failed at its first decision, inside
    transformers ("has to be a strictly positive float")."""
    from r3.reasoning.tiny import build_tiny_model

    folder = build_tiny_model("idefics3", tmp_path / "m")
    (folder / PROMPT_FILE).write_text(
        json.dumps({"mode": "reason", "history": "instruction", "temperature": 2})
    )
    backend = make_backend(f"transformers:{folder},device=cpu,max_new_tokens=4")
    backend.load()
    inp = ReasonerInput(
        "language_table", "group the red moon and blue cube", [np.zeros((24, 32, 3), np.uint8)]
    )
    assert isinstance(backend.decide(inp).raw_text, str)


@pytest.mark.parametrize("arch, closes_thinking", [("idefics3", False), ("qwen2_5_vl", True)])
def test_a_prompt_renders_without_a_warning_and_thinking_stays_off(tmp_path, arch, closes_thinking):
    """Found running ``r3 mini``: every prompt of an idefics3 model logged "Kwargs passed to
    `processor.__call__` have to be in `processor_kwargs`" (``enable_thinking`` given to a template
    that reads none), through the live view and the training's progress bars. A template that reads
    it (Qwen3-style) still gets it and closes the think block."""
    import logging

    from transformers import AutoProcessor

    from r3.reasoning.backends.transformers_backend import PROBE_MESSAGES, chat_text
    from r3.reasoning.tiny import build_tiny_model

    processor = AutoProcessor.from_pretrained(build_tiny_model(arch, tmp_path / "m"))
    logged: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: logged.append(record.getMessage())
    logging.getLogger("transformers").addHandler(handler)  # it does not propagate to the root logger
    try:
        text = chat_text(processor, PROBE_MESSAGES, where="m")
    finally:
        logging.getLogger("transformers").removeHandler(handler)
    assert logged == []
    assert ("<think>\n\n</think>" in text) == closes_thinking, text


@pytest.mark.parametrize(
    "settings, says",
    [
        (
            '{"mode": "reason", "history": "response", "constrained": "false"}',
            "constrained='false': expected true",
        ),
        ('{"mode": "reason", "history": "response", "thinking": 0}', "thinking=0: expected true or false"),
        (
            '{"mode": "reason", "history": "response", "temperature": NaN}',
            "temperature=nan: must be a finite",
        ),
        (
            '{"mode": "reason", "history": "response", "temperature": 1e300}',
            "must be a finite number in [0, 10]",
        ),
        ('{"mode": "reason", "history": "response", "temperature": true}', "expected a number, got bool"),
        ("[" * 100_000, "not valid prompt settings"),
    ],
)
def test_a_folders_prompt_settings_are_refused_unless_each_value_is_what_it_must_be(tmp_path, settings, says):
    """Found by a hostile user: ``"constrained": "false"`` turned the constraint on (a non-empty
    string is true), a NaN or 1e300 temperature was taken, and 100,000 nested brackets ended in a
    RecursionError, not a refusal naming the file."""
    (tmp_path / PROMPT_FILE).write_text(settings)
    with pytest.raises(ValueError, match="not valid prompt settings") as err:
        PromptSettings.load(tmp_path)
    assert says in str(err.value) and str(tmp_path / PROMPT_FILE) in str(err.value)


@pytest.mark.parametrize("kind", ["a folder", "a FIFO", "a broken link"])
def test_prompt_settings_that_are_no_regular_file_are_refused_not_ignored(tmp_path, kind):
    """Found by a hostile user: an r3_prompt.json that was a folder, a FIFO or a broken link was
    taken for no settings at all, and the reasoner prompted a trained checkpoint as an untrained one
    (reasoning mode, no constraint, temperature 1)."""
    path = tmp_path / PROMPT_FILE
    if kind == "a folder":
        path.mkdir()
    elif kind == "a FIFO":
        os.mkfifo(path)
    else:
        path.symlink_to(tmp_path / "gone.json")
    with pytest.raises(ValueError, match=re.escape(str(path))):
        PromptSettings.load(tmp_path)
