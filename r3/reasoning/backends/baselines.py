"""R^3's random baselines as reasoner backends, so they run in the same harness as every model.

``random_valid`` answers a uniformly random canonical instruction of the Language Table grammar
(:func:`r3.reasoning.constrained.canonical_instructions`, 1,467 of them); ``random_goal_block`` a
uniformly random one among those that push or touch a block the goal names (every block when the
goal names none, as "clear every block out of the bottom half"). Both read only the goal text, never
the image or the simulator state, and answer in the input's mode ("Reasoning: ..." first in reason
mode, so the answer parses). The draw is a function of (``seed``, the episode's seed, the step), so a
rerun gives the same episode.

>>> from r3.reasoning.backends import make_backend
>>> make_backend("random_goal_block,seed=3").model_id
'random_goal_block'
"""

from __future__ import annotations

import functools
import time
from typing import ClassVar

import numpy as np

from r3.reasoning.backends.base import FULL_REASONING, BackendOutput, ReasonerBackend, ReasoningBudget
from r3.reasoning.backends.spec import MAX_SEED, Option
from r3.reasoning.prompts import INSTRUCTION_HEADER, REASONING_HEADER, ReasonerInput

SUITE = "language_table"


@functools.cache
def _instructions() -> tuple[tuple[str, str | None], ...]:
    """(canonical text, the block it moves or touches; None for an arm move) of every instruction."""
    from r3.instructions.language_table import parse
    from r3.reasoning.constrained import canonical_instructions

    return tuple((text, parse(text).block) for text in canonical_instructions(SUITE))


def goal_blocks(goal: str) -> tuple[str, ...]:
    """The blocks ``goal`` names; every block when it names none.

    >>> goal_blocks("put the red moon and blue cube next to each other")
    ('red moon', 'blue cube')
    >>> len(goal_blocks("clear every block out of the bottom half of the board"))
    8
    """
    from r3.tasks.language_table.board import BLOCKS

    named = tuple(b for b in BLOCKS if b in goal)
    return named or tuple(BLOCKS)


class RandomInstructionBackend(ReasonerBackend):
    """A random canonical instruction each step: any (``goal_only`` False) or one naming a goal block.
    Subclasses name their spec (``SPEC``) and choose ``goal_only``."""

    SPEC_OPTIONS: ClassVar[dict[str, Option]] = {
        "seed": Option(int, f"seed of the random draws, in [0, {MAX_SEED}]", low=0, high=MAX_SEED)
    }
    SPEC: ClassVar[str]
    goal_only: ClassVar[bool]

    def __init__(self, seed: int = 0):
        self.seed, self.model_id = seed, self.SPEC

    @classmethod
    def from_spec(cls, rest: str, **options) -> RandomInstructionBackend:
        if rest:
            raise ValueError(f"{cls.SPEC} takes no argument, got {rest!r}")
        return cls(**options)

    def choices(self, goal: str) -> list[str]:
        """The instructions this baseline draws from for ``goal``."""
        if not self.goal_only:
            return [text for text, _ in _instructions()]
        blocks = set(goal_blocks(goal))
        return [text for text, block in _instructions() if block in blocks]

    def _generate(self, messages, prefix, max_tokens, stop, on_text):
        raise NotImplementedError("a random baseline answers whole steps in decide()")

    def decide(
        self, inp: ReasonerInput, budget: ReasoningBudget = FULL_REASONING, on_text=None
    ) -> BackendOutput:
        start = time.perf_counter()
        if inp.suite != SUITE or inp.interface != "instruction":
            raise ValueError(f"{self.model_id} answers Language Table instructions, not {inp.suite}")
        rng = np.random.default_rng([self.seed, int(inp.extra.get("seed") or 0), inp.step])
        options = self.choices(inp.goal)
        instruction = options[int(rng.integers(len(options)))]
        text = f"{INSTRUCTION_HEADER} {instruction}"
        if inp.mode == "reason":
            text = f"{REASONING_HEADER} a random choice, made without looking at the board.\n{text}"
        if on_text is not None:
            on_text(text)
        elapsed = time.perf_counter() - start
        return BackendOutput(
            text, "stop", None, len(text.split()), None, elapsed, elapsed, self.model_id, 1, False
        )


class RandomValidBackend(RandomInstructionBackend):
    """Spec ``random_valid[,seed=N]``: a uniformly random canonical instruction."""

    SPEC, goal_only = "random_valid", False


class RandomGoalBlockBackend(RandomInstructionBackend):
    """Spec ``random_goal_block[,seed=N]``: a random canonical instruction that names a goal block."""

    SPEC, goal_only = "random_goal_block", True
