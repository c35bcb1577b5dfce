"""Turn reward throughput: ERR's checkers scored in the simulator, as turn-level GSPO asks for them.

    python bench/bench_turn_rewards.py [--passes 3] [--workers 2] [--prompts 32] [--smoke] [--json PATH]

Prompts are the turns of stored semantic expert episodes (packing tasks 1, 4 and 7, seed 0). A batch
is what one optimiser step of ``config/train/rl_semantic_gspo.yaml`` scores: ``--prompts`` turns x 8
completions, through the four turn terms as TRL calls them (one call per term per batch; the first
runs the turns, the others read the cache). The 8 completions of a group are policy-like: the
expert's action twice, once more in other spelling (the same canonical action), ``home()``, a pick
of a random item at a random point, a place at a random point, and two answers that do not parse.

- one turn at a time, cold cache, one core: the cost of one simulated action;
- a batch on 1 and on ``--workers`` simulator processes, cache cleared before each batch, with the
  batch's cache hit rate (valid completions answered from the cache, as the first term sees them;
  the two invalid ones of a group never reach the simulator);
- the same batch again, warm: every turn from the cache.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.update({k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from common import COUNT, Report, parser

from r3.data.turns import load_episodes, record_packing_episode
from r3.instructions.packing import ITEMS
from r3.reasoning.backends import make_backend
from r3.rewards.turn import TurnSimulator, turn_rewards

GROUP = 8
TASKS = ("1", "4", "7")


def answer(action: str) -> str:
    return f"Reasoning: a candidate.\nAction: {action}"


def group(action: str, rng: np.random.Generator) -> list[str]:
    """The 8 completions of one group at a turn whose expert action is ``action``."""
    spelled = action.upper().replace(", ", " ,  ")
    item = ITEMS[int(rng.integers(len(ITEMS)))]
    x, y = (int(v) for v in rng.integers(0, 1001, size=2))
    return [
        answer(action),
        answer(action),
        answer(spelled),
        answer("home()"),
        answer(f"pick({item}, [{x}, {y}])"),
        answer(f"place({item}, [{y}, {x}])"),
        "Action: pick(soup can, [1, 2])",  # no reasoning
        answer("pick(the soup can please)"),
    ]


def batch(turns, rng: np.random.Generator) -> dict:
    completions, snapshots = [], []
    for turn in turns:
        completions += group(turn.action, rng)
        snapshots += [turn.snapshot_bytes()] * GROUP
    return {"completions": completions, "snapshot": snapshots}


def score(funcs, rows: dict) -> None:
    for fn in funcs:
        fn(rows["completions"], snapshot=rows["snapshot"])


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--passes", type=COUNT, default=3, help="passes per figure (default: %(default)s)")
    p.add_argument("--workers", type=COUNT, default=2, help="simulator processes (default: %(default)s)")
    p.add_argument("--prompts", type=COUNT, default=32, help="turns per batch (default: %(default)s)")
    args = p.parse_args()
    if args.smoke:
        args.passes, args.prompts = 1, 2
    report = Report("turn_rewards", vars(args))
    with tempfile.TemporaryDirectory() as root:
        expert = make_backend("expert")
        for task in TASKS[:1] if args.smoke else TASKS:
            record_packing_episode(task, 0, expert, root)
        turns = [t for e in load_episodes(root) for t in e.turns]
        prompts = (turns * (args.prompts // len(turns) + 1))[: args.prompts]
        print(f"{len(turns)} turns stored; batches of {len(prompts)} turns x {GROUP} completions")

        single = TurnSimulator()
        single.execute(turns[0].snapshot_bytes(), turns[0].action)  # build the cell
        rates = []
        for _ in range(args.passes):
            start = time.perf_counter()
            for t in prompts:
                single.execute(t.snapshot_bytes(), t.action)
            rates.append(len(prompts) / (time.perf_counter() - start))
        report.add("one turn at a time, cold, one core", rates, "turns/s", better="higher")

        for workers in sorted({1, args.workers}):
            simulator = TurnSimulator(workers=workers)
            funcs = turn_rewards(simulator).trl_reward_funcs()
            score(funcs, batch(prompts[:2], np.random.default_rng(99)))  # start the cell and the workers
            cold, hit_rates, warm = [], [], []
            for k in range(args.passes):
                rows = batch(prompts, np.random.default_rng(k))
                simulator._cache.clear()
                simulator.hits = simulator.misses = 0
                start = time.perf_counter()
                funcs[0](rows["completions"], snapshot=rows["snapshot"])  # the term that runs the turns
                hits, misses = simulator.hits, simulator.misses
                score(funcs[1:], rows)
                cold.append(len(rows["completions"]) / (time.perf_counter() - start))
                hit_rates.append(hits / (hits + misses))  # of the valid completions, first term only
                start = time.perf_counter()
                score(funcs, rows)
                warm.append(len(rows["completions"]) / (time.perf_counter() - start))
            simulator.close()
            size = f"{len(prompts)}x{GROUP}"
            report.add(
                f"batch {size}, cold cache, {workers} worker(s)",
                cold,
                "turn rewards/s",
                better="higher",
                note=f"cache hit rate {np.median(hit_rates):.2f} within the batch",
            )
            report.add(
                f"batch {size}, warm cache, {workers} worker(s)", warm, "turn rewards/s", better="higher"
            )
    report.finish(args.json)


if __name__ == "__main__":
    main()
