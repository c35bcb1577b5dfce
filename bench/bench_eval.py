"""Throughput of `r3 eval` with the expert: episodes per second on 1 and 2 worker processes.

    python bench/bench_eval.py [--scenes 4] [--workers 1,2] [--passes 2] [--smoke] [--json PATH]

Each pass runs every task on SCENES held-out scenes (1 trial, no rendering, as `r3 eval` runs) into
a fresh folder per worker count, and reports episodes/s (start-up, spawning workers and building the
simulator, is included, as a user sees it), the mean episode's own time (what one worker spends
inside run_episode), and per pass the speed-up of the largest worker count over one worker.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "osmesa")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, no install

from common import COUNT, Report, parser, worker_counts

from r3.eval.runner import EvalConfig, completed, evaluate
from r3.tasks.language_table.tasks import TASKS


def one_run(config: EvalConfig, workers: int) -> tuple[float, float]:
    """(episodes/s, mean seconds inside run_episode) of one evaluation."""
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        records = completed(evaluate(config, Path(out), workers=workers))
        wall = time.perf_counter() - start
    return len(records) / wall, sum(r["wall_s"] for r in records) / len(records)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--scenes", type=COUNT, default=4, help="held-out scenes per task (default: %(default)s)")
    p.add_argument(
        "--workers",
        type=worker_counts,
        default="1,2",
        help="comma-separated worker counts (default: %(default)s)",
    )
    p.add_argument("--passes", type=COUNT, default=2, help="passes per figure (default: %(default)s)")
    args = p.parse_args()
    counts = args.workers
    config = EvalConfig(scenes=args.scenes, trials=1)
    if args.smoke:
        args.scenes, args.passes = 1, 1
        config = EvalConfig(tasks=tuple(TASKS)[:2], scenes=1, trials=1, max_steps=2)
    report = Report("eval", vars(args))
    print(
        f"expert, {len(config.tasks)} tasks x {config.scenes} scenes x 1 trial = "
        f"{len(config.jobs())} episodes, "
        f"{os.cpu_count()} CPUs"
    )
    runs = [{w: one_run(config, w) for w in counts} for _ in range(args.passes)]
    for w in counts:
        report.add(
            f"eval, {w} worker(s)",
            [r[w][0] for r in runs],
            "episodes/s",
            better="higher",
            note="start-up included",
        )
        report.add(f"eval, {w} worker(s), mean episode inside run_episode", [r[w][1] for r in runs], "s")
    if len(counts) > 1 and 1 in counts:
        most = max(counts)
        report.add(
            f"eval, {most} workers / 1 worker",
            [r[most][0] / r[1][0] for r in runs],
            "x",
            better="higher",
            note="episodes/s of the same pass",
        )
    report.finish(args.json)


if __name__ == "__main__":
    main()
