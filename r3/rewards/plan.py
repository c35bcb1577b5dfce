"""Multi-step plan rewards after RoboGPT-R1 (section 3.4): format reward, LCS reward, their mix.

Two plan texts are scored with the same weights: RoboGPT-R1's own JSON plan (below), and the packing
cell's plan interface answer, "Reasoning: ... Plan:" with numbered semantic action calls
(:mod:`r3.instructions.plan`; :func:`packing_plan_format_terms`).

JSON plan text format
---------------------
A plan is one JSON object, optionally wrapped in a single Markdown code fence (```json ... ```),
with exactly these four sections, in the order perception -> reasoning -> plan -> actions::

    {
      "visual_state_description": "<non-empty string: what the scene shows>",
      "reasoning_and_reflection": "<non-empty string: why this plan>",
      "language_plan": "<non-empty string: the plan in words>",
      "executable_plan": [
        {"action_id": <int>, "action_name": "<non-empty string>"},
        ...
      ]
    }

``action_id`` indexes an action dictionary given per sample (ids may change between tasks, so the
model cannot memorise them); ``action_name`` must equal the dictionary's name for that id after
lower-casing and collapsing whitespace. Booleans are not integers here, although Python says so.

Like the packing plan rewards, these read at most :data:`MAX_JSON_PLAN_CHARS` characters (a longer
text is no plan: every term 0) and at most :data:`MAX_JSON_PLAN_STEPS` steps (the steps after them are
not well formed, and their actions are not in :func:`plan_actions`), so a plan that repeats every action
a million times gains nothing. A text that JSON cannot read (nesting too deep, an integer of thousands
of digits) is no plan either, nor is one that gives a key twice in an object (two ``executable_plan``
lists, a step with two names): json would score the last alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from r3.files import repeated_key
from r3.instructions.plan import MAX_PLAN_CHARS, MAX_PLAN_STEPS, PlanError, action_name, numbered_step
from r3.instructions.plan import parse as parse_packing_plan
from r3.instructions.semantic import ActionError, ActionErrorKind, ActionType, SemanticAction
from r3.instructions.semantic import parse as parse_action
from r3.reasoning.parsing import parse_response
from r3.rewards.terms import lcs_reward, normalise_action

#: Section name -> expected JSON type (the section reward checks presence and type).
PLAN_SECTIONS: dict[str, type] = {
    "visual_state_description": str,
    "reasoning_and_reflection": str,
    "language_plan": str,
    "executable_plan": list,
}
#: Weights of the three format checks (RoboGPT-R1 eq. 4).
FORMAT_WEIGHTS: dict[str, float] = {"section": 0.3, "type": 0.3, "validity": 0.4}
#: Weights of format and LCS in the overall plan reward (RoboGPT-R1 eq. 10).
PLAN_WEIGHTS: dict[str, float] = {"format": 0.2, "lcs": 0.8}

#: The most steps a JSON plan may hold; the steps after them count as malformed. RoboGPT-R1's
#: EmbodiedBench plans are a few dozen steps at most.
MAX_JSON_PLAN_STEPS = 64
#: Longer plan texts are not read at all (every term 0): the longest plan, pretty-printed, many times.
MAX_JSON_PLAN_CHARS = 100_000

_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n\s*```$", re.DOTALL)


def parse_plan(plan: str) -> dict | None:
    """The plan's JSON object, or None when the text is not one (see the module docstring); never
    raises."""
    if not isinstance(plan, str) or len(plan) > MAX_JSON_PLAN_CHARS:
        return None
    text = plan.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        obj = json.loads(text, object_pairs_hook=_one_value_per_key)
    except (ValueError, RecursionError):  # not JSON, an integer of thousands of digits, deep nesting
        return None
    return obj if isinstance(obj, dict) else None


def _one_value_per_key(pairs: list[tuple[str, object]]) -> dict:
    """An object of the plan; a key given twice (a second ``executable_plan``, a step's second
    ``action_name``) makes the text no plan: json would score its last value alone."""
    if (twice := repeated_key(pairs)) is not None:
        raise ValueError(f"the key {twice[:40]!r} is given twice")
    return dict(pairs)


def _typed(value, expected: type) -> bool:
    if expected is str:
        return isinstance(value, str) and bool(value.strip())
    return isinstance(value, expected)


def _step_well_formed(step) -> bool:
    return (
        isinstance(step, dict)
        and isinstance(step.get("action_id"), int)
        and not isinstance(step.get("action_id"), bool)
        and _typed(step.get("action_name"), str)
    )


def _dictionary(action_dictionary: Mapping) -> dict[int, str]:
    """Accept str keys too: a dictionary that went through JSON (a dataset column) has them; a key
    that is no integer id raises ValueError naming it."""
    known = {}
    for k, v in action_dictionary.items():
        if isinstance(k, bool) or not (
            isinstance(k, int) or (isinstance(k, str) and re.fullmatch(r"[-+]?[0-9]{1,18}", k.strip()))
        ):
            raise ValueError(f"action_dictionary key {str(k)[:40]!r} is not an integer action id")
        known[int(k)] = normalise_action(v)
    return known


def plan_format_terms(plan: str, action_dictionary: Mapping) -> dict[str, float]:
    """The three unscaled format checks of a plan: ``section``, ``type`` and ``validity``.

    ``validity`` averages over every step, so an invented id counts as invalid; RoboGPT-R1 averages
    only over steps whose id is in the dictionary, which lets an invented id cost nothing.

    >>> d = {1: "pick up", 2: "put down"}
    >>> plan = ('{"visual_state_description": "a cup", "reasoning_and_reflection": "grab it", '
    ...         '"language_plan": "pick, then place", "executable_plan": '
    ...         '[{"action_id": 1, "action_name": "pick up"}, {"action_id": 9, "action_name": "fly"}]}')
    >>> plan_format_terms(plan, d)
    {'section': 1.0, 'type': 1.0, 'validity': 0.5}
    """
    obj = parse_plan(plan)
    if obj is None:
        return {"section": 0.0, "type": 0.0, "validity": 0.0}
    section = sum(_typed(obj.get(k), t) for k, t in PLAN_SECTIONS.items()) / len(PLAN_SECTIONS)
    steps = obj.get("executable_plan")
    if not isinstance(steps, list) or not steps:
        return {"section": section, "type": 0.0, "validity": 0.0}
    known = _dictionary(action_dictionary)
    well_formed = [k < MAX_JSON_PLAN_STEPS and _step_well_formed(s) for k, s in enumerate(steps)]
    valid = [
        ok and known.get(s["action_id"]) == normalise_action(s["action_name"])
        for ok, s in zip(well_formed, steps)
    ]
    return {
        "section": section,
        "type": sum(well_formed) / len(steps),
        "validity": sum(valid) / len(steps),
    }


def plan_format_reward(plan: str, action_dictionary: Mapping) -> float:
    """``0.3 * section + 0.3 * type + 0.4 * validity`` (RoboGPT-R1 eq. 4); 0.0 for non-JSON text.

    >>> plan_format_reward("first I pick, then I place", {1: "pick up"})
    0.0
    """
    return weighted_format(plan_format_terms(plan, action_dictionary))


def weighted_format(terms: Mapping[str, float]) -> float:
    """``0.3 * section + 0.3 * type + 0.4 * validity`` (RoboGPT-R1 eq. 4), for either plan text."""
    return sum(FORMAT_WEIGHTS[k] * terms[k] for k in FORMAT_WEIGHTS)


def plan_actions(plan: str) -> list[str]:
    """Action names of the plan's executable steps, in order; [] when there is no readable plan."""
    obj = parse_plan(plan)
    steps = obj.get("executable_plan") if obj else None
    if not isinstance(steps, list):
        return []
    return [
        s["action_name"]
        for s in steps[:MAX_JSON_PLAN_STEPS]
        if isinstance(s, dict) and _typed(s.get("action_name"), str)
    ]


def plan_reward(plan: str, reference_actions: Sequence[str], action_dictionary: Mapping) -> float:
    """``0.2 * format + 0.8 * LCS`` (RoboGPT-R1 eq. 10); the LCS runs over action names.

    >>> plan = ('{"visual_state_description": "a cup", "reasoning_and_reflection": "grab it", '
    ...         '"language_plan": "pick it up", '
    ...         '"executable_plan": [{"action_id": 1, "action_name": "pick up"}]}')
    >>> round(plan_reward(plan, ["pick up", "put down"], {1: "pick up", 2: "put down"}), 6)
    0.6
    """
    fmt = plan_format_reward(plan, action_dictionary)
    lcs = lcs_reward(plan_actions(plan), reference_actions)
    return PLAN_WEIGHTS["format"] * fmt + PLAN_WEIGHTS["lcs"] * lcs


# --- The packing cell's plan answers -------------------------------------------------------------
#: The sections of a plan answer (RoboGPT-R1's four fields, as the plan interface's prompt asks for
#: them: the scene, reasoning and plan in words are the reasoning; the executable plan is the plan).
PACKING_PLAN_SECTIONS = ("reasoning", "plan")
#: Completions longer than this are not read at all (every term 0): ten times the longest plan.
MAX_SCORED_CHARS = 10 * MAX_PLAN_CHARS


def packing_action_dictionary(items: Sequence[str]) -> list[str]:
    """The actions a scene admits, by name: pick and place of each of its ``items``, home and done
    (the per-sample dictionary of the validity term; the scene's items change from sample to sample).

    >>> packing_action_dictionary(["soup can"])
    ['pick(soup can)', 'place(soup can)', 'home()', 'done()']
    """
    names = [f"{kind}({item})" for item in items for kind in ("pick", "place")]
    return names + ["home()", "done()"]


def packing_plan_actions(plan_text: str) -> list[str]:
    """The action names (:func:`r3.instructions.plan.action_name`) of a canonical plan text, in order:
    what a reference plan (the packing expert's for the same scene) is stored as."""
    plan = parse_packing_plan(plan_text)
    if isinstance(plan, PlanError):
        raise ValueError(f"not a plan: {plan.reason}")  # noqa: TRY004 - a bad reference text, refused as such
    return [action_name(a) for a in plan.steps]


def _plan_section(answer: str) -> tuple[bool, str]:
    """(reasoning present, the plan section's text) of an answer, read as the response parser reads it
    (the section is "" when there is none, or more than one)."""
    parsed = parse_response(answer, "packing", mode="reason", interface="plan")
    return bool(parsed.reasoning.strip()), parsed.instruction_text


def _steps(section: str) -> list[tuple[bool, SemanticAction | None]]:
    """Per non-blank line of a plan section: whether it is a step the plan grammar could take, holding
    one well-formed call (numbered one more than the numbered lines before it, within
    :data:`~r3.instructions.plan.MAX_PLAN_STEPS`, not after a done(); its label possibly outside the
    scene), and the action when it parses. A line of prose costs itself only; a second plan restarting
    at 1, or steps past the limit, cost all their steps. A section the plan grammar refuses as a whole
    (longer than it reads, a line break other than a newline) has no steps: line by line, each could
    read as a valid step (a plan padded with blank lines, a step ending in U+001C before its newline)."""
    plan = parse_packing_plan(section)
    if isinstance(plan, PlanError) and plan.step == 0:
        return []
    out, numbered, ended = [], 0, False
    lines = section.replace("\r\n", "\n").split("\n")  # as the plan grammar reads it: no other break
    for line in (ln for ln in lines if ln.strip()):
        step = numbered_step(line)
        numbered += step is not None
        in_place = step is not None and step[0] == numbered <= MAX_PLAN_STEPS and not ended
        action = parse_action(step[1]) if in_place else None
        well_formed = isinstance(action, SemanticAction) or (
            isinstance(action, ActionError) and action.kind is ActionErrorKind.UNKNOWN_LABEL
        )
        action = action if isinstance(action, SemanticAction) else None
        ended = ended or (action is not None and action.type is ActionType.DONE)
        out.append((well_formed, action))
    return out


def packing_plan_format_terms(answer: str, action_dictionary: Sequence[str]) -> dict[str, float]:
    """The three unscaled format checks of a plan answer (RoboGPT-R1 eq. 4-7, on our answer format).

    ``section``: the share of :data:`PACKING_PLAN_SECTIONS` present and non-empty. ``type``: the share
    of the plan section's lines that are a step numbered by its position holding one call of the
    semantic grammar's form. ``validity``: the share of those lines whose action (its name without the
    point) is in ``action_dictionary`` (:func:`packing_action_dictionary`). A line of prose, a second
    plan, a step after done() count against ``type`` and ``validity``, as RoboGPT-R1's averages over
    every step do. A plan the grammar refuses as a whole (too long, an odd line break) has no step:
    ``type`` and ``validity`` are 0.

    >>> d = packing_action_dictionary(["soup can"])
    >>> answer = "Reasoning: r\\nPlan:\\n1. pick(soup can, [1, 2])\\n2. pick(sugar box, [1, 2])"
    >>> packing_plan_format_terms(answer, d)
    {'section': 1.0, 'type': 1.0, 'validity': 0.5}
    """
    if not isinstance(answer, str) or len(answer) > MAX_SCORED_CHARS:
        return {"section": 0.0, "type": 0.0, "validity": 0.0}
    reasoning, section = _plan_section(answer)
    sections = (reasoning + bool(section.strip())) / len(PACKING_PLAN_SECTIONS)
    steps = _steps(section)
    if not steps:
        return {"section": sections, "type": 0.0, "validity": 0.0}
    known = {normalise_action(n) for n in action_dictionary}
    valid = [a is not None and normalise_action(action_name(a)) in known for _, a in steps]
    return {
        "section": sections,
        "type": sum(ok for ok, _ in steps) / len(steps),
        "validity": sum(valid) / len(steps),
    }


def packing_plan_answer_actions(answer: str) -> list[str]:
    """The action names of the answer's plan section, in order: every line that is a step holding an
    action that parses; [] without a readable plan section."""
    if not isinstance(answer, str) or len(answer) > MAX_SCORED_CHARS:
        return []
    return [action_name(a) for _, a in _steps(_plan_section(answer)[1]) if a is not None]
