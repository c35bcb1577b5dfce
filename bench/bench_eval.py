"""Throughput of `r3 eval` with the expert: episodes per second on 1 and 2 worker processes.

    MUJOCO_GL=osmesa python bench/bench_eval.py [--scenes 4] [--workers 1,2]

Runs every task on SCENES held-out scenes (1 trial, no rendering, as `r3 eval` runs) into a fresh
folder per worker count, and prints wall time, episodes/s, and the mean episode's own time
(what one worker spends inside run_episode). Start-up (spawning workers, building the simulator)
is included in the wall time, as a user sees it.
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

from r3.eval.runner import EvalConfig, completed, evaluate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=4, help="held-out scenes per task (default: 4)")
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts (default: 1,2)")
    args = parser.parse_args()
    config = EvalConfig(scenes=args.scenes, trials=1)
    print(f"expert, {len(config.tasks)} tasks x {args.scenes} scenes x 1 trial = {len(config.jobs())} episodes, "
          f"{os.cpu_count()} CPUs")
    for workers in (int(w) for w in args.workers.split(",")):
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            records = completed(evaluate(config, Path(out), workers=workers))
            wall = time.perf_counter() - start
        own = sum(r["wall_s"] for r in records) / len(records)
        print(f"  {workers} worker(s): {wall:6.1f} s wall, {len(records) / wall:5.2f} episodes/s "
              f"(mean episode {own:.2f} s in run_episode)")


if __name__ == "__main__":
    main()
