"""Vision pretraining on simulator labels: the image tower learns where each block is before Stage I.

A model built from scratch sees about a thousand expert rows in Stage I; from them it learns the
answer's format, not where the blocks are, and answers the same for every image (docs/mini.md). The
simulator knows every block's position for free ("pretraining knows what"), so before Stage I the
vision tower and its connector (the image tokens the language model reads) are trained to report
them: random layouts are rendered with the camera the reasoner sees, and a linear readout of each
image token says which blocks lie in the token's cell of the image grid and where each of them is
in the whole frame. Where in the frame, not where in the cell: the language model's attention
values carry no position (rotary embeddings act on queries and keys only), so a token it attends to
tells it where a block is only if the token's content says so. The readout is dropped afterwards;
the tower and connector keep what they learned, and the language model is untouched
(:mod:`r3.train.grounding` teaches it next to read them).

``readout: blocks`` trains object-centric tokens instead: image token ``k`` says which block it is
(the ``k``-th of ``BLOCKS``) and where that block is in the frame, wherever it lies, so the language
model gets one token per block, as the block-token classifier of ``scripts/expert_probe.py`` that
learns the expert's choice does. The tower has to find each block itself; the default 32-wide,
2-layer tower does not learn it, a 96-wide, 4-layer one does (docs/mini.md).

Idefics3 models only (the architecture ``r3 mini`` trains)."""

from __future__ import annotations

import json
import math
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from r3.files import write_text_atomically

#: The record this stage writes into the model folder it saves.
RECORD = "r3_vision.json"
#: What the image tokens are trained to say: each its cell's blocks, or one block each.
READOUTS = ("cells", "blocks")


@dataclass(frozen=True)
class VisionPretrainConfig:
    """Sizes of the pretraining; every layout is drawn from ``seed``, so the same config gives the
    same model."""

    images: int = 3000
    held_out_images: int = 200
    steps: int = 1500
    batch_size: int = 32
    learning_rate: float = 2e-3
    seed: int = 0
    readout: str = "cells"  # cells: each token its cell's blocks; blocks: token k is block k

    def __post_init__(self) -> None:
        check_sizes(self, "vision", ("images", "held_out_images", "steps", "batch_size"))
        if self.readout not in READOUTS:
            raise ValueError(f"vision.readout={self.readout!r}: expected one of {', '.join(READOUTS)}")


def check_sizes(cfg, section: str, counts: tuple[str, ...], zero_ok: tuple[str, ...] = ()) -> None:
    """Refuse a pretraining config whose ``counts`` are not integers >= 1 (>= 0 for ``zero_ok``) or
    whose ``learning_rate`` is not in (0, 1), naming ``section``'s key."""
    for key in counts:
        value, low = getattr(cfg, key), 0 if key in zero_ok else 1
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{section}.{key}={value!r}: must be an integer >= {low}")
    if not (isinstance(cfg.learning_rate, (int, float)) and 0 < cfg.learning_rate < 1):
        raise ValueError(f"{section}.learning_rate={cfg.learning_rate!r}: must be in (0, 1)")


def one_cycle(optimizer, learning_rate: float, steps: int):
    """torch's one-cycle schedule with a warm-up of 5 % of ``steps``, but at least two: torch divides by
    zero when the warm-up ends at the first step (fewer than 40 steps); 1 or 2 steps keep the rate."""
    import torch

    if steps <= 2:
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    return torch.optim.lr_scheduler.OneCycleLR(
        optimizer, learning_rate, total_steps=steps, pct_start=max(0.05, 2 / steps)
    )


def render_scenes(count: int, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """``count`` camera frames of random layouts (pusher anywhere on the board) and each block's board
    position (metres), shape (count, blocks, 2) in ``BLOCKS`` order. Every layout is drawn from
    ``seed``."""
    from r3.sim.language_table.env import LanguageTableEnv
    from r3.sim.language_table.scene import sample_layout
    from r3.tasks.language_table.board import BLOCKS, BOARD_HALF_EXTENTS, BoardState

    rng = np.random.default_rng(seed)
    half = np.array(BOARD_HALF_EXTENTS)
    env = LanguageTableEnv(task=None)
    frames, xy = [], np.empty((count, len(BLOCKS), 2), np.float32)
    try:
        for i in range(count):
            pusher = tuple(float(v) for v in rng.uniform(-0.9 * half, 0.9 * half))
            env.set_state(BoardState(sample_layout(rng), pusher))
            frames.append(env.render())
            xy[i] = env.state().positions()
    finally:
        env.close()
    return frames, xy


def render_layouts(count: int, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """:func:`render_scenes`, with where each block's centre lands in the frame as fractions (u right,
    v down) of its width and height: shape (count, blocks, 2)."""
    from r3.sim.language_table.env import LanguageTableEnv

    frames, xy = render_scenes(count, seed)
    env = LanguageTableEnv(task=None, render_mode=None)
    try:
        return frames, board_to_frame(env, xy).astype(np.float32)
    finally:
        env.close()


def board_to_frame(env, xy: np.ndarray) -> np.ndarray:
    """A block centre's board position (metres) as fractions (u, v) of ``env``'s camera frame."""
    from r3.sim.language_table import scene

    k, depth = env.camera_intrinsics(), scene.CAMERA_HEIGHT - scene.BLOCK_HEIGHT / 2
    u = k[0, 2] + k[0, 0] * xy[..., 0] / depth
    v = k[1, 2] - k[1, 1] * xy[..., 1] / depth
    return np.stack([u / env.width, v / env.height], axis=-1)


def metres_per_frame(env) -> np.ndarray:
    """Metres on the board per unit of frame fraction, along u and v (to report errors in cm)."""
    from r3.sim.language_table import scene

    k, depth = env.camera_intrinsics(), scene.CAMERA_HEIGHT - scene.BLOCK_HEIGHT / 2
    return np.array([env.width / k[0, 0], env.height / k[1, 1]]) * depth


def cell_readout(width: int, blocks: int):
    """Per image token and block: a logit that the block's centre lies in the token's cell of the
    image grid, and the centre's place in the frame. A linear layer on each token, so what is
    learned must be in the tokens themselves, the way the language model will read them."""
    from torch import nn

    return nn.Linear(width, blocks * 3)


def block_readout(width: int, blocks: int):
    """Per image token ``k`` < ``blocks``: block ``k``'s centre in the frame and which block the token
    is (logits over ``blocks``). One linear layer shared by the tokens, so each token's content must
    say both."""
    from torch import nn

    return nn.Linear(width, 2 + blocks)


def _image_tokens(model, pixel_values):
    """The image tokens the language model sees: vision tower, then connector (one tile per image)."""
    hidden = model.model.vision_model(pixel_values=pixel_values).last_hidden_state
    return model.model.connector(hidden)


class _Grid:
    """The image tokens' square grid over the tile (row-major, as the connector orders them)."""

    def __init__(self, tokens: int):
        self.side = math.isqrt(tokens)
        if self.side**2 != tokens:
            raise ValueError(f"{tokens} image tokens do not form a square grid")

    def targets(self, where):
        """Each block's cell index and its place in the frame, scaled to -1..1."""
        cell = (where * self.side).clamp(0, self.side - 1e-4).floor()
        return (cell[..., 1] * self.side + cell[..., 0]).long(), where * 2.0 - 1.0

    def decode(self, out):
        """``out`` (batch, tokens, blocks, 3) -> each block's centre as frame fractions (batch, blocks,
        2), read from the one token whose cell most likely holds it."""
        best = out[..., 0].argmax(1)
        picked = out.gather(1, best[:, None, :, None].expand(-1, 1, -1, 3)).squeeze(1)[..., 1:]
        return (picked + 1.0) / 2.0


def load_for_pretraining(model_dir: Path, stage: str, seed: int):
    """(processor, model) of the idefics3 model in ``model_dir`` for pretraining ``stage``, with torch
    seeded; another architecture is refused."""
    import torch
    from transformers import AutoProcessor

    from r3.reasoning.backends.transformers_backend import load_weights

    processor = AutoProcessor.from_pretrained(model_dir, local_files_only=True)  # never downloaded
    model = load_weights(model_dir, torch.float32)
    if model.config.model_type != "idefics3":
        raise ValueError(f"{model_dir}: {stage} pretraining takes idefics3, not {model.config.model_type}")
    torch.manual_seed(seed)
    return processor, model


def save_pretrained_stage(model, processor, model_dir: Path, out_dir: Path, record_file: str, record: dict):
    """Save the whole model with its processor files to ``out_dir``, keep the records ``model_dir``
    holds (what the model is: ``r3_tiny.json``, earlier stages'), and write this stage's ``record``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    for earlier in model_dir.glob("r3_*.json"):
        if earlier.name != record_file:
            shutil.copy2(earlier, out_dir / earlier.name)
    write_text_atomically(out_dir / record_file, json.dumps(record, indent=1) + "\n")  # the stage is done


def pretrain_vision(model_dir: str | Path, out_dir: str | Path, cfg: VisionPretrainConfig) -> dict:
    """Train ``model_dir``'s vision tower and connector on rendered layouts and save the whole model
    (processor files included) to ``out_dir``; returns the record written to ``out_dir/r3_vision.json``
    (the held-out error of the block centres read from the image tokens, in cm, before and after)."""
    import torch
    from PIL import Image
    from tqdm import tqdm

    from r3.sim.language_table.env import LanguageTableEnv

    model_dir, out_dir = Path(model_dir), Path(out_dir)
    processor, model = load_for_pretraining(model_dir, "vision", cfg.seed)

    def pixels(frames):
        batch = processor.image_processor([[Image.fromarray(f)] for f in frames], return_tensors="pt")
        return batch["pixel_values"][:, 0]  # one tile per image: (n, 3, size, size)

    print(f"[vision] rendering {cfg.images} + {cfg.held_out_images} layouts", file=sys.stderr, flush=True)
    frames, where = render_layouts(cfg.images + cfg.held_out_images, cfg.seed)
    images = torch.cat([pixels(frames[i : i + 256]) for i in range(0, len(frames), 256)]).half()
    where = torch.from_numpy(where)
    blocks = where.shape[1]
    width = model.config.text_config.hidden_size
    by_block = cfg.readout == "blocks"
    readout = block_readout(width, blocks) if by_block else cell_readout(width, blocks)
    env = LanguageTableEnv(task=None)
    scale = torch.from_numpy(metres_per_frame(env)).float() * 100.0  # frame fractions -> cm
    env.close()
    train, held = slice(0, cfg.images), slice(cfg.images, None)

    def forward(pixel_values):
        tokens = _image_tokens(model, pixel_values.float())
        if by_block:
            return readout(tokens[:, :blocks])  # (batch, blocks, 2 + blocks)
        out = readout(tokens)
        return out.view(out.shape[0], out.shape[1], blocks, 3)

    with torch.no_grad():
        grid = _Grid(_image_tokens(model, images[:1].float()).shape[1])
    if by_block and grid.side**2 < blocks:
        raise ValueError(f"readout blocks: {grid.side**2} image tokens for {blocks} blocks")
    cells, places = grid.targets(where)
    identity = torch.arange(blocks)

    def read_places(out):
        """Each block's centre as frame fractions (batch, blocks, 2)."""
        return (out[..., :2] + 1.0) / 2.0 if by_block else grid.decode(out)

    def loss_of(out, cell, place):
        if by_block:  # token k: block k's place, and that it is block k
            named = torch.nn.functional.cross_entropy(out[..., 2:].flatten(0, 1), identity.repeat(len(out)))
            return named + 4.0 * torch.nn.functional.mse_loss(out[..., :2], place)
        # Each block is in one cell: cross-entropy over the tokens, per block; its place from that token.
        logits = out[..., 0].transpose(1, 2).flatten(0, 1)
        located = torch.nn.functional.cross_entropy(logits, cell.flatten())
        picked = out.gather(1, cell[:, None, :, None].expand(-1, 1, -1, 3)).squeeze(1)[..., 1:]
        return located + 4.0 * torch.nn.functional.mse_loss(picked, place)

    parts = [model.model.vision_model, model.model.connector, readout]
    optimizer = torch.optim.AdamW([p for part in parts for p in part.parameters()], lr=cfg.learning_rate)
    schedule = one_cycle(optimizer, cfg.learning_rate, cfg.steps)

    n_held = cfg.held_out_images

    def held_out_error_cm() -> float:
        with torch.no_grad():
            chunks = [images[held][i : i + 256] for i in range(0, n_held, 256)]
            found = torch.cat([read_places(forward(c)) for c in chunks])
        return float(((found - where[held]) * scale).norm(dim=-1).mean())

    before = held_out_error_cm()
    generator = torch.Generator().manual_seed(cfg.seed)
    losses = []
    with tqdm(range(cfg.steps), desc="vision pretraining", unit="step", file=sys.stderr) as bar:
        for step in bar:
            index = torch.randint(0, cfg.images, (cfg.batch_size,), generator=generator)
            loss = loss_of(forward(images[train][index]), cells[train][index], places[train][index])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
            if step % 50 == 0:
                bar.set_postfix(loss=f"{np.mean(losses[-50:]):.3f}")
    after = held_out_error_cm()
    record = {
        "config": asdict(cfg),
        "held_out_error_cm": {"before": round(before, 2), "after": round(after, 2)},
        "final_loss": round(float(np.mean(losses[-50:])), 4),
    }
    save_pretrained_stage(model, processor, model_dir, out_dir, RECORD, record)
    print(f"[vision] held-out block centre error {before:.1f} cm -> {after:.1f} cm", file=sys.stderr)
    return record
