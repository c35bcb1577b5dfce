"""The trace checker: the claims an expert trace makes, verified against the state it was written in.

The experts' traces are Stage I's training data, so every sentence about the scene must be true of
the decision-time state. :func:`check_packing_step` and :func:`check_language_table_step` parse
the claims of one step (where items and blocks are, tray contents, relations and distances, what
the previous instruction did and why it failed, why a non-goal item or block moves) and return one
:class:`Claim` per statement, ``verified`` or not, with the fact it was checked against.

It also holds the scene-equality rules the experts and the evaluation share:
:func:`packing_unchanged` and :func:`board_unchanged` (nothing moved by more than a few
millimetres), and :func:`repeated_refusals`, the count of instructions repeated right after they
were refused in an unchanged scene.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: Items or blocks closer than this to where they were count as not moved (m).
STILL_TOLERANCE = 0.005


@dataclass(frozen=True)
class Claim:
    """One statement of a trace: its kind, its text, and whether the recorded state bears it out."""

    kind: str
    text: str
    verified: bool
    fact: str = ""


# ------------------------------------------------------------------------------------ unchanged scenes
def packing_unchanged(a, b) -> bool:
    """Whether packing state ``b`` shows the scene of the earlier ``a``: the same item held, and no
    item moved in between (each is where it was, and its count of still control steps has not
    restarted, which tells an item dropped back onto its spot from one that never moved)."""
    if a.held != b.held or set(a.items) != set(b.items):
        return False
    return all(math.dist(a.items[n].pos, b.items[n].pos) <= STILL_TOLERANCE
               and b.items[n].still_steps >= a.items[n].still_steps for n in a.items)


def board_unchanged(a, b) -> bool:
    """Whether two Language Table boards show the same scene: no block moved."""
    return set(a.blocks) == set(b.blocks) and all(
        math.dist(a.blocks[n][:2], b.blocks[n][:2]) <= STILL_TOLERANCE for n in a.blocks)


def repeated_refusals(instructions: Sequence[str], errors: Sequence[str], states: Sequence,
                      unchanged: Callable[[object, object], bool]) -> int:
    """How often an instruction that failed was given again, in the scene it failed in, and failed
    again for the same reason. ``states[i]`` is the decision-time state of step i and
    ``states[i + 1]`` the one after it (one more state than steps)."""
    count = 0
    for i in range(1, len(instructions)):
        if (errors[i - 1] and instructions[i] and instructions[i] == instructions[i - 1]
                and errors[i] == errors[i - 1] and unchanged(states[i - 1], states[i])):
            count += 1
    return count


_WORD = r"[a-z]+(?: [a-z]+)*?"
