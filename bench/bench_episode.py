"""Speed of the canonical episode loop with the expert reasoner (one core).

    MUJOCO_GL=osmesa python bench/bench_episode.py [--seeds 2]

Runs every task for a few seeds, rendering only at decision steps (as a VLM-driven run would), and
prints the wall time per episode (target: under 2 s), episodes per second, the cost per instruction
(and so of a worst-case 20-instruction episode), the expert's time per decision, and the same
episodes without rendering (as ``r3 sim table`` runs them).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "osmesa")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, no install

import numpy as np

from r3.episode import run_episode
from r3.reasoning.expert import LanguageTableExpert
from r3.sim.language_table.env import LanguageTableEnv
from r3.tasks.language_table.tasks import TASKS


def timed(env, expert, task: str, seed: int, render: bool):
    t = time.perf_counter()
    trajectory = run_episode(task, seed, expert, env=env, render=render)
    return time.perf_counter() - t, trajectory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2, help="seeds per task (default: 2)")
    args = parser.parse_args()
    env, expert = LanguageTableEnv(width=320, height=240), LanguageTableExpert()
    env.reset(seed=0)
    env.render()  # create the GL context outside the timings
    rendered, plain, decide_ms, steps = [], [], [], []
    for task in TASKS:
        for seed in range(args.seeds):
            seconds, trajectory = timed(env, expert, task, seed, render=True)
            rendered.append(seconds)
            decide_ms += [s.latency_s * 1e3 for s in trajectory.steps]
            steps.append(len(trajectory.steps))
            plain.append(timed(env, expert, task, seed, render=False)[0])
    print(
        f"episodes: {len(rendered)} ({len(TASKS)} tasks x {args.seeds} seeds), "
        f"mean {np.mean(steps):.1f} instructions each"
    )
    print(
        f"episode wall s, render at decisions: mean {np.mean(rendered):.2f}  max {max(rendered):.2f}  "
        f"-> {1 / np.mean(rendered):.2f} episodes/s"
    )
    print(
        f"episode wall s, no render:           mean {np.mean(plain):.2f}  max {max(plain):.2f}  "
        f"-> {1 / np.mean(plain):.2f} episodes/s"
    )
    per_instruction = sum(rendered) / sum(steps)
    print(
        f"per instruction s, render:          {per_instruction:.3f}  "
        f"-> a full 20-instruction episode ~ {20 * per_instruction:.2f} s"
    )
    print(
        f"expert decision ms:                  mean {np.mean(decide_ms):.0f}  "
        f"p95 {np.percentile(decide_ms, 95):.0f}"
    )
    env.close()


if __name__ == "__main__":
    main()
