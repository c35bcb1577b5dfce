"""The gate between a model's answer and the robot: what is refused, what the model is told, when
the episode stops.

Every answer goes through the suite's parser and grammar (``r3.reasoning.parsing``), which checks
the answer's form, the instruction type, every name (blocks, locations, items, trays) and its
components; an answer that does not pass commands no motion. The refusal reason becomes part of the
next step's history (``r3.episode_loop.next_history``), so the model sees why it was refused.
``MAX_CONSECUTIVE_INVALID`` refusals in a row end the episode with the robot holding still.

>>> guard = ResponseGuard()
>>> [guard.observe(False, "no_instruction: ...") for _ in range(3)][-1]
True
>>> guard.abort_reason
'3 consecutive invalid reasoner outputs (last: no_instruction: ...); the robot holds still'
"""

from __future__ import annotations

MAX_CONSECUTIVE_INVALID = 3
#: Longest refusal reason passed back to the model; hostile answers can make very long reasons.
MAX_NOTE_CHARS = 300


def refusal_note(reason: str) -> str:
    """The sentence the model reads at its next step about a refused answer."""
    reason = reason if len(reason) <= MAX_NOTE_CHARS else reason[:MAX_NOTE_CHARS] + "..."
    return f"[Your previous answer was refused and the robot did not move: {reason}]"


class ResponseGuard:
    """Counts consecutive refused answers within one episode."""

    def __init__(self, max_consecutive_invalid: int = MAX_CONSECUTIVE_INVALID):
        if max_consecutive_invalid < 1:
            raise ValueError(f"max_consecutive_invalid={max_consecutive_invalid}: must be >= 1")
        self.max_consecutive_invalid = max_consecutive_invalid
        self.consecutive_invalid = 0
        self.last_reason = ""

    def observe(self, valid: bool, reason: str = "") -> bool:
        """Record one answer; True when the episode must stop."""
        if valid:
            self.consecutive_invalid = 0
            return False
        self.consecutive_invalid += 1
        self.last_reason = reason
        return self.consecutive_invalid >= self.max_consecutive_invalid

    @property
    def abort_reason(self) -> str:
        count, last = self.consecutive_invalid, self.last_reason
        return f"{count} consecutive invalid reasoner outputs (last: {last}); the robot holds still"
