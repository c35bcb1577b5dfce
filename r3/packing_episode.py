"""The in-process packing episode: reasoner -> instruction -> packing policy (skills) -> sim.

It mirrors :mod:`r3.episode` (Language Table) with packing's own constants and the same order of
calls, which the ROS graph should follow step for step:

1. ``env.reset(seed=seed, options={"task": task})``; history starts empty ("instruction" history by
   default, as R^3 uses for packing).
2. At each decision step: stop if the task is solved; render the base and wrist views (blank
   images when rendering is off); ask the reasoner; snapshot the decision-time state.
3. A valid answer runs :meth:`PackingPolicy.follow` with ``np.random.default_rng(policy_seed(seed,
   step))``: pick, place, home, settle, within the policy's step budget. An invalid answer moves
   nothing.
4. Progress is K/N with K the most goal objects packed at any time (``env.max_progress``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from r3.episode import BLANK_IMAGE, Trajectory, TrajectoryStep, policy_seed
from r3.execution.sim import SimExecutor
from r3.lowlevel.grounding import Grounder, SimGrounder
from r3.lowlevel.packing import PackingPolicy, PackingPolicyConfig
from r3.lowlevel.perceived import LocalPerception, PerceivedScene, PerceptionSource
from r3.lowlevel.semantic import SemanticActions
from r3.reasoning.backends.base import ReasonerBackend, ReasoningBudget
from r3.reasoning.expert import NO_BUDGET
from r3.reasoning.packing_expert import PackingExpertView
from r3.reasoning.prompts import ReasonerInput
from r3.reasoning.reasoner import decide

SUITE = "packing"
#: Decision steps per episode: enough for five goal objects, clutter and a few repairs.
MAX_DECISIONS = 15


#: How the packing skills see the scene: ``sim`` reads item poses and the held item from the
#: simulator (ray casts, known poses); ``perception`` uses only the base camera through r3.perception
#: (sim segmenter, depth back-projection) and the arm's joint readings.
GROUNDINGS = ("sim", "perception")


@dataclass
class PackingCell:
    """The simulated cell the policy acts on: env, sim executor, grounder, semantic actions, policy."""

    env: object
    executor: SimExecutor
    grounder: Grounder
    actions: SemanticActions
    policy: PackingPolicy

    @classmethod
    def build(cls, env=None, policy_config: PackingPolicyConfig | None = None, grounding: str = "sim",
              source: PerceptionSource | None = None) -> PackingCell:
        """``source``: where ``perception`` grounding gets detections (default: in-process rendering
        and r3.perception; the packing sim node passes the perception node's, over ROS)."""
        if grounding not in GROUNDINGS:
            raise ValueError(f"unknown grounding {grounding!r}; expected one of {', '.join(GROUNDINGS)}")
        if env is None:
            from r3.sim.packing.env import PackingEnv  # MuJoCo only when no env is given

            env = PackingEnv()
        if grounding == "perception" and policy_config is None:
            # The grasp-point noise stands in for perception error; with perception the error is real.
            policy_config = PackingPolicyConfig(grasp_noise=0.0)
        executor = SimExecutor(env)
        if grounding == "sim":
            grounder, state = SimGrounder(env), env.state
        else:
            grounder = PerceivedScene(source or LocalPerception(env))
            state = grounder.state
        actions = SemanticActions(executor, grounder, state)
        policy = PackingPolicy(actions, grounder, lambda: env.step(env.joint_targets), policy_config)
        return cls(env, executor, grounder, actions, policy)

    def reset(self, seed: int, task: str) -> None:
        """A new episode: the simulator's layout and task, and a grounder that forgets the last one."""
        self.env.reset(seed=seed, options={"task": task})
        self.grounder.forget()

    def images(self, render: bool) -> list[np.ndarray]:
        if not render:
            return [BLANK_IMAGE, BLANK_IMAGE]
        return [self.env.render_camera("base"), self.env.render_camera("wrist")]


def run_packing_episode(
    task: str,
    seed: int,
    backend: ReasonerBackend,
    *,
    cell: PackingCell | None = None,
    max_steps: int = MAX_DECISIONS,
    budget: ReasoningBudget = NO_BUDGET,
    history: str = "instruction",
    render: bool = True,
    on_step: Callable[[TrajectoryStep], None] | None = None,
    rollout: int = 0,
) -> Trajectory:
    """Run one packing episode of ``task`` ("1".."12" or "train") from ``seed``.

    ``rollout`` > 0 reseeds only the low-level policy (same layout, other grasp noise and slips): R^3
    evaluates 5 environment seeds x 10 rollouts per goal. Rollout 0 is the one the ROS graph runs.
    """
    cell = cell or PackingCell.build()
    env = cell.env
    cell.reset(seed, task)
    steps: list[TrajectoryStep] = []
    history_text = ""
    for step in range(max_steps):
        state, instance = env.state(), env.task_instance
        if instance.success(state):
            break
        images = cell.images(render)
        inp = ReasonerInput(SUITE, instance.goal, images, note=instance.note, history_text=history_text,
                            history=history, step=step,
                            extra={"privileged": PackingExpertView(state, instance), "seed": seed})
        decision = decide(backend, inp, budget)
        snapshot = env.snapshot()
        executed, outcome = 0, ""
        if decision.valid:
            key = policy_seed(seed, step) if rollout == 0 else [policy_seed(seed, step), rollout]
            result = cell.policy.follow(decision.parsed.instruction_text, np.random.default_rng(key))
            executed, outcome = result.control_steps, result.reason
        out, parsed = decision.output, decision.parsed
        instruction = parsed.instruction_text if decision.valid else ""
        history_text = out.raw_text if history == "response" else (instruction if history == "instruction" else "")
        record = TrajectoryStep(
            step=step, image=images[0] if render else None, reasoning=parsed.reasoning, instruction=instruction,
            raw_response=out.raw_text, valid=decision.valid,
            error=outcome if decision.valid and outcome != "done" else (
                "" if decision.valid else f"{parsed.kind.value}: {parsed.reason}"),
            snapshot=snapshot, progress=float(env.max_progress), control_steps=executed, latency_s=out.latency_s,
            model_s=out.model_s, completion_tokens=out.completion_tokens, reasoning_tokens=out.reasoning_tokens,
            model_id=out.model_id)
        steps.append(record)
        if on_step is not None:
            on_step(record)
    final, instance = env.state(), env.task_instance
    return Trajectory(task=task, seed=seed, goal=instance.goal, instance=instance.to_dict(), steps=steps,
                      success=bool(instance.success(final)), progress=float(env.max_progress),
                      control_steps=sum(s.control_steps for s in steps),
                      final_image=env.render_camera("base") if render else None)
