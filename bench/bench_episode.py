"""Speed of the canonical episode loop with the expert reasoner (one core).

    python bench/bench_episode.py [--seeds 2] [--passes 3] [--smoke] [--json PATH]

Each pass runs every task for ``seeds`` seeds, rendering only at decision steps (as a VLM-driven
run would), and the same episodes without rendering (as ``r3 sim table`` runs them), and reports
the mean episode's wall time, the mean time per instruction and the expert's time per decision.
A 20-instruction episode is measured, not extrapolated: the expert decides every step (its cost is
paid) and a random valid instruction is executed instead of its answer, so the task stays unsolved
and the loop runs all ``instructions`` decisions (an episode that ends earlier by chance is left
out and counted).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

os.environ.update({k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
os.environ.setdefault("MUJOCO_GL", "osmesa")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, no install

import numpy as np
from common import COUNT, Report, parser

from r3.episode import run_episode
from r3.instructions import language_table as lt
from r3.reasoning.expert import LanguageTableExpert
from r3.reasoning.prompts import INSTRUCTION_HEADER
from r3.sim.language_table.env import LanguageTableEnv
from r3.tasks.language_table.tasks import TASKS


class WanderingExpert(LanguageTableExpert):
    """The expert's whole decision, then a random valid instruction in place of its answer."""

    def decide(self, inp, *args, **kwargs):
        out = super().decide(inp, *args, **kwargs)
        rng = np.random.default_rng([int(inp.extra.get("seed", 0)), int(inp.step), 7])
        head = out.raw_text.rpartition(INSTRUCTION_HEADER)[0]
        return dataclasses.replace(
            out, raw_text=f"{head}{INSTRUCTION_HEADER} {lt.format_instruction(lt.sample_instruction(rng))}"
        )


def timed(env, backend, task: str, seed: int, render: bool, max_steps: int = 20):
    t = time.perf_counter()
    trajectory = run_episode(task, seed, backend, env=env, render=render, max_steps=max_steps)
    return time.perf_counter() - t, trajectory


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--seeds", type=COUNT, default=2, help="seeds per task (default: %(default)s)")
    p.add_argument("--passes", type=COUNT, default=3, help="passes per figure (default: %(default)s)")
    p.add_argument(
        "--instructions", type=COUNT, default=20, help="the long episode's decisions (default: %(default)s)"
    )
    args = p.parse_args()
    tasks = list(TASKS)
    if args.smoke:
        args.seeds, args.passes, args.instructions, tasks = 1, 1, 3, tasks[:1]
    report = Report("episode", vars(args))
    env, expert, wandering = LanguageTableEnv(width=320, height=240), LanguageTableExpert(), WanderingExpert()
    env.reset(seed=0)
    env.render()  # create the GL context outside the timings
    figures: dict[str, list[float]] = {}
    long_runs, cut_short = [], 0
    for _ in range(args.passes):
        rendered, plain, decide_ms, instructions = [], [], [], 0
        for task in tasks:
            for seed in range(args.seeds):
                seconds, trajectory = timed(env, expert, task, seed, render=True)
                rendered.append(seconds)
                decide_ms += [s.latency_s * 1e3 for s in trajectory.steps]
                instructions += len(trajectory.steps)
                plain.append(timed(env, expert, task, seed, render=False)[0])
        figures.setdefault("episode, render at decisions", []).append(float(np.mean(rendered)))
        figures.setdefault("episode, no render", []).append(float(np.mean(plain)))
        figures.setdefault("instruction, render at decisions", []).append(sum(rendered) / instructions)
        figures.setdefault("expert decision", []).append(float(np.mean(decide_ms)))
        seconds, trajectory = timed(
            env, wandering, tasks[0], len(long_runs) + cut_short, True, args.instructions
        )
        if len(trajectory.steps) == args.instructions:
            long_runs.append(seconds)
        else:
            cut_short += 1
    episodes = len(tasks) * args.seeds
    report.add(
        "episode, render at decisions",
        figures["episode, render at decisions"],
        "s",
        note=f"mean of {episodes} expert episodes per pass",
    )
    report.add("episode, no render", figures["episode, no render"], "s", note="the same episodes")
    report.add("instruction, render at decisions", figures["instruction, render at decisions"], "s")
    report.add("expert decision", figures["expert decision"], "ms", note="mean per decision")
    if long_runs:
        report.add(
            f"{args.instructions}-instruction episode, render at decisions (target <= 2 s for 20)",
            long_runs,
            "s",
            note=f"expert decides, random instruction runs; {cut_short} ended early, left out",
        )
    else:
        print(f"every {args.instructions}-instruction episode ended early ({cut_short})")
    env.close()
    report.finish(args.json)


if __name__ == "__main__":
    main()
