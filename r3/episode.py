"""The canonical in-process Language Table episode: reasoner -> instruction -> low-level policy.

This loop is the contract the ROS graph mirrors step for step (same seed, same instructions,
same outcome), so keep the order of calls below stable:

1. ``env.reset(seed=seed, options={"task": task})``; the history starts empty.
2. At each decision step: stop if the task is solved; render the image (or a blank one when
   rendering is off); ask the reasoner; take a snapshot of the decision-time state.
3. A valid answer resets the policy with ``np.random.default_rng(policy_seed(noise, step))`` and
   runs at most ``steps_per_instruction`` control steps (fewer if the policy says it is done).
   An invalid answer commands no motion.
4. The history for the next step is the raw answer ("response") or the instruction ("instruction");
   a refused answer adds the refusal reason (``r3.safety``), and three refusals in a row end the
   episode (``Trajectory.aborted``).

``noise`` is ``trial_seed(seed, trial)``: the seed itself for trial 0, so only trials > 0 (repeats of
a scene with fresh policy noise and wording, for evaluation) differ from the graph's episodes.

ROS-free: it runs the reasoner backend and the policy in this process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from r3.lowlevel.pushing import ScriptedPushingPolicy
from r3.reasoning.backends.base import ReasonerBackend, ReasoningBudget
from r3.reasoning.expert import NO_BUDGET, ExpertView
from r3.reasoning.prompts import ReasonerInput
from r3.reasoning.reasoner import decide
from r3.safety import ResponseGuard

SUITE = "language_table"
#: Image given to the reasoner when rendering is off (the expert ignores images; it must be valid RGB).
BLANK_IMAGE = np.zeros((8, 8, 3), dtype=np.uint8)


def policy_seed(episode_seed: int, step: int) -> int:
    """Seed of the low-level policy's generator at one decision step (the ROS graph uses it too).

    >>> policy_seed(3, 0) == policy_seed(3, 0) != policy_seed(3, 1)
    True
    """
    return int(np.random.SeedSequence([int(episode_seed), int(step)]).generate_state(1)[0])


def trial_seed(scene_seed: int, trial: int) -> int:
    """Seed of the stochastic parts (policy noise, expert wording) of one trial of a scene.

    Trial 0 is the scene seed itself (what the ROS graph's RunTask uses); other trials keep the
    scene and redraw the noise.

    >>> trial_seed(3, 0), trial_seed(3, 1) != trial_seed(3, 2)
    (3, True)
    """
    if trial == 0:
        return int(scene_seed)
    return int(np.random.SeedSequence([int(scene_seed), int(trial)]).generate_state(1)[0])


@dataclass
class TrajectoryStep:
    """One decision step: what the reasoner saw and said, and what executing it did.

    ``snapshot`` is the env snapshot at decision time (before execution), so ``env.restore`` and
    re-running from ``step`` reproduces the rest of the episode. ``progress`` is measured after
    execution. ``frames`` are intermediate renders taken during execution (see ``frame_every``).
    """

    step: int
    image: np.ndarray | None
    reasoning: str
    instruction: str
    raw_response: str
    valid: bool
    error: str
    snapshot: bytes
    progress: float
    control_steps: int
    latency_s: float
    model_s: float
    completion_tokens: int | None
    reasoning_tokens: int | None
    model_id: str
    frames: list[np.ndarray] = field(default_factory=list)

    def to_summary(self) -> dict:
        return {
            "step": self.step,
            "reasoning": self.reasoning,
            "instruction": self.instruction,
            "raw_response": self.raw_response,
            "valid": self.valid,
            "error": self.error,
            "progress": self.progress,
            "control_steps": self.control_steps,
            "latency_s": self.latency_s,
            "model_s": self.model_s,
            "completion_tokens": self.completion_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "model_id": self.model_id,
        }


@dataclass
class Trajectory:
    """A whole episode; ``to_summary`` is its JSON-able record without images or snapshots."""

    task: str
    seed: int
    goal: str
    instance: dict
    steps: list[TrajectoryStep]
    success: bool
    progress: float
    control_steps: int
    final_image: np.ndarray | None
    trial: int = 0
    #: Why the episode was stopped early by the safety guard ("" when it was not).
    aborted: str = ""

    @property
    def instructions(self) -> list[str]:
        return [s.instruction for s in self.steps]

    def to_summary(self) -> dict:
        return {
            "task": self.task,
            "seed": self.seed,
            "trial": self.trial,
            "aborted": self.aborted,
            "goal": self.goal,
            "instance": self.instance,
            "success": self.success,
            "progress": self.progress,
            "control_steps": self.control_steps,
            "decision_steps": len(self.steps),
            "invalid_steps": sum(not s.valid for s in self.steps),
            "steps": [s.to_summary() for s in self.steps],
        }


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
    loop = _Loop(
        task,
        seed,
        backend,
        env,
        policy or ScriptedPushingPolicy(),
        steps_per_instruction,
        budget,
        history,
        render,
        on_step,
        frame_every,
        trial,
    )
    return loop.run([], 0, "", max_steps)


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

    With the same backend and options as the original run the continuation is identical; with
    another backend it answers "what if the reasoner had decided differently from here".
    The returned trajectory keeps the original steps before ``step``.
    """
    env = env if env is not None else _default_env()
    env.restore(trajectory.steps[step].snapshot)
    previous = trajectory.steps[step - 1] if step > 0 else None
    history_text = (
        ""
        if previous is None
        else previous.raw_response
        if history == "response"
        else (previous.instruction if history == "instruction" else "")
    )
    loop = _Loop(
        trajectory.task,
        trajectory.seed,
        backend,
        env,
        policy or ScriptedPushingPolicy(),
        steps_per_instruction,
        budget,
        history,
        render,
        on_step,
        frame_every,
        trajectory.trial,
    )
    return loop.run(list(trajectory.steps[:step]), step, history_text, max_steps)


def _default_env():
    from r3.sim.language_table.env import LanguageTableEnv  # MuJoCo only when no env is given

    return LanguageTableEnv()


@dataclass
class _Loop:
    """The decision loop shared by :func:`run_episode` and :func:`resume_episode`."""

    task: str
    seed: int
    backend: ReasonerBackend
    env: object
    policy: object
    steps_per_instruction: int
    budget: ReasoningBudget
    history: str
    render: bool
    on_step: Callable[[TrajectoryStep], None] | None
    frame_every: int
    trial: int = 0

    def run(self, steps: list[TrajectoryStep], first: int, history_text: str, max_steps: int) -> Trajectory:
        env, seed = self.env, self.seed
        noise = trial_seed(seed, self.trial)
        guard, aborted = ResponseGuard(), ""
        for step in range(first, max_steps):
            state = env.state()
            instance = env.task_instance
            if instance.success(state):
                break
            image = env.render() if self.render else BLANK_IMAGE
            inp = ReasonerInput(
                SUITE,
                instance.goal,
                [image],
                note=instance.note,
                history_text=history_text,
                history=self.history,
                step=step,
                extra={"privileged": ExpertView(state, instance), "seed": noise},
            )
            decision = decide(self.backend, inp, self.budget)
            snapshot = env.snapshot()
            executed, frames = 0, []
            if decision.valid:
                self.policy.reset(
                    decision.parsed.instruction, state, np.random.default_rng(policy_seed(noise, step))
                )
                for _ in range(self.steps_per_instruction):
                    action = self.policy.act(env.state())
                    if action is None:
                        break
                    env.step(action)
                    executed += 1
                    if self.render and self.frame_every > 0 and executed % self.frame_every == 0:
                        frames.append(env.render())
            out, parsed = decision.output, decision.parsed
            instruction = parsed.instruction_text if decision.valid else ""
            error = "" if decision.valid else f"{parsed.kind.value}: {parsed.reason}"
            history_text = guard.history_after(decision.valid, out.raw_text, instruction, self.history, error)
            record = TrajectoryStep(
                step=step,
                image=image if self.render else None,
                reasoning=parsed.reasoning,
                instruction=instruction,
                raw_response=out.raw_text,
                valid=decision.valid,
                error=error,
                snapshot=snapshot,
                progress=float(instance.progress(env.state())),
                control_steps=executed,
                latency_s=out.latency_s,
                model_s=out.model_s,
                completion_tokens=out.completion_tokens,
                reasoning_tokens=out.reasoning_tokens,
                model_id=out.model_id,
                frames=frames,
            )
            steps.append(record)
            if self.on_step is not None:
                self.on_step(record)
            if guard.observe(decision.valid, error):
                aborted = guard.abort_reason
                break
        final = env.state()
        instance = env.task_instance
        return Trajectory(
            task=self.task,
            seed=seed,
            goal=instance.goal,
            instance=instance.to_dict(),
            steps=steps,
            success=bool(instance.success(final)),
            progress=float(instance.progress(final)),
            control_steps=sum(s.control_steps for s in steps),
            final_image=env.render() if self.render else None,
            trial=self.trial,
            aborted=aborted,
        )
