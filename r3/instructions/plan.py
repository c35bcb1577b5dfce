"""The multi-step plan grammar (RoboGPT-R1): one answer is one whole plan of semantic actions.

Canonical text (:func:`format_instruction`), one numbered step a line, each step one call of the
semantic action grammar (:mod:`r3.instructions.semantic`, which alone decides what a step is)::

    1. pick(soup can, [412, 530])
    2. place(soup can, [655, 380])
    3. home()
    4. done()

The cell carries the steps out in order and stops at the first that fails (``r3.packing_episode``);
the next answer is a new plan from the state that left. ``done()`` may only be the last step: a step
after it could never run.

:func:`parse` never raises: a text that is not one such plan gives a :class:`PlanError` whose ``kind``
(:class:`PlanErrorKind`) says what is wrong and ``reason`` says it for people, naming the step.
Forgiven: blank lines between steps, "1)" for "1.", whitespace around the number, whatever the semantic
grammar forgives in a call. Refused: a line that is not a numbered step (prose before, between or after
the steps, a second plan's heading), numbers that do not run 1, 2, 3, ... (a second plan restarting at
1 is a gap), more than :data:`MAX_PLAN_STEPS` steps, a step that is not exactly one call, a line break
other than "\\n" or "\\r\\n" (:data:`OTHER_LINE_BREAKS`: Python's ``splitlines`` would split there, but a
step is never two lines apart from the next by a character the answer's other grammars refuse).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from r3.instructions import semantic
from r3.instructions.language_table import ParseError
from r3.instructions.semantic import ActionError, ActionType, SemanticAction

#: The most steps one plan may hold: five goal objects moved with pick, place and home each, then done(),
#: with room for one more move (clutter, a detour).
MAX_PLAN_STEPS = 19
#: Longer texts are refused before any pattern sees them (every step at the semantic grammar's limit,
#: numbered).
MAX_PLAN_CHARS = MAX_PLAN_STEPS * (semantic.MAX_ACTION_CHARS + 5)

#: What ``str.splitlines`` takes for a line break besides "\n" and "\r\n": refused anywhere in a plan.
OTHER_LINE_BREAKS = "\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"

_STEP_RE = re.compile(r"[ \t]*(?P<number>[0-9]{1,3})[ \t]*[.)][ \t]*(?P<call>.*)", re.ASCII)


@dataclass(frozen=True)
class Plan:
    """A plan: one to :data:`MAX_PLAN_STEPS` semantic actions, ``done()`` at most once and last."""

    steps: tuple[SemanticAction, ...]

    def __post_init__(self):
        object.__setattr__(self, "steps", tuple(self.steps))
        if not 1 <= len(self.steps) <= MAX_PLAN_STEPS:
            raise ValueError(f"a plan holds 1-{MAX_PLAN_STEPS} steps, got {len(self.steps)}")
        if any(s.type is ActionType.DONE for s in self.steps[:-1]):
            raise ValueError("done() may only be a plan's last step")


class PlanErrorKind(str, enum.Enum):
    NOT_TEXT = "not_text"  # not a str
    EMPTY = "empty_plan"  # nothing but whitespace
    TOO_LONG = "too_long"  # longer than MAX_PLAN_CHARS
    NOT_A_STEP = "not_a_step"  # a line before or between the steps that is not a numbered step
    TRAILING_TEXT = "trailing_text"  # a line after the last step that is not a numbered step
    NUMBERING = "numbering"  # numbers that do not run 1, 2, 3, ...
    TOO_MANY_STEPS = "too_many_steps"  # more than MAX_PLAN_STEPS steps
    BAD_STEP = "bad_step"  # a step that is not exactly one semantic action call
    STEP_AFTER_DONE = "step_after_done"  # done() before the last step
    LINE_BREAK = "line_break"  # a line break other than "\n" or "\r\n" (OTHER_LINE_BREAKS)


@dataclass(frozen=True)
class PlanError(ParseError):
    """Why a text is not one plan: ``kind`` for counting, ``reason`` for people (with the step), and
    ``step``, the 1-based step it is about (0: the plan as a whole)."""

    kind: PlanErrorKind = PlanErrorKind.NOT_A_STEP
    step: int = 0


def _numbered(lines: list[str]) -> list[tuple[int, re.Match | None, str]]:
    """(line index, step match or None, line) of every non-blank line."""
    return [(i, _STEP_RE.fullmatch(ln), ln) for i, ln in enumerate(lines) if ln.strip()]


def parse(text) -> Plan | PlanError:
    """Parse one plan; failures are returned as :class:`PlanError`, never raised.

    >>> parse("1. pick(soup can, [412, 530])\\n2) place(soup can, [655, 380])").steps[1].type.value
    'place'
    >>> e = parse("1. home()\\n3. done()")
    >>> e.kind.value, e.step
    ('numbering', 2)
    """
    if not isinstance(text, str):
        return PlanError(
            repr(text)[:200], f"expected a str, got {type(text).__name__}", PlanErrorKind.NOT_TEXT
        )
    s = text.strip()
    if not s:
        return PlanError(text, "no plan: no numbered step", PlanErrorKind.EMPTY)
    if len(s) > MAX_PLAN_CHARS:
        return PlanError(
            s[:200], f"{len(s)} characters long (at most {MAX_PLAN_CHARS})", PlanErrorKind.TOO_LONG
        )
    s = s.replace("\r\n", "\n")
    odd = next((c for c in s if c in OTHER_LINE_BREAKS), None)
    if odd is not None:
        why = f"the line break {odd!r}: steps are separated by newlines only"
        return PlanError(s[:200], why, PlanErrorKind.LINE_BREAK)
    lines = _numbered(s.split("\n"))
    last_step = max((k for k, (_, m, _) in enumerate(lines) if m), default=-1)
    steps: list[SemanticAction] = []
    for k, (_, match, line) in enumerate(lines):
        n = len(steps) + 1
        if match is None:
            if k > last_step >= 0:
                return PlanError(
                    s[:200],
                    f"text after step {n - 1}: {line.strip()[:40]!r}; a plan holds only numbered steps",
                    PlanErrorKind.TRAILING_TEXT,
                    n - 1,
                )
            return PlanError(
                s[:200],
                f"where step {n} should be: {line.strip()[:40]!r}, not a numbered step such as '{n}. home()'",
                PlanErrorKind.NOT_A_STEP,
                n,
            )
        if int(match["number"]) != n:
            return PlanError(s[:200], f"step {n} is numbered {match['number']}", PlanErrorKind.NUMBERING, n)
        if n > MAX_PLAN_STEPS:
            return PlanError(
                s[:200], f"step {n}: more than {MAX_PLAN_STEPS} steps", PlanErrorKind.TOO_MANY_STEPS, n
            )
        if steps and steps[-1].type is ActionType.DONE:
            return PlanError(
                s[:200], f"step {n} follows done(); done() ends the plan", PlanErrorKind.STEP_AFTER_DONE, n
            )
        action = semantic.parse(match["call"])
        if isinstance(action, ActionError):
            return PlanError(
                s[:200], f"step {n}: {action.kind.value}: {action.reason}", PlanErrorKind.BAD_STEP, n
            )
        steps.append(action)
    if not steps:
        return PlanError(s[:200], "no plan: no numbered step", PlanErrorKind.EMPTY)
    return Plan(tuple(steps))


def numbered_step(line: str) -> tuple[int, str] | None:
    """(number, call text) of a line written as a numbered step, else None.

    >>> numbered_step(" 2) home()"), numbered_step("home()")
    ((2, 'home()'), None)
    """
    match = _STEP_RE.fullmatch(line)
    return (int(match["number"]), match["call"]) if match else None


def format_instruction(plan: Plan) -> str:
    """The canonical text: "1. <call>" lines, each call in the semantic grammar's canonical form."""
    return "\n".join(f"{i}. {semantic.format_instruction(a)}" for i, a in enumerate(plan.steps, 1))


def step_texts(plan_text: str) -> list[str]:
    """The calls of a canonical plan text, in order (the numbering dropped).

    >>> step_texts("1. home()\\n2. done()")
    ['home()', 'done()']
    """
    return [m["call"] for m in map(_STEP_RE.fullmatch, plan_text.splitlines()) if m]


def action_name(action: SemanticAction) -> str:
    """A step as its action's name, without the point: what a plan's sequence reward compares (a point
    is a pixel choice, not a different action).

    >>> action_name(semantic.parse("pick(soup can, [412, 530])"))
    'pick(soup can)'
    """
    return f"{action.type.value}({action.label})"


#: How the line begins that tells the model, at its next step, what came of its plan (the result lines of
#: the steps carried out follow it).
PLAN_RESULT_HEADER = "Plan result:"


def split_plan_result(history_text: str) -> tuple[str, str]:
    """A previous step as the history shows it, split into the plan (or answer) and what came of it (from
    the :data:`PLAN_RESULT_HEADER` line to the end; "" when there is none, as for a refused answer).

    >>> split_plan_result("1. done()\\nPlan result: carried out to the end.\\nStep 1 done(): Result: ok.")
    ('1. done()', 'Plan result: carried out to the end.\\nStep 1 done(): Result: ok.')
    """
    lines = history_text.rstrip().split("\n")
    first = next((i for i, line in enumerate(lines) if line.startswith(PLAN_RESULT_HEADER)), None)
    if first is None:
        return history_text, ""
    return "\n".join(lines[:first]), "\n".join(lines[first:])
