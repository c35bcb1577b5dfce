"""Scalar reward terms that need no simulator: exact match, length penalty and the LCS reward.

Each function returns one unscaled term; weights are applied by :class:`r3.rewards.RewardComposer`
so that training can log every term on its own (STYLE item 12).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: Default target length of a response in words (R^3 Appendix A.4).
TARGET_WORDS = 80


def normalise_instruction_text(text: str) -> str:
    """Lower-case, collapse whitespace and drop one final period: the only slack exact match allows.

    >>> normalise_instruction_text("  Pack the Soup can  into the small tray. ")
    'pack the soup can into the small tray'
    """
    text = " ".join(text.split()).lower()
    return text[:-1].rstrip() if text.endswith(".") else text


def exact_match(candidate: str, reference: str) -> float:
    """1.0 when the two instructions are the same string up to whitespace, case and a final period.

    This is the packing suite's accuracy reward (R^3 Appendix A.4): its grammar is closed, so any
    paraphrase is a mistake the model should unlearn.

    >>> exact_match("Pack the soup can into the small tray.", "pack the soup can into the  small tray")
    1.0
    >>> exact_match("Pack the soup can into the large tray.", "Pack the soup can into the small tray.")
    0.0
    """
    return float(normalise_instruction_text(candidate) == normalise_instruction_text(reference))


def word_count(text: str) -> int:
    """Number of whitespace-separated words; the unit of the length penalty."""
    return len(text.split())


def length_penalty(text: str, target_words: int = TARGET_WORDS) -> float:
    """``clip(log2(clip(n, 1, T) / T), -1, 0)`` with ``n`` the word count of ``text``.

    Zero once the response reaches ``T`` words; halving the length below ``T`` costs 1, and the
    penalty never goes below -1, so an empty response costs exactly 1.

    >>> length_penalty("word " * 80)
    0.0
    >>> length_penalty("word " * 40)
    -1.0
    >>> round(length_penalty("word " * 60), 4)
    -0.415
    """
    if target_words < 1:
        raise ValueError(f"target_words must be >= 1, got {target_words}")
    n = min(max(word_count(text), 1), target_words)
    return min(max(math.log2(n / target_words), -1.0), 0.0)


def normalise_action(name: str) -> str:
    """Action names compare lower-cased with whitespace collapsed (RoboGPT-R1's ``norm``)."""
    return " ".join(str(name).split()).lower()


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two action-name sequences (O(len(a) * len(b)))."""
    if not a or not b:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b, start=1):
            cur.append(prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1]


def lcs_reward(predicted: Sequence[str], reference: Sequence[str]) -> float:
    """``LCS(predicted, reference) / len(reference)`` over action names (RoboGPT-R1, eq. 8-9).

    Names are compared lower-cased with whitespace collapsed. An empty reference has no
    denominator: an empty prediction then scores 1.0 (nothing was asked, nothing was done) and
    any other prediction 0.0 (every step is superfluous). Extra predicted steps are not penalised
    here; the format reward and the judge see them.

    >>> lcs_reward(["find apple", "pick up apple", "put down"], ["find apple", "Pick up  apple"])
    1.0
    >>> lcs_reward(["put down", "find apple"], ["find apple", "put down"])
    0.5
    """
    ref = [normalise_action(r) for r in reference]
    pred = [normalise_action(p) for p in predicted]
    if not ref:
        return float(not pred)
    return lcs_length(pred, ref) / len(ref)
