"""Episode metrics with 95% confidence intervals: one module for every harness.

Interval methods (chosen so that 0 % and 100 % rates and small samples behave):

- success-type rates: the **Wilson score interval** (never leaves [0, 1], keeps its coverage at 0 %
  and 100 % where the normal interval collapses to zero width). It is not centred on the rate, so
  tables print its two ends, ``rate [low, high]``, and R^3's ``rate ± h`` only where both ends are
  equally far from the rate at the digits shown (:func:`interval_text`); CSVs carry both ends.
- means of bounded scores (progress): the **Student t interval**, mean ± t(0.975, n-1) s/sqrt(n)
  (none from one value: tables show it as ``(n=1)``).
- differences of rates (``r3 eval compare``): **Newcombe's hybrid score interval** (method 10),
  built from the two Wilson intervals (lopsided near 0 % and 100 %: tables print it by the same
  rule); a difference is significant when the interval excludes 0,
  which for R^3's symmetric ``Δ ± CI`` is the rule |Δ| > CI.
- differences of means: Welch's t interval (Welch-Satterthwaite degrees of freedom); with no spread
  on either side it has no width, and such a difference is never significant (values all equal
  on each side say nothing of the spread Welch's interval needs).

Episodes are treated as independent draws, also the trials of one scene (as R^3's 64 x 16 counts).

ERR's metrics for tool-using harnesses, per episode then averaged: success rate (SR), progress (PG,
progress over the goal's total, clipped to [0, 1]), no-penalty rate (NPR: no penalty incurred) and
strict success rate (SSR: success with no penalty). An episode is a mapping with ``success`` (bool),
``progress`` (in [0, 1]) and, for NPR/SSR, ``penalty`` (>= 0; None when the harness has none).

>>> e = [{"success": True, "progress": 1.0, "penalty": 0.0},
...      {"success": True, "progress": 1.0, "penalty": 0.5},
...      {"success": False, "progress": 0.5, "penalty": 0.0},
...      {"success": False, "progress": 0.0, "penalty": 1.0}]
>>> {k: round(v.value, 3) for k, v in err_metrics(e).items()}
{'SR': 0.5, 'PG': 0.625, 'NPR': 0.5, 'SSR': 0.25}
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

#: Two-sided level of every interval here.
LEVEL = 0.95
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its 95% interval [low, high] over ``n`` episodes."""

    value: float
    low: float
    high: float
    n: int

    @property
    def half_width(self) -> float:
        """Half the interval's width: the ``±`` printed in tables."""
        return (self.high - self.low) / 2

    @property
    def significant(self) -> bool:
        """The interval excludes 0 and has a width (meaningful for differences): one of no width comes
        only from values without spread, where 0.3 - (0.1 + 0.2), a float's last bit, would count."""
        return (self.low > 0 or self.high < 0) and self.low < self.high


def interval_text(
    value: float, low: float, high: float, *, scale: float = 100, digits: int = 1, signed=False
) -> str:
    """``value ± h`` where the interval [low, high] is as far from ``value`` on both sides at the
    ``digits`` shown (a t interval), else ``value [low, high]``: a Wilson or Newcombe interval is not
    centred on its estimate, and near 0 % or 100 % "100.0 ± 39.7" would claim rates above 100 % and
    hide that the interval reaches down to 20.7. Values are multiplied by ``scale``; ``signed``
    prints a sign on each (differences).

    >>> interval_text(0.5, 0.4, 0.6), interval_text(1.0, 0.207, 1.0)
    ('50.0 ± 10.0', '100.0 [20.7, 100.0]')
    >>> interval_text(0.1, -0.05, 0.2, signed=True)
    '+10.0 [-5.0, +20.0]'
    """
    shown = f"{{:{'+' if signed else ''}.{digits}f}}".format
    below, above = (f"{scale * v:.{digits}f}" for v in (value - low, high - value))
    if below == above:
        return f"{shown(scale * value)} ± {above}"
    return f"{shown(scale * value)} [{shown(scale * low)}, {shown(scale * high)}]"


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial rate; (0, 1) when ``n`` is 0.

    >>> [round(v, 4) for v in wilson_interval(0, 10)]
    [0.0, 0.2775]
    >>> [round(v, 4) for v in wilson_interval(5, 10)]
    [0.2366, 0.7634]
    >>> wilson_interval(10, 10)[1], wilson_interval(0, 3)[0]
    (1.0, 0.0)
    """
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, n={n}], got {successes}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # The interval holds p exactly; in floating point its ends can miss p by an ulp at 0 % and 100 %.
    return min(p, max(0.0, centre - half)), max(p, min(1.0, centre + half))


#: Degrees of freedom from which the Cornish-Fisher expansion is used (under 1e-5 off from here up);
#: below, the quantile is found on the exact distribution function.
_EXPANSION_DF = 10


def t_quantile(df: float, p: float = 0.975) -> float:
    """Quantile of Student's t for any ``df`` > 0 (Welch's degrees of freedom are fractional): found
    by bisection on the exact distribution function below 10 degrees of freedom, from there the
    Cornish-Fisher expansion (Abramowitz & Stegun 26.7.5; under 1e-5 off).

    >>> [round(t_quantile(df), 3) for df in (1, 1.5, 10, 1e9)]
    [12.706, 6.017, 2.228, 1.96]
    """
    if df <= 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if p < 0.5:
        return -t_quantile(df, 1 - p)
    if df < _EXPANSION_DF:
        lo, hi = 0.0, 1.0
        while _t_cdf(hi, df) < p:
            lo, hi = hi, 2 * hi
        for _ in range(100):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if _t_cdf(mid, df) < p else (lo, mid)
        return (lo + hi) / 2
    z = _normal_quantile(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def _t_cdf(t: float, df: float) -> float:
    """Student's t distribution function at ``t`` >= 0: 1 - I_x(df/2, 1/2) / 2 with x = df / (df + t^2)."""
    return 1 - _regularized_beta(df / (df + t * t), df / 2, 0.5) / 2


def _regularized_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction (Lentz's method)."""
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    if x > (a + 1) / (a + b + 2):  # the fraction converges fast on this side
        return 1 - _regularized_beta(1 - x, b, a)
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 1000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1) < 1e-15:
            break
    return front * f / a


def _normal_quantile(p: float) -> float:
    """Standard normal quantile by bisection on erf (exact to ~1e-12; only called a few times)."""
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def rate(flags: Iterable[bool]) -> Estimate:
    """Share of true flags with its Wilson interval.

    >>> r = rate([True] * 3 + [False]); (r.value, r.n)
    (0.75, 4)
    """
    flags = [bool(f) for f in flags]
    k, n = sum(flags), len(flags)
    low, high = wilson_interval(k, n)
    return Estimate(k / n if n else float("nan"), low, high, n)


def mean(values: Iterable[float]) -> Estimate:
    """Mean with its t interval; NaN ends for one value (one value gives no interval: a zero-width one
    would read as certainty), all NaN for none.

    >>> m = mean([0.0, 1.0]); (m.value, round(m.high, 3))
    (0.5, 6.853)
    """
    x = [float(v) for v in values]
    n = len(x)
    if n == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    m = sum(x) / n
    if n == 1:
        return Estimate(m, float("nan"), float("nan"), 1)
    half = t_quantile(n - 1) * math.sqrt(_variance(x, m) / n)
    return Estimate(m, m - half, m + half, n)


def _variance(x: Sequence[float], m: float) -> float:
    return sum((v - m) ** 2 for v in x) / (len(x) - 1)


def rate_difference(a: Sequence[bool], b: Sequence[bool]) -> Estimate:
    """Rate of ``b`` minus rate of ``a`` with Newcombe's hybrid score interval.

    >>> d = rate_difference([True] * 56 + [False] * 14, [True] * 48 + [False] * 32)
    >>> round(d.value, 4), round(d.low, 4), round(d.high, 4)
    (-0.2, -0.3339, -0.0524)
    """
    ra, rb = rate(a), rate(b)
    d = rb.value - ra.value
    low = d - math.sqrt((rb.value - rb.low) ** 2 + (ra.high - ra.value) ** 2)
    high = d + math.sqrt((rb.high - rb.value) ** 2 + (ra.value - ra.low) ** 2)
    return Estimate(d, low, high, ra.n + rb.n)


def mean_difference(a: Sequence[float], b: Sequence[float]) -> Estimate:
    """Mean of ``b`` minus mean of ``a`` with Welch's t interval (needs two values on each side)."""
    a, b = [float(v) for v in a], [float(v) for v in b]
    if len(a) < 2 or len(b) < 2:
        raise ValueError("a difference of means needs at least two values on each side")
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    va, vb = _variance(a, ma) / len(a), _variance(b, mb) / len(b)
    d = mb - ma
    if va + vb == 0:
        return Estimate(d, d, d, len(a) + len(b))
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = t_quantile(df) * math.sqrt(va + vb)
    return Estimate(d, d - half, d + half, len(a) + len(b))


def err_metrics(episodes: Sequence[Mapping]) -> dict[str, Estimate]:
    """ERR's SR, PG, NPR and SSR over ``episodes`` (NPR and SSR only when every episode has a penalty)."""
    out = {
        "SR": rate(e["success"] for e in episodes),
        "PG": mean(min(1.0, max(0.0, float(e["progress"]))) for e in episodes),
    }
    if episodes and all(e.get("penalty") is not None for e in episodes):
        out["NPR"] = rate(e["penalty"] == 0 for e in episodes)
        out["SSR"] = rate(e["success"] and e["penalty"] == 0 for e in episodes)
    return out
