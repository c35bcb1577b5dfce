"""Vision pretraining on simulator labels (r3.train.vision): the image tower learns where blocks are.

Learning signal at toy size, not a figure: the held-out block position error falls; only the vision
tower and connector change; the saved folder loads as a model with its processor."""

from __future__ import annotations

import json

import numpy as np
import pytest

from r3.train.vision import RECORD, VisionPretrainConfig, pretrain_vision, render_layouts

torch = pytest.importorskip("torch")


def test_layouts_are_rendered_with_where_each_block_lands_in_the_frame_from_the_seed():
    frames, where = render_layouts(3, seed=5)
    again, same = render_layouts(3, seed=5)
    assert len(frames) == 3 and frames[0].shape == (240, 320, 3) and where.shape == (3, 8, 2)
    assert 0 < where.min() and where.max() < 1  # every block centre is inside the frame
    np.testing.assert_array_equal(where, same)
    np.testing.assert_array_equal(frames[2], again[2])
    assert not np.array_equal(where[0], where[1])


@pytest.mark.parametrize(
    "bad",
    [{"images": 0}, {"steps": -3}, {"batch_size": 2.5}, {"learning_rate": 0}, {"held_out_images": True}],
)
def test_bad_sizes_are_refused_with_the_key(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        VisionPretrainConfig(**bad)


def test_pretraining_lowers_the_held_out_position_error_and_touches_only_the_image_path(tmp_path):
    from safetensors.torch import load_file
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from r3.reasoning.tiny import build_tiny_model

    base = build_tiny_model("idefics3", tmp_path / "model", hidden=64, image_size=64)
    cfg = VisionPretrainConfig(images=400, held_out_images=64, steps=600, batch_size=32, learning_rate=3e-3)
    record = pretrain_vision(base, tmp_path / "vision", cfg)

    error = record["held_out_error_cm"]
    # Untrained, every block is read near the frame's centre (the readout starts near 0), about
    # what guessing the mean position gives; a 64-pixel, 64-wide toy tower gets well under it.
    assert error["after"] < 0.85 * error["before"], error
    assert json.loads((tmp_path / "vision" / RECORD).read_text()) == record

    before = load_file(base / "model.safetensors")
    after = load_file(tmp_path / "vision" / "model.safetensors")
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(".vision_model." in k or ".connector." in k for k in changed), sorted(changed)
    assert any(".connector." in k for k in changed) and any(".vision_model." in k for k in changed)
    AutoModelForImageTextToText.from_pretrained(tmp_path / "vision", local_files_only=True)
    AutoProcessor.from_pretrained(tmp_path / "vision")


def test_block_readout_needs_a_token_per_block_and_trains_the_image_path_only(tmp_path):
    """``readout: blocks`` (token k is block k): refused when the tile has fewer image tokens than
    blocks (64 pixels: 4); with 128 pixels (16 tokens) it trains the tower and connector. Whether
    the tokens learn the places is measured in docs/mini.md (a 96-wide tower: 2.1 cm)."""
    from safetensors.torch import load_file

    from r3.reasoning.tiny import build_tiny_model

    cfg = VisionPretrainConfig(images=64, held_out_images=16, steps=20, batch_size=8, readout="blocks")
    small = build_tiny_model("idefics3", tmp_path / "small", hidden=64, image_size=64)
    with pytest.raises(ValueError, match="4 image tokens for 8 blocks"):
        pretrain_vision(small, tmp_path / "refused", cfg)
    base = build_tiny_model(
        "idefics3", tmp_path / "model", hidden=64, image_size=128, vision_hidden=48, vision_heads=3
    )
    record = pretrain_vision(base, tmp_path / "vision", cfg)
    assert record["config"]["readout"] == "blocks" and record["held_out_error_cm"]["after"] > 0
    before, after = (
        load_file(base / "model.safetensors"),
        load_file(tmp_path / "vision" / "model.safetensors"),
    )
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(".vision_model." in k or ".connector." in k for k in changed), sorted(changed)


def test_an_unknown_readout_is_refused():
    with pytest.raises(ValueError, match="vision.readout='tokens'"):
        VisionPretrainConfig(readout="tokens")


@pytest.mark.parametrize("steps", [1, 2, 3, 20, 39, 40, 1500])
def test_the_schedule_runs_for_any_number_of_steps(steps):
    """torch's one-cycle schedule divided by zero under 40 steps (its warm-up ended at step 0)."""
    from r3.train.vision import one_cycle

    weight = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.AdamW([weight], 1e-3)
    schedule = one_cycle(optimizer, 1e-3, steps)
    rates = []
    for _ in range(steps):
        optimizer.step()
        schedule.step()
        rates.append(optimizer.param_groups[0]["lr"])
    assert all(0 < r <= 1e-3 for r in rates)


def test_a_model_whose_config_declares_weights_it_lacks_is_refused_before_pretraining(tmp_path):
    """Found in review of a hostile sweep: the pretraining stages loaded a model folder without the
    reasoner's check, so a config.json of more layers than its weights pretrained a model whose extra
    layers were random (and the processor could be looked up online)."""
    from r3.reasoning.tiny import build_tiny_model
    from r3.train.vision import load_for_pretraining

    model = build_tiny_model("idefics3", tmp_path / "model", hidden=64, image_size=64)
    config = json.loads((model / "config.json").read_text())
    config["text_config"]["num_hidden_layers"] += 1
    (model / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="declares .* weight"):
        load_for_pretraining(model, "vision", seed=0)
