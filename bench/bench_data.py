"""Throughput of the data pipeline: `r3 collect` episodes/s on N workers, bags -> dataset MB/s.

    python bench/bench_data.py [--scenes 4] [--workers 2] [--passes 2] [--smoke] [--json PATH]

Each pass collects ``scenes`` x 1 trial of every T_M task with the expert (fresh output folder, so
nothing is resumed), then builds the sft and the rl dataset from those bags and reports MB of bag
read per second and rows per second. Worker start-up (spawn, imports, MuJoCo) is part of the
collect time.
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

from common import COUNT, Report, parser

from r3.data.build import build_dataset, find_bags
from r3.data.collect import CollectConfig, collect


def one_pass(scenes: int, workers: int, max_steps: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        config = CollectConfig(
            out=f"{tmp}/bags", split="T_M", scenes=scenes, trials=1, workers=workers, max_steps=max_steps
        )
        t = time.perf_counter()
        collected = collect(config, progress=False)
        out = {
            "episodes/s": (collected.succeeded + collected.failed) / (time.perf_counter() - t),
            "episodes": collected.succeeded + collected.failed,
        }
        bags = find_bags([config.out])
        for kind in ("sft", "rl"):
            built = build_dataset(bags, f"{tmp}/{kind}", kind)
            out[f"{kind} MB/s"] = built.bytes_read / 1e6 / built.seconds
            out[f"{kind} rows/s"] = built.rows / built.seconds
    return out


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--scenes", type=COUNT, default=4, help="scenes per T_M task (default: %(default)s)")
    p.add_argument(
        "--workers", type=COUNT, default=2, help="collection worker processes (default: %(default)s)"
    )
    p.add_argument("--passes", type=COUNT, default=2, help="passes per figure (default: %(default)s)")
    args = p.parse_args()
    max_steps = 20
    if args.smoke:
        args.scenes, args.workers, args.passes, max_steps = 1, 1, 1, 2
    report = Report("data", vars(args))
    passes = [one_pass(args.scenes, args.workers, max_steps) for _ in range(args.passes)]
    episodes = int(passes[0]["episodes"])
    report.add(
        f"collect, {args.workers} worker(s)",
        [r["episodes/s"] for r in passes],
        "episodes/s",
        better="higher",
        note=f"{episodes} episodes per pass, start-up included",
    )
    for kind in ("sft", "rl"):
        report.add(f"build {kind}, bag read", [r[f"{kind} MB/s"] for r in passes], "MB/s", better="higher")
        report.add(f"build {kind}, rows", [r[f"{kind} rows/s"] for r in passes], "rows/s", better="higher")
    report.finish(args.json)


if __name__ == "__main__":
    main()
