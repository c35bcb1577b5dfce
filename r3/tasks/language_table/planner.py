"""Target layouts for the expert: where each block should go to satisfy a task, near where it is.

A task proposes candidate target layouts for its selected blocks (``TaskSpec.proposals``); this
module turns each candidate into a full plan (moves other blocks out of the way or out of a
region), rejects plans that would not pass the checker with margin, and keeps the one with the
smallest total displacement. Smallest displacement is what keeps re-planning stable: blocks that
are already placed cost nothing to keep, so a slightly changed state yields the same plan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from r3.tasks.language_table.board import BOARD_HALF_EXTENTS

#: Planned block centres stay at least this far apart (a block is ~0.044 m wide, plus a margin
#: for an imprecise push).
PLAN_SPACING = 0.06
#: Planned centres stay at least this far inside the usable board edge.
PLAN_BORDER = 0.04
#: A plan must pass every checker limit tightened by this fraction (upper limits x0.75, lower x1.25),
#: so an imperfect push towards the targets still succeeds.
PLAN_SAFETY = 0.25
#: A plan uses at most this fraction of an offset tolerance on each side of its ideal line / point.
PLAN_BAND = 0.3
#: Minimum lengths (arm, width, spacing) are planned at this multiple of the checker's minimum.
PLAN_STRETCH = 1.6
#: Targets closer than this to a block's current centre are not moves (the block is already fine).
PLAN_MIN_MOVE = 0.005
#: Clearing tasks: destinations lie at least this far past the region's boundary.
PLAN_CLEAR_OUT = 0.03
#: Isolation tasks: pushed-away blocks come to rest at least this far from the isolated block(s).
PLAN_ISOLATION = 0.135
#: Resolution of the grid searched for free destinations.
GRID_STEP = 0.005

#: Largest |x|, |y| of a planned centre.
LIMITS = np.array([BOARD_HALF_EXTENTS[0] - PLAN_BORDER, BOARD_HALF_EXTENTS[1] - PLAN_BORDER])
_xs = np.arange(-LIMITS[0], LIMITS[0] + 1e-9, GRID_STEP)
_ys = np.arange(-LIMITS[1], LIMITS[1] + 1e-9, GRID_STEP)
#: Every candidate destination on the usable board, (M, 2).
GRID = np.stack(np.meshgrid(_xs, _ys), axis=-1).reshape(-1, 2)

Points = dict[str, np.ndarray]
#: rest_ok(proposal_final, points, strict) -> bool mask: may another block rest at each point?
#: strict=False is the test for "must move" (the checker limit with margin), strict=True the
#: stricter test for destinations, so that moved blocks do not land on the edge of the limit.
RestOk = Callable[[Points, np.ndarray, bool], np.ndarray]


def anywhere(proposal: Points, pts: np.ndarray, strict: bool) -> np.ndarray:
    return np.ones(len(pts), dtype=bool)


def free_spot(near: np.ndarray, taken: Iterable[np.ndarray], cand: np.ndarray = GRID):
    """The point of ``cand`` (default: the whole grid) nearest ``near`` and PLAN_SPACING from ``taken``."""
    taken = np.array(list(taken), dtype=float).reshape(-1, 2)
    if len(taken) and len(cand):
        cand = cand[np.linalg.norm(cand[:, None, :] - taken[None, :, :], axis=-1).min(axis=1) >= PLAN_SPACING]
    if not len(cand):
        return None
    return cand[np.argmin(np.linalg.norm(cand - near, axis=1))]


def spaced(values: np.ndarray, gap: float, lo: float = -np.inf, hi: float = np.inf) -> np.ndarray:
    """Closest (least squares) sequence to sorted ``values`` with steps >= ``gap`` inside [lo, hi].

    Subtracting i*gap turns the step constraint into monotonicity, solved by pool-adjacent-violators;
    values that are already far enough apart come back unchanged.
    """
    n = len(values)
    u = np.asarray(values, dtype=float) - gap * np.arange(n)
    pools: list[list[float]] = []
    for v in u:
        pools.append([v, 1.0])
        while len(pools) > 1 and pools[-2][0] / pools[-2][1] > pools[-1][0] / pools[-1][1]:
            s, c = pools.pop()
            pools[-1][0] += s
            pools[-1][1] += c
    u = np.concatenate([np.full(int(c), s / c) for s, c in pools])
    return np.clip(u, lo, hi - gap * (n - 1)) + gap * np.arange(n)


def widen(lo: float, hi: float, width: float) -> list[tuple[float, float]]:
    """Ways to make hi - lo >= width: unchanged if it is, else symmetric / keep lo / keep hi."""
    if hi - lo >= width:
        return [(lo, hi)]
    mid = (lo + hi) / 2
    return [(mid - width / 2, mid + width / 2), (lo, lo + width), (hi - width, hi)]


def band(value: float, centre: float, tol: float) -> float:
    """``value`` moved just enough to lie within PLAN_BAND * tol of ``centre``."""
    half = PLAN_BAND * tol
    return float(np.clip(value, centre - half, centre + half))


def _fit_board(proposal: Points, current: Points) -> Points | None:
    """Translate the proposal inside the planning limits if a moved target is outside them."""
    pts = np.array([proposal[n] for n in proposal]).reshape(-1, 2)
    moving = np.array([np.linalg.norm(proposal[n] - current[n]) > PLAN_MIN_MOVE for n in proposal])
    if not moving.any() or np.all(np.abs(pts[moving]) <= LIMITS + 1e-12):
        return proposal
    lo, hi = -LIMITS - pts.min(axis=0), LIMITS - pts.max(axis=0)
    if np.any(lo > hi):
        return None
    shift = np.clip(0.0, lo, hi)
    return {n: p + shift for n, p in proposal.items()}


def _clear_way(current: Points, proposal: Points, moved: Points, rest_ok: RestOk) -> Points | None:
    """Moves for the blocks outside the proposal that are in the way or in a forbidden place."""
    final = {n: moved.get(n, current[n]) for n in proposal}
    others = [n for n in current if n not in proposal]
    if not others:
        return dict(moved)
    pts = np.array([current[n] for n in others])
    must = ~rest_ok(final, pts, False)
    if moved:
        near = np.linalg.norm(pts[:, None] - np.array(list(moved.values()))[None], axis=-1).min(axis=1)
        must |= near < PLAN_SPACING
    taken = list(final.values()) + [current[n] for n, m in zip(others, must) if not m]
    allowed = GRID[rest_ok(final, GRID, True)]
    out: Points = {}  # blocks in the way first: the dict order is a sensible execution order
    for n in (n for n, m in zip(others, must) if m):
        spot = free_spot(current[n], taken, allowed)
        if spot is None:
            return None
        out[n] = spot
        taken.append(spot)
    return {**out, **moved}


def _well_spaced(final: Points, moves: Points) -> bool:
    return all(
        np.linalg.norm(final[m] - final[o]) >= PLAN_SPACING - 1e-9 for m in moves for o in final if o != m
    )


def best_plan(
    current: Points,
    proposals: Iterable[Points],
    verify: Callable[[Points], bool],
    rest_ok: RestOk = anywhere,
) -> dict[str, tuple[float, float]]:
    """The cheapest verified plan over ``proposals``: {block: target} for every block that moves,
    blocks that clear the way first.

    Candidates are tried in order of their own displacement; clearing the way only adds cost, so the
    search stops once no untried candidate can beat the best verified plan. Returns {} if the layout
    already passes with margin, or if no candidate verifies (the task's proposals are built so
    that this does not happen in practice).
    """
    if verify(current):
        return {}
    ranked = []
    for i, prop in enumerate(proposals):
        prop = _fit_board({n: np.asarray(p, dtype=float) for n, p in prop.items()}, current)
        if prop is None:
            continue
        moved = {n: p for n, p in prop.items() if np.linalg.norm(p - current[n]) > PLAN_MIN_MOVE}
        cost = sum(float(np.linalg.norm(p - current[n])) for n, p in moved.items())
        ranked.append((cost, i, prop, moved))
    ranked.sort(key=lambda r: r[:2])
    best: tuple[float, Points] | None = None
    for cost, _, prop, moved in ranked:
        if best is not None and cost >= best[0]:
            break
        moves = _clear_way(current, prop, moved, rest_ok)
        if moves is None:
            continue
        final = {**current, **moves}
        if not _well_spaced(final, moves) or not verify(final):
            continue
        total = sum(float(np.linalg.norm(p - current[n])) for n, p in moves.items())
        if best is None or total < best[0]:
            best = (total, moves)
    if best is None:
        return {}
    return {n: (float(p[0]), float(p[1])) for n, p in best[1].items()}


def clearing_reason(
    current: Points, plan: Points, block: str, goal_blocks: Iterable[str], rest_ok: RestOk = anywhere
) -> tuple[str, str | None]:
    """Why ``block``, which is not one of the goal's blocks, moves in ``plan`` (as ``_clear_way`` decided):
    ("in_the_way", other) when it stands within PLAN_SPACING of goal block ``other``'s planned spot,
    ("forbidden", None) when the goal does not let any block rest where it is.
    """
    goal_blocks = list(goal_blocks)
    p = np.asarray(current[block], dtype=float)
    targets = {b: np.asarray(plan[b], dtype=float) for b in goal_blocks if b in plan}
    near = sorted((float(np.linalg.norm(t - p)), b) for b, t in targets.items())
    if near and near[0][0] < PLAN_SPACING:
        return "in_the_way", near[0][1]
    final = {b: np.asarray(plan.get(b, current[b]), dtype=float) for b in goal_blocks}
    if not bool(rest_ok(final, p.reshape(1, 2), False)[0]):
        return "forbidden", None
    return "in_the_way", near[0][1] if near else None
