"""The judge figures of `r3 mini`'s report: per split, and paired differences on the same states."""

from __future__ import annotations

import pytest

from r3.mini import MiniError, differences_line, judge_by_split, paired_difference


def _states(scores, splits=None):
    splits = splits or ["T_M"] * len(scores)
    return [
        {"episode_id": f"e{i}", "step": i, "split": split, "judge": score}
        for i, (score, split) in enumerate(zip(scores, splits))
    ]


def test_a_paired_difference_is_the_mean_of_per_state_differences_with_a_narrower_interval():
    a = _states([1.0, 0.25, 1.0, 0.0, 1.0, 0.25])
    b = _states([0.75, 0.0, 0.75, 0.0, 0.75, 0.0])  # a is b plus 0.25 or 0 on every state
    d = paired_difference(a, b)
    assert d.value == pytest.approx(0.25 * 5 / 6)
    assert d.low > 0, "a constant gain on every state is significant when paired"
    assert d.n == 6


def test_states_files_of_other_states_are_refused():
    a, b = _states([1.0, 0.0]), _states([1.0, 0.0])
    b[1]["step"] = 7
    with pytest.raises(MiniError, match="different states"):
        paired_difference(a, b)


def test_unscored_states_are_left_out_per_split():
    states = _states([1.0, None, 0.0, 0.5], ["T_M", "T_M", "T_R", "T_R"])
    by_split = judge_by_split(states)
    assert {s: (e["value"], e["n"]) for s, e in by_split.items()} == {"T_M": (1.0, 1), "T_R": (0.25, 2)}


def test_the_differences_line_names_each_pair():
    line = differences_line({"sft - random_valid": {"value": 0.02, "low": 0.01, "high": 0.03, "n": 500}})
    assert "sft - random_valid: 0.020 ± 0.010" in line
