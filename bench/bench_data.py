"""Throughput of the data pipeline: `r3 collect` episodes/s on N workers, bags -> dataset MB/s.

    MUJOCO_GL=osmesa python bench/bench_data.py [--scenes 4] [--workers 2]

Collects ``scenes`` x 1 trial of every T_M task with the expert (fresh output folder, so nothing is
resumed), then builds the sft and the rl dataset from those bags and prints MB of bag read per second
and rows per second. Worker start-up (spawn, imports, MuJoCo) is part of the collect time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "osmesa")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, no install

from r3.data.build import build_dataset, find_bags
from r3.data.collect import CollectConfig, collect


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=4, help="scenes per T_M task (default: 4)")
    parser.add_argument("--workers", type=int, default=2, help="collection worker processes (default: 2)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = CollectConfig(out=f"{tmp}/bags", split="T_M", scenes=args.scenes, trials=1, workers=args.workers)
        t = time.perf_counter()
        report = collect(config, progress=False)
        seconds = time.perf_counter() - t
        episodes = report.succeeded + report.failed
        print(f"collect: {episodes} episodes on {args.workers} workers in {seconds:.1f} s = "
              f"{episodes / seconds:.2f} episodes/s ({report.succeeded} succeeded)")
        bags = find_bags([config.out])
        for kind in ("sft", "rl"):
            built = build_dataset(bags, f"{tmp}/{kind}", kind)
            print(f"build {kind}: {built.bytes_read / 1e6:.1f} MB of bags, {built.rows} rows in {built.seconds:.2f} s"
                  f" = {built.bytes_read / 1e6 / built.seconds:.1f} MB/s, {built.rows / built.seconds:.0f} rows/s")


if __name__ == "__main__":
    main()
