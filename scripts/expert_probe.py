"""How learnable is the expert's choice of block from the exact board state? (docs/mini.md)

The learned reasoner of ``r3 mini`` names the block the expert pushes no more often than a guess
among the goal's blocks. This probe asks the same of small classifiers that read the simulator's
exact state instead of an image: expert episodes of T_M in process (privileged state, goal blocks,
previous instruction, and the block the expert's instruction moves), then classifiers trained on
them and scored on held-out scenes:

- ``no positions``: each block's goal role, the task and the previous instruction, no coordinates;
- ``absolute``: the same plus every block's coordinates, one MLP over the whole board;
- ``relational``: each block scored from its own place, its offset from the goal blocks' centre and
  its neighbours' offsets (nearest first), the eight scores compared;
- ``block tokens``: what a language model would get from an object-centric image encoder, one token
  per block (which block, its goal role, whether the previous instruction moved it, its place, the
  task), read by a transformer of the mini model's size (4 layers, 128 wide) that scores each token:
  the relations are left for its attention to find;
- the sequence kinds (``SEQUENCE_KINDS``): the same decision as a language model meets it. The image
  tokens say which block and where (what ``vision.readout: blocks`` trains); the task, the goal's
  blocks in their order and the previous instruction's block are text tokens with name embeddings of
  their own, so the model has to bind a name to its image token itself. They differ in one thing at
  a time: the image first (the order of r3's prompts and of most VLM chat templates, where causal
  image tokens cannot attend to the goal) or the goal first; the answer read at the last position
  (as a language model writes the block's name) or by pointing (one score per image token); causal
  or bidirectional attention; and image tokens that also carry their block's goal role.

    .venv/bin/python scripts/expert_probe.py                   # 300 scenes per task, every kind, about 40 min
    .venv/bin/python scripts/expert_probe.py --scenes 900 --kinds "no positions" absolute relational
    .venv/bin/python scripts/expert_probe.py --epochs 2 4 10 20 40 --kinds "block tokens" "LM, image first"
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from functools import partial

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


@dataclass(frozen=True)
class SequenceKind:
    """How a sequence model meets the decision: the goal text before or after the image tokens,
    causal attention or not, where the answer is read, and whether each image token also says its
    block's goal role (no binding needed). ``answer``: "last", the last position's eight logits (as a
    language model writes the block's name); "image", one score per image token (pointing); "names",
    one score per block at eight tokens after everything else that each name one block (as a
    reasoning that goes through the blocks one by one and says yes or no to each)."""

    goal_first: bool
    causal: bool = True
    answer: str = "last"
    roles_in_image: bool = False


SEQUENCE_KINDS: dict[str, SequenceKind] = {
    "LM, image first": SequenceKind(goal_first=False),
    "LM, goal first": SequenceKind(goal_first=True),
    "LM, goal first, roles in image": SequenceKind(goal_first=True, roles_in_image=True),
    "LM, image first, pointing": SequenceKind(goal_first=False, answer="image"),
    "LM, goal first, pointing": SequenceKind(goal_first=True, answer="image"),
    "LM, image first, block by block": SequenceKind(goal_first=False, answer="names"),
    "bidirectional": SequenceKind(goal_first=True, causal=False),
    "bidirectional, pointing": SequenceKind(goal_first=True, causal=False, answer="image"),
}
KINDS = ("no positions", "absolute", "relational", "block tokens", *SEQUENCE_KINDS)
#: A sequence token's features: its type, then the parts of each type (see :func:`sequence`).
_TYPES = ("image", "task", "goal", "previous", "query", "ask")
_GOAL_SLOTS = len(BLOCKS)
_ROLES = 5  # not in the goal, or its first to fourth block (later ones share the fourth)


def sequence(row: dict, kind: SequenceKind) -> np.ndarray:
    """T x F: the tokens a language model reads for one decision: eight image tokens (which block, its
    place; with ``roles_in_image`` also its goal role and whether the previous instruction moved it)
    and the text (the task, the goal's blocks by name in their slots, padded to eight, the previous
    instruction's block by name), in ``kind``'s order, then the query the answer is read at, or, to
    answer block by block, eight tokens that each ask about one block by name."""
    n = len(BLOCKS)
    segments = {"identity": n, "name": n, "place": 2, "slot": _GOAL_SLOTS, "task": len(TASKS)}
    segments |= {"role": _ROLES, "moved": 1}
    offsets = dict(zip(segments, np.cumsum([len(_TYPES), *segments.values()])[:-1], strict=True))
    width = len(_TYPES) + sum(segments.values())

    def token(type_: str, **parts) -> np.ndarray:
        t = np.zeros(width, np.float32)
        t[_TYPES.index(type_)] = 1.0
        for part, value in parts.items():
            if part == "place":
                t[offsets["place"] : offsets["place"] + 2] = value
            elif part == "moved":
                t[offsets["moved"]] = float(value)
            elif value is not None:  # an index into the part's one-hot segment
                t[offsets[part] + value] = 1.0
        return t

    role = {b: min(row["goal"].index(b) + 1, _ROLES - 1) if b in row["goal"] else 0 for b in BLOCKS}
    image = []
    for k, b in enumerate(BLOCKS):
        own = {"role": role[b], "moved": row["previous"] == b} if kind.roles_in_image else {}
        image.append(token("image", identity=k, place=np.array(row["state"].blocks[b][:2]) * 5, **own))
    text = [token("task", task=TASKS.index(row["task"]))]
    names = [BLOCKS.index(b) for b in row["goal"]] + [None] * (_GOAL_SLOTS - len(row["goal"]))
    text += [token("goal", name=k, slot=i) for i, k in enumerate(names)]
    text.append(token("previous", name=None if row["previous"] is None else BLOCKS.index(row["previous"])))
    if kind.answer == "names":
        ends = [token("ask", name=k) for k in range(n)]
    else:
        ends = [token("query")]
    return np.stack([*(text + image if kind.goal_first else image + text), *ends])


class SequenceReader(torch.nn.Module):
    """A transformer of the mini language model's size over :func:`sequence`'s tokens: eight logits,
    read at the last position, or one per image token (which start at ``image_at``), or one per
    asking token (the last eight)."""

    def __init__(self, features: int, length: int, kind: SequenceKind, image_at: int, width: int = 128):
        super().__init__()
        self.kind, self.image_at = kind, image_at
        self.embed = torch.nn.Linear(features, width)
        self.position = torch.nn.Parameter(0.02 * torch.randn(length, width))
        layer = torch.nn.TransformerEncoderLayer(width, 4, 4 * width, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 4)
        self.register_buffer("mask", torch.nn.Transformer.generate_square_subsequent_mask(length))
        self.answer = torch.nn.Linear(width, len(BLOCKS) if kind.answer == "last" else 1)

    def forward(self, x):
        h = self.embed(x) + self.position
        if self.kind.causal:
            h = self.encoder(h, mask=self.mask, is_causal=True)
        else:
            h = self.encoder(h)
        if self.kind.answer == "image":
            return self.answer(h[:, self.image_at : self.image_at + len(BLOCKS)]).squeeze(-1)
        if self.kind.answer == "names":
            return self.answer(h[:, -len(BLOCKS) :]).squeeze(-1)
        return self.answer(h[:, -1])


def features_of(kind: str):
    """The function that turns one decision row into the classifier's input."""
    if kind in SEQUENCE_KINDS:
        return partial(sequence, kind=SEQUENCE_KINDS[kind])
    if kind == "block tokens":
        return block_tokens
    return partial(block_features, positions=kind != "no positions")


def accuracies(
    kind: str, train: list[dict], held_out: list[dict], epochs: list[int], seeds: list[int]
) -> np.ndarray:
    """Held-out accuracy of the expert's block for one classifier kind after each of ``epochs``, one
    row per seed (the features are built once for all seeds)."""
    features = features_of(kind)
    x_train = torch.tensor(np.stack([features(r) for r in train]))
    x_test = torch.tensor(np.stack([features(r) for r in held_out]))
    if kind == "absolute":  # one vector for the whole board: no sharing between blocks
        x_train, x_test = x_train.flatten(1), x_test.flatten(1)
    y_train = torch.tensor([BLOCKS.index(r["block"]) for r in train])
    y_test = np.array([BLOCKS.index(r["block"]) for r in held_out])
    return np.array([_train(kind, x_train, y_train, x_test, y_test, epochs, seed) for seed in seeds])


def _train(kind: str, x_train, y_train, x_test, y_test, epochs: list[int], seed: int) -> list[float]:
    """One classifier of ``kind`` trained from ``seed``: its held-out accuracy after each of ``epochs``."""
    torch.manual_seed(seed)
    width = x_train.shape[-1]
    per_block = kind in ("no positions", "relational")  # one score per block's row of features
    if kind == "block tokens":
        model = TokenScorer(width)
    elif kind in SEQUENCE_KINDS:
        image_at = int(x_train[0, :, _TYPES.index("image")].argmax())  # the first image token
        model = SequenceReader(width, x_train.shape[1], SEQUENCE_KINDS[kind], image_at)
    else:
        layers = [torch.nn.Linear(width, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU()]
        model = torch.nn.Sequential(*layers, torch.nn.Linear(256, 1 if per_block else len(BLOCKS)))

    def scores(x):
        return model(x).squeeze(-1) if per_block else model(x)

    optimiser = torch.optim.AdamW(model.parameters(), 1e-3, weight_decay=1e-3)
    out = []
    for epoch in tqdm(range(1, max(epochs) + 1), desc=kind, unit="epoch", leave=False):
        for batch in torch.randperm(len(x_train)).split(256):
            loss = torch.nn.functional.cross_entropy(scores(x_train[batch]), y_train[batch])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        if epoch in epochs:
            with torch.no_grad():
                out.append(float((scores(x_test).argmax(1).numpy() == y_test).mean()))
    return out


def _cell(accuracies: np.ndarray) -> str:
    """One accuracy, or the mean over seeds with the lowest and highest."""
    if len(accuracies) == 1:
        return f"{accuracies[0]:.1%}"
    return f"{accuracies.mean():.1%} ({accuracies.min():.1%}-{accuracies.max():.1%})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scenes", type=integer(1), default=300, help="training scenes per task (default: 300)"
    )
    parser.add_argument(
        "--held-out-scenes", type=integer(1), default=50, help="held-out scenes per task (default: 50)"
    )
    parser.add_argument(
        "--epochs",
        type=integer(1),
        nargs="+",
        default=[40],
        metavar="N",
        help="training epochs; with several, the accuracy after each of them (default: 40)",
    )
    parser.add_argument(
        "--seeds",
        type=integer(0, 2**32 - 1),
        nargs="+",
        default=[0],
        metavar="SEED",
        help="initialisation and batch-order seeds; with several, each cell is the mean with the lowest "
        "and highest (default: 0)",
    )
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
    epochs = sorted(set(args.epochs))
    seeds = sorted(set(args.seeds))
    print(
        "held-out accuracy of the expert's block after N epochs"
        + (", mean (lowest-highest) over seeds " + ", ".join(map(str, seeds)) if len(seeds) > 1 else "")
    )
    print("| classifier | " + " | ".join(f"{n}" for n in epochs) + " |")
    print("| --- |" + " ---: |" * len(epochs))
    for kind in args.kinds:
        runs = accuracies(kind, train, held_out, epochs, seeds)
        print(f"| {kind} | {' | '.join(_cell(column) for column in runs.T)} |", flush=True)
    print(f"({time.monotonic() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
