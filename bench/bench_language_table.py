"""Speed of the Language Table simulator and of an episode driven by the scripted policy.

    python bench/bench_language_table.py [--passes 3] [--episodes 3] [--smoke] [--json PATH]

Reports, over ``passes``: env steps/s without rendering; MuJoCo physics steps/s (``mj_step`` timed
by itself on the same model, the pusher driven to random targets); render ms per 320x240 frame;
the wall time of a 400-step episode of a task (20 instructions x 20 steps, one render per
instruction, as a reasoner loop would) with random instructions, scored as real episodes are (the
task's success and progress on the final state); and how often the scripted policy reports that it
reached its instruction's target within the 20-step budget.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "osmesa")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, no install

import numpy as np
from common import COUNT, Report, parser

from r3.instructions.language_table import sample_instruction
from r3.lowlevel.pushing import PushingPolicyConfig, ScriptedPushingPolicy
from r3.sim.language_table import scene
from r3.sim.language_table.env import LanguageTableEnv
from r3.sim.offscreen import mujoco
from r3.tasks.language_table.tasks import TASKS


def env_step_rate(env: LanguageTableEnv, n: int) -> float:
    env.reset(seed=0)
    actions = np.random.default_rng(0).uniform(-0.03, 0.03, (n, 2))
    t = time.perf_counter()
    for a in actions:
        env.step(a)
    return n / (time.perf_counter() - t)


def mj_step_rate(env: LanguageTableEnv, n: int) -> float:
    """``mj_step`` alone; the control target changes every SUBSTEPS steps, as env.step's would."""
    env.reset(seed=0)
    m, d = env.model, env.data
    lo, hi = m.actuator_ctrlrange[:, 0], m.actuator_ctrlrange[:, 1]
    targets = np.random.default_rng(0).uniform(lo, hi, (n // scene.SUBSTEPS + 1, len(lo)))
    t = time.perf_counter()
    for i in range(n):
        if i % scene.SUBSTEPS == 0:
            d.ctrl[:] = targets[i // scene.SUBSTEPS]
        mujoco.mj_step(m, d)
    rate = n / (time.perf_counter() - t)
    env.reset(seed=0)
    return rate


def render_ms(env: LanguageTableEnv, n: int) -> float:
    env.reset(seed=0)
    env.render()  # the first call creates the GL context
    t = time.perf_counter()
    for _ in range(n):
        env.render()
    return (time.perf_counter() - t) / n * 1e3


def episode(env: LanguageTableEnv, task: str, seed: int) -> dict[str, float]:
    """One 400-step episode of ``task``: render, pick an instruction, run the policy for its slot."""
    rng = np.random.default_rng(seed)
    policy = ScriptedPushingPolicy(PushingPolicyConfig())
    t = time.perf_counter()
    env.reset(seed=seed, options={"task": task})
    reached, slots = 0, env.max_episode_steps // policy.config.steps
    for _ in range(slots):
        env.render()
        policy.reset(sample_instruction(rng), env.state(), rng)
        for _ in range(policy.config.steps):
            action = policy.act(env.state())
            env.step(np.zeros(2) if action is None else action)
        reached += policy.reason == "reached"
    seconds = time.perf_counter() - t
    final, instance = env.state(), env.task_instance
    return {
        "seconds": seconds,
        "reached": reached / slots,
        "success": float(instance.success(final)),
        "progress": float(instance.progress(final)),
    }


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--passes", type=COUNT, default=3, help="passes per figure (default: %(default)s)")
    p.add_argument(
        "--episodes", type=COUNT, default=3, help="400-step episodes per pass (default: %(default)s)"
    )
    args = p.parse_args()
    steps, frames = 500, 20
    if args.smoke:
        args.passes, args.episodes, steps, frames = 1, 1, 50, 2
    report = Report("language_table", vars(args))
    env = LanguageTableEnv(width=320, height=240)
    tasks = list(TASKS)
    report.add(
        "env steps/s, no render",
        [env_step_rate(env, steps) for _ in range(args.passes)],
        "steps/s",
        better="higher",
        note=f"{steps} random actions",
    )
    report.add(
        "MuJoCo mj_step/s, timed alone",
        [mj_step_rate(env, steps * scene.SUBSTEPS) for _ in range(args.passes)],
        "steps/s",
        better="higher",
        note=f"{steps * scene.SUBSTEPS} physics steps",
    )
    report.add("render 320x240", [render_ms(env, frames) for _ in range(args.passes)], "ms/frame")
    runs = [
        [episode(env, tasks[(k + j) % len(tasks)], j) for j in range(args.episodes)]
        for k in range(args.passes)
    ]
    note = f"median/mean of {args.episodes} episodes per pass, tasks in turn"
    report.add(
        "400-step episode, one render per instruction",
        [np.median([e["seconds"] for e in r]) for r in runs],
        "s",
        note=note,
    )
    report.add(
        "400-step episode, task success (random instructions)",
        [np.mean([e["success"] for e in r]) for r in runs],
        "fraction",
        better="higher",
    )
    report.add(
        "400-step episode, task progress (random instructions)",
        [np.mean([e["progress"] for e in r]) for r in runs],
        "fraction",
        better="higher",
    )
    report.add(
        "scripted policy reports its target reached",
        [np.mean([e["reached"] for e in r]) for r in runs],
        "fraction of instructions",
        better="higher",
    )
    env.close()
    report.finish(args.json)


if __name__ == "__main__":
    main()
