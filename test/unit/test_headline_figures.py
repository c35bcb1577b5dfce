"""The README's headline success tables, kept honest by a small sample of the same episodes.

The full tables are benchmarks (minutes to an hour); here a few of their episodes, on fixed seeds,
must succeed at least as often as the published interval allows: the bound is the fewest successes
that a success rate at the interval's lower end would give with probability 0.999 or more
(binomial tail), so a sample below it means the published figure no longer holds. The figures are
read from the README itself, so the test follows them when they are re-measured.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
README = Path(__file__).resolve().parents[2] / "README.md"
ALPHA = 1e-3
#: Environment seeds of the packing samples: one episode (rollout 0) of each of the 12 goals per seed.
#: 12 episodes only catch a collapse (the bound is 4 of 12 for sim); 24 catch a slip rate of 60 %.
#: Perception episodes cost about three times as much, so it gets the smaller sample.
PACKING_SEEDS = {"sim": (0, 1), "perception": (0,)}


def published(row: str, column: int) -> tuple[float, float]:
    """(value, half-width) in [0, 1] of the "V ± H" cell ``column`` of the README table row starting
    ``row``."""
    line = next(line for line in README.read_text().splitlines() if line.startswith(row))
    value, half = re.fullmatch(r"\s*([\d.]+) ± ([\d.]+)\s*", line.split("|")[column]).groups()
    return float(value) / 100, float(half) / 100


def fewest_successes(n: int, p: float, alpha: float = ALPHA) -> int:
    """The largest k with P(X < k) < alpha for X ~ Binomial(n, p)."""
    below, k = 0.0, 0
    while k < n and below + math.comb(n, k) * p**k * (1 - p) ** (n - k) < alpha:
        below += math.comb(n, k) * p**k * (1 - p) ** (n - k)
        k += 1
    return k


def test_the_bound_is_the_binomial_tail():
    assert fewest_successes(28, 0.989) == 25  # P(X <= 24) = 2.4e-4, P(X <= 25) = 4.3e-3
    assert fewest_successes(10, 0.5) == 1 and fewest_successes(10, 0.0) == 0


def test_language_table_expert_success_matches_the_readme():
    from r3.eval.runner import EpisodeWorker, EvalConfig

    value, half = published("| **mean** |", 4)
    config = EvalConfig(reasoner="expert", scenes=2, trials=1)  # the table's first 2 scenes of every task
    worker = EpisodeWorker(config)
    try:
        records = [r for r in map(worker.run, config.jobs()) if "skipped" not in r]
    finally:
        worker.close()
    successes, need = sum(r["success"] for r in records), fewest_successes(len(records), value - half)
    print(
        f"\nLanguage Table expert: {successes}/{len(records)} episodes succeeded (README {value:.1%} ± "
        f"{half:.1%}; at least {need} needed)"
    )
    assert successes >= need, [(r["task"], r["scene"]) for r in records if not r["success"]]


@pytest.mark.parametrize("grounding, column", [("sim", 2), ("perception", 4)])
def test_packing_expert_success_matches_the_readme(grounding, column):
    from r3.packing_episode import PackingCell, run_packing_episode
    from r3.reasoning.backends import make_backend

    value, half = published("| **Mean** |", column)
    backend = make_backend("expert")
    backend.load()
    cell = PackingCell.build(grounding=grounding)
    episodes = [(str(task), seed) for seed in PACKING_SEEDS[grounding] for task in range(1, 13)]
    failed = [
        (task, seed)
        for task, seed in episodes
        if not run_packing_episode(task, seed, backend, cell=cell, render=False).success
    ]
    successes, need = len(episodes) - len(failed), fewest_successes(len(episodes), value - half)
    print(
        f"\npacking expert ({grounding}): {successes}/{len(episodes)} episodes succeeded "
        f"(README {value:.1%} ± {half:.1%}; at least {need} needed); failed (task, seed): {failed}"
    )
    assert successes >= need, failed
