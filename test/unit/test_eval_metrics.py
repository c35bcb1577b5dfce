"""Intervals and metrics of r3.eval against published or hand-computed values."""

from __future__ import annotations

import math

import pytest

from r3.eval import metrics
from r3.eval.metrics import (
    err_metrics,
    mean,
    mean_difference,
    rate,
    rate_difference,
    t_quantile,
    wilson_interval,
)


@pytest.mark.parametrize(
    "k, n, low, high",
    [
        (0, 10, 0.0, 0.2775),  # the normal interval would be [0, 0]
        (10, 10, 0.7225, 1.0),
        (5, 10, 0.2366, 0.7634),
        (81, 263, 0.2553, 0.3662),  # Newcombe (1998), Stat Med 17:857, example (a)
        (15, 148, 0.0624, 0.1605),  # Newcombe (1998), example (b)
    ],
)
def test_wilson_interval_known_cases(k, n, low, high):
    assert wilson_interval(k, n) == pytest.approx((low, high), abs=1e-4)


def test_wilson_interval_edges():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_half_width_matches_r3_table_2_scale():
    # R^3 Table 2 reports iL at 23.3 ± 2.6 over 64 scenes x 16 trials.
    r = rate([True] * 239 + [False] * 785)
    assert round(100 * r.value, 1) == 23.3 and round(100 * r.half_width, 1) == 2.6


@pytest.mark.parametrize(
    "df, expected",
    [
        (1, 12.7062),
        (2, 4.3027),
        (4, 2.7764),
        (5, 2.5706),
        (10, 2.2281),
        (30, 2.0423),
        (63, 1.9983),
        (1e9, 1.9600),
    ],
)
def test_t_quantile_known_values(df, expected):
    assert t_quantile(df) == pytest.approx(expected, abs=1e-3)


def test_mean_interval_is_the_t_interval():
    m = mean([1, 2, 3, 4, 5])
    half = 2.7764 * math.sqrt(2.5 / 5)
    assert (m.value, m.n) == (3.0, 5)
    assert (m.low, m.high) == pytest.approx((3 - half, 3 + half), abs=1e-3)
    one = mean([0.7])  # one value gives no interval (a zero-width one read as certainty)
    assert one.value == 0.7 and math.isnan(one.low) and math.isnan(one.high) and not one.significant
    assert math.isnan(mean([]).value)


def test_rate_difference_newcombe_example():
    # Newcombe (1998) method 10: 56/70 - 48/80 = 0.2000, 95% CI 0.0524 to 0.3339.
    d = rate_difference([False] * 32 + [True] * 48, [True] * 56 + [False] * 14)
    assert d.value == pytest.approx(0.2) and (d.low, d.high) == pytest.approx((0.0524, 0.3339), abs=1e-4)
    assert d.significant
    same = rate_difference([True] * 5 + [False] * 5, [True] * 6 + [False] * 4)
    assert not same.significant and same.low < 0 < same.high


def test_mean_difference_welch():
    a, b = [0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.9]
    d = mean_difference(a, b)
    # Welch: var 0.01667/4 and 0.02917/4, df = 5.73 -> t = 2.47 (tabled 2.4469 at 6 df, 2.5706 at 5)
    se = math.sqrt(0.0166667 / 4 + 0.0291667 / 4)
    assert d.value == pytest.approx(0.425)
    assert 2.44 * se < d.half_width < 2.58 * se and d.significant
    assert mean_difference([1, 1], [1, 1]).half_width == 0
    with pytest.raises(ValueError):
        mean_difference([1.0], [1.0, 2.0])


@pytest.mark.parametrize(
    "df, expected",
    # Student's t 0.975 quantiles at fractional degrees of freedom (R: qt(0.975, df))
    [(1.2, 8.6488), (1.5, 6.0167), (2.5, 3.5747), (3, 3.1824), (7.5, 2.3330)],
)
def test_t_quantile_at_fractional_degrees_of_freedom(df, expected):
    """Found by a hostile sweep: the Cornish-Fisher expansion, used for every df other than 1 and 2,
    is far off below 3; Welch's df of two small evaluations lands there (1.2: 8.14 for 8.65)."""
    assert t_quantile(df) == pytest.approx(expected, rel=1e-4)
    assert t_quantile(df, 0.025) == pytest.approx(-expected, rel=1e-4)


def test_welch_interval_of_two_and_three_progress_values():
    """Welch's df here is 1.009: the interval was 11 % too narrow (half-width 5.566 for 6.236)."""
    a, b = [0.0, 1.0], [0.5, 0.5, 0.6]
    va, vb = 0.5 / 2, (2 * (0.1 / 3) ** 2 + (0.2 / 3) ** 2) / 2 / 3
    df = (va + vb) ** 2 / (va**2 / 1 + vb**2 / 2)
    assert df == pytest.approx(1.0089, abs=1e-4)
    assert mean_difference(a, b).half_width == pytest.approx(12.4444 * math.sqrt(va + vb), rel=1e-3)


def test_err_metrics_sr_pg_npr_ssr():
    episodes = [
        {"success": True, "progress": 1.0, "penalty": 0.0},
        {"success": True, "progress": 1.0, "penalty": 1.5},  # success with a penalty: not strict
        {"success": False, "progress": 0.5, "penalty": 0.0},
        {"success": False, "progress": 1.2, "penalty": 0.5},  # progress clipped to 1
    ]
    m = err_metrics(episodes)
    assert {k: v.value for k, v in m.items()} == {"SR": 0.5, "PG": 0.875, "NPR": 0.5, "SSR": 0.25}
    assert all(v.n == 4 for v in m.values())
    assert set(err_metrics([{"success": True, "progress": 1.0, "penalty": None}])) == {"SR", "PG"}


def test_estimate_significance_excludes_zero():
    assert metrics.Estimate(0.1, 0.01, 0.2, 10).significant
    assert metrics.Estimate(-0.1, -0.2, -0.01, 10).significant
    assert not metrics.Estimate(0.1, -0.01, 0.2, 10).significant


def test_a_difference_without_spread_is_never_significant():
    """Found by a review: values without spread on both sides gave Welch's interval no width, and a
    zero-width interval off 0 was marked significant, even 0.3 against 0.1 + 0.2 (a float's last bit)."""
    noise = metrics.mean_difference([0.3, 0.3], [0.1 + 0.2, 0.1 + 0.2])
    assert noise.value != 0 and noise.low == noise.high and not noise.significant
    assert not metrics.mean_difference([1.0, 1.0], [0.5, 0.5]).significant
    assert not metrics.mean_difference([0.5, 0.5], [0.5, 0.5]).significant
    assert metrics.mean_difference([1.0, 0.9], [0.5, 0.4]).significant  # with spread: as before
