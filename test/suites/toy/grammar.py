"""The toy suite's instructions: ``step left`` or ``step right``, in any case and spacing."""

from __future__ import annotations

from r3.instructions.language_table import ParseError

STEPS = {"left": -1, "right": +1}


def parse(text: str) -> int | ParseError:
    """The step (-1 or +1) of an instruction, or why it is none."""
    words = text.lower().split()
    if len(words) == 2 and words[0] == "step" and words[1] in STEPS:
        return STEPS[words[1]]
    return ParseError(text, f"not a number-line instruction: {text[:40]!r} (say 'step left' or 'step right')")


def format_instruction(step: int) -> str:
    return "step left" if step < 0 else "step right"
