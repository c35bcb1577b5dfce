"""The judge's verdict: a tier of the R^3 rubric (Appendix D.2), its score and a readable reason."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Tier(str, enum.Enum):
    """Rubric tiers, best first. The score is a function of the tier, never set on its own."""

    LINGUISTIC = "linguistic_match"  # same type and components, paraphrases allowed
    ADVERB_MISMATCH = "adverb_mismatch"  # as above except "slightly" / "a bit"
    SEMANTIC = "semantic_match"  # different words, same outcome in the scene
    NO_MATCH = "no_match"
    INVALID = "invalid_candidate"  # the candidate is not an instruction of the grammar


TIER_SCORES: dict[Tier, float] = {
    Tier.LINGUISTIC: 1.0,
    Tier.ADVERB_MISMATCH: 0.5,
    Tier.SEMANTIC: 0.25,
    Tier.NO_MATCH: 0.0,
    Tier.INVALID: 0.0,
}
#: The four score classes, in the order used for confusion matrices and Cohen's kappa.
SCORE_CLASSES: tuple[float, ...] = (0.0, 0.25, 0.5, 1.0)


@dataclass(frozen=True)
class JudgeResult:
    """One judgement.

    >>> JudgeResult(Tier.ADVERB_MISMATCH, "adverb 'slightly' vs none").to_dict()
    {'score': 0.5, 'tier': 'adverb_mismatch', 'reason': "adverb 'slightly' vs none"}
    """

    tier: Tier
    reason: str

    @property
    def score(self) -> float:
        return TIER_SCORES[self.tier]

    def to_dict(self) -> dict:
        return {"score": self.score, "tier": self.tier.value, "reason": self.reason}


def parse_pair(grammar, candidate: str, reference: str):
    """``(candidate, reference)`` parsed by ``grammar`` (a module with ``parse`` and ``ParseError``),
    or the verdict on a candidate outside it (``invalid_candidate``, the parse error as the reason).
    A reference outside the grammar is a ValueError: that is a bug in the data, not something to
    reward or punish the model for."""
    ref = grammar.parse(reference)
    if isinstance(ref, grammar.ParseError):  # a bad value, not a bad type
        raise ValueError(f"reference {reference!r} does not parse: {ref.reason}")  # noqa: TRY004
    cand = grammar.parse(candidate)
    if isinstance(cand, grammar.ParseError):
        return JudgeResult(Tier.INVALID, f"candidate does not parse: {cand.reason}")
    return cand, ref
