"""The one decision loop of every episode, in process and in the ROS graph (ROS-free).

:class:`Decider` is one episode's decision half: it asks the reasoner, parses the answer, tells the
model at the next step what came of this one (:func:`next_history`, refusal note included, and for
the semantic interface the action's result line) and counts refusals (``r3.safety.ResponseGuard``).
``r3_reasoner_node`` calls :meth:`Decider.decide` once per step; :func:`run_loop` runs a whole
episode in process around it, with a suite adapter (:class:`SuiteAdapter`) for what differs between
suites: how the scene is seen, how an answer is carried out, how progress is read. Keep the order
of :func:`run_loop` stable, the graph mirrors it:

1. Stop if the task is solved; else the suite's view of the scene (images, the expert's view).
2. Ask the reasoner with the history of the previous step; snapshot the decision-time state.
3. A valid answer is carried out by the suite; an invalid one moves nothing. What came of it
   (``Execution.outcome``, the semantic interface's result line) joins the next step's history.
4. Three refusals in a row end the episode (``Trajectory.aborted``), and so does an answer that
   ends it (:func:`ends_episode`: the semantic and tools interfaces' ``done()``, a plan carried out to
   its ``done()`` step).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from r3.instructions.plan import step_texts
from r3.reasoning.backends.base import ReasonerBackend, ReasoningBudget
from r3.reasoning.expert import NO_BUDGET
from r3.reasoning.prompts import ReasonerInput
from r3.reasoning.reasoner import Decision, decide
from r3.safety import MAX_CONSECUTIVE_INVALID, ResponseGuard, refusal_note
from r3.seeds import policy_seed

#: Image given to the reasoner when rendering is off (the expert ignores images; it must be valid RGB).
BLANK_IMAGE = np.zeros((8, 8, 3), dtype=np.uint8)


def next_history(
    history: str, valid: bool, raw_text: str, instruction: str, error: str = "", outcome: str = ""
) -> str:
    """What the model is told of a step at the next one, for history mode ``history``: its answer
    ("response"), its instruction ("instruction") or nothing ("none"); then why a refused answer was
    refused, or what came of a carried-out one when the suite reports it (``outcome``, in every mode,
    as the refusal note: the semantic interface's result line; the instruction interface reports none).

    >>> next_history("instruction", True, "Reasoning: ...", "move the red moon up")
    'move the red moon up'
    >>> next_history("none", False, "fly", "", "bad")
    '[Your previous answer was refused and the robot did not move: bad]'
    >>> next_history("instruction", True, "...", "home()", outcome="Result: ok.")
    'home()\\nResult: ok.'
    """
    text = {"response": raw_text, "instruction": instruction}.get(history, "")
    if valid and not outcome:
        return text
    return (text + "\n" + (outcome if valid else refusal_note(error))).strip()


@dataclass(frozen=True)
class StepView:
    """What the suite shows the reasoner at one step, besides the history."""

    suite: str
    goal: str
    images: list[np.ndarray]
    note: str
    privileged: object  # the expert's view of the true state; other backends ignore it
    seed: int  # seeds the expert's wording
    interface: str = "instruction"  # how the answer acts (r3.reasoning.prompts.INTERFACES)


@dataclass(frozen=True)
class StepDecision:
    """One decision step as recorded (a ReasonerStep): what the model was shown and what came of it."""

    step: int
    input: ReasonerInput
    decision: Decision
    instruction: str  # the grammar's canonical text when valid, else ""
    error: str  # "kind: reason" when refused, else ""
    next_history: str  # what the model is told of this step at the next one
    abort: str  # why the episode ends here (the guard's reason), else ""

    @property
    def valid(self) -> bool:
        return self.decision.valid

    @property
    def history(self) -> str:
        """What the model was told of the previous step (recast into a checkpoint's own history kind)."""
        return self.decision.prompted.history_text


class Decider:
    """The decision half of one episode: history between steps and the refusal count."""

    def __init__(
        self,
        backend: ReasonerBackend,
        budget: ReasoningBudget = NO_BUDGET,
        history: str = "response",
        max_consecutive_invalid: int = MAX_CONSECUTIVE_INVALID,
    ):
        self.backend, self.budget, self.history = backend, budget, history
        self.guard = ResponseGuard(max_consecutive_invalid)
        self.history_text = ""
        self._last: tuple[bool, str, str, str] = (True, "", "", "")  # the last answer observed

    def decide(self, step: int, view: StepView) -> StepDecision:
        inp = ReasonerInput(
            view.suite,
            view.goal,
            view.images,
            note=view.note,
            history_text=self.history_text,
            history=self.history,
            step=step,
            extra={"privileged": view.privileged, "seed": view.seed},
            interface=view.interface,
        )
        decision = decide(self.backend, inp, self.budget)
        parsed = decision.parsed
        instruction = parsed.instruction_text if decision.valid else ""
        error = "" if decision.valid else f"{parsed.kind.value}: {parsed.reason}"
        abort = self.observe(decision.valid, decision.output.raw_text, instruction, error)
        return StepDecision(step, inp, decision, instruction, error, self.history_text, abort)

    def observe(self, valid: bool, raw_text: str, instruction: str, error: str, outcome: str = "") -> str:
        """Take one answer (and what came of it, when known) into the history and the refusal count;
        the abort reason, or ""."""
        self._last = (valid, raw_text, instruction, error)
        self.history_text = next_history(self.history, valid, raw_text, instruction, error, outcome)
        return self.guard.abort_reason if self.guard.observe(valid, error) else ""

    def report(self, outcome: str) -> None:
        """What carrying out the last answer did (the suite's result line) joins the next history."""
        self.history_text = next_history(self.history, *self._last, outcome)


@dataclass
class TrajectoryStep:
    """One decision step: what the reasoner saw and said, and what executing it did.

    ``history`` is what the model was told of the previous step. ``error`` is the refusal ("kind:
    reason") or, for a valid answer, how its execution fell short ("" when it did not). ``snapshot``
    is the env snapshot at decision time (before execution), so ``env.restore`` and re-running from
    ``step`` reproduces the rest of the episode. ``progress`` is measured after execution.
    ``frames`` are intermediate renders taken during execution. ``outcome`` is the suite's result line
    for the step (the semantic interface's; "" otherwise), which the next step's history carries.
    """

    step: int
    image: np.ndarray | None
    reasoning: str
    instruction: str
    raw_response: str
    valid: bool
    error: str
    history: str
    snapshot: bytes
    progress: float
    control_steps: int
    latency_s: float
    model_s: float
    completion_tokens: int | None
    reasoning_tokens: int | None
    model_id: str
    frames: list[np.ndarray] = field(default_factory=list)
    outcome: str = ""
    finish_reason: str = "stop"  # how the backend's generation ended; the guard read it with the text

    def to_summary(self) -> dict:
        return {
            "step": self.step,
            "reasoning": self.reasoning,
            "instruction": self.instruction,
            "raw_response": self.raw_response,
            "finish_reason": self.finish_reason,
            "valid": self.valid,
            "error": self.error,
            "progress": self.progress,
            "control_steps": self.control_steps,
            "latency_s": self.latency_s,
            "model_s": self.model_s,
            "completion_tokens": self.completion_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "model_id": self.model_id,
            "outcome": self.outcome,
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
    #: Whether the agent ended the episode itself (:func:`ends_episode`) before its step budget.
    agent_ended: bool = False

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


def cut_short_summary(task: str, seed: int, steps: Sequence[TrajectoryStep], outcome: str) -> dict:
    """The record of an episode its reasoner ended with an error (``outcome``) after ``steps``: the
    keys of :meth:`Trajectory.to_summary` that those steps tell, so a demo loses none of them."""
    return {
        "task": task,
        "seed": seed,
        "outcome": outcome,
        "success": False,
        "progress": steps[-1].progress if steps else 0.0,
        "control_steps": sum(s.control_steps for s in steps),
        "decision_steps": len(steps),
        "invalid_steps": sum(not s.valid for s in steps),
        "steps": [s.to_summary() for s in steps],
    }


#: The canonical answer by which the agent itself ends its episode (ERR's done()); the task's checker,
#: not the agent, then says whether it succeeded.
DONE_ANSWER = "done()"


def end_reason(success: bool, agent_ended: bool, canceled: bool = False) -> str:
    """Why an episode that met no error ended, as its RunTask result, END event and bag say it:
    ``success``, ``done`` (the agent ended it, unsolved), ``canceled`` or ``step_budget``."""
    if success:
        return "success"
    return "done" if agent_ended else "canceled" if canceled else "step_budget"


def ends_episode(decision: StepDecision, fell_short: bool = False) -> bool:
    """Whether this step's answer ends the episode (the in-process loop and the reasoner node both ask):
    its last action is ``done()`` and everything before it was carried out (``fell_short`` False). One
    call is its own last action; a plan's is its last step, reached only when no step failed (the
    reasoner node reads that from the FollowInstruction result's success)."""
    if not decision.valid or fell_short:
        return False
    last = decision.instruction.rsplit("\n", 1)[-1]
    return DONE_ANSWER in (last, *step_texts(last))


@dataclass
class Execution:
    """What carrying out one valid answer did: control steps, a shortfall ("" if none), renders, and the
    result line the model reads at the next step ("" when the suite reports none)."""

    control_steps: int = 0
    error: str = ""
    frames: list[np.ndarray] = field(default_factory=list)
    outcome: str = ""


class SuiteAdapter(Protocol):
    """A suite's part of the in-process loop (``env`` has ``state`` and ``task_instance``)."""

    env: object
    render: bool

    def view(self, step: int) -> StepView: ...

    def snapshot(self) -> bytes:
        """Everything the next decision is taken on, to restore and continue from exactly."""
        ...

    def execute(self, decision: StepDecision, step: int) -> Execution: ...

    def progress(self) -> float: ...

    def final_image(self) -> np.ndarray | None: ...


class SuiteSim(Protocol):
    """A suite's own simulator (``Suite.make_sim``), driven the same way in process
    (:class:`SimulatedSuite`) and by the graph's generic simulator node (``r3_suite_sim_node``).

    ``task_instance`` (None before the first reset) has ``goal``, ``note``, ``success(state)``,
    ``progress(state)`` and ``to_dict()``, as every suite's task instances do.
    """

    task_instance: object

    def reset(self, task: str, seed: int) -> None:
        """A new scene of ``task`` (a canonical task name of the suite), drawn by ``seed``."""

    def state(self) -> object:
        """What the task instance's checkers read."""

    def image(self) -> np.ndarray:
        """The camera view the reasoner decides on (HxWx3 uint8)."""

    def follow(self, instruction: str, max_steps: int, seed: int) -> Execution:
        """Carry out one instruction, given as text in the suite's grammar, within ``max_steps``
        control steps (0: the simulator's own budget); text outside the grammar moves nothing and
        comes back as the Execution's error."""

    def snapshot(self) -> bytes:
        """Everything the next decision is taken on, to restore and continue from exactly."""


@dataclass
class SimulatedSuite:
    """The in-process loop's adapter of a suite that brings its own simulator (:class:`SuiteSim`).
    Each instruction gets the policy seed and control-step budget the reasoner node gives it."""

    suite: str
    env: SuiteSim
    seed: int = 0
    render: bool = True
    interface: str = "instruction"
    steps_per_instruction: int = 0

    def view(self, step: int) -> StepView:
        instance = self.env.task_instance
        image = self.env.image() if self.render else BLANK_IMAGE
        return StepView(self.suite, instance.goal, [image], instance.note, None, self.seed, self.interface)

    def snapshot(self) -> bytes:
        return self.env.snapshot()

    def execute(self, decision: StepDecision, step: int) -> Execution:
        return self.env.follow(decision.instruction, self.steps_per_instruction, policy_seed(self.seed, step))

    def progress(self) -> float:
        return float(self.env.task_instance.progress(self.env.state()))

    def final_image(self) -> np.ndarray | None:
        return self.env.image() if self.render else None


def run_loop(
    suite: SuiteAdapter,
    decider: Decider,
    task: str,
    seed: int,
    max_steps: int,
    *,
    trial: int = 0,
    earlier: Sequence[TrajectoryStep] = (),
    on_step: Callable[[TrajectoryStep], None] | None = None,
) -> Trajectory:
    """Run the episode in ``suite.env`` from its current state up to decision ``max_steps``.

    ``earlier`` are the steps already taken (a resume from the snapshot of step ``len(earlier)``):
    the decider takes them in first, so history and refusal count are those of the original run.
    """
    for s in earlier:
        decider.observe(s.valid, s.raw_response, s.instruction, s.error, s.outcome)
    steps, env, aborted, agent_ended = list(earlier), suite.env, "", False
    for step in range(len(earlier), max_steps):
        if env.task_instance.success(env.state()):
            break
        view = suite.view(step)
        record = decider.decide(step, view)
        snapshot = suite.snapshot()
        done = suite.execute(record, step) if record.valid else Execution()
        if done.outcome:
            decider.report(done.outcome)
        out = record.decision.output
        steps.append(
            TrajectoryStep(
                step=step,
                image=view.images[0] if suite.render else None,
                reasoning=record.decision.parsed.reasoning,
                instruction=record.instruction,
                raw_response=out.raw_text,
                valid=record.valid,
                error=record.error or done.error,
                history=record.history,
                snapshot=snapshot,
                progress=suite.progress(),
                control_steps=done.control_steps,
                latency_s=out.latency_s,
                model_s=out.model_s,
                completion_tokens=out.completion_tokens,
                reasoning_tokens=out.reasoning_tokens,
                model_id=out.model_id,
                frames=done.frames,
                outcome=done.outcome,
                finish_reason=out.finish_reason,
            )
        )
        if on_step is not None:
            on_step(steps[-1])
        if record.abort:
            aborted = record.abort
            break
        if ends_episode(record, bool(done.error)):
            agent_ended = True
            break
    final, instance = env.state(), env.task_instance
    return Trajectory(
        task=task,
        seed=seed,
        goal=instance.goal,
        instance=instance.to_dict(),
        steps=steps,
        success=bool(instance.success(final)),
        progress=suite.progress(),
        control_steps=sum(s.control_steps for s in steps),
        final_image=suite.final_image(),
        trial=trial,
        aborted=aborted,
        agent_ended=agent_ended,
    )
