"""The rubric judge (R^3 Appendix D.2) with rule-based linguistic tiers and a simulated semantic tier.

Tiers, checked in order (``r3.instructions.language_table.compare`` owns the paraphrase rules):

- 1.0 linguistic match: same instruction type and components; only the rubric's paraphrases
  differ (verb among move/place/slide/push, wording of places and directions, articles and
  equivalent prepositions). "slightly" and "a bit" are one adverb class.
- 0.5 adverb mismatch: as above, except that one side carries an adverb and the other does not.
- 0.25 semantic match: given a simulator snapshot, both instructions executed by the low-level
  policy move the same block and leave every block within a tolerance of the other outcome
  (:mod:`r3.rewards.semantic`).
- 0.0 otherwise, and for a candidate outside the grammar (the reason carries the parse error).

The packing suite has a closed grammar and uses exact string match instead (R^3 Appendix A.4); its
reference must be in that grammar and a candidate outside it is ``invalid_candidate``, as above.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from r3.instructions import language_table, packing
from r3.rewards.result import JudgeResult, Tier, parse_pair
from r3.rewards.semantic import OutcomeSimulator, load_snapshot
from r3.rewards.terms import exact_match
from r3.suites import DEFAULT_SUITE, get_suite


class RuleJudge:
    """Grammar plus simulator judge; picklable, and cheap to build (the env starts on first use).

    >>> judge = RuleJudge()
    >>> judge.judge("Slide the blue cube to the right", "move the blue cube right").to_dict()
    {'score': 1.0, 'tier': 'linguistic_match', 'reason': "same instruction: 'move the blue cube right'"}
    >>> judge.judge("move the blue cube slightly right", "move the blue cube right").score
    0.5
    """

    def __init__(self, simulator: OutcomeSimulator | None = None):
        self.simulator = simulator if simulator is not None else OutcomeSimulator()

    def judge(
        self,
        candidate: str,
        reference: str,
        suite: str = DEFAULT_SUITE,
        snapshot: bytes | str | os.PathLike | None = None,
    ) -> JudgeResult:
        """Score ``candidate`` against the expert's ``reference``; see the module docstring.

        Raises ValueError for an unknown suite or a reference outside the grammar: that is a data
        bug, not something to reward or punish the model for.
        """
        return self.judge_many([(candidate, reference, suite, snapshot)])[0]

    def judge_many(self, pairs: list[tuple]) -> list[JudgeResult]:
        """Judge ``(candidate, reference, suite, snapshot)`` tuples as one batch.

        The verdicts are those of :meth:`judge` one by one; the batch only changes the cost: the
        simulator rollouts that the semantic tier needs are collected first and run once each
        (on the simulator's worker pool when it has one), so a GRPO group's shared reference and
        its repeated candidates are rolled out once.
        """
        return self.resolve([self.text_tiers(*pair) for pair in pairs])

    def resolve(self, verdicts: list[JudgeResult | PendingSemantic]) -> list[JudgeResult]:
        """Finish :meth:`text_tiers` verdicts: the pending ones are decided by batched rollouts."""
        jobs = []
        for v in verdicts:
            if isinstance(v, PendingSemantic):
                jobs += [(v.snapshot, v.candidate), (v.snapshot, v.reference)]
        self.simulator.prefetch(jobs)
        return [self._semantic(v) if isinstance(v, PendingSemantic) else v for v in verdicts]

    def _semantic(self, v: PendingSemantic) -> JudgeResult:
        same, why = self.simulator.same_outcome(v.snapshot, v.candidate, v.reference)
        return JudgeResult(Tier.SEMANTIC if same else Tier.NO_MATCH, f"{v.words}; {why}")

    def text_tiers(
        self,
        candidate: str,
        reference: str,
        suite: str = DEFAULT_SUITE,
        snapshot: bytes | str | os.PathLike | None = None,
    ) -> JudgeResult | PendingSemantic:
        """The verdict of the text tiers, or what the semantic tier must roll out to decide (the
        suite's rule, ``r3.suites.Suite.judge``)."""
        return get_suite(suite).hook("judge")(candidate, reference, snapshot)


def packing_tiers(candidate: str, reference: str, snapshot=None) -> JudgeResult:
    """Text tiers of packing: an instruction of its closed grammar names one placement, so only the
    same text matches."""
    if isinstance(parsed := parse_pair(packing, candidate, reference), JudgeResult):
        return parsed
    if exact_match(candidate, reference):
        return JudgeResult(Tier.LINGUISTIC, "exact match")
    return JudgeResult(Tier.NO_MATCH, f"'{candidate}' differs from '{reference}'")


def grammar_tiers(
    candidate: str, reference: str, snapshot: bytes | str | os.PathLike | None = None
) -> JudgeResult | PendingSemantic:
    """Text tiers of Language Table: the grammar compares the two, and the simulator decides a
    linguistic difference when a snapshot is given."""
    if isinstance(parsed := parse_pair(language_table, candidate, reference), JudgeResult):
        return parsed
    cand, ref = parsed
    verdict = language_table.compare(cand, ref)
    if verdict == language_table.MATCH:
        return JudgeResult(Tier.LINGUISTIC, f"same instruction: '{language_table.format_instruction(ref)}'")
    if verdict == language_table.ADVERB_MISMATCH:
        return JudgeResult(
            Tier.ADVERB_MISMATCH,
            f"same instruction apart from the adverb: candidate {cand.adverb or 'none'}, "
            f"reference {ref.adverb or 'none'}",
        )
    words = (
        f"'{language_table.format_instruction(cand)}' and "
        f"'{language_table.format_instruction(ref)}' differ linguistically"
    )
    if snapshot is None:
        return JudgeResult(Tier.NO_MATCH, f"{words}; no snapshot to compare outcomes")
    return PendingSemantic(cand, ref, load_snapshot(snapshot), words)


@dataclass(frozen=True)
class PendingSemantic:
    """A pair that only the simulated semantic tier can decide (see :meth:`RuleJudge.resolve`)."""

    candidate: language_table.Instruction
    reference: language_table.Instruction
    snapshot: bytes
    words: str


@functools.lru_cache(maxsize=1)
def default_judge() -> RuleJudge:
    """The process-wide judge behind :func:`judge_instruction` (one env, built on first use)."""
    return RuleJudge()


def judge_instruction(
    candidate: str,
    reference: str,
    suite: str = DEFAULT_SUITE,
    snapshot: bytes | str | os.PathLike | None = None,
) -> JudgeResult:
    """Judge one instruction with the process-wide :class:`RuleJudge`.

    >>> judge_instruction(
    ...     "push the red moon into the blue cube", "push the blue cube into the red moon"
    ... ).tier.value
    'no_match'
    >>> print(judge_instruction("move the red block up", "move the red moon up").reason)
    ... # doctest: +NORMALIZE_WHITESPACE
    candidate does not parse: ambiguous block 'the red block': name blocks by colour and shape,
    e.g. 'red moon'
    """
    return default_judge().judge(candidate, reference, suite=suite, snapshot=snapshot)
