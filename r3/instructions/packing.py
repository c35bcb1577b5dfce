"""The grocery packing instruction grammar (R^3 Appendix D.4): pack, remove, transfer.

Canonical texts, exactly as the packing prompt spells them (packing RL rewards an exact string
match, so :func:`normalise_text` only forgives case, whitespace and the final period)::

    Pack the <item> into the <size> tray.
    Remove the <item> from the <size> tray.
    Transfer the <item> from the <size> tray to the <size> tray.

:func:`parse` is a little more lenient ("the" optional) so that an executor can still run a
correct instruction written without articles.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from r3.instructions.language_table import ParseError
from r3.instructions.text import hidden_character
from r3.tasks.packing.workcell import ITEMS, TRAYS


class PackingInstructionType(str, enum.Enum):
    PACK = "pack"  # table -> tray
    REMOVE = "remove"  # tray -> table
    TRANSFER = "transfer"  # tray -> other tray


@dataclass(frozen=True)
class PackingInstruction:
    """One packing instruction. ``tray`` is the tray named first (destination of PACK, source of
    REMOVE and TRANSFER); ``to_tray`` is the TRANSFER destination and None otherwise."""

    type: PackingInstructionType
    item: str
    tray: str
    to_tray: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "type", PackingInstructionType(self.type))
        if self.item not in ITEMS:
            raise ValueError(f"item must be one of {ITEMS}, got {self.item!r}")
        trays = (self.tray, self.to_tray) if self.type is PackingInstructionType.TRANSFER else (self.tray,)
        for tray in trays:
            if tray not in TRAYS:
                raise ValueError(f"tray must be one of {TRAYS}, got {tray!r}")
        if self.type is not PackingInstructionType.TRANSFER and self.to_tray is not None:
            raise ValueError(f"{self.type.value}: to_tray must be None, got {self.to_tray!r}")
        if self.type is PackingInstructionType.TRANSFER and self.tray == self.to_tray:
            raise ValueError(f"transfer from and to the same tray {self.tray!r}")


_TEMPLATES = {
    PackingInstructionType.PACK: "Pack the {item} into the {tray} tray.",
    PackingInstructionType.REMOVE: "Remove the {item} from the {tray} tray.",
    PackingInstructionType.TRANSFER: "Transfer the {item} from the {tray} tray to the {to_tray} tray.",
}


_PATTERNS = {
    PackingInstructionType.PACK: re.compile(
        r"^pack (?:the )?(?P<item>.+?) into (?:the )?(?P<tray>\S+) tray$"
    ),
    PackingInstructionType.REMOVE: re.compile(
        r"^remove (?:the )?(?P<item>.+?) from (?:the )?(?P<tray>\S+) tray$"
    ),
    PackingInstructionType.TRANSFER: re.compile(
        r"^transfer (?:the )?(?P<item>.+?) from (?:the )?(?P<tray>\S+) tray"
        r" to (?:the )?(?P<to_tray>\S+) tray$"
    ),
}


def normalise_text(text: str) -> str:
    """Text reduced for exact matching: lower case, single spaces, no final period.

    >>> normalise_text("  Pack the sugar box into the  medium tray. ")
    'pack the sugar box into the medium tray'
    """
    return " ".join(str(text).lower().split()).rstrip(". ").strip()


def parse(text: str) -> PackingInstruction | ParseError:
    """Parse one packing instruction; failures are returned as ParseError naming the culprit."""
    if not isinstance(text, str):
        return ParseError(repr(text), f"expected a str, got {type(text).__name__}")
    if hidden := hidden_character(text, allowed="\t\n"):  # split() would read U+001F as a space
        return ParseError(text, hidden)
    s = normalise_text(text)
    if not s:
        return ParseError(text, "empty instruction")
    if re.search(r"[.;]|\bthen\b", s):
        return ParseError(text, "more than one instruction")
    verb = s.split()[0]
    try:
        kind = PackingInstructionType(verb)
    except ValueError:
        return ParseError(text, f"no verb: expected pack, remove or transfer, got '{verb}'")
    match = _PATTERNS[kind].match(s)
    if not match:
        return ParseError(
            text,
            f"not understood; a {verb} instruction reads "
            f"'{_TEMPLATES[kind].format(item='<item>', tray='<size>', to_tray='<size>')}'",
        )
    parts = match.groupdict()
    if parts["item"] not in ITEMS:
        return ParseError(text, f"unknown item '{parts['item']}'")
    for tray in (parts["tray"], parts.get("to_tray")):
        if tray is not None and tray not in TRAYS:
            return ParseError(text, f"unknown tray '{tray}' (trays are {', '.join(TRAYS)})")
    if parts.get("to_tray") == parts["tray"]:
        return ParseError(text, f"transfer from and to the same tray '{parts['tray']}'")
    return PackingInstruction(kind, **parts)


def format_instruction(instr: PackingInstruction) -> str:
    """The canonical text, e.g. "Transfer the coffee mug from the medium tray to the large tray."."""
    return _TEMPLATES[instr.type].format(item=instr.item, tray=instr.tray, to_tray=instr.to_tray)
