"""Prompts for the high-level reasoner, per suite, and the chat messages built from them.

The structure follows R^3 Appendix D.1 (Language Table) and D.4 (grocery packing): scene image(s),
goal, optional task note, interaction history, the instruction grammar with examples, reasoning
rules and the answer format "Reasoning: ... Instruction: ...". Every sentence here is our own.

Variants (both studied in R^3): ``history`` is what the model sees of the previous step
("response": its whole previous answer, "instruction": only the previous instruction, "none"),
and ``mode`` is "reason" or "instruction_only" (no-think: the answer is just "Instruction: ...").

Messages use the chat format that transformers' ``apply_chat_template`` and (after
:func:`to_openai_content`) OpenAI-compatible servers accept.

A trained checkpoint says how it was prompted in its folder (:data:`PROMPT_FILE`, written by
``r3 train``, read by the transformers backend): :class:`PromptSettings` recasts every input to
that mode and history, so a model is never asked in a way it was not trained on.
"""

from __future__ import annotations

import base64
import io
import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from r3.files import json_value, read_small_text, write_text_atomically
from r3.instructions.plan import MAX_PLAN_STEPS, split_plan_result
from r3.instructions.semantic import split_result
from r3.instructions.tools import split_observation
from r3.reasoning.backends.spec import TEMPERATURES
from r3.safety.goals import check_interface
from r3.suites import get_suite
from r3.tasks.language_table.board import BLOCKS, DIRECTIONS, LOCATIONS

HISTORY_MODES: tuple[str, ...] = ("response", "instruction", "none")
MODES: tuple[str, ...] = ("reason", "instruction_only")
#: Prompt variants: "full" (R^3 Appendix D, what a pretrained VLM reads) and "compact" (goal, previous
#: step and the answer format only, for models trained from scratch that learn the grammar from their
#: rows: ``r3 mini``; Language Table instructions only).
VARIANTS: tuple[str, ...] = ("full", "compact")
#: Header that starts the instruction section of an answer (the parser and budgets use it too).
INSTRUCTION_HEADER = "Instruction:"
REASONING_HEADER = "Reasoning:"
#: How the reasoner acts: one instruction for the low-level policy (R^3), one semantic action call
#: (ERR: pick / place / home / done with an image point), one pose-tool call (ZAP: move_to,
#: set_gripper, change_query, update_todo, done) or one plan of numbered semantic action calls
#: (RoboGPT-R1), each with its answer's header.
ANSWER_HEADERS: dict[str, str] = {
    "instruction": INSTRUCTION_HEADER,
    "semantic": "Action:",
    "tools": "Tool call:",
    "plan": "Plan:",
}
INTERFACES: tuple[str, ...] = tuple(ANSWER_HEADERS)
#: How many calls one answer may hold, where more than one (a plan's steps): the answer stage of a
#: budgeted generation gets its token budget once per call.
ANSWER_CALLS: dict[str, int] = {"plan": MAX_PLAN_STEPS}
#: How each call interface splits a previous step into the answer and what came back (its result
#: line, its whole observation, or its plan's result lines).
CALL_SPLITTERS = {"semantic": split_result, "tools": split_observation, "plan": split_plan_result}
#: What one answer of an interface is called in the prompt's words.
ANSWER_WORDS: dict[str, str] = {
    "instruction": "instruction",
    "semantic": "action",
    "tools": "tool call",
    "plan": "plan",
}


@dataclass
class ReasonerInput:
    """Everything the reasoner sees at one decision step.

    ``images`` are HxWx3 uint8 RGB arrays: one top-down view for Language Table; for packing the
    base view first, then the wrist views named by ``view_names`` (default: the suite's
    ``r3.suites.Suite.views``). ``history`` left None is the suite's default. ``history_text`` is
    the previous response or previous instruction (per ``history``; ignored for "none"); empty at
    the first step. ``step`` is the decision index (for seeding and logs); ``extra`` carries inputs
    only some backends read (the expert's privileged view); neither enters the prompt. ``interface``
    is how the answer acts (one of :data:`INTERFACES`): it chooses the prompt and the grammar the
    answer is parsed with. ``variant`` is one of :data:`VARIANTS`.
    """

    suite: str
    goal: str
    images: list[np.ndarray]
    note: str = ""
    history_text: str = ""
    history: str | None = None
    mode: str = "reason"
    view_names: tuple[str, ...] | None = None
    step: int = 0
    extra: dict = field(default_factory=dict)
    interface: str = "instruction"
    variant: str = "full"

    def __post_init__(self) -> None:
        try:
            suite = get_suite(self.suite)
        except ValueError as exc:
            raise ValueError(f"suite={self.suite!r}: {exc}") from None
        if self.interface not in INTERFACES:
            raise ValueError(f"interface={self.interface!r}: expected one of {INTERFACES}")
        check_interface(self.interface, self.suite)  # a GoalRefused is a ValueError
        if self.history is None:
            self.history = suite.default_history
        if self.history not in HISTORY_MODES:
            raise ValueError(f"history={self.history!r}: expected one of {HISTORY_MODES}")
        if self.mode not in MODES:
            raise ValueError(f"mode={self.mode!r}: expected one of {MODES}")
        _check_variant(self.variant, self.suite, self.interface)
        if not self.images:
            raise ValueError("images: at least one image is required")
        for i, image in enumerate(self.images):
            a = np.asarray(image)
            if a.ndim != 3 or a.shape[2] != 3 or a.dtype != np.uint8:
                raise ValueError(f"images[{i}]: expected HxWx3 uint8, got shape {a.shape} dtype {a.dtype}")
        if suite.views is None and len(self.images) != 1:
            raise ValueError(f"images: {suite.name} takes one top-down image, got {len(self.images)}")
        if self.view_names is None and suite.views is not None:
            if len(self.images) not in suite.views:
                raise ValueError(
                    f"images: {suite.name} takes {min(suite.views)}-{max(suite.views)} views without "
                    f"view_names, got {len(self.images)}"
                )
            self.view_names = suite.views[len(self.images)]
        if self.view_names is not None and len(self.view_names) != len(self.images):
            raise ValueError(f"view_names: {len(self.view_names)} names for {len(self.images)} images")


#: The file in a model folder that says how the model was trained to be prompted.
PROMPT_FILE = "r3_prompt.json"


def _check_variant(variant: str, suite: str | None = None, interface: str = "instruction") -> None:
    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r}: expected one of {VARIANTS}")
    compact = suite is None or get_suite(suite).compact_prompt
    if variant == "compact" and (not compact or interface != "instruction"):
        raise ValueError(f"variant 'compact' prompts Language Table instructions, not {suite} {interface}")


def previous_instruction_text(response: str, suite: str, interface: str = "instruction") -> str:
    """The instruction (or action) of a previous answer ("Reasoning: ... Instruction: ..." or
    "Instruction: ..."), in the grammar's canonical phrasing; "" when it has none that parses."""
    from r3.reasoning.parsing import ParsedResponse, parse_response

    parsed = parse_response(response.strip(), suite, mode="instruction_only", interface=interface)
    return parsed.instruction_text if isinstance(parsed, ParsedResponse) else ""


def temperature_problem(value) -> str | None:
    """Why ``value`` is no sampling temperature (a finite number in :data:`TEMPERATURES`), or None."""
    low, high = TEMPERATURES
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"expected a number, got {type(value).__name__}"
    try:
        if math.isfinite(value) and low <= value <= high:
            return None
    except OverflowError:  # an int too large for a float
        pass
    return f"must be a finite number in [{low:g}, {high:g}] (0 = greedy)"


@dataclass(frozen=True)
class PromptSettings:
    """How a model was trained to be prompted: the answer ``mode``, what it sees of the previous step
    (``history``), whether the chat template's thinking was on, the prompt ``variant`` and whether
    its instruction is decoded under the grammar constraint (``constrained``,
    :mod:`r3.reasoning.constrained`) and at which sampling ``temperature`` (None: the backend's
    default); the last two are the transformers backend's defaults for the folder."""

    mode: str
    history: str
    thinking: bool = False
    variant: str = "full"
    constrained: bool = False
    temperature: float | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode={self.mode!r}: expected one of {MODES}")
        if self.history not in HISTORY_MODES:
            raise ValueError(f"history={self.history!r}: expected one of {HISTORY_MODES}")
        _check_variant(self.variant)
        for name in ("thinking", "constrained"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r}: expected true or false")  # noqa: TRY004
        if self.temperature is not None:
            if problem := temperature_problem(self.temperature):
                raise ValueError(f"temperature={self.temperature!r}: {problem}")
            object.__setattr__(self, "temperature", float(self.temperature))  # transformers needs a float

    def apply(self, inp: ReasonerInput) -> ReasonerInput:
        """``inp`` in this model's mode, its previous step recast into this model's history kind.

        An instruction-only model's own previous answer is its instruction line, so a previous
        response is shown as "Instruction: ..."; a response reduces to its instruction for a model
        trained on instructions ("" when it has none); a semantic action's result line (a tool call's
        observation) stays; history
        "none" (nothing shown, as at a first step) is an empty history of any kind. A previous
        instruction cannot be turned back into the previous response (nor the refusal notes around
        it): ValueError, naming the fix.
        """
        given, wanted = inp.history, self.history
        if given == "instruction" and wanted == "response":
            raise ValueError(
                f"this model was trained with history={wanted!r} but is given history={given!r}, which "
                f"cannot be recast: run it with history {wanted!r}"
            )
        text = inp.history_text
        if "none" in (given, wanted):
            text = ""
        elif given == "response" and (wanted == "instruction" or self.mode == "instruction_only"):
            split = CALL_SPLITTERS.get(inp.interface)
            answer, result = split(text) if split else (text, "")
            instruction = previous_instruction_text(answer, inp.suite, inp.interface)
            if wanted == "instruction":
                text = instruction
            elif instruction:
                text = f"{ANSWER_HEADERS[inp.interface]} {instruction}"
            text = f"{text}\n{result}".strip() if result else text
        return replace(inp, mode=self.mode, history=wanted, history_text=text, variant=self.variant)

    def save(self, model_dir: str | Path) -> Path:
        path = Path(model_dir) / PROMPT_FILE
        write_text_atomically(path, json.dumps(asdict(self)))  # a checkpoint's last file: whole or none
        return path

    @classmethod
    def load(cls, model_dir: str | Path) -> PromptSettings | None:
        """The settings a model folder declares; None when it has no :data:`PROMPT_FILE`.

        Raises ValueError naming the file when it is not valid settings, or is there but no regular
        file (a folder, a FIFO, a broken link): the model would be prompted as an untrained one.
        """
        path = Path(model_dir) / PROMPT_FILE
        if not path.exists() and not path.is_symlink():
            return None

        try:
            return cls(**json_value(read_small_text(path)))
        except OSError as exc:
            raise ValueError(f"{path}: not readable ({exc.strerror or exc})") from None
        except (ValueError, TypeError) as exc:  # no JSON, no object, an unknown key, a bad value
            raise ValueError(f"{path}: not valid prompt settings ({exc})") from None


# --- Language Table ---------------------------------------------------------------------------

#: One example per instruction type, in the canonical phrasing of our grammar.
LANGUAGE_TABLE_EXAMPLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("move <block> to <absolute location>", ("move the blue moon to the bottom right corner",)),
    (
        "move <block> to the <side> side of <other block>",
        ("move the red moon to the right side of the green cube",),
    ),
    ("push <block> into <other block>", ("push the yellow star into the blue cube",)),
    ("move <block> <direction>", ("move the green star down and left", "move the red pentagon up slightly")),
    ("separate <block> from <other block>", ("separate the blue cube from the yellow pentagon",)),
    ("touch <block>", ("touch the red moon",)),
    ("move your arm to <absolute location>", ("move your arm to the top center",)),
)


def language_table_text(inp: ReasonerInput) -> str:
    """The prompt text of a Language Table instruction step (R^3 Appendix D.1; the suite's prompt)."""
    reason = inp.mode == "reason"
    given = ["the current top-down image of the board", "the long-horizon goal"]
    if inp.history == "response":
        given.append("your own answer from the previous step")
    elif inp.history == "instruction":
        given.append("the instruction you gave at the previous step")
    parts = [
        "A robot pushes coloured blocks around a board in a simulator, working towards a "
        "long-horizon arrangement. Its arm ends in a grey cylindrical pusher that slides over the "
        "board. The robot can only carry out short instructions, one at a time. "
        + (
            "Study the current scene, reason honestly about what you can actually see, and finish "
            "with exactly one short instruction for the robot."
            if reason
            else "Study the current scene and give exactly one short instruction for the robot."
        ),
        "You receive:\n" + "\n".join(f"{i}. {g}" for i, g in enumerate(given, 1)),
        f"## Goal\n{inp.goal.strip()}" + (f"\nNote: {inp.note.strip()}" if inp.note.strip() else ""),
    ]
    parts += _history_section(inp)
    lines = [
        "## Instructions the robot can follow",
        "The robot understands these seven kinds of instruction and nothing else:",
    ]
    for form, examples in LANGUAGE_TABLE_EXAMPLES:
        lines.append(f"- {form}, for example " + " or ".join(f'"{e}"' for e in examples))
    lines += [
        "Blocks: " + ", ".join(BLOCKS) + ".",
        "Absolute locations: " + ", ".join(LOCATIONS) + ".",
        "Directions: " + ", ".join(DIRECTIONS) + "; sides: up, down, left, right.",
        "Notes:",
        "- The examples only show the wording; they say nothing about the current scene.",
        '- Add "slightly" or "a bit" when a smaller push is wanted.',
        (
            '- Always name a block by colour and shape, such as "the green star"; '
            '"the red block" or "the cube" could mean more than one block.'
        ),
    ]
    parts.append("\n".join(lines))
    if reason:
        parts.append(_reasoning_rules(image_word="image", history=inp.history))
    parts.append(_answer_format(reason))
    return "\n\n".join(parts)


def _compact_text(inp: ReasonerInput) -> str:
    """The compact Language Table prompt: the goal, the previous step and the answer format, nothing
    the model must learn from its training rows anyway (the grammar, the rules)."""
    reason = inp.mode == "reason"
    parts = [f"## Goal\n{inp.goal.strip()}", *_history_section(inp)]
    parts.append(
        f"{REASONING_HEADER} ...\n{INSTRUCTION_HEADER} ..." if reason else f"{INSTRUCTION_HEADER} ..."
    )
    return "\n".join(parts)


# --- Grocery packing --------------------------------------------------------------------------


def _packing_vocabulary() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Items and tray sizes, from the packing grammar so the prompt and the parser never disagree."""
    from r3.instructions import packing

    return tuple(packing.ITEMS), tuple(packing.TRAYS)


def _packing_opening(
    inp: ReasonerInput, intro: str, previous_response: str, previous_answer: str
) -> list[str]:
    """The sections every packing prompt opens with: the task, what the model receives (its previous
    step described as the interface words it), the goal and the history."""
    views = "\n".join(f"   - image {i}: the {name} camera view" for i, name in enumerate(inp.view_names, 1))
    given = [
        f"{len(inp.images)} camera image(s) taken just now, in this order:\n{views}",
        "the long-horizon goal",
    ]
    if inp.history == "response":
        given.append(previous_response)
    elif inp.history == "instruction":
        given.append(previous_answer)
    parts = [
        intro,
        "You receive:\n" + "\n".join(f"{i}. {g}" for i, g in enumerate(given, 1)),
        f"## Goal\n{inp.goal.strip()}" + (f"\nNote: {inp.note.strip()}" if inp.note.strip() else ""),
    ]
    return parts + _history_section(inp)


def packing_text(inp: ReasonerInput) -> str:
    """The prompt text of a packing instruction step (R^3 Appendix D.4; the suite's prompt)."""
    reason = inp.mode == "reason"
    items, trays = _packing_vocabulary()
    parts = _packing_opening(
        inp,
        "A robot is packing groceries into trays, a task that takes many steps. The robot can only "
        "carry out short instructions, one at a time. "
        + (
            "Study the current images, reason honestly about what you can actually see, and finish "
            "with exactly one short instruction for the robot."
            if reason
            else "Study the current images and give exactly one short instruction for the robot."
        ),
        previous_response="your own answer from the previous step",
        previous_answer="the instruction you gave at the previous step",
    )
    parts.append(
        "\n".join(
            [
                "## Instructions the robot can follow",
                "Use exactly one of these three forms:",
                (
                    "- Pack the <item> into the <size> tray. For example: "
                    '"Pack the soup can into the small tray."'
                ),
                (
                    "- Remove the <item> from the <size> tray. For example: "
                    '"Remove the cracker box from the large tray."'
                ),
                (
                    "- Transfer the <item> from the <size> tray to the <size> tray. For example: "
                    '"Transfer the foam brick from the small tray to the medium tray."'
                ),
                "<item> is one of: " + ", ".join(items) + ".",
                "<size> is one of: " + ", ".join(trays) + ".",
            ]
        )
    )
    if reason:
        parts.append(_reasoning_rules(image_word="images", history=inp.history))
    parts.append(_answer_format(reason))
    return "\n\n".join(parts)


# --- Grocery packing with semantic actions (ERR) ----------------------------------------------


def _semantic_text(inp: ReasonerInput) -> str:
    """The packing prompt for the semantic interface: one ERR action call per answer, with a point in
    the base view; the history carries what came of the previous action."""
    reason = inp.mode == "reason"
    parts = _packing_opening(
        inp,
        "You control a robot arm that packs groceries into trays, a task of many steps. You act through "
        "four semantic actions; each answer gives exactly one, the robot carries it out, and the next step "
        "tells you whether it worked. "
        + (
            "Study the current images, reason honestly about what you can actually see, and finish with "
            "exactly one action."
            if reason
            else "Study the current images and give exactly one action."
        ),
        previous_response="your own answer from the previous step, and what came of its action",
        previous_answer="the action you gave at the previous step, and what came of it",
    )
    parts.append("\n".join(_semantic_actions("Write the action as one of these calls:")))
    if reason:
        parts.append(_reasoning_rules(image_word="images", history=inp.history, act="action"))
    parts.append(_answer_format(reason, ANSWER_HEADERS["semantic"], "action"))
    return "\n\n".join(parts)


def _semantic_actions(lead: str) -> list[str]:
    """The semantic actions, their point convention and notes: the semantic and plan prompts' list."""
    from r3.instructions.semantic import POINT_MAX

    items, _ = _packing_vocabulary()
    return [
        "## Actions the robot can carry out",
        lead,
        (
            "- pick(<item>, [x, y]): grasp <item>; [x, y] is a point on that item. "
            'For example: "pick(soup can, [412, 530])"'
        ),
        (
            "- place(<item>, [x, y]): set down <item>, which the gripper must be holding; [x, y] is "
            "the point on a tray floor or on the table where it goes. "
            'For example: "place(soup can, [655, 380])"'
        ),
        "- home(): move the arm back to its rest pose, out of the camera's way.",
        "- done(): the goal is reached; say it only when it is.",
        (
            "[x, y] is a point in image 1 (the base view): x from its left edge (0) to its right "
            f"edge ({POINT_MAX}), y from its top edge (0) to its bottom edge ({POINT_MAX}); "
            "both whole numbers."
        ),
        "<item> is one of: " + ", ".join(items) + ".",
        "Notes:",
        "- The examples only show the form; their points say nothing about the current scene.",
        (
            "- A point must show the thing the action is about: the item itself for pick, free "
            "tray floor or table for place."
        ),
        (
            "- An action that cannot be carried out reports why (for example no_object_at_point "
            "or gripper_not_empty); look at the new images before you try again."
        ),
    ]


# --- Grocery packing with multi-step plans (RoboGPT-R1) ---------------------------------------


def _plan_text(inp: ReasonerInput) -> str:
    """The packing prompt for the plan interface: one whole plan of semantic actions per answer, carried
    out step by step until a step fails; the history carries what came of each step."""
    reason = inp.mode == "reason"
    parts = _packing_opening(
        inp,
        "You control a robot arm that packs groceries into trays, a task of many steps. Each answer is a "
        "whole plan: a numbered list of semantic actions that the robot carries out in order. It stops at "
        "the first step that fails, and the next step shows you what each step did and where the plan "
        "stopped, so you can plan again from there. "
        + (
            "Study the current images, reason honestly about what you can actually see, and finish with "
            "one plan."
            if reason
            else "Study the current images and give one plan."
        ),
        previous_response="your own answer from the previous step, and what came of each step of its plan",
        previous_answer="the plan you gave at the previous step, and what came of each of its steps",
    )
    parts.append("\n".join(_semantic_actions("Each step is one of these calls:")))
    parts.append(
        "\n".join(
            [
                "## How to write a plan",
                f"- One step a line, numbered 1, 2, 3, ... with at most {MAX_PLAN_STEPS} steps. For example:",
                "  1. pick(soup can, [412, 530])",
                "  2. place(soup can, [655, 380])",
                "  3. home()",
                "- Points of later steps are where things will be once the earlier steps are done.",
                (
                    "- End with done() only when the plan, carried out to the end, reaches the goal; nothing "
                    "may follow done(). A plan that stops short of the goal is fine: you plan again after it."
                ),
                (
                    "- Write nothing but numbered steps after the plan's header; a plan with any other line "
                    "is refused as a whole and nothing moves."
                ),
            ]
        )
    )
    if reason:
        parts.append(_reasoning_rules(image_word="images", history=inp.history, act="plan"))
    parts.append(_answer_format(reason, ANSWER_HEADERS["plan"], "plan"))
    return "\n\n".join(parts)


# --- Grocery packing with pose tools (ZAP) ----------------------------------------------------


def _cell_description() -> list[str]:
    """The packing cell as the tools see it: the frame, the fixed trays, the limits a move_to must keep
    (from the workcell and the executor's declared limits, so the prompt and the validation agree)."""
    from r3.lowlevel.tools import ToolLimits
    from r3.sim.packing import scene
    from r3.tasks.packing.workcell import TRAY_SPECS

    limits = ToolLimits()
    lo, hi = limits.box.low, limits.box.high
    lines = [
        "## The cell",
        (
            "Positions are in metres in the robot's base frame: x points away from the robot, y to its "
            "left, z up from the table top. Perception reports objects in the same frame."
        ),
        "The trays are fixed (floor centre x, y; inner size; floor height; wall top height):",
    ]
    for name, t in TRAY_SPECS.items():
        lines.append(
            f"- {name} tray: centre ({t.centre[0]:.2f}, {t.centre[1]:.2f}), inner {t.inner[0]:.2f} x "
            f"{t.inner[1]:.2f} m, floor at z {t.floor:.3f}, walls up to z {t.top:.3f}"
        )
    lines += [
        (
            f"A move_to must keep the tool centre point within x {lo[0]:g} to {hi[0]:g}, y {lo[1]:g} to "
            f"{hi[1]:g} and z {lo[2]:g} to {hi[2]:g}, with a tilt of at most {limits.max_tilt:g} degrees."
        ),
        f"The jaws open to {scene.MAX_OPENING * 1000:.0f} mm at opening 1.",
    ]
    return lines


def _tools_text(inp: ReasonerInput) -> str:
    """The packing prompt for the tools interface: one ZAP pose-tool call per answer; the history
    carries the observation that came back from the previous call."""
    from r3.instructions.tools import MAX_QUERIES, MAX_TODO_CHARS, MAX_TODO_ITEMS

    reason = inp.mode == "reason"
    items, _ = _packing_vocabulary()
    parts = _packing_opening(
        inp,
        "You control a robot arm with a two-jaw gripper that packs groceries into trays, a task of many "
        "steps. You act through five tools; each answer makes exactly one tool call, the robot carries it "
        "out, and the next step shows you what came back. Nothing moves unless you command it: every "
        "approach, grasp, lift and release is a sequence of your own move_to and set_gripper calls. "
        + (
            "Study the current images and the last observation, reason honestly about what you can "
            "actually see and measure, and finish with exactly one tool call."
            if reason
            else "Study the current images and the last observation and give exactly one tool call."
        ),
        previous_response="your own answer from the previous step, and the observation its call returned",
        previous_answer="the tool call you made at the previous step, and the observation it returned",
    )
    parts.append("\n".join(_cell_description()))
    parts.append(
        "\n".join(
            [
                "## Tools",
                "Write the call with keyword arguments, numbers as plain decimals:",
                (
                    "- move_to(x=<m>, y=<m>, z=<m>, slot_yaw=<deg>, tilt=<deg>, tilt_direction=<deg>): move "
                    "the tool centre point (between the fingertips) in a straight line to this absolute "
                    "position and orientation. Angles are in degrees, counterclockwise from the +x axis. "
                    "slot_yaw is the heading of the slot between the jaws: they close across it, so a held "
                    "item lies along it. tilt leans the tool axis away from pointing straight down (0, the "
                    "default, points down; 90 is horizontal); tilt_direction is the heading the fingertips "
                    "lean towards, given only when tilt is above 0. "
                    "For example: move_to(x=0.45, y=0.1, z=0.2, slot_yaw=90)"
                ),
                (
                    "- set_gripper(opening=<0 to 1>): 0 closes the jaws, 1 opens them fully; jaws that close "
                    "on an item hold it. For example: set_gripper(opening=1)"
                ),
                (
                    f'- change_query(queries=["<name>", ...]): the objects perception looks for (up to '
                    f"{MAX_QUERIES}); every later observation measures them. "
                    'For example: change_query(queries=["soup can"])'
                ),
                (
                    f'- update_todo(items=["<step>", ...]): replace your todo list (up to {MAX_TODO_ITEMS} '
                    f"items of {MAX_TODO_CHARS} characters); every later observation repeats it."
                ),
                "- done(): the goal is reached and the episode ends; call it only when it is.",
                "Objects perception can find: " + ", ".join(items) + ".",
                "## What comes back",
                (
                    "- A result line. A move_to ends reached (at rest within tolerance), short (at rest "
                    "outside tolerance), incomplete (started but did not finish), not attempted (nothing "
                    "moved: the pose breaks the cell's limits or no valid path leads there) or unknown, "
                    "with the cause and the position and orientation errors. A pose outside the limits is "
                    "refused, never replaced by a nearby one."
                ),
                (
                    "- For each queried object, perception's measurement from the base camera: top centre, "
                    "centroid, height, footprint and the heading of its long axis (degrees, as slot_yaw)."
                ),
                "- The measured tool pose in move_to's terms, the jaw opening, your todo list, steps left.",
                "Notes:",
                "- The examples only show the form; their numbers say nothing about the current scene.",
                (
                    "- An answer that is not exactly one valid call is refused with the reason, and nothing "
                    "moves."
                ),
            ]
        )
    )
    if reason:
        parts.append(_reasoning_rules(image_word="images", history=inp.history, act="tool call"))
    parts.append(_answer_format(reason, ANSWER_HEADERS["tools"], "tool call"))
    return "\n\n".join(parts)


# --- Shared sections --------------------------------------------------------------------------


def _history_section(inp: ReasonerInput) -> list[str]:
    if inp.history == "none":
        return []
    what = ANSWER_WORDS[inp.interface]
    title = "## Your previous answer" if inp.history == "response" else f"## Your previous {what}"
    body = inp.history_text.strip() or "None: this is the first step."
    return [f"{title}\n{body}"]


def _reasoning_rules(image_word: str, history: str, act: str = "instruction") -> str:
    rules = [
        "## How to reason",
        "Rules:",
        (
            f"- Rely only on what the {image_word} show{'s' if image_word == 'image' else ''} "
            "or what is written above."
        ),
        (
            "- Never make up object positions, contacts, finished subgoals or outcomes. When part of the "
            "scene is unclear or hidden, say so and pick the most sensible action anyway."
        ),
    ]
    if history != "none":
        rules.append(
            "- The previous step describes an earlier moment and may be wrong, stale or a poor plan. "
            f"When it disagrees with the current {image_word}, believe the {image_word}; "
            "do not just repeat it."
        )
    rules += [
        "Style:",
        "- Think in short, explicit steps.",
        f"- Let the {act} follow from the reasoning: describe and weigh the scene first, decide last.",
        (
            '- Do not announce a choice ("I will ...", "the best move is ...") '
            "without the reasons that lead to it."
        ),
    ]
    return "\n".join(rules)


def _answer_format(reason: bool, header: str = INSTRUCTION_HEADER, what: str = "instruction") -> str:
    if reason:
        return (
            "## Answer format\n"
            f"{REASONING_HEADER} <your reasoning>\n{header} <one {what}>\n"
            f"Write nothing after the {what}."
        )
    return f"## Answer format\n{header} <one {what}>\nAnswer with this single line and nothing else."


def prompt_text(inp: ReasonerInput) -> str:
    """The text part of the prompt for ``inp`` (images are separate chat content items)."""
    if inp.variant == "compact":
        return _compact_text(inp)
    interface_builders = {"semantic": _semantic_text, "tools": _tools_text, "plan": _plan_text}
    return (interface_builders.get(inp.interface) or get_suite(inp.suite).hook("prompt"))(inp)


def build_messages(inp: ReasonerInput) -> list[dict]:
    """Chat messages for ``inp``: one user turn, images first (in view order), then the text.

    Images are PIL images under the "image" key, which transformers' chat templates and
    processors accept; :func:`to_openai_content` rewrites them as data URLs for HTTP servers.
    """
    from PIL import Image

    content = [{"type": "image", "image": Image.fromarray(np.asarray(a))} for a in inp.images]
    content.append({"type": "text", "text": prompt_text(inp)})
    return [{"role": "user", "content": content}]


def image_data_url(image) -> str:
    """A PIL image or HxWx3 uint8 array as a base64 PNG data URL (lossless, so tests are exact)."""
    from PIL import Image

    if not isinstance(image, Image.Image):
        image = Image.fromarray(np.asarray(image))
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def to_openai_content(messages: list[dict]) -> list[dict]:
    """The same messages in the OpenAI chat-completions format (images as ``image_url`` items)."""
    out = []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            content = [
                {"type": "image_url", "image_url": {"url": image_data_url(c["image"])}}
                if c["type"] == "image"
                else c
                for c in content
            ]
        out.append({"role": message["role"], "content": content})
    return out
