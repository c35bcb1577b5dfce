"""Prompts: every variant renders, examples are valid in our own grammar, messages are well formed."""

from __future__ import annotations

import numpy as np
import pytest

from r3.instructions import language_table, packing
from r3.reasoning.prompts import (
    HISTORY_MODES,
    LANGUAGE_TABLE_EXAMPLES,
    MODES,
    ReasonerInput,
    build_messages,
    prompt_text,
    to_openai_content,
)

IMAGE = np.zeros((24, 32, 3), np.uint8)


def test_language_table_examples_parse_to_their_canonical_form():
    examples = [e for _, es in LANGUAGE_TABLE_EXAMPLES for e in es]
    types = set()
    for example in examples:
        instr = language_table.parse(example)
        assert isinstance(instr, language_table.Instruction), (example, instr)
        assert language_table.format_instruction(instr) == example
        types.add(instr.type)
    assert types == set(language_table.InstructionType)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("history", HISTORY_MODES)
@pytest.mark.parametrize("suite", ["language_table", "packing"])
def test_variants(suite, history, mode):
    images = [IMAGE] if suite == "language_table" else [IMAGE] * 3
    inp = ReasonerInput(
        suite,
        "arrange the blue blocks",
        images,
        note="keep it tidy",
        history_text="PREVIOUS-XYZ",
        history=history,
        mode=mode,
    )
    text = prompt_text(inp)
    assert "arrange the blue blocks" in text and "keep it tidy" in text
    assert ("PREVIOUS-XYZ" in text) == (history != "none")
    assert ("Reasoning:" in text) == (mode == "reason")
    assert "Instruction: <one instruction>" in text


def test_packing_vocabulary_and_views_follow_inputs():
    text = prompt_text(ReasonerInput("packing", "pack the mug", [IMAGE, IMAGE]))
    assert "image 1: the base camera view" in text and "image 2: the wrist camera view" in text
    assert all(item in text for item in packing.ITEMS)
    text = prompt_text(ReasonerInput("packing", "g", [IMAGE] * 3, view_names=("top", "left", "right")))
    assert "image 3: the right camera view" in text
    for example in (
        "Pack the soup can into the small tray.",
        "Remove the cracker box from the large tray.",
        "Transfer the foam brick from the small tray to the medium tray.",
    ):
        assert example in text and packing.format_instruction(packing.parse(example)) == example


def test_first_step_history_is_explicit():
    assert "None: this is the first step." in prompt_text(ReasonerInput("language_table", "g", [IMAGE]))


def test_messages_put_images_first_and_convert_to_openai():
    messages = build_messages(ReasonerInput("packing", "g", [IMAGE] * 3))
    kinds = [c["type"] for c in messages[0]["content"]]
    assert messages[0]["role"] == "user" and kinds == ["image", "image", "image", "text"]
    converted = to_openai_content(messages)[0]["content"]
    assert converted[0]["image_url"]["url"].startswith("data:image/png;base64,")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"suite": "chess"}, "suite"),
        ({"history": "all"}, "history"),
        ({"mode": "think"}, "mode"),
        ({"images": []}, "at least one"),
        ({"images": [np.zeros((4, 4), np.uint8)]}, "HxWx3 uint8"),
        ({"images": [IMAGE, IMAGE]}, "one top-down image"),
    ],
)
def test_input_validation_names_the_bad_field(kwargs, match):
    args = {"suite": "language_table", "goal": "g", "images": [IMAGE]} | kwargs
    with pytest.raises(ValueError, match=match):
        ReasonerInput(**args)
