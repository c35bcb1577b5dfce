"""The in-process packing episode: reasoner -> instruction -> packing policy (skills) -> sim.

The decision loop is :func:`r3.episode_loop.run_loop`, as for Language Table (and the ROS graph
follows it step for step); this module is packing's part of it:

1. ``env.reset(seed=seed, options={"task": task})``; history starts empty ("instruction" history by
   default, as R^3 uses for packing).
2. The reasoner sees the base and wrist views (blank images when rendering is off) and, for the
   expert, the true state of the cell.
3. A valid answer runs :meth:`PackingPolicy.follow` with ``np.random.default_rng(policy_seed(seed,
   step))``: pick, place, home, settle, within the policy's step budget.
4. Progress is K/N with K the most goal objects packed at any time (``env.max_progress``).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar

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
from r3.execution.sim import SimExecutor
from r3.instructions import plan as plan_grammar
from r3.instructions.language_table import ParseError
from r3.instructions.packing import parse as parse_packing_instruction
from r3.instructions.semantic import RESULT_HEADER, ActionError, ActionType, SemanticAction
from r3.instructions.semantic import parse as parse_action
from r3.instructions.tools import ToolCallError
from r3.instructions.tools import parse as parse_tool_call
from r3.lowlevel import GROUNDINGS
from r3.lowlevel.grounding import Grounder
from r3.lowlevel.packing import PackingPolicy, PackingPolicyConfig
from r3.lowlevel.perceived import PerceptionSource
from r3.lowlevel.semantic import ActionResult, SemanticActions, describe_result
from r3.lowlevel.tools import ToolActions
from r3.reasoning.backends.base import ReasonerBackend, ReasoningBudget
from r3.reasoning.expert import NO_BUDGET
from r3.reasoning.packing_expert import PackingExpertView
from r3.safety.freeze import GoalStop
from r3.seeds import policy_seed
from r3.sim.packing import scene

SUITE = "packing"
#: Decision steps per episode: enough for five goal objects, clutter and a few repairs.
MAX_DECISIONS = 15
#: The same for the semantic interface, where one instruction's work takes three actions (pick, place,
#: home).
MAX_ACTIONS = 3 * MAX_DECISIONS
#: The same for the tools interface, where one instruction's work takes about ten calls (query, open,
#: above, down, close, lift, carry, lower, open, up).
MAX_TOOL_CALLS = 10 * MAX_DECISIONS
#: The same for the plan interface: plans per episode. A plan does at least one instruction's work unless
#: a step fails, and each failure is followed by a new plan, so the instruction interface's budget for
#: five goal objects and a few repairs holds for plans too.
MAX_PLANS = MAX_DECISIONS


#: The array of a cell snapshot that holds what the tools remember (JSON).
TOOLS_STATE = "tools_state"
#: The format a cell snapshot (:meth:`PackingCell.snapshot`) is published under (SceneSnapshot.format).
SNAPSHOT_FORMAT = "r3-packing-snapshot/1"

#: The interfaces whose answers :meth:`PackingCell.carry_out` carries out.
CELL_INTERFACES = ("instruction", "semantic", "tools", "plan")
#: How the cell reads an answer of each interface.
ANSWER_PARSERS = {
    "instruction": parse_packing_instruction,
    "semantic": parse_action,
    "tools": parse_tool_call,
    "plan": plan_grammar.parse,
}


def answer_refusal(interface: str, text: str) -> str:
    """Why the cell refuses ``text``, an answer written in ``interface`` (one of ``CELL_INTERFACES``),
    before anything moves ("" = it does not): what its grammar does not read."""
    parsed = ANSWER_PARSERS[interface](text)
    return f"rejected: {parsed.reason}" if isinstance(parsed, ParseError) else ""


@dataclass
class PackingCell:
    """The simulated cell the policy acts on: env, sim executor, grounder, semantic actions, policy, and
    the pose tools (whose perception query and todo list last one episode: :meth:`reset` renews them).
    Its sim time (:attr:`now_ns`, what a node publishing the cell stamps with) advances one control step
    (50 ms) per step and never goes back, across resets too."""

    env: object
    executor: SimExecutor
    grounder: Grounder
    actions: SemanticActions
    policy: PackingPolicy
    tools: ToolActions
    base_ns: int = 0  # sim time of the current episode's step 0

    @classmethod
    def build(
        cls,
        env=None,
        policy_config: PackingPolicyConfig | None = None,
        grounding: str = "sim",
        source: PerceptionSource | None = None,
    ) -> PackingCell:
        """``grounding``: one of ``r3.lowlevel.GROUNDINGS``; ``source``: where ``perception`` grounding
        gets detections (default: in-process rendering and r3.perception; the packing sim node passes
        the perception node's, over ROS)."""
        ground = GROUNDINGS.get(grounding)
        if env is None:
            from r3.sim.packing.env import PackingEnv  # MuJoCo only when no env is given

            env = PackingEnv()
        if grounding == "perception" and policy_config is None:
            # The grasp-point noise stands in for perception error; with perception the error is real.
            policy_config = PackingPolicyConfig(grasp_noise=0.0)
        executor = SimExecutor(env)
        grounder, state = GROUNDINGS.call(grounding, ground, env, source)
        actions = SemanticActions(executor, grounder, state)

        def hold_still() -> bool:
            env.step(env.joint_targets)
            return True

        policy = PackingPolicy(actions, grounder, hold_still, policy_config)
        return cls(env, executor, grounder, actions, policy, ToolActions(executor, env))

    @property
    def now_ns(self) -> int:
        return self.base_ns + self.env.elapsed_steps * scene.STEP_NS

    def reset(self, seed: int, task: str) -> None:
        """A new episode: the simulator's layout and task, and a grounder that forgets the last one."""
        next_ns = self.now_ns + scene.STEP_NS  # time moves on across a reset, so every stamp is unique
        self.env.reset(seed=seed, options={"task": task})
        self.grounder.forget()
        self.tools = ToolActions(self.executor, self.env)
        self.base_ns = next_ns

    @contextmanager
    def driven(self, on_step: Callable[[float], bool], stop: GoalStop):
        """The cell's motions while one goal runs: ``on_step(distance_remaining)`` after every control
        step (the policy's settling steps too, with 0.0), ``stop`` asked before every step of the
        executor's motions; once it has stopped, the world takes no further step for the goal (the
        settling steps are skipped too, and not counted)."""
        idle, hooks = self.policy.idle, (self.executor.on_step, self.executor.should_stop)

        def idle_until_stopped() -> bool:
            if stop.reason is not None or not idle():
                return False
            on_step(0.0)
            return True

        self.executor.on_step, self.executor.should_stop = on_step, stop
        self.policy.idle = idle_until_stopped
        try:
            yield
        finally:
            self.executor.on_step, self.executor.should_stop = hooks
            self.policy.idle = idle

    def snapshot(self) -> bytes:
        """The simulator's snapshot (``PackingEnv.snapshot``) plus what the tools remember, in one npz:
        everything a turn of any interface is decided on."""
        with np.load(io.BytesIO(self.env.snapshot()), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        arrays[TOOLS_STATE] = np.frombuffer(json.dumps(self.tools.state()).encode(), np.uint8)
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        return buf.getvalue()

    def restore(self, snapshot: bytes) -> None:
        """Back to a :meth:`snapshot` (or a bare ``PackingEnv.snapshot``: the tools start afresh), with
        a grounder that remembers nothing of what came after it."""
        self.env.restore(snapshot)
        self.grounder.forget()
        self.tools = ToolActions(self.executor, self.env)
        with np.load(io.BytesIO(snapshot), allow_pickle=False) as npz:
            if TOOLS_STATE in npz.files:
                self.tools.restore(json.loads(npz[TOOLS_STATE].tobytes().decode()))

    def carry_out(
        self, interface: str, text: str, rng: np.random.Generator, steps_left: int = 0
    ) -> Execution:
        """Carry out one answer's canonical ``text`` written in ``interface``, the one way both the
        in-process loop and the packing sim node act: the packing policy follows an instruction
        (pick, place, home, settle); a semantic action or a tool call runs alone, then the items
        settle (after an arm motion), and what the model reads next comes back: the semantic result
        line (ok or the reason, what changed place), or the tools observation (result, perception's
        readouts, tool pose, todo list and ``steps_left``, the episode's decision steps after this)."""
        if interface == "instruction":
            result = self.policy.follow(text, rng)
            return Execution(result.control_steps, "" if result.reason == "done" else result.reason)
        if interface == "tools":
            return self._call_tool(text, steps_left)
        if interface == "plan":
            return self._follow_plan(text, rng)
        if interface not in CELL_INTERFACES:
            raise ValueError(f"the packing cell carries out no {interface!r} answers")
        action = parse_action(text)
        if isinstance(action, ActionError):
            return _refused(action.reason)
        before = self.actions.state()
        result = self._act(action, rng)
        steps = result.control_steps + (self.policy.settle() if result.control_steps else 0)
        outcome = describe_result(result, before, self.actions.state())
        return Execution(steps, "" if result.ok else result.reason, outcome=outcome)

    def _follow_plan(self, text: str, rng: np.random.Generator) -> Execution:
        """A plan's steps in order, each as one semantic answer, until one fails or the plan ends."""
        plan = plan_grammar.parse(text)
        if isinstance(plan, plan_grammar.PlanError):
            return _refused(plan.reason)
        calls = plan_grammar.step_texts(plan_grammar.format_instruction(plan))
        done: list[Execution] = []
        for call in calls:
            done.append(self.carry_out("semantic", call, rng))
            if done[-1].error:
                break
        error = f"step {len(done)}: {done[-1].error}" if done[-1].error else ""
        return Execution(
            sum(d.control_steps for d in done),
            error,
            [f for d in done for f in d.frames],
            plan_outcome(calls, [d.outcome for d in done], bool(error)),
        )

    def _call_tool(self, text: str, steps_left: int) -> Execution:
        call = parse_tool_call(text)
        if isinstance(call, ToolCallError):
            return _refused(call.reason)
        result = self.tools.run(call)
        steps = result.control_steps + (self.policy.settle() if result.control_steps else 0)
        error = "" if result.ok else f"{result.outcome.value}: {result.cause}"
        return Execution(steps, error, outcome=self.tools.observation(result, steps_left))

    def _act(self, action: SemanticAction, rng: np.random.Generator) -> ActionResult:
        if action.type is ActionType.PICK:
            return self.actions.pick(action.label, action.point, rng, self.policy.config.grasp_noise)
        if action.type is ActionType.PLACE:
            return self.actions.place(action.label, action.point)
        return self.actions.home() if action.type is ActionType.HOME else self.actions.done()

    def images(self, render: bool) -> list[np.ndarray]:
        if not render:
            return [BLANK_IMAGE, BLANK_IMAGE]
        return [self.env.render_camera("base"), self.env.render_camera("wrist")]


def _refused(reason: str) -> Execution:
    """A text that is no answer of its interface (a hostile FollowInstruction goal): nothing moves."""
    return Execution(0, f"rejected: {reason}", outcome=f"{RESULT_HEADER} refused ({reason}).")


@dataclass
class PackingSuite:
    """Packing's part of :func:`r3.episode_loop.run_loop`: base and wrist views, the packing skills."""

    #: How the reasoner's answers act here (r3.reasoning.prompts.INTERFACES), and its decision budget.
    interface: ClassVar[str] = "instruction"
    default_steps: ClassVar[int] = MAX_DECISIONS

    cell: PackingCell
    render: bool
    seed: int
    rollout: int  # > 0 reseeds only the low-level policy
    #: The episode's decision steps at most (None: ``default_steps``).
    max_steps: int | None = None

    def __post_init__(self):
        if self.max_steps is None:
            self.max_steps = self.default_steps

    @property
    def env(self):
        return self.cell.env

    def view(self, step: int) -> StepView:
        state, instance = self.env.state(), self.env.task_instance
        return StepView(
            SUITE,
            instance.goal,
            self.cell.images(self.render),
            instance.note,
            PackingExpertView(state, instance, self.env.camera_model("base")),
            self.seed,
            self.interface,
        )

    def rng(self, step: int) -> np.random.Generator:
        """The low-level's randomness at ``step`` (grasp noise, slips, table spots)."""
        key = policy_seed(self.seed, step)
        return np.random.default_rng(key if self.rollout == 0 else [key, self.rollout])

    def execute(self, decision: StepDecision, step: int) -> Execution:
        steps_left = self.max_steps - step - 1
        return self.cell.carry_out(self.interface, decision.instruction, self.rng(step), steps_left)

    def snapshot(self) -> bytes:
        return self.cell.snapshot()

    def progress(self) -> float:
        return float(self.env.max_progress)

    def final_image(self) -> np.ndarray | None:
        return self.env.render_camera("base") if self.render else None


@dataclass
class SemanticPackingSuite(PackingSuite):
    """The semantic interface (ERR) on the packing cell: each valid answer is one action of
    :class:`~r3.lowlevel.semantic.SemanticActions`, its point grounded by the cell's grounder (the
    camera ray in the simulator, or perception's mask and depth); then the items settle. The result
    line (ok or the reason, and what changed place) is what the model reads at the next step."""

    interface: ClassVar[str] = "semantic"
    default_steps: ClassVar[int] = MAX_ACTIONS


@dataclass
class PlanPackingSuite(PackingSuite):
    """The plan interface (RoboGPT-R1) on the packing cell: each valid answer is a whole plan whose steps
    the cell carries out in order as semantic actions (:meth:`PackingCell.carry_out`, the same way one
    semantic answer acts), until a step fails or the plan ends; ``done()`` as its last step ends the
    episode once reached. What the model reads next (to plan again) is where the plan stopped and every
    executed step's result line (:func:`plan_outcome`)."""

    interface: ClassVar[str] = "plan"
    default_steps: ClassVar[int] = MAX_PLANS


def plan_outcome(calls: list[str], outcomes: list[str], fell_short: bool) -> str:
    """What came of a plan, for the model's next step: where it stopped, then each executed step's result
    line.

    >>> print(plan_outcome(["home()", "done()"], ["Result: failed (unreachable)."], True))
    Plan result: stopped at step 1 of 2; the steps after it did not run.
    Step 1 home(): Result: failed (unreachable).
    """
    n, total = len(outcomes), len(calls)
    head = (
        f"stopped at step {n} of {total}; the steps after it did not run."
        if fell_short and n < total
        else f"stopped at step {n} of {total}, the last one."
        if fell_short
        else f"carried out to the end ({total} step{'s' if total > 1 else ''})."
    )
    lines = [f"{plan_grammar.PLAN_RESULT_HEADER} {head}"]
    lines += [f"Step {i} {call}: {outcome}" for i, (call, outcome) in enumerate(zip(calls, outcomes), 1)]
    return "\n".join(lines)


@dataclass
class ToolsPackingSuite(PackingSuite):
    """The tools interface (ZAP) on the packing cell: each valid answer is one tool call of
    :class:`~r3.lowlevel.tools.ToolActions` (its own perception query and todo list, fresh for the
    episode); the arm's motions are followed by the items settling. The observation (result line,
    perception's readouts, measured tool pose and jaws, todo list, steps left) is what the model reads
    at the next step; ``done()`` ends the episode."""

    interface: ClassVar[str] = "tools"
    default_steps: ClassVar[int] = MAX_TOOL_CALLS


#: Interface -> the suite adapter that carries out its answers.
SUITE_ADAPTERS: dict[str, type[PackingSuite]] = {
    "instruction": PackingSuite,
    "semantic": SemanticPackingSuite,
    "tools": ToolsPackingSuite,
    "plan": PlanPackingSuite,
}


def run_packing_episode(
    task: str,
    seed: int,
    backend: ReasonerBackend,
    *,
    cell: PackingCell | None = None,
    max_steps: int | None = None,
    budget: ReasoningBudget = NO_BUDGET,
    history: str = "instruction",
    render: bool = True,
    on_step: Callable[[TrajectoryStep], None] | None = None,
    rollout: int = 0,
    interface: str = "instruction",
) -> Trajectory:
    """Run one packing episode of ``task`` ("1".."12" or "train") from ``seed``.

    ``rollout`` > 0 reseeds only the low-level policy (same layout, other grasp noise and slips): R^3
    evaluates 5 environment seeds x 10 rollouts per goal. Rollout 0 is the one the ROS graph runs.
    ``interface`` is how the reasoner acts: "instruction" (the packing policy follows one instruction),
    "semantic" (one pick / place / home / done per step), "tools" (one pose-tool call per step) or "plan"
    (one plan of semantic actions per step). ``max_steps`` defaults to the interface's budget:
    :data:`MAX_DECISIONS`, :data:`MAX_ACTIONS` for the semantic interface, :data:`MAX_TOOL_CALLS` for the
    tools interface, :data:`MAX_PLANS` for the plan interface.
    """
    if interface not in SUITE_ADAPTERS:
        raise ValueError(f"unknown interface {interface!r}; expected one of {', '.join(SUITE_ADAPTERS)}")
    cell = cell or PackingCell.build()
    cell.reset(seed, task)
    suite = SUITE_ADAPTERS[interface](cell, render, seed, rollout, max_steps)
    return run_loop(suite, Decider(backend, budget, history), task, seed, suite.max_steps, on_step=on_step)
