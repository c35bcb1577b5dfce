"""Geometric success checkers for the 14 Language Table tasks (R^3 Appendix A.1).

Every task is judged by a list of :class:`Constraint`: one named raw term (a distance in metres, or
a ratio), a limit and a direction. Success means every constraint holds; progress is the mean of a
per-constraint score that is 1 when the constraint holds and decays with the normalised residual.
Shapes whose blocks may play any role (V, L, T, rectangle, ...) are judged under the best role
assignment, which ``tasks.py`` searches; the builders here take one fixed assignment.

Thresholds below were chosen for blocks ~0.044 m wide pushed by an imperfect policy: tight enough
that a passing layout reads as the named shape in the top-down image, loose enough that blocks left
a centimetre or two off their ideal spot still pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# --- group / gris / iip ------------------------------------------------------------------------
#: group: every selected block within this of the 4 blocks' centroid. A touching 2x2 cluster sits at
#: ~0.031 m; 0.075 m still accepts a cluster with a gap of about one block width, not two scattered pairs.
GROUP_RADIUS = 0.075
#: gris: each of the 2 blocks within this of their shared centre, i.e. centres at most 0.09 m apart
#: (a gap under one block width between the footprints).
GRIS_RADIUS = 0.045
#: gris / iip: every other block's centre at least this far from the isolated block(s); leaves a
#: free ring wider than one block around them, clearly visible as "alone".
ISOLATION_DISTANCE = 0.10
#: iip: the target may drift at most this far from its initial position (under a block width,
#: so it still reads as "in place" although pushing nearby blocks nudges it).
IIP_MAX_DRIFT = 0.03

# --- straight lines ----------------------------------------------------------------------------
#: line: max minus min of the blocks' coordinate across the line; about one block width.
LINE_MAX_SPREAD = 0.05
#: line: neighbouring blocks at least this far apart along the line. Two blocks side by side across
#: the line would otherwise pass the spread test; touching blocks in a row are ~0.044 m apart.
LINE_MIN_SPACING = 0.04
#: diag_line: max minus min of the offsets across the 45-degree line.
DIAG_MAX_SPREAD = 0.05
#: diag_line: neighbours at least this far apart along the diagonal, so that the spread tolerance
#: cannot turn a short pair into a horizontal or vertical one (keeps the line visibly slanted).
DIAG_MIN_SPACING = 0.06

# --- V and inverted V --------------------------------------------------------------------------
#: V / iV: the two edge blocks' heights differ by at most this ("roughly horizontal" edge).
V_MAX_EDGE_TILT = 0.03
#: V / iV: the edge blocks at least this far apart horizontally, so the apex sits between two arms.
V_MIN_WIDTH = 0.08
#: V / iV: the apex at least this far below (above, for iV) the edge's mid-height.
V_MIN_DEPTH = 0.04
#: V / iV: the apex's horizontal offset from the edge midpoint is at most this.
V_APEX_TOL = 0.03

# --- L and inverted L --------------------------------------------------------------------------
#: L / iL: each arm block at least this far from the corner along its arm direction.
L_MIN_ARM = 0.05
#: L / iL: each arm block's sideways offset from the corner's row / column is at most this.
L_ALIGN_TOL = 0.03

# --- T -----------------------------------------------------------------------------------------
#: T: max minus min height of the three bar blocks.
T_BAR_SPREAD = 0.04
#: T: neighbouring bar blocks at least this far apart horizontally (touching blocks: ~0.044 m).
T_BAR_MIN_SPACING = 0.04
#: T: the stem's horizontal offset from the bar's mean x is at most this.
T_STEM_TOL = 0.03
#: T: the stem lies between these distances below the bar's mean height: low enough to be a stem,
#: close enough to attach to the bar rather than float away from it.
T_STEM_MIN_DROP = 0.04
T_STEM_MAX_DROP = 0.12

# --- rectangle ---------------------------------------------------------------------------------
#: rect: blocks sharing a side differ by at most this across that side (axis-aligned corners).
RECT_ALIGN_TOL = 0.03
#: rect: every side at least this long, a clear gap between corner blocks in both directions.
RECT_MIN_SIDE = 0.08

# --- midpoint ----------------------------------------------------------------------------------
#: mid: the midpoint block within this fraction of the endpoint spacing from the segment midpoint.
MID_REL_TOL = 0.2
#: mid: the endpoints at least this far apart, room for the midpoint block between them.
MID_MIN_SPAN = 0.10

# --- clearing regions --------------------------------------------------------------------------
#: clear_qtr / clear_half: a block centre must be at least this far past the region's boundary;
#: a centre sitting on the board's centre line is ambiguous in the image.
CLEAR_MARGIN = 0.01

# --- progress ----------------------------------------------------------------------------------
#: A metric residual of this size halves that constraint's progress score.
PROGRESS_SCALE = 0.10
#: The same for dimensionless residuals (mid's offset / span ratio).
RATIO_PROGRESS_SCALE = 0.5
#: Progress of an unsolved layout never exceeds this, so 1.0 means success and nothing else.
MAX_UNSOLVED_PROGRESS = 0.999


@dataclass(frozen=True)
class Constraint:
    """One raw term and its limit: ``value <= limit`` if ``upper`` else ``value >= limit``."""

    name: str
    value: float
    limit: float
    upper: bool
    scale: float = PROGRESS_SCALE

    def residual(self, slack: float = 0.0) -> float:
        """How far the term is from its limit, with the limit tightened by the fraction ``slack``."""
        if self.upper:
            return max(0.0, self.value - self.limit * (1.0 - slack))
        return max(0.0, self.limit * (1.0 + slack) - self.value)


def at_most(name: str, value: float, limit: float, scale: float = PROGRESS_SCALE) -> Constraint:
    return Constraint(name, float(value), limit, True, scale)


def at_least(name: str, value: float, limit: float, scale: float = PROGRESS_SCALE) -> Constraint:
    return Constraint(name, float(value), limit, False, scale)


def holds(constraints: list[Constraint], slack: float = 0.0) -> bool:
    return all(c.residual(slack) == 0.0 for c in constraints)


def score(constraints: list[Constraint]) -> float:
    """Progress in [0, 1]: 1.0 iff every constraint holds, else the mean of 1 / (1 + residual/scale)."""
    if holds(constraints):
        return 1.0
    mean = float(np.mean([1.0 / (1.0 + c.residual() / c.scale) for c in constraints]))
    return min(mean, MAX_UNSOLVED_PROGRESS)


Points = dict[str, np.ndarray]


def group(P: Points, blocks: tuple[str, ...], radius: float = GROUP_RADIUS) -> list[Constraint]:
    centre = np.mean([P[b] for b in blocks], axis=0)
    return [at_most(f"centroid_dist[{b}]", np.linalg.norm(P[b] - centre), radius) for b in blocks]


def isolation(P: Points, isolated: tuple[str, ...]) -> list[Constraint]:
    """Every block outside ``isolated`` at least ISOLATION_DISTANCE from the nearest isolated one."""
    return [
        at_least(f"clearance[{o}]", min(np.linalg.norm(P[o] - P[b]) for b in isolated), ISOLATION_DISTANCE)
        for o in P
        if o not in isolated
    ]


def iip(P: Points, target: str, origin: np.ndarray) -> list[Constraint]:
    return [at_most("drift", np.linalg.norm(P[target] - origin), IIP_MAX_DRIFT)] + isolation(P, (target,))


def straight_line(
    P: Points, blocks: tuple[str, ...], along: np.ndarray, max_spread: float, min_spacing: float
) -> list[Constraint]:
    """Blocks on one line of direction ``along``: narrow across it, spaced along it (any order)."""
    across = np.array([-along[1], along[0]])
    pts = np.array([P[b] for b in blocks])
    a, q = np.sort(pts @ along), pts @ across
    gaps = [at_least(f"spacing[{i}]", a[i + 1] - a[i], min_spacing) for i in range(len(a) - 1)]
    return [at_most("spread", q.max() - q.min(), max_spread)] + gaps


def apex_shape(P: Points, roles: tuple[str, str, str], sign: float) -> list[Constraint]:
    """V (sign +1, apex below the edge) or inverted V (sign -1); roles: edge left, edge right, apex."""
    (xa, ya), (xb, yb), (xc, yc) = (P[r] for r in roles)
    return [
        at_most("edge_tilt", abs(ya - yb), V_MAX_EDGE_TILT),
        at_least("width", xb - xa, V_MIN_WIDTH),
        at_least("depth", sign * ((ya + yb) / 2 - yc), V_MIN_DEPTH),
        at_most("apex_offset", abs(xc - (xa + xb) / 2), V_APEX_TOL),
    ]


def ell_shape(P: Points, roles: tuple[str, str, str], sign: float) -> list[Constraint]:
    """L (sign +1: arms up and right) or inverted L (-1: down and left); roles: corner, vertical,
    horizontal."""
    (xc, yc), (xv, yv), (xh, yh) = (P[r] for r in roles)
    return [
        at_least("vertical_arm", sign * (yv - yc), L_MIN_ARM),
        at_most("vertical_offset", abs(xv - xc), L_ALIGN_TOL),
        at_least("horizontal_arm", sign * (xh - xc), L_MIN_ARM),
        at_most("horizontal_offset", abs(yh - yc), L_ALIGN_TOL),
    ]


def tee_shape(P: Points, roles: tuple[str, str, str, str]) -> list[Constraint]:
    """T; roles: bar left, bar middle, bar right, stem."""
    bar = np.array([P[r] for r in roles[:3]])
    xs, ys = P[roles[3]]
    bar_x, bar_y = bar.mean(axis=0)
    drop = bar_y - ys
    return [
        at_most("bar_spread", np.ptp(bar[:, 1]), T_BAR_SPREAD),
        at_least("bar_spacing[0]", bar[1, 0] - bar[0, 0], T_BAR_MIN_SPACING),
        at_least("bar_spacing[1]", bar[2, 0] - bar[1, 0], T_BAR_MIN_SPACING),
        at_most("stem_offset", abs(xs - bar_x), T_STEM_TOL),
        at_least("stem_drop", drop, T_STEM_MIN_DROP),
        at_most("stem_reach", drop, T_STEM_MAX_DROP),
    ]


def rectangle(P: Points, roles: tuple[str, str, str, str]) -> list[Constraint]:
    """Axis-aligned rectangle; roles: top left, top right, bottom left, bottom right."""
    tl, tr, bl, br = (P[r] for r in roles)
    return [
        at_most("left_offset", abs(tl[0] - bl[0]), RECT_ALIGN_TOL),
        at_most("right_offset", abs(tr[0] - br[0]), RECT_ALIGN_TOL),
        at_most("top_offset", abs(tl[1] - tr[1]), RECT_ALIGN_TOL),
        at_most("bottom_offset", abs(bl[1] - br[1]), RECT_ALIGN_TOL),
        at_least("top_width", tr[0] - tl[0], RECT_MIN_SIDE),
        at_least("bottom_width", br[0] - bl[0], RECT_MIN_SIDE),
        at_least("left_height", tl[1] - bl[1], RECT_MIN_SIDE),
        at_least("right_height", tr[1] - br[1], RECT_MIN_SIDE),
    ]


def midpoint(P: Points, roles: tuple[str, str, str]) -> list[Constraint]:
    """Roles: midpoint block, then the two endpoints."""
    m, a, b = (P[r] for r in roles)
    span = float(np.linalg.norm(a - b))
    offset = float(np.linalg.norm(m - (a + b) / 2))
    return [
        at_least("span", span, MID_MIN_SPAN),
        at_most("relative_offset", offset / max(span, 1e-9), MID_REL_TOL, RATIO_PROGRESS_SCALE),
    ]


def outside_distance(pts: np.ndarray, region: tuple[int, int]) -> np.ndarray:
    """How far each (N, 2) point lies past the boundary of ``region`` (negative: inside).

    ``region`` = (sx, sy) picks the side of each centre line: (-1, 1) is the top-left quarter,
    (0, 1) the top half (0 = that axis does not bound the region).
    """
    d = np.full(len(pts), -np.inf)
    for axis, s in enumerate(region):
        if s:
            d = np.maximum(d, -s * pts[:, axis])
    return d


def clear_region(P: Points, region: tuple[int, int]) -> list[Constraint]:
    names = list(P)
    d = outside_distance(np.array([P[n] for n in names]), region)
    return [at_least(f"outside[{n}]", v, CLEAR_MARGIN) for n, v in zip(names, d)]
