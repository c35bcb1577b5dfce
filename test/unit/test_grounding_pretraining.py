"""Grounding pretraining (r3.train.grounding): the language model learns to write each named block's
board region after its name, from rendered layouts.

Learning signal at toy size, not a figure (the full size's figures, and that they need the image,
are in docs/mini.md): the held-out blocks read rise from none; the image tower is untouched while the
connector and language model change; the saved folder loads with its processor and records."""

from __future__ import annotations

import json

import numpy as np
import pytest

from r3.tasks.language_table.board import board_region, region_name
from r3.train.grounding import RECORD, GroundingPretrainConfig, pretrain_grounding

torch = pytest.importorskip("torch")


@pytest.mark.parametrize(
    ("xy", "region"),
    [
        ((0.0, 0.0), "centre"),
        ((-0.2, 0.15), "top left"),
        ((0.07, 0.0), "right"),
        ((0.0, -0.06), "bottom"),
        ((0.06, 0.05), "centre"),  # the middle third's edges belong to the middle
        (np.array([0.25, -0.18]), "bottom right"),
    ],
)
def test_a_position_is_named_by_its_board_region(xy, region):
    assert region_name(xy) == region
    assert " ".join(w for w in board_region(xy) if w) == region.replace("centre", "")


def test_the_captions_name_two_blocks_then_four_then_all_eight():
    cfg = GroundingPretrainConfig(curriculum_steps=10)
    assert [cfg.named_blocks(s, 8) for s in (0, 9, 10, 19, 20, 29, 30, 10_000)] == [2, 2, 4, 4, 8, 8, 8, 8]
    assert GroundingPretrainConfig(curriculum_steps=0).named_blocks(0, 8) == 8


@pytest.mark.parametrize(
    "bad",
    [
        {"images": 0},
        {"steps": -3},
        {"batch_size": 2.5},
        {"learning_rate": 1},
        {"held_out_images": True},
        {"curriculum_steps": -1},
    ],
)
def test_bad_sizes_are_refused_with_the_key(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        GroundingPretrainConfig(**bad)


def test_pretraining_teaches_the_language_model_and_leaves_the_image_tower(tmp_path):
    from safetensors.torch import load_file
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from r3.reasoning.tiny import build_tiny_model

    base = build_tiny_model("idefics3", tmp_path / "model", hidden=64, image_size=64)
    cfg = GroundingPretrainConfig(
        images=200, held_out_images=40, steps=150, batch_size=16, learning_rate=3e-3, curriculum_steps=40
    )
    record = pretrain_grounding(base, tmp_path / "grounding", cfg)

    read = record["held_out_blocks_read"]
    assert read["before"] < 0.05 and read["after"] > read["before"] + 0.1, record
    assert 0 <= record["held_out_blocks_read_with_another_image"] <= 1
    assert json.loads((tmp_path / "grounding" / RECORD).read_text()) == record

    before = load_file(base / "model.safetensors")
    after = load_file(tmp_path / "grounding" / "model.safetensors")
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert not any(".vision_model." in k for k in changed), sorted(changed)
    assert any(".connector." in k for k in changed) and any(".text_model." in k for k in changed)
    assert (tmp_path / "grounding" / "r3_tiny.json").is_file()
    AutoModelForImageTextToText.from_pretrained(tmp_path / "grounding", local_files_only=True)
    AutoProcessor.from_pretrained(tmp_path / "grounding")
