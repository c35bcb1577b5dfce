"""How learnable is the expert's choice of block from the exact board state? (docs/mini.md)

The learned reasoner of ``r3 mini`` names the block the expert pushes no more often than a guess
among the goal's blocks. This probe asks the same of small classifiers that read the simulator's
exact state instead of an image: expert episodes of T_M in process (privileged state, goal blocks,
previous instruction, and the block the expert's instruction moves), then four classifiers trained
on them and scored on held-out scenes:

- ``no positions``: each block's goal role, the task and the previous instruction, no coordinates;
- ``absolute``: the same plus every block's coordinates, one MLP over the whole board;
- ``relational``: each block scored from its own place, its offset from the goal blocks' centre and
  its neighbours' offsets (nearest first), the eight scores compared;
- ``block tokens``: what a language model would get from an object-centric image encoder, one token
  per block (which block, its goal role, whether the previous instruction moved it, its place, the
  task), read by a transformer of the mini model's size (4 layers, 128 wide) that scores each token:
  the relations are left for its attention to find.

    .venv/bin/python scripts/expert_probe.py                   # 300 scenes per task, about 8 min
    .venv/bin/python scripts/expert_probe.py --scenes 900      # the figure with three times the rows
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from tqdm import tqdm

from r3.cli_args import integer
from r3.episode import run_episode
from r3.instructions.language_table import parse
from r3.reasoning.backends import make_backend
from r3.tasks.language_table.board import BLOCKS
from r3.tasks.language_table.tasks import SPLITS

TASKS = SPLITS["T_M"]
KINDS = ("no positions", "absolute", "relational", "block tokens")
#: Held-out scenes start here, as in ``r3 eval``.
HELD_OUT_SEED = 1_000_000


class Tap:
    """The expert backend, keeping the privileged view of every decision it makes."""

    def __init__(self, backend):
        self.backend, self.views = backend, []

    def __getattr__(self, name):
        return getattr(self.backend, name)

    def decide(self, inp, *args, **kwargs):
        self.views.append(inp.extra["privileged"])
        return self.backend.decide(inp, *args, **kwargs)


def collect(seeds: range, desc: str) -> list[dict]:
    """One row per valid expert decision of T_M: state, goal blocks, previous block, chosen block."""
    tap = Tap(make_backend("expert"))
    tap.load()
    rows = []
    for task, seed in tqdm([(t, s) for t in TASKS for s in seeds], desc=desc, unit="episode"):
        tap.views = []
        trajectory = run_episode(task, seed, tap, render=False)
        previous = None
        for view, step in zip(tap.views, trajectory.steps, strict=True):
            if step.valid:
                block = parse(step.instruction).block
                goal = view.task.blocks
                rows.append(
                    {"state": view.state, "task": task, "goal": goal, "previous": previous, "block": block}
                )
                previous = block
    return rows


def block_features(row: dict, positions: bool) -> np.ndarray:
    """8 x F: per block, its goal role, whether the previous instruction moved it, the task, and (with
    ``positions``) its place, its offset from the goal blocks' centre and its neighbours' offsets."""
    place = {b: np.array(row["state"].blocks[b][:2]) * 5 if positions else np.zeros(2) for b in BLOCKS}
    role = {b: row["goal"].index(b) + 1 if b in row["goal"] else 0 for b in BLOCKS}
    named = [place[b] for b in BLOCKS if role[b]] or list(place.values())
    centre = np.mean(named, axis=0)
    task = [float(row["task"] == t) for t in TASKS]
    out = []
    for b in BLOCKS:
        f = [float(role[b] > 0), *(float(role[b] == k) for k in range(1, 5)), float(row["previous"] == b)]
        f += [*place[b], *(place[b] - centre), float(np.linalg.norm(place[b] - centre))]
        for other in sorted((o for o in BLOCKS if o != b), key=lambda o: np.linalg.norm(place[o] - place[b])):
            offset = place[other] - place[b]
            f += [*offset, float(np.linalg.norm(offset)), float(role[other] > 0)]
        out.append(f + task)
    return np.array(out, np.float32)


def block_tokens(row: dict) -> np.ndarray:
    """8 x F: per block, which block it is, its goal role, whether the previous instruction moved it,
    its place on the board, and the task; nothing computed between blocks."""
    role = {b: row["goal"].index(b) + 1 if b in row["goal"] else 0 for b in BLOCKS}
    task = [float(row["task"] == t) for t in TASKS]
    out = []
    for k, b in enumerate(BLOCKS):
        f = [float(k == j) for j in range(len(BLOCKS))] + [float(role[b] == r) for r in range(5)]
        out.append(f + [float(row["previous"] == b), *(np.array(row["state"].blocks[b][:2]) * 5), *task])
    return np.array(out, np.float32)


class TokenScorer(torch.nn.Module):
    """A transformer over one token per block, each token scored: the language model's view of an
    object-centric image encoder's tokens."""

    def __init__(self, features: int, width: int = 128, layers: int = 4, heads: int = 4):
        super().__init__()
        self.embed = torch.nn.Linear(features, width)
        layer = torch.nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers)
        self.score = torch.nn.Linear(width, 1)

    def forward(self, x):
        return self.score(self.encoder(self.embed(x))).squeeze(-1)


def accuracy(kind: str, train: list[dict], held_out: list[dict], epochs: int, seed: int = 0) -> float:
    """Held-out accuracy of the expert's block for one classifier kind."""
    torch.manual_seed(seed)
    positions = kind != "no positions"
    features = block_tokens if kind == "block tokens" else lambda r: block_features(r, positions)
    x_train = torch.tensor(np.stack([features(r) for r in train]))
    x_test = torch.tensor(np.stack([features(r) for r in held_out]))
    if kind == "absolute":  # one vector for the whole board: no sharing between blocks
        x_train, x_test = x_train.flatten(1), x_test.flatten(1)
    width = x_train.shape[-1]
    if kind == "block tokens":
        model = TokenScorer(width)
    else:
        layers = [torch.nn.Linear(width, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU()]
        model = torch.nn.Sequential(*layers, torch.nn.Linear(256, len(BLOCKS) if kind == "absolute" else 1))

    def scores(x):
        return model(x) if kind in ("absolute", "block tokens") else model(x).squeeze(-1)

    y_train = torch.tensor([BLOCKS.index(r["block"]) for r in train])
    y_test = np.array([BLOCKS.index(r["block"]) for r in held_out])
    optimiser = torch.optim.AdamW(model.parameters(), 1e-3, weight_decay=1e-3)
    for _ in tqdm(range(epochs), desc=kind, unit="epoch", leave=False):
        for batch in torch.randperm(len(x_train)).split(256):
            loss = torch.nn.functional.cross_entropy(scores(x_train[batch]), y_train[batch])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    with torch.no_grad():
        return float((scores(x_test).argmax(1).numpy() == y_test).mean())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scenes", type=integer(1), default=300, help="training scenes per task (default: 300)"
    )
    parser.add_argument(
        "--held-out-scenes", type=integer(1), default=50, help="held-out scenes per task (default: 50)"
    )
    parser.add_argument("--epochs", type=integer(1), default=40, help="training epochs (default: 40)")
    parser.add_argument(
        "--kinds",
        nargs="+",
        choices=KINDS,
        default=KINDS,
        metavar="KIND",
        help=f"classifiers to train (default: all of {', '.join(repr(k) for k in KINDS)})",
    )
    args = parser.parse_args(argv)
    start = time.monotonic()
    train = collect(range(args.scenes), "training scenes")
    held_out = collect(range(HELD_OUT_SEED, HELD_OUT_SEED + args.held_out_scenes), "held-out scenes")
    named = np.mean([len(r["goal"]) for r in held_out if r["block"] in r["goal"]])
    print(f"{len(train)} training and {len(held_out)} held-out decisions of T_M")
    print(f"the expert's block is a goal block in {np.mean([r['block'] in r['goal'] for r in held_out]):.1%}")
    print(f"(a guess among the goal's blocks is right 1 in {named:.1f} of those)")
    print("| classifier | held-out accuracy of the expert's block |\n| --- | ---: |")
    for kind in args.kinds:
        print(f"| {kind} | {accuracy(kind, train, held_out, args.epochs):.1%} |", flush=True)
    print(f"({time.monotonic() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
