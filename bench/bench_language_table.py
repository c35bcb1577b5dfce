"""Speed of the Language Table simulator and of an episode driven by the scripted policy.

    MUJOCO_GL=osmesa python bench/bench_language_table.py

Prints: env steps/s without rendering, render ms per 320x240 frame, the wall time of a 400-step
episode (20 instructions x 20 steps, one render per instruction, as a reasoner loop would), and how
often the scripted policy reaches its target within the 20-step budget on random instructions.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "osmesa")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, no install

import numpy as np

from r3.instructions.language_table import sample_instruction
from r3.lowlevel.pushing import PushingPolicyConfig, ScriptedPushingPolicy
from r3.sim.language_table import scene
from r3.sim.language_table.env import LanguageTableEnv


def physics_rate(env: LanguageTableEnv, n: int = 500) -> float:
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = rng.uniform(-0.03, 0.03, (n, 2))
    t = time.perf_counter()
    for a in actions:
        env.step(a)
    return n / (time.perf_counter() - t)


def render_ms(env: LanguageTableEnv, n: int = 20) -> float:
    env.reset(seed=0)
    env.render()  # the first call creates the GL context
    t = time.perf_counter()
    for _ in range(n):
        env.render()
    return (time.perf_counter() - t) / n * 1e3


def episode_seconds(env: LanguageTableEnv, seed: int = 0) -> tuple[float, int]:
    """One 400-step episode: render, pick an instruction, run the policy for its 20-step slot."""
    rng = np.random.default_rng(seed)
    policy = ScriptedPushingPolicy(PushingPolicyConfig())
    t = time.perf_counter()
    env.reset(seed=seed)
    reached = 0
    for _ in range(env.max_episode_steps // policy.config.steps):
        env.render()
        policy.reset(sample_instruction(rng), env.state(), rng)
        for _ in range(policy.config.steps):
            action = policy.act(env.state())
            env.step(np.zeros(2) if action is None else action)
        reached += policy.reason == "reached"
    return time.perf_counter() - t, reached


def main() -> None:
    env = LanguageTableEnv(width=320, height=240)
    rate = physics_rate(env)
    print(f"env steps/s (no render):     {rate:8.0f}  ({rate * scene.SUBSTEPS:.0f} physics steps/s)")
    print(f"render ms/frame (320x240):   {render_ms(env):8.1f}")
    times, reached = zip(*(episode_seconds(env, seed) for seed in range(3)))
    print(f"400-step episode, s:         {np.mean(times):8.2f}  (min {min(times):.2f}, max {max(times):.2f})")
    print(f"policy reached target:       {sum(reached):5d}/{20 * len(reached)} random instructions")
    env.close()


if __name__ == "__main__":
    main()
