"""Judgments per second of the rubric judge on one CPU core: rule tier and simulator tier.

Usage: ``python bench/bench_judge.py [--seconds 3]``. The rule tier parses and compares text
pairs (no snapshot). The simulator tier restores a snapshot and runs the low-level policy for
both instructions; the outcome cache is cleared before every judgement, so each one pays two
rollouts (in training the reference rollout is cached across a prompt's K candidates).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.update({k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
os.environ.setdefault("MUJOCO_GL", "osmesa")
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})

from r3.rewards.agreement import load_cases  # noqa: E402
from r3.rewards.judge import RuleJudge  # noqa: E402


def _rate(fn, items, seconds: float) -> float:
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for item in items:
            fn(item)
        done += len(items)
    return done / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time spent on each measurement")
    args = parser.parse_args()
    cases = load_cases()
    text = [c for c in cases if c.snapshot is None]
    sim = [c for c in cases if c.snapshot is not None]
    snapshots = {c.snapshot: c.snapshot.read_bytes() for c in sim}
    judge = RuleJudge()
    judge.judge(sim[0].candidate, sim[0].reference, snapshot=snapshots[sim[0].snapshot])  # build the env

    def rule(c):
        judge.judge(c.candidate, c.reference, suite=c.suite)

    def cold(c):
        judge.simulator._cache.clear()
        judge.judge(c.candidate, c.reference, snapshot=snapshots[c.snapshot])

    print(f"one core, {len(text)} text pairs, {len(sim)} simulator pairs")
    print(f"rule tier:      {_rate(rule, text, args.seconds):9.0f} judgments/s")
    print(f"simulator tier: {_rate(cold, sim, args.seconds):9.1f} judgments/s (two rollouts each, no cache)")


if __name__ == "__main__":
    main()
