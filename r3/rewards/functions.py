"""Reward functions with TRL's contract, and a composer of named, unscaled terms.

Every reward function here is a picklable callable class (so it survives dataloader and
generation workers) with ``__call__(self, completions, **kwargs) -> list[float | None]``; dataset
columns arrive as keyword lists, read by name; ``None`` marks a sample the function cannot score
(TRL then ignores that function for the sample). ``__name__`` is set on the instance because TRL
logs each function as ``rewards/<__name__>``.

Completions are plain strings or chat messages (``[{"role": "assistant", "content": ...}]`` with
string or multi-part content). A response reads "Reasoning: ... Instruction: ...".

Columns read, by function:

==================  =====================================================================
JudgeReward         ``expert_instruction`` (str), optional ``suite`` (default
                    "language_table"), ``snapshot`` (bytes or file path), ``judge_image``
                    (PNG/JPEG bytes, for the VLM backend)
LengthPenaltyReward none
PlanFormatReward    ``action_dictionary`` ({id: name}, str ids accepted)
PlanLCSReward       ``reference_plan`` (list of action names)
PackingPlanFormat-  ``action_dictionary`` (list of action names: ``pick(<item>)``,
Reward              ``place(<item>)``, ``home()``, ``done()``; see
                    ``r3.rewards.plan.packing_action_dictionary``)
PackingPlanLCS-     ``reference_plan`` (the packing expert's plan for the same scene, as action
Reward              names: ``r3.rewards.plan.packing_plan_actions``)
==================  =====================================================================

The packing plan rewards read the plan interface's answer ("Reasoning: ... Plan:" and numbered
semantic action calls, ``r3.instructions.plan``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from r3.files import bounded_repr
from r3.instructions.language_table import ParseError
from r3.reasoning.parsing import ResponseError, answer_grammar, parse_response
from r3.rewards.judge import RuleJudge
from r3.rewards.plan import (
    PLAN_WEIGHTS,
    packing_plan_answer_actions,
    packing_plan_format_terms,
    plan_actions,
    plan_format_reward,
    weighted_format,
)
from r3.rewards.semantic import load_snapshot
from r3.rewards.terms import TARGET_WORDS, lcs_reward, length_penalty
from r3.rewards.vlm import JudgeFailure, VLMJudge
from r3.suites import DEFAULT_SUITE, get_suite

RewardFn = Callable[..., list]


def completion_text(completion) -> str:
    """The text of one completion: a string, one message, or a conversation (last assistant turn).
    Never raises: anything else (a number, a list of strings, a text part whose text is no string)
    has no text, "", so that every reward scores it as an answer without an instruction.

    >>> completion_text(
    ...     [{"role": "assistant", "content": [{"type": "text", "text": "Instruction: touch the red moon"}]}]
    ... )
    'Instruction: touch the red moon'
    >>> completion_text(42), completion_text(["Instruction: touch the red moon"])
    ('', '')
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        content = completion.get("content", "")
    elif isinstance(completion, list) and completion and all(isinstance(m, Mapping) for m in completion):
        replies = [m for m in completion if m.get("role") == "assistant"] or completion
        content = replies[-1].get("content", "")
    else:
        return ""
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type") == "text"]
        return "".join(parts) if all(isinstance(t, str) for t in parts) else ""
    return content if isinstance(content, str) else ""


def _column(kwargs: dict, name: str, n: int, default=None) -> list:
    values = kwargs.get(name)
    if values is None:
        return [default] * n
    if len(values) != n:
        raise ValueError(f"column {name!r} has {len(values)} values for {n} completions")
    return list(values)


def _snapshots(kwargs: dict, n: int) -> list:
    """The rows' ``snapshot`` column, None where a row has none (a dataset's "": a step recorded
    without a simulator, e.g. on a real arm)."""
    return [None if isinstance(s, str | bytes) and not s else s for s in _column(kwargs, "snapshot", n)]


def _action_names(reference, owner) -> list[str] | None:
    """A row's ``reference_plan`` when it is a list of action names; otherwise None, with a warning: a
    data bug, not a 0 (a string was scored letter by letter)."""
    if isinstance(reference, list | tuple) and all(isinstance(a, str) for a in reference):
        return list(reference)
    why = f"reference_plan {bounded_repr(reference)} is no list of action names"
    warnings.warn(f"{owner.__name__}: sample skipped, {why}", RuntimeWarning, stacklevel=4)
    return None


def _required_column(kwargs: dict, name: str, n: int, owner: object) -> list:
    """:func:`_column` for a column the reward cannot do without: every row must carry it."""
    values = _column(kwargs, name, n)
    if any(v is None for v in values):
        raise ValueError(f"{type(owner).__name__} needs the {name!r} column")
    return values


class JudgeReward:
    """Rubric-judge score of the response's instruction against ``expert_instruction``.

    The response is read by ``r3.reasoning.parsing.parse_response``; one without a single valid
    "Instruction:" section scores 0.0 (R^3 has no format reward, only zero accuracy). Missing
    reasoning is left to the length penalty. The judge sees the grammar's canonical text of the
    parsed instruction (R^3 compares the *parsed* instruction, for packing too). Samples with a
    snapshot go to the rule judge and its simulator; without one, to the VLM judge when one is
    configured, else to the rule judge's linguistic tiers. A VLM failure is never a 0:
    ``on_failure="skip"`` warns and returns None for the sample, ``"raise"`` stops.

    >>> reward = JudgeReward()
    >>> reward(["Reasoning: it is low. Instruction: push the red moon upwards", "Instruction: touch it"],
    ...        expert_instruction=["move the red moon up"] * 2)
    [1.0, 0.0]
    """

    def __init__(
        self,
        judge: RuleJudge | None = None,
        vlm: VLMJudge | None = None,
        on_failure: str = "skip",
        name: str = "judge",
    ):
        if on_failure not in ("skip", "raise"):
            raise ValueError(f"on_failure must be 'skip' or 'raise', got {on_failure!r}")
        self.judge = judge if judge is not None else RuleJudge()
        self.vlm = vlm
        self.on_failure = on_failure
        self.__name__ = name

    def __call__(self, completions, **kwargs) -> list[float | None]:
        n = len(completions)
        references = _column(kwargs, "expert_instruction", n)
        suites = [s or DEFAULT_SUITE for s in _column(kwargs, "suite", n, DEFAULT_SUITE)]
        snapshots = _snapshots(kwargs, n)
        images = _column(kwargs, "judge_image", n)
        scores: list[float | None] = [None] * n
        batch = []  # (index, candidate, reference, suite, snapshot) for the rule judge, judged as one batch
        for i, (c, r, s, snap, img) in enumerate(zip(completions, references, suites, snapshots, images)):
            if r is None:
                raise ValueError("JudgeReward needs the 'expert_instruction' column")
            suite = get_suite(s)  # an unknown suite is refused with the known ones
            parsed = parse_response(completion_text(c), s, mode="instruction_only")
            if isinstance(parsed, ResponseError):
                scores[i] = 0.0
            elif self.vlm is not None and snap is None and suite.vlm_judged:
                scores[i] = self._guarded(
                    lambda text=parsed.instruction_text, ref=r, image=img: (
                        self.vlm.judge(text, ref, image).score
                    )
                )
            else:
                batch.append((i, parsed.instruction_text, r, s, snap))
        # Text tiers one by one (a reference outside the grammar skips its sample, not the batch),
        # then every rollout the semantic tier needs in one batch.
        pending = [(i, self._guarded(lambda item=item: self.judge.text_tiers(*item))) for i, *item in batch]
        pending = [(i, v) for i, v in pending if v is not None]
        results = self._guarded(lambda: self.judge.resolve([v for _, v in pending])) or []
        for (i, _), result in zip(pending, results):
            scores[i] = result.score
        return scores

    def _guarded(self, score):
        """``score()``, or None (with a warning) when the judge cannot score this sample."""
        try:
            return score()
        except JudgeFailure as err:
            if self.on_failure == "raise":
                raise
            warnings.warn(f"{self.__name__}: sample skipped, {err}", RuntimeWarning, stacklevel=3)
        except ValueError as err:  # a reference outside the grammar: a data bug, not a 0
            warnings.warn(f"{self.__name__}: sample skipped, {err}", RuntimeWarning, stacklevel=3)
        return None


def _simulated_answers(completions, kwargs: dict) -> list[tuple]:
    """The rows whose answer the judge's simulator can carry out (a ``snapshot``, and a suite it
    simulates: ``Suite.outcome_simulated``), as (index, suite, snapshot bytes, the answer read as
    one instruction or its ResponseError)."""
    n = len(completions)
    suites = [s or DEFAULT_SUITE for s in _column(kwargs, "suite", n, DEFAULT_SUITE)]
    rows = []
    for i, (c, suite, snap) in enumerate(zip(completions, suites, _snapshots(kwargs, n))):
        if get_suite(suite).outcome_simulated and snap is not None:
            parsed = parse_response(completion_text(c), suite, mode="instruction_only")
            rows.append((i, suite, load_snapshot(snap), parsed))
    return rows


class OutcomeReward:
    """Graded outcome agreement with the expert's instruction in the simulator
    (:meth:`r3.rewards.semantic.OutcomeSimulator.agreement`): a denser Stage II signal than the
    rubric, which scores 0 for any instruction that is not the expert's or ends elsewhere.

    Not part of R^3's reward; r3 mini weights it beside the judge because a model trained from
    scratch rarely hits the rubric's tiers (docs/mini.md). It shares the judge's simulator when
    given the judge, so each (snapshot, instruction) rollout runs once for both terms. Rows need a
    ``snapshot`` and a suite whose instructions that simulator carries out
    (``Suite.outcome_simulated``: Language Table); other rows are None. An answer without one valid
    instruction scores 0.0.
    """

    def __init__(self, judge: RuleJudge | None = None, name: str = "outcome"):
        self.judge = judge if judge is not None else RuleJudge()
        self.__name__ = name

    def __call__(self, completions, **kwargs) -> list[float | None]:
        references = _required_column(kwargs, "expert_instruction", len(completions), self)
        scores: list[float | None] = [None] * len(completions)
        jobs = []  # (index, snapshot, candidate, reference), rolled out as one batch
        for i, suite, snap, parsed in _simulated_answers(completions, kwargs):
            reference = answer_grammar("instruction", suite).parse(references[i])
            if isinstance(reference, ParseError):
                warnings.warn(
                    f"{self.__name__}: sample skipped, reference {references[i]!r} does not parse: "
                    f"{reference.reason}",
                    RuntimeWarning,
                    stacklevel=2,
                )
                continue
            if isinstance(parsed, ResponseError):
                scores[i] = 0.0
            else:
                jobs.append((i, snap, parsed.instruction, reference))
        simulator = self.judge.simulator
        simulator.prefetch([(snap, x) for _, snap, cand, ref in jobs for x in (cand, ref)])
        for i, snap, cand, ref in jobs:
            scores[i] = simulator.agreement(snap, cand, ref)
        return scores


class ProgressReward:
    """The task progress the answer's instruction makes when the simulator carries it out from the
    row's snapshot (:meth:`r3.rewards.semantic.OutcomeSimulator.progress_gain`): progress after
    minus before, in [-1, 1], with no reference to compare with.

    Not part of R^3's reward, which grades agreement with the expert; it grades the move by what
    the task itself measures, the signal an environment reward gives (ERR, RoboGPT-R1). It shares
    the judge's simulator when given the judge. Rows need a ``snapshot`` that holds a task and a
    suite whose instructions that simulator carries out (Language Table); other rows are None. An
    answer without one valid instruction scores -1, the worst any move can do, so that answering
    badly is never a way out of a move that would undo work.
    """

    def __init__(self, judge: RuleJudge | None = None, name: str = "progress"):
        self.judge = judge if judge is not None else RuleJudge()
        self.__name__ = name

    def __call__(self, completions, **kwargs) -> list[float | None]:
        scores: list[float | None] = [None] * len(completions)
        jobs = []  # (index, snapshot, instruction), rolled out as one batch
        for i, _, snap, parsed in _simulated_answers(completions, kwargs):
            if isinstance(parsed, ResponseError):
                scores[i] = -1.0
            else:
                jobs.append((i, snap, parsed.instruction))
        simulator = self.judge.simulator
        simulator.prefetch([(snap, instruction) for _, snap, instruction in jobs])
        for i, snap, instruction in jobs:
            scores[i] = simulator.progress_gain(snap, instruction)
        return scores


class LengthPenaltyReward:
    """``clip(log2(clip(n, 1, T) / T), -1, 0)`` over the whole response (R^3 Appendix A.4).

    >>> LengthPenaltyReward(target_words=4)(
    ...     ["Reasoning: short. Instruction: touch the red moon", "Instruction: x"]
    ... )
    [0.0, -1.0]
    """

    def __init__(self, target_words: int = TARGET_WORDS, name: str = "length"):
        if target_words < 1:
            raise ValueError(f"target_words must be >= 1, got {target_words}")
        self.target_words = target_words
        self.__name__ = name

    def __call__(self, completions, **kwargs) -> list[float | None]:
        return [length_penalty(completion_text(c), self.target_words) for c in completions]


class PlanFormatReward:
    """RoboGPT-R1 format reward of a JSON plan (see :mod:`r3.rewards.plan`).

    >>> PlanFormatReward()(["not a plan"], action_dictionary=[{1: "pick up"}])
    [0.0]
    """

    def __init__(self, name: str = "plan_format"):
        self.__name__ = name

    def __call__(self, completions, **kwargs) -> list[float | None]:
        dictionaries = _required_column(kwargs, "action_dictionary", len(completions), self)
        return [self._score(completion_text(c), d) for c, d in zip(completions, dictionaries)]

    def _score(self, text: str, dictionary) -> float | None:
        try:
            return plan_format_reward(text, dictionary)
        except ValueError as err:  # a dictionary key that is no action id: a data bug, not a 0
            warnings.warn(f"{self.__name__}: sample skipped, {err}", RuntimeWarning, stacklevel=3)
            return None


class PlanLCSReward:
    """LCS of the plan's action names with ``reference_plan``, over the reference length.

    >>> PlanLCSReward()(['{"executable_plan": [{"action_id": 1, "action_name": "pick up"}]}'],
    ...                 reference_plan=[["pick up", "put down"]])
    [0.5]
    """

    def __init__(self, name: str = "plan_lcs"):
        self.__name__ = name

    def __call__(self, completions, **kwargs) -> list[float | None]:
        references = _required_column(kwargs, "reference_plan", len(completions), self)
        return [
            None
            if (ref := _action_names(r, self)) is None
            else lcs_reward(plan_actions(completion_text(c)), ref)
            for c, r in zip(completions, references)
        ]


class PackingPlanFormatReward:
    """RoboGPT-R1 format reward of a packing plan answer (:func:`r3.rewards.plan.packing_plan_format_terms`,
    weighted as eq. 4).

    >>> PackingPlanFormatReward()(["Reasoning: empty table.\\nPlan:\\n1. done()"],
    ...                           action_dictionary=[["home()", "done()"]])
    [1.0]
    """

    def __init__(self, name: str = "plan_format"):
        self.__name__ = name

    def __call__(self, completions, **kwargs) -> list[float | None]:
        dictionaries = _required_column(kwargs, "action_dictionary", len(completions), self)
        return [
            weighted_format(packing_plan_format_terms(completion_text(c), d))
            for c, d in zip(completions, dictionaries)
        ]


class PackingPlanLCSReward:
    """LCS of a packing plan answer's action names with ``reference_plan``, over the reference length.

    >>> PackingPlanLCSReward()(["Reasoning: r\\nPlan:\\n1. pick(soup can, [5, 5])\\n2. home()"],
    ...                        reference_plan=[["pick(soup can)", "place(soup can)", "home()", "done()"]])
    [0.5]
    """

    def __init__(self, name: str = "plan_lcs"):
        self.__name__ = name

    def __call__(self, completions, **kwargs) -> list[float | None]:
        references = _required_column(kwargs, "reference_plan", len(completions), self)
        return [
            None
            if (ref := _action_names(r, self)) is None
            else lcs_reward(packing_plan_answer_actions(completion_text(c)), ref)
            for c, r in zip(completions, references)
        ]


@dataclass(frozen=True)
class ComposedReward:
    """One sample's weighted total and its raw, unscaled terms (None: the sample is skipped)."""

    total: float | None
    terms: dict[str, float | None]


class RewardComposer:
    """Named reward terms plus weights from config; itself a TRL reward function for the total.

    To let TRL log every term, pass ``trl_reward_funcs()`` and ``trl_reward_weights()`` to
    ``GRPOTrainer(reward_funcs=...)`` / ``GRPOConfig(reward_weights=...)``. Used directly, a term
    that returns None makes the whole total None: a skipped judge must not leave the length
    penalty alone to pass as the reward.

    >>> composer = RewardComposer({"judge": JudgeReward(), "length": LengthPenaltyReward(10)},
    ...                           {"judge": 1.0, "length": 1.0})
    >>> composer.evaluate(["Instruction: touch the red moon"], expert_instruction=["touch the red moon"])
    [ComposedReward(total=0.0, terms={'judge': 1.0, 'length': -1.0})]
    """

    def __init__(self, terms: Mapping[str, RewardFn], weights: Mapping[str, float], name: str = "reward"):
        if not terms:
            raise ValueError("RewardComposer needs at least one term")
        if set(terms) != set(weights):
            raise ValueError(f"weights must name exactly the terms {sorted(terms)}, got {sorted(weights)}")
        for key, w in weights.items():
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w):
                raise ValueError(f"weight {key!r} must be a finite number, got {w!r}")
            if not callable(terms[key]):
                raise ValueError(f"term {key!r} is not callable")  # noqa: TRY004 - a bad config value, refused as such
        self.terms = dict(terms)
        self.weights = {k: float(weights[k]) for k in self.terms}
        self.__name__ = name

    def evaluate(self, completions, **kwargs) -> list[ComposedReward]:
        values = {}
        for key, fn in self.terms.items():
            values[key] = list(fn(completions, **kwargs))
            if len(values[key]) != len(completions):
                raise ValueError(
                    f"term {key!r} returned {len(values[key])} values for {len(completions)} completions"
                )
        out = []
        for i in range(len(completions)):
            terms = {k: v[i] for k, v in values.items()}
            total = (
                None
                if any(v is None for v in terms.values())
                else sum(self.weights[k] * v for k, v in terms.items())
            )
            out.append(ComposedReward(total, terms))
        return out

    def __call__(self, completions, **kwargs) -> list[float | None]:
        return [r.total for r in self.evaluate(completions, **kwargs)]

    def trl_reward_funcs(self) -> list[RewardFn]:
        for key, fn in self.terms.items():
            fn.__name__ = key  # TRL logs rewards/<__name__>; keep it equal to the term's key
        return list(self.terms.values())

    def trl_reward_weights(self) -> list[float]:
        return list(self.weights.values())


def instruction_rewards(
    judge: RuleJudge | None = None,
    vlm: VLMJudge | None = None,
    target_words: int = TARGET_WORDS,
    weights: Mapping[str, float] | None = None,
) -> RewardComposer:
    """R^3's single-step RL reward, ``R = R_acc + R_len`` (Appendix A.4), as named terms."""
    return RewardComposer(
        {"judge": JudgeReward(judge, vlm), "length": LengthPenaltyReward(target_words)},
        weights or {"judge": 1.0, "length": 1.0},
    )


def plan_rewards(weights: Mapping[str, float] | None = None, answers: str = "json") -> RewardComposer:
    """RoboGPT-R1's plan reward, ``0.2 * format + 0.8 * LCS``, as named terms: of JSON plans
    (``answers`` "json") or of the packing cell's plan interface answers ("packing")."""
    kinds = {
        "json": (PlanFormatReward, PlanLCSReward),
        "packing": (PackingPlanFormatReward, PackingPlanLCSReward),
    }
    if answers not in kinds:
        raise ValueError(f"answers must be one of {', '.join(kinds)}, got {answers!r}")
    fmt, lcs = kinds[answers]
    return RewardComposer(
        {"plan_format": fmt(), "plan_lcs": lcs()},
        weights or {"plan_format": PLAN_WEIGHTS["format"], "plan_lcs": PLAN_WEIGHTS["lcs"]},
    )
