"""The Language Table instruction grammar (R^3 Appendix D.1, seven instruction types).

``parse`` turns a short-horizon instruction into an :class:`Instruction` (or a :class:`ParseError`
that names what was not understood), ``format_instruction`` writes the one canonical text of an
instruction, ``compare`` applies the linguistic tiers of the R^3 judge rubric (Appendix D.2),
``sample_instruction`` / ``paraphrase`` generate instructions and surface forms for tests and data.

Canonical texts (lower case, "the" before every block and location, no final period; an adverb,
when present, goes last)::

    move the red moon to the top left corner            BLOCK_TO_LOCATION
    move the yellow star to the top side of the blue moon   BLOCK_TO_SIDE (top|bottom|left|right)
    push the green star into the yellow pentagon        BLOCK_INTO_BLOCK
    move the blue cube down and right slightly          BLOCK_DIRECTION
    separate the red moon from the blue cube            SEPARATE
    touch the green cube                                TOUCH
    move your arm to the bottom center                  ARM_TO_LOCATION

Paraphrases accepted as the same instruction, following the rubric's allowed variations:

- verbs "move" = "place" = "slide" = "push" (any of them for every moving type, "push" included
  for BLOCK_INTO_BLOCK); "touch" and "separate" are their own verbs. Any other verb is an error.
- "the" optional everywhere; case, extra whitespace, hyphens, brackets, quotes and final periods
  do not matter.
- absolute locations: the axis words in any order ("top left corner" = "left top of the board" =
  "top-left corner of the board" = "upper left" = "the top left"); "center" = "centre" = "middle"
  (optionally "of the board"); edge centres as "top center", "top middle", "top edge",
  "top of the board", "left side of the board", "center left", ... Location prepositions
  "to" = "into" = "at" = "near" = "in" = "on" (the paper's own arm example says "near").
- directions: "up" = "upward" = "upwards" = "to the top"; "left" = "to the left" =
  "to the left side" = "leftward(s)" = "towards the left"; diagonals in either order, joined by
  "and", a space or a hyphen, optionally "diagonally" ("down and right" = "right and down" =
  "down-right" = "diagonally down and to the right").
- Absolute versus relative: a single axis word without "of the board", "edge", "corner" or a
  centre word is a direction ("to the left side" moves left; "to the left side of the board" is the
  location "center left"). Two axes named with "top"/"upper"/"bottom"/"lower" are a corner
  ("to the top left"); two axes named with "up"/"down" are a diagonal direction ("up and left").
- sides of another block: "to the top side of" = "into the top side of" = "to the top of" =
  "above"; "to the left side of" = "on the left of" = "left of"; likewise
  bottom/"below" and right. The board frame is the camera image, so "top" is "up".
  "on top of", "under", "beneath", "next to", "near" ... a block are rejected: on a pushing board
  they either mean stacking or do not say which side.
- into another block: "into" = "in to" = "to".
- separate: "from" = "away from".
- adverbs "slightly", "a bit", "a little", "a little bit" anywhere in the text (before the verb,
  after the block, at the end). "a little" and "a little bit" are stored as "a bit" (same words,
  same size); "slightly" stays a distinct value so a formatted instruction keeps the word that was
  written, but :func:`compare` puts both in one magnitude class, because the rubric judges adverb
  presence, not wording. Any instruction type may carry an adverb.
"""

from __future__ import annotations

import enum
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import numpy as np

from r3.instructions.text import hidden_character
from r3.tasks.language_table.board import BLOCKS, COLOURS, DIRECTIONS, LOCATIONS, SHAPES


class InstructionType(str, enum.Enum):
    BLOCK_TO_LOCATION = "block_to_location"  # move <block> to <absolute location>
    BLOCK_TO_SIDE = "block_to_side"  # move <block> to the <side> side of <other>
    BLOCK_INTO_BLOCK = "block_into_block"  # push <block> into <other>
    BLOCK_DIRECTION = "block_direction"  # move <block> <direction> [slightly | a bit]
    SEPARATE = "separate"  # separate <block> from <other>
    TOUCH = "touch"  # touch <block>
    ARM_TO_LOCATION = "arm_to_location"  # move your arm to <absolute location>


#: Adverb values an :class:`Instruction` may carry.
ADVERBS: tuple[str, ...] = ("slightly", "a bit")
#: Directions allowed as the side of another block (BLOCK_TO_SIDE).
SIDE_DIRECTIONS: tuple[str, ...] = ("up", "down", "left", "right")
#: Verbs the rubric treats as one ("move" = "place" = "slide" = "push").
MOVE_VERBS: tuple[str, ...] = ("move", "place", "slide", "push")

#: Results of :func:`compare`, named after the rubric's linguistic tiers.
MATCH = "match"
ADVERB_MISMATCH = "adverb_mismatch"
DIFFERENT = "different"

#: Components each type needs; every other component must be None.
_COMPONENTS: dict[InstructionType, tuple[str, ...]] = {
    InstructionType.BLOCK_TO_LOCATION: ("block", "location"),
    InstructionType.BLOCK_TO_SIDE: ("block", "other", "direction"),
    InstructionType.BLOCK_INTO_BLOCK: ("block", "other"),
    InstructionType.BLOCK_DIRECTION: ("block", "direction"),
    InstructionType.SEPARATE: ("block", "other"),
    InstructionType.TOUCH: ("block",),
    InstructionType.ARM_TO_LOCATION: ("location",),
}
_VALID_VALUES: dict[str, tuple[str, ...]] = {
    "block": BLOCKS,
    "other": BLOCKS,
    "location": tuple(LOCATIONS),
    "direction": tuple(DIRECTIONS),
}


@dataclass(frozen=True)
class Instruction:
    """One short-horizon instruction, with its components normalised.

    ``block`` / ``other`` are names from ``board.BLOCKS``; ``location`` a key of
    ``board.LOCATIONS``; ``direction`` a key of ``board.DIRECTIONS`` (for BLOCK_TO_SIDE only
    "up", "down", "left", "right"); ``adverb`` is None, "slightly" or "a bit" (any instruction type
    may carry one; it scales how far the policy pushes). ``verb`` is the verb as written, for
    display only: it takes no part in equality, since the rubric treats the moving verbs as one.
    Invalid combinations raise ValueError at construction, naming the bad field.
    """

    type: InstructionType
    block: str | None = None
    other: str | None = None
    location: str | None = None
    direction: str | None = None
    adverb: str | None = None
    verb: str = field(default="move", compare=False)

    def __post_init__(self):
        # A plain string type ("touch") compares equal to the enum but hashes differently.
        object.__setattr__(self, "type", InstructionType(self.type))
        needed = _COMPONENTS[self.type]
        for name, valid in _VALID_VALUES.items():
            value = getattr(self, name)
            if name in needed and value not in valid:
                raise ValueError(f"{self.type.value}: {name} must be one of {valid}, got {value!r}")
            if name not in needed and value is not None:
                raise ValueError(f"{self.type.value}: {name} must be None, got {value!r}")
        if self.type is InstructionType.BLOCK_TO_SIDE and self.direction not in SIDE_DIRECTIONS:
            raise ValueError(
                f"block_to_side: direction must be one of {SIDE_DIRECTIONS}, got {self.direction!r}"
            )
        if self.other is not None and self.other == self.block:
            raise ValueError(f"{self.type.value}: block and other are both {self.block!r}")
        if self.adverb not in (None, *ADVERBS):
            raise ValueError(f"adverb must be None or one of {ADVERBS}, got {self.adverb!r}")


@dataclass(frozen=True)
class ParseError:
    """Why a text is not an instruction of the grammar. Returned, never raised."""

    text: str
    reason: str


# ---------------------------------------------------------------------------------------------
# Vocabulary

_ALL_VERBS = (*MOVE_VERBS, "separate", "touch")
_ADVERB_RE = re.compile(r"\b(slightly|a little bit|a little|a bit)\b")
_ADVERB_VALUE = {"slightly": "slightly", "a little bit": "a bit", "a little": "a bit", "a bit": "a bit"}
#: Words that refer to a block without naming it ("the red block", "move it").
_VAGUE_BLOCK_WORDS = frozenset({"block", "blocks", "one", "piece", "object", "shape", "it", "this", "that"})
_BLOCK_WORDS = frozenset(COLOURS) | frozenset(SHAPES) | _VAGUE_BLOCK_WORDS
_ARM_RE = re.compile(r"^(?:your |the )?(?:robot )?arm\b ?")

_LOCATION_PREPOSITION_RE = re.compile(r"^(?:to|into|at|near|in|on) ")
_BOARD_SUFFIX_RE = re.compile(r" (?:of|on) (?:the )?(?:board|table)$")
#: Word -> (role, value); each role may occur once in a location phrase, in any order.
_LOCATION_WORDS = {
    "top": ("vertical", "top"),
    "upper": ("vertical", "top"),
    "bottom": ("vertical", "bottom"),
    "lower": ("vertical", "bottom"),
    "left": ("horizontal", "left"),
    "right": ("horizontal", "right"),
    "center": ("center", "center"),
    "centre": ("center", "center"),
    "middle": ("center", "center"),
    "central": ("center", "center"),
    "corner": ("corner", "corner"),
    "edge": ("edge", "edge"),
    "side": ("side", "side"),
}

# "top"/"bottom" count as directions only after "to (the)" / "towards (the)": "to the top" = "up".
_AXIS = r"(?:(?:to|towards?) (?:the )?(?:left|right|top|bottom)(?: side)?|(?:up|down|left|right)(?:wards?)?)"
_DIRECTION_RE = re.compile(rf"^(?:diagonally )?({_AXIS})(?:(?: and | )({_AXIS}))?(?: diagonally)?$")
_AXIS_OF_WORD = {"up": "up", "top": "up", "down": "down", "bottom": "down", "left": "left", "right": "right"}

_SIDE_WORD = {"up": "top", "down": "bottom", "left": "left", "right": "right"}
_SIDE_RE = re.compile(
    r"^(?:(?:to|into|in to|on|at) )?(?:the )?(top|upper|bottom|lower|left|right)(?: side)? of$"
)
_SIDE_OF_WORD = {
    "top": "up",
    "upper": "up",
    "bottom": "down",
    "lower": "down",
    "left": "left",
    "right": "right",
}
_SIDE_PREPOSITIONS = {"above": "up", "below": "down"}
_INTO_RELATIONS = frozenset({"into", "in to", "to"})
_SEPARATE_RELATIONS = frozenset({"from", "away from"})
#: Relations to a block that name no side, or that mean stacking on a board where blocks only slide.
_VAGUE_RELATIONS = frozenset(
    {
        "on top of",
        "on the top of",
        "on the bottom of",
        "under",
        "underneath",
        "beneath",
        "next to",
        "beside",
        "near",
        "by",
        "close to",
        "around",
        "behind",
        "in front of",
        "on",
        "onto",
        "towards",
        "toward",
    }
)


def _normalise(text: str) -> str:
    """Lower-case, turn hyphens/brackets/quotes into spaces, collapse whitespace, drop final punctuation."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = re.sub(r"[\-\u2010-\u2015(),\[\]\"'`\u2018\u2019\u201c\u201d]", " ", text)
    text = " ".join(text.split())
    return text.rstrip(".!? ").strip()


# ---------------------------------------------------------------------------------------------
# Parsing


def parse(text: str) -> Instruction | ParseError:
    """Parse one instruction; any failure is a ParseError whose reason names the culprit phrase.

    >>> parse("Slightly push the red moon upwards.") == Instruction(
    ...     InstructionType.BLOCK_DIRECTION, block="red moon", direction="up", adverb="slightly")
    True
    >>> parse("move the red block up").reason
    "ambiguous block 'the red block': name blocks by colour and shape, e.g. 'red moon'"
    """
    if not isinstance(text, str):
        return ParseError(repr(text), f"expected a str, got {type(text).__name__}")
    if hidden := hidden_character(text, allowed="\t\n"):  # split() would read U+001F as a space
        return ParseError(text, hidden)
    result = _parse(_normalise(text))
    if isinstance(result, str):
        return ParseError(text, result)
    return result


def _first_few(words: list[str], shown: int = 3) -> str:
    """The first ``shown`` of ``words``, quoted, and how many more: a reason stays short."""
    more = f" and {len(words) - shown} more" if len(words) > shown else ""
    return ", ".join(repr(w) for w in words[:shown]) + more


def _parse(s: str) -> Instruction | str:
    """Parse normalised text; a str result is the reason it failed."""
    if not s:
        return "empty instruction"
    separator = re.search(r"[.;!?]|\bthen\b", s)
    if separator:
        return f"more than one instruction (separated by '{separator.group()}')"
    verbs = [w for w in s.split() if w in _ALL_VERBS]
    if len(verbs) > 1:
        return f"more than one instruction (verbs {_first_few(verbs)})"
    adverbs = _ADVERB_RE.findall(s)
    if len(adverbs) > 1:
        return f"more than one adverb: {_first_few(adverbs)}"
    adverb = _ADVERB_VALUE[adverbs[0]] if adverbs else None
    words = _ADVERB_RE.sub(" ", s).split()
    if not words:
        return f"no verb, only the adverb '{adverbs[0]}'"
    verb, rest = words[0], words[1:]
    if verb not in _ALL_VERBS:
        return f"no verb: expected the instruction to start with one of {', '.join(_ALL_VERBS)}, got '{verb}'"
    if verb == "touch":
        return _parse_touch(rest, adverb)
    if verb == "separate":
        return _parse_separate(rest, adverb)
    arm = _ARM_RE.match(" ".join(rest))
    if arm:
        return _parse_arm(" ".join(rest)[arm.end() :], verb, adverb)
    return _parse_move_block(rest, verb, adverb)


def _read_block(words: list[str]) -> tuple[str, list[str]] | str:
    """Read "[the] <colour> <shape>" at the start of ``words``; returns (block, rest) or a reason."""
    start = 1 if words[:1] == ["the"] else 0
    head = words[start : start + 2]
    said = " ".join(words[: start + 2])
    if not head:
        return "missing block"
    vague = "ambiguous block '{}': name blocks by colour and shape, e.g. 'red moon'"
    if head[0] in COLOURS:
        if len(head) == 2 and head[1] in SHAPES:
            name = " ".join(head)
            if name in BLOCKS:
                return name, words[start + 2 :]
            return f"unknown block '{name}' (the blocks are: {', '.join(BLOCKS)})"
        if len(head) == 1 or head[1] in _VAGUE_BLOCK_WORDS:
            return vague.format(said)
        return f"unknown block '{' '.join(head)}' (the blocks are: {', '.join(BLOCKS)})"
    if head[0] in SHAPES or head[0] in _VAGUE_BLOCK_WORDS:
        return vague.format(" ".join(words[: start + 1]))
    if len(head) == 2 and head[1] in SHAPES:
        return f"unknown block '{' '.join(head)}' (the blocks are: {', '.join(BLOCKS)})"
    return f"expected a block (colour and shape, e.g. 'red moon'), got '{' '.join(words)}'"


def _read_relation(words: list[str]) -> tuple[str, str] | str:
    """Split "<relation> [the] <block>" into (relation, block); a str result is the reason it failed."""
    first = next(i for i, w in enumerate(words) if w in _BLOCK_WORDS)
    if first > 0 and words[first - 1] == "the":
        first -= 1
    block = _read_block(words[first:])
    if isinstance(block, str):
        return block
    other, tail = block
    if tail:
        return f"unexpected text '{' '.join(tail)}' after '{other}'"
    return " ".join(words[:first]), other


def _parse_touch(words: list[str], adverb: str | None) -> Instruction | str:
    block = _read_block(words)
    if isinstance(block, str):
        return block
    name, tail = block
    if tail:
        return f"unexpected text '{' '.join(tail)}' after 'touch the {name}'"
    return Instruction(InstructionType.TOUCH, block=name, adverb=adverb, verb="touch")


def _parse_separate(words: list[str], adverb: str | None) -> Instruction | str:
    block = _read_block(words)
    if isinstance(block, str):
        return block
    name, tail = block
    if not any(w in _BLOCK_WORDS for w in tail):
        return f"missing the block to separate the {name} from"
    relation = _read_relation(tail)
    if isinstance(relation, str):
        return relation
    preposition, other = relation
    if preposition not in _SEPARATE_RELATIONS:
        return f"unknown relation '{preposition}' in a separation: say 'separate <block> from <block>'"
    if other == name:
        return f"the same block '{name}' twice"
    return Instruction(InstructionType.SEPARATE, block=name, other=other, adverb=adverb, verb="separate")


def _parse_arm(rest: str, verb: str, adverb: str | None) -> Instruction | str:
    if any(w in _BLOCK_WORDS for w in rest.split()):
        return f"the arm moves only to absolute locations, not to a block ('{rest}'); use 'touch <block>'"
    location = _read_location(rest)
    if location is not None:
        return Instruction(InstructionType.ARM_TO_LOCATION, location=location, adverb=adverb, verb=verb)
    if _read_direction(rest) is not None:
        return f"the arm moves only to absolute locations, not in a direction ('{rest}')"
    return f"unknown location '{rest}'" if rest else "missing location for the arm"


def _parse_move_block(words: list[str], verb: str, adverb: str | None) -> Instruction | str:
    block = _read_block(words)
    if isinstance(block, str):
        return block
    name, tail = block
    rest = " ".join(tail)
    if not rest:
        return f"missing where to {verb} the {name}: expected a location, a direction or another block"
    if any(w in _BLOCK_WORDS for w in tail):
        return _parse_block_relation(name, tail, verb, adverb)
    location = _read_location(rest)
    if location is not None:
        return Instruction(
            InstructionType.BLOCK_TO_LOCATION, block=name, location=location, adverb=adverb, verb=verb
        )
    direction = _read_direction(rest)
    if direction in DIRECTIONS:
        return Instruction(
            InstructionType.BLOCK_DIRECTION, block=name, direction=direction, adverb=adverb, verb=verb
        )
    return direction or f"unknown location or direction '{rest}'"


def _parse_block_relation(name: str, tail: list[str], verb: str, adverb: str | None) -> Instruction | str:
    relation = _read_relation(tail)
    if isinstance(relation, str):
        return relation
    preposition, other = relation
    if other == name:
        return f"the same block '{name}' twice"
    if preposition in _INTO_RELATIONS:
        return Instruction(
            InstructionType.BLOCK_INTO_BLOCK, block=name, other=other, adverb=adverb, verb=verb
        )
    side = _SIDE_RE.match(preposition)
    direction = _SIDE_OF_WORD[side.group(1)] if side else _SIDE_PREPOSITIONS.get(preposition)
    if side and preposition.startswith("on ") and "side" not in preposition and direction in ("up", "down"):
        direction = None  # "on the top of" reads as stacking, like "on top of"
    if direction is not None:
        return Instruction(
            InstructionType.BLOCK_TO_SIDE,
            block=name,
            other=other,
            direction=direction,
            adverb=adverb,
            verb=verb,
        )
    if preposition in _VAGUE_RELATIONS:
        return (
            f"ambiguous relation '{preposition}' to the {other}: say 'into' or "
            f"'to the top/bottom/left/right side of'"
        )
    if not preposition:
        return f"missing relation between the {name} and the {other}"
    return f"unknown relation '{preposition}' to the {other}"


def _read_location(phrase: str) -> str | None:
    """Key of ``LOCATIONS`` named by ``phrase``, or None when it names no absolute location."""
    phrase = _LOCATION_PREPOSITION_RE.sub("", phrase)
    on_board = bool(_BOARD_SUFFIX_RE.search(phrase))
    words = _BOARD_SUFFIX_RE.sub("", phrase).split()
    if words[:1] == ["the"]:
        words = words[1:]
    parts: dict[str, str] = {}
    for word in words:
        if word not in _LOCATION_WORDS:
            return None
        kind, value = _LOCATION_WORDS[word]
        if kind in parts:
            return None
        parts[kind] = value
    vertical, horizontal = parts.get("vertical"), parts.get("horizontal")
    centre, corner = "center" in parts, "corner" in parts
    edge, side = "edge" in parts, "side" in parts
    if vertical and horizontal:
        if centre or edge or side:
            return None
        return f"{vertical} {horizontal} corner"
    if corner or (edge and side):
        return None
    if vertical or horizontal:
        # One axis is a location only when something says so; "to the left side" is a direction.
        if not (centre or edge or on_board):
            return None
        return f"{vertical} center" if vertical else f"center {horizontal}"
    if centre and not (edge or side):
        return "center"
    return None


def _read_direction(phrase: str) -> str | None:
    """Key of ``DIRECTIONS`` named by ``phrase``, a reason string for a bad diagonal, or None."""
    match = _DIRECTION_RE.match(phrase)
    if not match:
        return None
    axes = [_axis_of(part) for part in match.groups() if part is not None]
    if len(axes) == 1:
        return None if "diagonally" in phrase else axes[0]
    vertical = [a for a in axes if a in ("up", "down")]
    horizontal = [a for a in axes if a in ("left", "right")]
    if len(vertical) != 1 or len(horizontal) != 1:
        return f"conflicting directions '{phrase}': a diagonal needs one of up/down and one of left/right"
    return f"{vertical[0]} and {horizontal[0]}"


def _axis_of(part: str) -> str:
    word = next(w for w in part.split() if w not in ("to", "toward", "towards", "the", "side"))
    return _AXIS_OF_WORD[re.sub(r"wards?$", "", word)]


# ---------------------------------------------------------------------------------------------
# Formatting and comparison


def format_instruction(instr: Instruction) -> str:
    """The canonical text of ``instr`` (see the module docstring); parse() reads it back equal.

    >>> format_instruction(Instruction(InstructionType.BLOCK_DIRECTION, block="blue cube",
    ...                                direction="down and right", adverb="slightly"))
    'move the blue cube down and right slightly'
    """
    t = InstructionType
    body = {
        t.BLOCK_TO_LOCATION: lambda i: f"move the {i.block} to the {i.location}",
        t.BLOCK_TO_SIDE: lambda i: (
            f"move the {i.block} to the {_SIDE_WORD[i.direction]} side of the {i.other}"
        ),
        t.BLOCK_INTO_BLOCK: lambda i: f"push the {i.block} into the {i.other}",
        t.BLOCK_DIRECTION: lambda i: f"move the {i.block} {i.direction}",
        t.SEPARATE: lambda i: f"separate the {i.block} from the {i.other}",
        t.TOUCH: lambda i: f"touch the {i.block}",
        t.ARM_TO_LOCATION: lambda i: f"move your arm to the {i.location}",
    }[instr.type](instr)
    return f"{body} {instr.adverb}" if instr.adverb else body


def compare(a: Instruction, b: Instruction) -> str:
    """Rubric step 1: MATCH, ADVERB_MISMATCH (only adverb presence differs) or DIFFERENT.

    "slightly" and "a bit" are one magnitude class, so they match each other; an adverb against
    none is an adverb mismatch.
    """
    if replace(a, adverb=None) != replace(b, adverb=None):
        return DIFFERENT
    return MATCH if (a.adverb is None) == (b.adverb is None) else ADVERB_MISMATCH


# ---------------------------------------------------------------------------------------------
# Generation


def sample_instruction(
    rng: np.random.Generator,
    types: Iterable[InstructionType | str] | None = None,
    adverb_probability: float = 0.3,
) -> Instruction:
    """A random valid instruction of one of ``types`` (default: all seven), for tests and data.

    Blocks, locations and directions are uniform; any type gets an adverb with
    ``adverb_probability`` so that every parse path, adverbs included, is exercised.
    """
    types = list(InstructionType) if types is None else [InstructionType(t) for t in types]
    kind = types[rng.integers(len(types))]
    block, other = (BLOCKS[i] for i in rng.choice(len(BLOCKS), size=2, replace=False))
    values = {
        "block": block,
        "other": other,
        "location": _pick(rng, tuple(LOCATIONS)),
        "direction": _pick(
            rng, SIDE_DIRECTIONS if kind is InstructionType.BLOCK_TO_SIDE else tuple(DIRECTIONS)
        ),
    }
    adverb = _pick(rng, ADVERBS) if rng.random() < adverb_probability else None
    return Instruction(kind, **{k: values[k] for k in _COMPONENTS[kind]}, adverb=adverb)


def _pick(rng: np.random.Generator, options):
    return options[rng.integers(len(options))]


def _location_phrases(location: str) -> tuple[str, ...]:
    """Surface forms of one location key, all of which _read_location maps back to it."""
    words = location.replace(" corner", "").split()
    if location == "center":
        return (
            "center",
            "centre",
            "middle",
            "center of the board",
            "middle of the board",
            "centre of the board",
        )
    if location.endswith("corner"):
        vertical, horizontal = words
        alt = {"top": "upper", "bottom": "lower"}[vertical]
        return (
            f"{vertical} {horizontal} corner",
            f"{vertical}-{horizontal} corner",
            f"{vertical} {horizontal}",
            f"{horizontal} {vertical} of the board",
            f"{vertical}-{horizontal} corner of the board",
            f"{alt} {horizontal} corner",
            f"{alt} {horizontal}",
            f"{horizontal} {vertical} corner",
        )
    axis = words[0] if words[1] == "center" else words[1]
    return (
        location,
        f"{axis} center",
        f"center {axis}",
        f"{axis} middle",
        f"middle {axis}",
        f"{axis}-center",
        f"{axis} centre",
        f"{axis} edge",
        f"{axis} edge of the board",
        f"{axis} side of the board",
        f"{axis} of the board",
    )


_ONE_AXIS_PHRASES = {
    "up": ("up", "upwards", "upward", "to the top", "towards the top"),
    "down": ("down", "downwards", "downward", "to the bottom", "towards the bottom"),
    "left": (
        "left",
        "to the left",
        "to the left side",
        "leftwards",
        "leftward",
        "towards the left",
        "to left",
    ),
    "right": ("right", "to the right", "to the right side", "rightwards", "rightward", "towards the right"),
}


def _direction_phrase(direction: str, rng: np.random.Generator) -> str:
    if direction in _ONE_AXIS_PHRASES:
        return _pick(rng, _ONE_AXIS_PHRASES[direction])
    vertical, horizontal = direction.split(" and ")
    # Only up/down words here: "to the top left" names the corner, not a diagonal.
    parts = [_pick(rng, _ONE_AXIS_PHRASES[vertical][:3]), _pick(rng, _ONE_AXIS_PHRASES[horizontal])]
    if rng.random() < 0.5:
        parts.reverse()
    joined = _pick(rng, (" and ", " ", "-")).join(parts) if " " not in "".join(parts) else " and ".join(parts)
    return _pick(rng, ("", "diagonally ")) + joined


def _side_phrase(direction: str, rng: np.random.Generator) -> str:
    word = _SIDE_WORD[direction]
    forms = [
        f"to the {word} side of",
        f"into the {word} side of",
        f"to the {word} of",
        f"on the {word} side of",
        f"at the {word} side of",
        f"{word} side of",
    ]
    forms += {"up": ["above"], "down": ["below"]}.get(direction, [f"{word} of", f"on the {word} of"])
    return _pick(rng, forms)


def paraphrase(instr: Instruction, rng: np.random.Generator) -> str:
    """A random surface form of ``instr`` (verb, "the", wording, adverb place, case, period)."""
    t = InstructionType

    def the() -> str:
        return _pick(rng, ("the ", ""))

    block = f"{the()}{instr.block}"
    other = f"{the()}{instr.other}"
    verb = _pick(rng, MOVE_VERBS)
    location = f"{the()}{_pick(rng, _location_phrases(instr.location))}" if instr.location else ""
    to = _pick(rng, ("to", "into", "at", "near", "in", "on"))
    verb, subject, tail = {
        t.BLOCK_TO_LOCATION: lambda: (verb, block, f"{to} {location}"),
        t.BLOCK_TO_SIDE: lambda: (verb, block, f"{_side_phrase(instr.direction, rng)} {other}"),
        t.BLOCK_INTO_BLOCK: lambda: (verb, block, f"{_pick(rng, ('into', 'to', 'in to'))} {other}"),
        t.BLOCK_DIRECTION: lambda: (verb, block, _direction_phrase(instr.direction, rng)),
        t.SEPARATE: lambda: ("separate", block, f"{_pick(rng, ('from', 'away from'))} {other}"),
        t.TOUCH: lambda: ("touch", block, ""),
        t.ARM_TO_LOCATION: lambda: (
            verb,
            _pick(rng, ("your arm", "the arm", "the robot arm")),
            f"{to} {location}",
        ),
    }[instr.type]()
    parts = [verb, subject, tail]
    if instr.adverb:
        word = "slightly" if instr.adverb == "slightly" else _pick(rng, ("a bit", "a little", "a little bit"))
        parts.insert(int(rng.integers(4)), word)
    text = " ".join(p for p in parts if p)
    if rng.random() < 0.3:
        text = text[0].upper() + text[1:]
    return text + _pick(rng, ("", ".", " .", "  "))
