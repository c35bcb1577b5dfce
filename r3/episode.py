"""The in-process Language Table episode: reasoner -> instruction -> low-level pushing policy.

The decision loop is :func:`r3.episode_loop.run_loop` (the one the ROS graph mirrors step for step:
same seed, same instructions, same outcome); this module is Language Table's part of it:

1. ``env.reset(seed=seed, options={"task": task})``; the history starts empty.
2. The reasoner sees the rendered top-down image (or a blank one when rendering is off) and, for the
   expert, the true board state.
3. A valid answer resets the policy with ``np.random.default_rng(policy_seed(noise, step))`` and
   runs at most ``steps_per_instruction`` control steps (fewer if the policy says it is done).

``noise`` is ``trial_seed(seed, trial)``: the seed itself for trial 0, so only trials > 0 (repeats of
a scene with fresh policy noise and wording, for evaluation) differ from the graph's episodes.

ROS-free: it runs the reasoner backend and the policy in this process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from r3.episode_loop import (
    BLANK_IMAGE,
    Decider,
    Execution,
    StepDecision,
    StepView,
    Trajectory,
    TrajectoryStep,
    run_loop,
)
from r3.lowlevel.pushing import ScriptedPushingPolicy
from r3.reasoning.backends.base import ReasonerBackend, ReasoningBudget
from r3.reasoning.expert import NO_BUDGET, ExpertView
from r3.seeds import policy_seed, trial_seed

SUITE = "language_table"


@dataclass
class LanguageTableSuite:
    """Language Table's part of :func:`r3.episode_loop.run_loop`: one top-down image, the pushing policy."""

    env: object
    policy: object
    steps_per_instruction: int
    render: bool
    frame_every: int
    noise: int  # trial_seed(seed, trial)

    def view(self, step: int) -> StepView:
        state, instance = self.env.state(), self.env.task_instance
        image = self.env.render() if self.render else BLANK_IMAGE
        return StepView(SUITE, instance.goal, [image], instance.note, ExpertView(state, instance), self.noise)

    def snapshot(self) -> bytes:
        return self.env.snapshot()

    def execute(self, decision: StepDecision, step: int) -> Execution:
        env, done = self.env, Execution()
        rng = np.random.default_rng(policy_seed(self.noise, step))
        self.policy.reset(decision.decision.parsed.instruction, env.state(), rng)
        for _ in range(self.steps_per_instruction):
            action = self.policy.act(env.state())
            if action is None:
                break
            env.step(action)
            done.control_steps += 1
            if self.render and self.frame_every > 0 and done.control_steps % self.frame_every == 0:
                done.frames.append(env.render())
        return done

    def progress(self) -> float:
        return float(self.env.task_instance.progress(self.env.state()))

    def final_image(self) -> np.ndarray | None:
        return self.env.render() if self.render else None


def run_episode(
    task: str,
    seed: int,
    backend: ReasonerBackend,
    *,
    env=None,
    policy=None,
    max_steps: int = 20,
    steps_per_instruction: int = 20,
    budget: ReasoningBudget = NO_BUDGET,
    history: str = "response",
    render: bool = True,
    on_step: Callable[[TrajectoryStep], None] | None = None,
    frame_every: int = 0,
    trial: int = 0,
) -> Trajectory:
    """Run one episode of ``task`` from ``seed`` with ``backend`` as the reasoner.

    ``env`` defaults to a new ``LanguageTableEnv`` and ``policy`` to ``ScriptedPushingPolicy()``.
    ``on_step`` gets every :class:`TrajectoryStep` as soon as it is recorded (for a live view).
    ``frame_every`` > 0 (with ``render``) also renders every that many control steps.
    ``seed`` fixes the scene; ``trial`` > 0 redraws policy noise and wording (see :func:`trial_seed`).
    """
    env = env if env is not None else _default_env()
    env.reset(seed=seed, options={"task": task})
    suite = LanguageTableSuite(
        env,
        policy or ScriptedPushingPolicy(),
        steps_per_instruction,
        render,
        frame_every,
        trial_seed(seed, trial),
    )
    decider = Decider(backend, budget, history)
    return run_loop(suite, decider, task, seed, max_steps, trial=trial, on_step=on_step)


def resume_episode(
    trajectory: Trajectory,
    step: int,
    backend: ReasonerBackend,
    *,
    env=None,
    policy=None,
    max_steps: int = 20,
    steps_per_instruction: int = 20,
    budget: ReasoningBudget = NO_BUDGET,
    history: str = "response",
    render: bool = True,
    on_step: Callable[[TrajectoryStep], None] | None = None,
    frame_every: int = 0,
) -> Trajectory:
    """Restore ``trajectory`` at decision ``step`` and run the loop on from there.

    With the same backend and options as the original run the continuation is identical (the model
    is told what it was told then, refusals included, and earlier refusals still count); with
    another backend it answers "what if the reasoner had decided differently from here".
    The returned trajectory keeps the original steps before ``step``.
    """
    env = env if env is not None else _default_env()
    env.restore(trajectory.steps[step].snapshot)
    suite = LanguageTableSuite(
        env,
        policy or ScriptedPushingPolicy(),
        steps_per_instruction,
        render,
        frame_every,
        trial_seed(trajectory.seed, trajectory.trial),
    )
    return run_loop(
        suite,
        Decider(backend, budget, history),
        trajectory.task,
        trajectory.seed,
        max_steps,
        trial=trajectory.trial,
        earlier=trajectory.steps[:step],
        on_step=on_step,
    )


def _default_env():
    from r3.sim.language_table.env import LanguageTableEnv  # MuJoCo only when no env is given

    return LanguageTableEnv()
