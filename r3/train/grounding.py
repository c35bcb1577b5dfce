"""Grounding pretraining: the language model learns to say where a named block is in the image.

After the vision stage (:mod:`r3.train.vision`) the image tokens say where each block is, but a
language model trained from scratch does not learn from Stage I's rows to find a named block among
them: its answers are the same with another state's image (docs/mini.md). The simulator's labels
are free here too. Random layouts are rendered with the reasoner's camera and captioned with every
block's board region, in a random order ("Where they are: the red moon top right, the blue cube
left, ..."); the model learns to write each region after its name, with the loss on the region
words only. The names come in a curriculum, two blocks first, then four, then all eight: a 4-layer
model given all eight from the start stays at the regions' prior (measured in docs/mini.md), while
with two it learns the lookup within a few hundred steps and then extends it. The image tower stays
as the vision stage left it; the connector and the language model train.

Idefics3 models only (the architecture ``r3 mini`` trains).
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

#: The record this stage writes into the model folder it saves.
RECORD = "r3_grounding.json"
#: The caption's opening words, before the first block's name.
OPENING = "Where they are:"


def caption_pieces(named) -> list[tuple[str, bool]]:
    """The caption after :data:`OPENING` of blocks and their board regions, ``[(block, region),
    ...]``, as (text, is the region) pieces: " the red moon", " top right", ",", ... "."."""
    pieces = []
    for k, (block, region) in enumerate(named):
        ending = "." if k == len(named) - 1 else ","
        pieces += [(f" the {block}", False), (f" {region}", True), (ending, False)]
    return pieces


def region_sentence(named) -> str:
    """The caption as text: "Where they are: the red moon top right, the blue cube left." (what
    Stage I's ``reasoning_regions`` puts first in an answer's reasoning)."""
    return OPENING + "".join(text for text, _ in caption_pieces(named))


def goal_region_sentence(goal: str, snapshot: str | None, env) -> str:
    """The region sentence of the blocks ``goal`` names, in the order it names them, where the
    Language Table ``snapshot`` file (restored into ``env``) has them; "" when the goal names none
    or there is no snapshot."""
    from r3.tasks.language_table.board import BLOCKS, region_name

    named = sorted((goal.find(b), b) for b in BLOCKS if b in goal)
    if not named or not snapshot:
        return ""
    env.restore(Path(snapshot).read_bytes())
    state = env.state()
    return region_sentence([(b, region_name(state.xy(b))) for _, b in named])


@dataclass(frozen=True)
class GroundingPretrainConfig:
    """Sizes of the pretraining; every layout and caption is drawn from ``seed``. The number of
    blocks a caption names doubles every ``curriculum_steps`` steps, from two to all eight (0: all
    eight from the first step)."""

    images: int = 6000
    held_out_images: int = 400
    steps: int = 4000
    batch_size: int = 16
    learning_rate: float = 1e-3
    curriculum_steps: int = 750
    seed: int = 0

    def __post_init__(self) -> None:
        from r3.train.vision import check_sizes

        counts = ("images", "held_out_images", "steps", "batch_size", "curriculum_steps")
        check_sizes(self, "grounding", counts, zero_ok=("curriculum_steps",))

    def named_blocks(self, step: int, blocks: int) -> int:
        """How many blocks the captions of training step ``step`` name."""
        if self.curriculum_steps == 0:
            return blocks
        return min(blocks, 2 * 2 ** (step // self.curriculum_steps))


class _Captions:
    """Token ids of captions, built piece by piece so the region words' places are known."""

    def __init__(self, processor, frame):
        from PIL import Image

        tokenizer = processor.tokenizer
        self.pad = tokenizer.pad_token_id or 0
        self.encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]
        image = getattr(processor, "image_token", "<image>")
        opening = processor(text=f"{image}{OPENING}", images=[[Image.fromarray(frame)]], return_tensors="pt")
        self.prefix = opening["input_ids"][0].tolist()
        self._ids: dict[str, list[int]] = {}

    def caption(self, named: list[tuple[str, str]]):
        """(ids, labels, spans) of :func:`caption_pieces`: labels are -100 except on the region
        words; spans are each region's [start, end) in ids."""
        ids, labels, spans = list(self.prefix), [-100] * len(self.prefix), []
        for text, is_region in caption_pieces(named):
            if text not in self._ids:
                self._ids[text] = self.encode(text)
            piece = self._ids[text]
            if is_region:
                spans.append((len(ids), len(ids) + len(piece)))
            ids += piece
            labels += piece if is_region else [-100] * len(piece)
        return ids, labels, spans

    def batch(self, captions):
        import torch

        width = max(len(ids) for ids, _, _ in captions)
        ids = torch.full((len(captions), width), self.pad)
        labels = torch.full((len(captions), width), -100)
        mask = torch.zeros((len(captions), width), dtype=torch.long)
        for row, (i, lab, _) in enumerate(captions):
            ids[row, : len(i)], labels[row, : len(lab)], mask[row, : len(i)] = (
                torch.tensor(i),
                torch.tensor(lab),
                1,
            )
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def pretrain_grounding(model_dir: str | Path, out_dir: str | Path, cfg: GroundingPretrainConfig) -> dict:
    """Train ``model_dir``'s connector and language model to caption rendered layouts with each
    block's board region and save the whole model (processor files included) to ``out_dir``; returns
    the record written to ``out_dir/r3_grounding.json``: the share of held-out blocks whose region the
    model reads from the image (every region token its top choice after the block's name), before
    and after, and after with another layout's image (what the caption's order and the regions'
    prior alone give)."""
    import torch
    from PIL import Image
    from tqdm import tqdm

    from r3.tasks.language_table.board import BLOCKS, region_name
    from r3.train.checkpoint import freeze_vision_tower
    from r3.train.vision import load_for_pretraining, one_cycle, render_scenes, save_pretrained_stage

    model_dir, out_dir = Path(model_dir), Path(out_dir)
    processor, model = load_for_pretraining(model_dir, "grounding", cfg.seed)
    freeze_vision_tower(model)

    total = cfg.images + cfg.held_out_images
    print(f"[grounding] rendering {cfg.images} + {cfg.held_out_images} layouts", file=sys.stderr, flush=True)
    frames, xy = render_scenes(total, cfg.seed)
    regions = [[region_name(p) for p in layout] for layout in xy]
    chunks = [[[Image.fromarray(f)] for f in frames[i : i + 256]] for i in range(0, total, 256)]
    pixels = torch.cat([processor.image_processor(c, return_tensors="pt")["pixel_values"] for c in chunks])
    captions = _Captions(processor, frames[0])
    rng = np.random.default_rng(cfg.seed)

    def named(image: int, blocks) -> list[tuple[str, str]]:
        return [(b, regions[image][BLOCKS.index(b)]) for b in blocks]

    held_out = range(cfg.images, total)
    held_order = [list(rng.permutation(BLOCKS)) for _ in held_out]

    def read_share(shift: int = 0) -> float:
        """Share of held-out blocks read, captions of each image with image ``shift`` places on."""
        model.eval()
        right = count = 0
        with torch.no_grad():
            for start in range(0, cfg.held_out_images, 50):
                rows = range(start, min(start + 50, cfg.held_out_images))
                built = [captions.caption(named(cfg.images + r, held_order[r])) for r in rows]
                shown = [cfg.images + (r + shift) % cfg.held_out_images for r in rows]
                inputs = captions.batch(built)
                top = model(**inputs, pixel_values=pixels[shown]).logits.argmax(-1)
                for row, (ids, _, spans) in enumerate(built):
                    for s, e in spans:
                        right += ids[s:e] == top[row, s - 1 : e - 1].tolist()
                        count += 1
        model.train()
        return right / count

    before = read_share()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.learning_rate)
    schedule = one_cycle(optimizer, cfg.learning_rate, cfg.steps)
    losses = []
    with tqdm(range(cfg.steps), desc="grounding pretraining", unit="step", file=sys.stderr) as bar:
        for step in bar:
            blocks = BLOCKS[: cfg.named_blocks(step, len(BLOCKS))]
            images = rng.integers(0, cfg.images, cfg.batch_size).tolist()
            built = [captions.caption(named(i, rng.permutation(blocks))) for i in images]
            loss = model(**captions.batch(built), pixel_values=pixels[images]).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
            if step % 50 == 0:
                bar.set_postfix(loss=f"{np.mean(losses[-50:]):.3f}", names=len(blocks))
    after, other = read_share(), read_share(shift=max(1, cfg.held_out_images // 3))
    record = {
        "config": asdict(cfg),
        "held_out_blocks_read": {"before": round(before, 4), "after": round(after, 4)},
        "held_out_blocks_read_with_another_image": round(other, 4),
        "final_loss": round(float(np.mean(losses[-50:])), 4),
    }
    save_pretrained_stage(model, processor, model_dir, out_dir, RECORD, record)
    print(
        f"[grounding] held-out blocks read {before:.1%} -> {after:.1%} ({other:.1%} with another image)",
        file=sys.stderr,
    )
    return record
