"""The semantic action grammar (ERR): exactly one call per answer, on the packing workcell.

Canonical texts (:func:`format_instruction`)::

    pick(<item>, [x, y])
    place(<item>, [x, y])
    home()
    done()

``x``, ``y`` are integers 0-1000 in the base camera image (0 = left / top edge, 1000 = right /
bottom edge). ``pick`` names the item to grasp and a point on it; ``place`` names the item held and a
point on the tray floor (or the table) where it goes: the executor (``r3.lowlevel.semantic``) checks
that the point shows what the label says, so a label is never guessed from a point. ERR names the
destination in ``place``'s label; here the label is the held item, as the executor's preconditions
(``nothing_held``, ``wrong_object_held``) read it.

:func:`parse` never raises: a text that is not exactly one such call gives an :class:`ActionError`
whose ``kind`` (:class:`ActionErrorKind`) says what is wrong and ``reason`` says it for people.
Forgiven: the case of the action name, whitespace between tokens, quotes around the label, a case or
spacing difference in the label. Refused: anything after the call's closing parenthesis (a second
call, "; then ...", a remark), a point that is not two plain ASCII integers in 0-1000 (no sign, no
decimal point, no NaN), a label that is not an item of the scene's vocabulary.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from r3.instructions.language_table import ParseError
from r3.instructions.packing import ITEMS
from r3.instructions.text import hidden_character

#: The largest image coordinate (the right / bottom edge).
POINT_MAX = 1000
#: Longer texts are refused before any pattern sees them (a valid call is under 40 characters).
MAX_ACTION_CHARS = 120


class ActionType(str, enum.Enum):
    PICK = "pick"
    PLACE = "place"
    HOME = "home"
    DONE = "done"


#: The actions that take a label and a point.
POINTED = (ActionType.PICK, ActionType.PLACE)


@dataclass(frozen=True)
class SemanticAction:
    """One semantic action; ``label`` and ``point`` only for pick and place."""

    type: ActionType
    label: str = ""
    point: tuple[int, int] | None = None

    def __post_init__(self):
        object.__setattr__(self, "type", ActionType(self.type))
        if self.type in POINTED:
            if self.label not in ITEMS:
                raise ValueError(f"{self.type.value}: label must be one of {ITEMS}, got {self.label!r}")
            if (
                self.point is None
                or len(self.point) != 2
                or not all(type(c) is int and 0 <= c <= POINT_MAX for c in self.point)
            ):
                raise ValueError(
                    f"{self.type.value}: point must be two ints in 0-{POINT_MAX}, got {self.point!r}"
                )
        elif self.label or self.point is not None:
            raise ValueError(f"{self.type.value}() takes no label and no point")


class ActionErrorKind(str, enum.Enum):
    NOT_TEXT = "not_text"  # not a str
    EMPTY = "empty"  # nothing but whitespace
    TOO_LONG = "too_long"  # longer than MAX_ACTION_CHARS
    NOT_A_CALL = "not_a_call"  # not of the form name(arguments)
    UNKNOWN_ACTION = "unknown_action"  # a call, but not pick, place, home or done
    TRAILING_TEXT = "trailing_text"  # anything after the call's closing parenthesis
    BAD_ARGUMENTS = "bad_arguments"  # arguments not of the action's form
    UNKNOWN_LABEL = "unknown_label"  # the label is not an item
    INVALID_POINT = "invalid_point"  # a coordinate that is not an integer 0-1000


@dataclass(frozen=True)
class ActionError(ParseError):
    """Why a text is not one semantic action: ``kind`` for counting, ``reason`` for people."""

    kind: ActionErrorKind = ActionErrorKind.NOT_A_CALL


_CALL_RE = re.compile(r"(?P<name>[A-Za-z_]\w*)\s*\((?P<args>[^()]*)\)(?P<rest>.*)", re.DOTALL | re.ASCII)
_POINTED_ARGS_RE = re.compile(
    r"\s*(?P<label>\"[^\"]*\"|'[^']*'|[^,\[\]\"']*?)\s*,\s*\[(?P<x>[^,\[\]]*),(?P<y>[^,\[\]]*)\]\s*",
    re.DOTALL,
)
_INTEGER_RE = re.compile(r"[0-9]{1,4}", re.ASCII)


def _form(kind: ActionType) -> str:
    return f"{kind.value}(<item>, [x, y])" if kind in POINTED else f"{kind.value}()"


def _coordinate(text: str) -> int | None:
    s = text.strip()
    return int(s) if _INTEGER_RE.fullmatch(s) and int(s) <= POINT_MAX else None


def parse(text) -> SemanticAction | ActionError:
    """Parse one semantic action call; failures are returned as :class:`ActionError`, never raised.

    >>> parse("Pick( 'Soup Can' , [412, 530] )")
    SemanticAction(type=<ActionType.PICK: 'pick'>, label='soup can', point=(412, 530))
    >>> parse("home() done()").kind.value
    'trailing_text'
    """
    if not isinstance(text, str):
        return ActionError(
            repr(text)[:200], f"expected a str, got {type(text).__name__}", ActionErrorKind.NOT_TEXT
        )
    s = text.strip()
    if not s:
        return ActionError(text, "no action", ActionErrorKind.EMPTY)
    if len(s) > MAX_ACTION_CHARS:
        return ActionError(
            s[:MAX_ACTION_CHARS],
            f"{len(s)} characters long (at most {MAX_ACTION_CHARS})",
            ActionErrorKind.TOO_LONG,
        )
    call = _CALL_RE.fullmatch(s)
    if call is None:
        return ActionError(
            s, "not a call such as 'pick(<item>, [x, y])' or 'home()'", ActionErrorKind.NOT_A_CALL
        )
    try:
        kind = ActionType(call["name"].lower())
    except ValueError:
        return ActionError(
            s,
            f"unknown action '{call['name']}'; actions are pick, place, home, done",
            ActionErrorKind.UNKNOWN_ACTION,
        )
    if call["rest"].strip():
        return ActionError(
            s,
            f"text after the call: {call['rest'].strip()[:40]!r}; an answer holds exactly one action",
            ActionErrorKind.TRAILING_TEXT,
        )
    args = call["args"]
    if kind not in POINTED:
        if args.strip():
            return ActionError(s, f"{kind.value}() takes no arguments", ActionErrorKind.BAD_ARGUMENTS)
        return SemanticAction(kind)
    parts = _POINTED_ARGS_RE.fullmatch(args)
    if parts is None:
        return ActionError(s, f"{kind.value} reads '{_form(kind)}'", ActionErrorKind.BAD_ARGUMENTS)
    if hidden := hidden_character(parts["label"]):  # a name with one is not the name it shows
        return ActionError(s, f"item {parts['label'][:40]!r} {hidden}", ActionErrorKind.UNKNOWN_LABEL)
    label = " ".join(parts["label"].strip("\"'").lower().split())
    if label not in ITEMS:
        return ActionError(s, f"unknown item '{label[:40]}'", ActionErrorKind.UNKNOWN_LABEL)
    x, y = _coordinate(parts["x"]), _coordinate(parts["y"])
    if x is None or y is None:
        return ActionError(
            s,
            f"point [{parts['x'].strip()[:12]}, {parts['y'].strip()[:12]}]: "
            f"x and y must be integers 0-{POINT_MAX}",
            ActionErrorKind.INVALID_POINT,
        )
    return SemanticAction(kind, label, (x, y))


#: How the line begins that tells the model, at its next step, what came of an action
#: (``r3.lowlevel.semantic.describe_result`` writes it; the history carries it after the action).
RESULT_HEADER = "Result:"


def split_result(history_text: str) -> tuple[str, str]:
    """A previous step as the history shows it, split into the answer (or action) and its final result
    line ("" when it has none: a refused answer, or the instruction interface).

    >>> split_result("home()\\nResult: ok. No item changed place.")
    ('home()', 'Result: ok. No item changed place.')
    """
    head, _, last = history_text.rstrip().rpartition("\n")
    return (head, last) if last.startswith(RESULT_HEADER) else (history_text, "")


def format_instruction(action: SemanticAction) -> str:
    """The canonical text, e.g. "pick(soup can, [412, 530])" or "home()"."""
    if action.type in POINTED:
        return f"{action.type.value}({action.label}, [{action.point[0]}, {action.point[1]}])"
    return f"{action.type.value}()"
