"""The pose-tool grammar (ZAP): exactly one tool call per answer, for the single-arm packing cell.

Canonical texts (:func:`format_instruction`)::

    move_to(x=0.412, y=0.2, z=0.12, slot_yaw=90)
    move_to(x=0.5, y=-0.1, z=0.2, slot_yaw=0, tilt=30, tilt_direction=180)
    set_gripper(opening=0.6)
    change_query(queries=["soup can", "sugar box"])
    update_todo(items=["soup can to the small tray", "then the sugar box"])
    done()

``move_to`` gives the absolute tool-centre-point position in metres, in the robot base frame the
object readouts use (a readout's centre can be a target as it is), and the tool's orientation as
three angles in degrees, each counterclockwise from base +x: ``slot_yaw`` is the heading of the jaw
slot (the axis a held item lies along; the jaws close across it), ``tilt`` the angle of the tool axis
from straight down (0 = pointing down, the default), ``tilt_direction`` the heading the fingertips
lean towards. ``tilt_direction`` is required when ``tilt`` > 0 and refused when ``tilt`` is 0, where
it has no meaning (so each pose has one canonical text). ``set_gripper``'s opening is 0 (closed) to 1
(fully open). ``change_query`` sets the names perception looks for; ``update_todo`` replaces the
short plan shown in every later observation (an empty list clears it); ``done`` ends the episode.

The ranges here are the grammar's: what a number may be at all (:data:`ARGUMENTS`). The cell's own
limits (workspace box, tilt range) are checked by the executor (:mod:`r3.lowlevel.tools`), which
refuses a pose outside them with the reason and never clips it.

:func:`parse` never raises: a text that is not exactly one such call gives a :class:`ToolCallError`
whose ``kind`` (:class:`ToolErrorKind`) says what is wrong and ``reason`` says it for people.
Forgiven: the case of tool and argument names, whitespace between tokens, single or double quotes
around texts, the order of keyword arguments. Refused: positional arguments, anything after the
call's closing parenthesis (another call, a remark), numbers that are not plain finite ASCII decimals.
:data:`TOOL_SCHEMAS` states the same tools as JSON schemas (OpenAI function-calling format).
"""

from __future__ import annotations

import enum
import json
import math
import re
from dataclasses import dataclass

from r3.files import repeated_key
from r3.instructions.language_table import ParseError
from r3.instructions.semantic import RESULT_HEADER
from r3.instructions.text import hidden_character

#: Longer texts are refused before any pattern sees them (the response parser's limit for a line).
MAX_CALL_CHARS = 300
#: How many texts a list may hold, and how long each may be (characters).
MAX_QUERIES, MAX_QUERY_CHARS = 6, 40
MAX_TODO_ITEMS, MAX_TODO_CHARS = 5, 50


class Tool(str, enum.Enum):
    MOVE_TO = "move_to"
    SET_GRIPPER = "set_gripper"
    CHANGE_QUERY = "change_query"
    UPDATE_TODO = "update_todo"
    DONE = "done"


@dataclass(frozen=True)
class Argument:
    """One keyword argument: a number in [low, high] or a list of at most ``high`` texts, each at most
    ``chars`` long; ``required`` False: may be left out (see :func:`_tilt_rule` for the tilt pair)."""

    name: str
    kind: str  # "number" or "texts"
    low: float
    high: float
    unit: str
    doc: str
    required: bool = True
    chars: int = 0


_POSITION = (-2.0, 2.0, "m")
_ANGLE = (-360.0, 360.0, "deg")
#: Tool -> its arguments, in canonical order (the parser, the formatter and the schemas read this).
ARGUMENTS: dict[Tool, tuple[Argument, ...]] = {
    Tool.MOVE_TO: (
        Argument("x", "number", *_POSITION, "tool-centre-point x in the base frame"),
        Argument("y", "number", *_POSITION, "tool-centre-point y in the base frame"),
        Argument("z", "number", *_POSITION, "tool-centre-point height above the table"),
        Argument("slot_yaw", "number", *_ANGLE, "heading of the jaw slot, counterclockwise from +x"),
        Argument("tilt", "number", 0.0, 180.0, "deg", "tool axis from straight down", required=False),
        Argument("tilt_direction", "number", *_ANGLE, "heading the fingertips lean towards", required=False),
    ),
    Tool.SET_GRIPPER: (Argument("opening", "number", 0.0, 1.0, "", "0 closed, 1 fully open"),),
    Tool.CHANGE_QUERY: (
        Argument("queries", "texts", 1, MAX_QUERIES, "", "names of objects to find", chars=MAX_QUERY_CHARS),
    ),
    Tool.UPDATE_TODO: (
        Argument("items", "texts", 0, MAX_TODO_ITEMS, "", "the plan, one step each", chars=MAX_TODO_CHARS),
    ),
    Tool.DONE: (),
}


class _Checked:
    """Calls built in code are held to what :func:`parse` returns: numbers become floats, lists
    tuples, and a value outside the declared ranges raises ValueError (see :func:`check_call`)."""

    def __post_init__(self):
        for arg in ARGUMENTS[self.tool]:
            value = getattr(self, arg.name)
            if arg.kind == "number" and type(value) is int:
                object.__setattr__(self, arg.name, float(value))
            elif arg.kind == "texts" and isinstance(value, list):
                object.__setattr__(self, arg.name, tuple(value))
        check_call(self)


@dataclass(frozen=True)
class MoveTo(_Checked):
    x: float
    y: float
    z: float
    slot_yaw: float
    tilt: float = 0.0
    tilt_direction: float | None = None

    tool = Tool.MOVE_TO


@dataclass(frozen=True)
class SetGripper(_Checked):
    opening: float

    tool = Tool.SET_GRIPPER


@dataclass(frozen=True)
class ChangeQuery(_Checked):
    queries: tuple[str, ...]

    tool = Tool.CHANGE_QUERY


@dataclass(frozen=True)
class UpdateTodo(_Checked):
    items: tuple[str, ...]

    tool = Tool.UPDATE_TODO


@dataclass(frozen=True)
class Done(_Checked):
    tool = Tool.DONE


ToolCall = MoveTo | SetGripper | ChangeQuery | UpdateTodo | Done
CALL_TYPES: dict[Tool, type] = {c.tool: c for c in (MoveTo, SetGripper, ChangeQuery, UpdateTodo, Done)}


class ToolErrorKind(str, enum.Enum):
    NOT_TEXT = "not_text"  # not a str
    EMPTY = "empty"  # nothing but whitespace
    TOO_LONG = "too_long"  # longer than MAX_CALL_CHARS
    NOT_A_CALL = "not_a_call"  # not of the form name(arguments)
    UNKNOWN_TOOL = "unknown_tool"  # a call, but not one of the five tools
    SECOND_CALL = "second_call"  # another call after the first one
    TRAILING_TEXT = "trailing_text"  # any other text after the call's closing parenthesis
    BAD_ARGUMENTS = "bad_arguments"  # not name=value pairs (a positional argument, an empty one)
    UNKNOWN_ARGUMENT = "unknown_argument"  # a name the tool does not take
    DUPLICATE_ARGUMENT = "duplicate_argument"  # the same name twice
    MISSING_ARGUMENT = "missing_argument"  # a required name left out
    NOT_A_NUMBER = "not_a_number"  # not a plain finite decimal (NaN, inf, 1e999, words, other digits)
    OUT_OF_RANGE = "out_of_range"  # a number or a list length outside the declared range
    NOT_A_LIST = "not_a_list"  # not a [...] list of quoted texts
    INVALID_TEXT = "invalid_text"  # an empty or too long text, or one with control characters


@dataclass(frozen=True)
class ToolCallError(ParseError):
    """Why a text is not one tool call: ``kind`` for counting, ``reason`` for people."""

    kind: ToolErrorKind = ToolErrorKind.NOT_A_CALL


K = ToolErrorKind
_NAME_RE = re.compile(r"([A-Za-z_]\w*)\s*\(", re.ASCII)
_KEYWORD_RE = re.compile(r"([A-Za-z_]\w*)\s*=(.*)", re.ASCII | re.DOTALL)
_NUMBER_RE = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?", re.ASCII)
_TEXT = r"\"[^\"\\]*\"|'[^'\\]*'"
_LIST_RE = re.compile(rf"\[\s*(?:(?:{_TEXT})\s*(?:,\s*(?:{_TEXT})\s*)*)?\]")
_TEXT_RE = re.compile(_TEXT)
#: Text after a call that starts another call (a name and an opening parenthesis, after separators).
_ANOTHER_CALL_RE = re.compile(r"[\s,;.&|]*(?:(?:and|then)\s+)*[A-Za-z_][\w.]*\s*\(", re.ASCII)


def _split_call(s: str) -> tuple[str, list[str], str] | None:
    """(name, top-level argument texts, text after the closing parenthesis), or None when ``s`` does
    not start with a call whose parenthesis closes (quotes and brackets are respected)."""
    head = _NAME_RE.match(s)
    if head is None:
        return None
    args, depth, quote, start = [], 0, "", head.end()
    for i in range(head.end(), len(s)):
        c = s[i]
        if quote:
            quote = "" if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c in "[(":
            depth += 1
        elif c in "])":
            if depth == 0 and c == ")":
                args.append(s[start:i])
                return head[1], ([] if len(args) == 1 and not args[0].strip() else args), s[i + 1 :]
            depth -= 1
            if depth < 0:
                return None
        elif c == "," and depth == 0:
            args.append(s[start:i])
            start = i + 1
    return None


def _number(arg: Argument, text: str) -> float | ToolCallError:
    s = text.strip()
    if not _NUMBER_RE.fullmatch(s):
        return ToolCallError(text, f"{arg.name}={s[:20]!r} is not a number", K.NOT_A_NUMBER)
    value = float(s)
    if not math.isfinite(value):
        return ToolCallError(text, f"{arg.name}={s[:20]} is not a finite number", K.NOT_A_NUMBER)
    if not arg.low <= value <= arg.high:
        unit = f" {arg.unit}" if arg.unit else ""
        return ToolCallError(
            text, f"{arg.name}={s[:20]} is outside [{arg.low:g}, {arg.high:g}]{unit}", K.OUT_OF_RANGE
        )
    return value


def text_refusal(text: str, chars: int) -> str:
    """Why ``text`` cannot be one text of a list ("" when it can): empty, longer than ``chars``, with
    spaces around it or a control, format (zero-width, direction) or unassigned character inside."""
    if not text.strip():
        return "an empty text"
    if len(text) > chars:
        return f"a text of {len(text)} characters (at most {chars})"
    if text != text.strip():
        return f"{text[:20]!r} has spaces around it"
    if hidden := hidden_character(text):
        return f"{text[:20]!r} {hidden}"
    return ""


def _texts(arg: Argument, text: str) -> tuple[str, ...] | ToolCallError:
    s = text.strip()
    if not _LIST_RE.fullmatch(s):
        why = f'{arg.name} must be a list of quoted texts, such as ["a", "b"]'
        return ToolCallError(text, why, K.NOT_A_LIST)
    items = tuple(m[0][1:-1].strip() for m in _TEXT_RE.finditer(s))
    if not arg.low <= len(items) <= arg.high:
        return ToolCallError(
            text, f"{arg.name} holds {len(items)} texts ({arg.low:g} to {arg.high:g})", K.OUT_OF_RANGE
        )
    for item in items:
        why = text_refusal(item, arg.chars)
        if why:
            return ToolCallError(text, f"{arg.name}: {why}", K.INVALID_TEXT)
    return items


def _tilt_rule(tilt: float, tilt_direction: float | None) -> tuple[str, ToolErrorKind] | None:
    """The tilt pair: a direction exactly when the tool leans (None when it holds)."""
    if tilt > 0 and tilt_direction is None:
        return "tilt > 0 needs tilt_direction (where the fingertips lean)", K.MISSING_ARGUMENT
    if tilt == 0 and tilt_direction is not None:
        why = "tilt_direction has no meaning at tilt 0 (the tool points straight down); leave it out"
        return why, K.BAD_ARGUMENTS
    return None


def parse(text) -> ToolCall | ToolCallError:
    """Parse one tool call; failures are returned as :class:`ToolCallError`, never raised.

    >>> parse("Move_To(z=0.12, x=0.412, y=0.2, slot_yaw=90)")
    MoveTo(x=0.412, y=0.2, z=0.12, slot_yaw=90.0, tilt=0.0, tilt_direction=None)
    >>> parse("set_gripper(opening=0) done()").kind.value
    'second_call'
    """
    if not isinstance(text, str):
        return ToolCallError(repr(text)[:200], f"expected a str, got {type(text).__name__}", K.NOT_TEXT)
    s = text.strip()
    if not s:
        return ToolCallError(text, "no tool call", K.EMPTY)
    refused = _REFUSED_RE.fullmatch(s)
    if refused:  # a server's structured call that function_call_text refused
        kind = refused["kind"] if refused["kind"] in {k.value for k in K} else K.BAD_ARGUMENTS.value
        return ToolCallError(s[:MAX_CALL_CHARS], refused["why"][:MAX_CALL_CHARS], K(kind))
    if len(s) > MAX_CALL_CHARS:
        return ToolCallError(
            s[:MAX_CALL_CHARS], f"{len(s)} characters long (at most {MAX_CALL_CHARS})", K.TOO_LONG
        )
    split = _split_call(s)
    if split is None:
        return ToolCallError(s, "not a call such as 'set_gripper(opening=1)' or 'done()'", K.NOT_A_CALL)
    name, pieces, rest = split
    try:
        tool = Tool(name.lower())
    except ValueError:
        known = ", ".join(t.value for t in Tool)
        return ToolCallError(s, f"unknown tool '{name[:40]}'; the tools are {known}", K.UNKNOWN_TOOL)
    if rest.strip():
        if _ANOTHER_CALL_RE.match(rest):
            why = "a second call after the first; an answer holds exactly one"
            return ToolCallError(s, why, K.SECOND_CALL)
        return ToolCallError(s, f"text after the call: {rest.strip()[:40]!r}", K.TRAILING_TEXT)
    declared = {a.name: a for a in ARGUMENTS[tool]}
    values: dict[str, object] = {}
    for piece in pieces:
        keyword = _KEYWORD_RE.fullmatch(piece.strip())
        if keyword is None:
            what = "an empty argument" if not piece.strip() else f"{piece.strip()[:30]!r}"
            return ToolCallError(s, f"{what}: arguments are written name=value", K.BAD_ARGUMENTS)
        key = keyword[1].lower()
        if key not in declared:
            takes = ", ".join(declared) or "no arguments"
            return ToolCallError(s, f"{tool.value} takes no '{key[:30]}' ({takes})", K.UNKNOWN_ARGUMENT)
        if key in values:
            return ToolCallError(s, f"'{key}' is given twice", K.DUPLICATE_ARGUMENT)
        arg = declared[key]
        value = _number(arg, keyword[2]) if arg.kind == "number" else _texts(arg, keyword[2])
        if isinstance(value, ToolCallError):
            return ToolCallError(s, value.reason, value.kind)
        values[key] = value
    missing = [a.name for a in ARGUMENTS[tool] if a.required and a.name not in values]
    if missing:
        return ToolCallError(s, f"{tool.value} needs {', '.join(missing)}", K.MISSING_ARGUMENT)
    if tool is Tool.MOVE_TO:
        broken = _tilt_rule(values.get("tilt", 0.0), values.get("tilt_direction"))
        if broken:
            return ToolCallError(s, *broken)
    return CALL_TYPES[tool](**values)


def check_call(call: ToolCall) -> None:
    """Raise ValueError unless ``call`` is one :func:`parse` could return (for calls built in code)."""
    for arg in ARGUMENTS[call.tool]:
        value = getattr(call, arg.name)
        if value is None and not arg.required:
            continue
        if arg.kind == "number":
            ok = isinstance(value, float) and math.isfinite(value) and arg.low <= value <= arg.high
        else:
            ok = (
                isinstance(value, tuple)
                and arg.low <= len(value) <= arg.high
                and all(isinstance(t, str) and "'" not in t and '"' not in t and "\\" not in t for t in value)
                and not any(text_refusal(t, arg.chars) for t in value)
            )
        if not ok:
            raise ValueError(f"{call.tool.value}: {arg.name}={value!r} is not a valid value")
    if isinstance(call, MoveTo) and _tilt_rule(call.tilt, call.tilt_direction):
        raise ValueError(_tilt_rule(call.tilt, call.tilt_direction)[0])


def _number_text(value: float) -> str:
    """The shortest decimal that reads back as ``value`` ("0.412", "90", "1e-05"); -0 is written 0."""
    text = repr(float(value) + 0.0)  # -0.0 + 0.0 is 0.0
    return text.removesuffix(".0")


def format_instruction(call: ToolCall) -> str:
    """The canonical text: arguments in declared order, a default tilt of 0 left out."""
    parts = []
    for arg in ARGUMENTS[call.tool]:
        value = getattr(call, arg.name)
        if value is None or (arg.name == "tilt" and value == 0):
            continue
        if arg.kind == "number":
            parts.append(f"{arg.name}={_number_text(value)}")
        else:
            parts.append(f"{arg.name}=[{', '.join(f'{chr(34)}{t}{chr(34)}' for t in value)}]")
    return f"{call.tool.value}({', '.join(parts)})"


#: How :func:`function_call_text` writes a server's structured call that it refuses: this, the kind in
#: parentheses, ": " and why. :func:`parse` refuses such a line with that kind, wherever it is read.
REFUSED_CALL = "refused function call"
_REFUSED_RE = re.compile(rf"{REFUSED_CALL} \((?P<kind>[a-z_]+)\): (?P<why>.*)", re.ASCII | re.DOTALL)
#: Longer JSON arguments are refused before they are decoded (a valid call's are under 400 characters).
MAX_ARGUMENTS_CHARS = 2000


class _Refused(Exception):
    def __init__(self, kind: ToolErrorKind, why: str):
        super().__init__(why)
        self.kind, self.why = kind, why


def _shown(value, chars: int = 40) -> str:
    """``value`` for a reason: ASCII, one line, at most about ``chars`` characters."""
    text = ascii(value)
    return text if len(text) <= chars else text[:chars] + "..."


def _no_constant(name: str):
    raise _Refused(K.NOT_A_NUMBER, f"arguments hold {name}, not a finite number")


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    twice = repeated_key(pairs)
    if twice is not None:
        raise _Refused(K.DUPLICATE_ARGUMENT, f"{_shown(twice)} is given twice")
    return dict(pairs)


def _json_value(arg: Argument, value) -> str:
    """One argument's JSON value as the grammar's text, or :class:`_Refused` when it is not of the type
    the schema declares (a plain number; a list of texts the grammar can quote)."""
    if arg.kind == "number":
        if type(value) not in (int, float):
            raise _Refused(K.NOT_A_NUMBER, f"{arg.name} must be a number, got {type(value).__name__}")
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise _Refused(K.NOT_A_NUMBER, f"{arg.name} is not a finite number")
        return _number_text(number)
    if type(value) is not list or any(type(t) is not str for t in value):
        raise _Refused(K.NOT_A_LIST, f'{arg.name} must be a list of texts, such as ["a", "b"]')
    for t in value:
        why = text_refusal(t, arg.chars) or (
            f"{_shown(t, 20)} holds a quote or a backslash" if any(c in "\"'\\" for c in t) else ""
        )
        if why:
            raise _Refused(K.INVALID_TEXT, f"{arg.name}: {why}")
    return f"[{', '.join(f'{chr(34)}{t}{chr(34)}' for t in value)}]"


def _function_call_text(name, arguments) -> str:
    if not isinstance(name, str) or name not in {t.value for t in Tool}:
        known = ", ".join(t.value for t in Tool)
        raise _Refused(K.UNKNOWN_TOOL, f"unknown tool {_shown(name)}; the tools are {known}")
    tool = Tool(name)
    if not isinstance(arguments, str):
        raise _Refused(K.BAD_ARGUMENTS, f"arguments must be JSON text, got {type(arguments).__name__}")
    if len(arguments) > MAX_ARGUMENTS_CHARS:
        why = f"arguments of {len(arguments)} characters (at most {MAX_ARGUMENTS_CHARS})"
        raise _Refused(K.TOO_LONG, why)
    try:
        values = (
            json.loads(arguments, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
            if arguments.strip()
            else {}
        )
    except (ValueError, RecursionError):  # not JSON, an integer of thousands of digits, deep nesting
        raise _Refused(K.BAD_ARGUMENTS, f"arguments are not JSON: {_shown(arguments)}") from None
    if not isinstance(values, dict):
        raise _Refused(K.BAD_ARGUMENTS, f"arguments are not a JSON object: {_shown(arguments)}")
    declared = {a.name: a for a in ARGUMENTS[tool]}
    for key in values:
        if key not in declared:
            takes = ", ".join(declared) or "no arguments"
            raise _Refused(K.UNKNOWN_ARGUMENT, f"{tool.value} takes no {_shown(key)} ({takes})")
    given = {k: v for k, v in values.items() if v is not None or declared[k].required}  # null: left out
    parts = [f"{a.name}={_json_value(a, given[a.name])}" for a in ARGUMENTS[tool] if a.name in given]
    return f"{tool.value}({', '.join(parts)})"


def function_call_text(name: str, arguments: str) -> str:
    """An OpenAI function call (its name and JSON arguments, as a server's tool parser returns them)
    as the text this grammar reads, so that the grammar's rules and refusals apply to it unchanged.

    Only a call the schema declares is written as a call: one of the tools by its exact name, and
    arguments that are one JSON object (at most :data:`MAX_ARGUMENTS_CHARS` long, no key twice) whose
    keys are that tool's parameters and whose values are plain JSON numbers (finite, no booleans) or
    lists of texts the grammar can quote; an optional parameter given as null counts as left out (servers
    that fill every parameter send null for those not used). Nothing else is re-read as a call: it becomes a
    :data:`REFUSED_CALL` line that :func:`parse` refuses with the kind and reason given here. Ranges,
    missing arguments and the tilt rule are left to :func:`parse`. Never raises.

    >>> function_call_text("move_to", '{"x": 0.4, "y": 0.2, "z": 0.1, "slot_yaw": 90}')
    'move_to(x=0.4, y=0.2, z=0.1, slot_yaw=90)'
    >>> function_call_text("change_query", '{"queries": ["soup can"]}')
    'change_query(queries=["soup can"])'
    >>> function_call_text("set_gripper", "opening=1")
    "refused function call (bad_arguments): arguments are not JSON: 'opening=1'"
    """
    try:
        return _function_call_text(name, arguments)
    except _Refused as refused:
        return f"{REFUSED_CALL} ({refused.kind.value}): {refused.why}"


def split_observation(history_text: str) -> tuple[str, str]:
    """A previous step as the history shows it, split into the answer (or call) and the observation
    that came back (from its :data:`~r3.instructions.semantic.RESULT_HEADER` line to the end; "" when
    there is none, as for a refused answer).

    >>> split_observation("done()\\nResult: ok, the episode ends.\\nSteps left: 3")
    ('done()', 'Result: ok, the episode ends.\\nSteps left: 3')
    """
    lines = history_text.rstrip().split("\n")
    first = next((i for i, line in enumerate(lines) if line.startswith(RESULT_HEADER)), None)
    if first is None:
        return history_text, ""
    return "\n".join(lines[:first]), "\n".join(lines[first:])


def _schema(arg: Argument) -> dict:
    if arg.kind == "number":
        return {"type": "number", "minimum": arg.low, "maximum": arg.high, "description": arg.doc}
    return {
        "type": "array",
        "items": {"type": "string", "minLength": 1, "maxLength": arg.chars},
        "minItems": int(arg.low),
        "maxItems": int(arg.high),
        "description": arg.doc,
    }


_TOOL_DOCS = {
    Tool.MOVE_TO: "Move the tool centre point to an absolute pose (metres, degrees).",
    Tool.SET_GRIPPER: "Set the jaw opening, 0 closed to 1 fully open.",
    Tool.CHANGE_QUERY: "Set the names of the objects perception looks for.",
    Tool.UPDATE_TODO: "Replace the short plan shown in every later observation.",
    Tool.DONE: "End the episode: the goal is reached.",
}
#: The tools as OpenAI function-calling declarations, from :data:`ARGUMENTS` (one source of truth).
TOOL_SCHEMAS: tuple[dict, ...] = tuple(
    {
        "type": "function",
        "function": {
            "name": tool.value,
            "description": _TOOL_DOCS[tool],
            "parameters": {
                "type": "object",
                "properties": {a.name: _schema(a) for a in args},
                "required": [a.name for a in args if a.required],
                "additionalProperties": False,
            },
        },
    }
    for tool, args in ARGUMENTS.items()
)
