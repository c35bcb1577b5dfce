"""The 14 Language Table tasks of R^3 (Appendix A.1): sampling, goal text, checking and planning.

``TASKS`` maps a task name to its :class:`TaskSpec`; ``spec.sample(rng, state)`` picks the blocks and
variant for a layout and returns a :class:`TaskInstance`, which checks success and progress,
reports raw terms, and plans target positions for the expert. Thresholds live in ``checkers.py``,
planning margins in ``planner.py``. ROS-free.

>>> import numpy as np
>>> from r3.tasks.language_table.board import BLOCKS, BoardState
>>> xs = np.linspace(-0.2, 0.2, len(BLOCKS))
>>> state = BoardState(
...     {b: (x, 0.1 * (-1) ** i, 0.0) for i, (b, x) in enumerate(zip(BLOCKS, xs))}, (0.0, -0.15)
... )
>>> inst = get_task("V").sample(np.random.default_rng(0), state)
>>> inst.success(state), 0.0 <= inst.progress(state) < 1.0
(False, True)
>>> moved = {b: (*inst.plan(state).get(b, state.blocks[b][:2]), 0.0) for b in state.blocks}
>>> inst.success(BoardState(moved, state.pusher))
True
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import permutations, product

import numpy as np

from r3.tasks.language_table import checkers as ck
from r3.tasks.language_table import planner as pl
from r3.tasks.language_table.board import BLOCKS, BoardState

Points = dict[str, np.ndarray]
Fit = tuple[tuple[str, ...], list[ck.Constraint]]

#: Draws tried before sample() gives up on finding a task that the layout does not already solve.
SAMPLE_TRIES = 200

SPLITS: dict[str, tuple[str, ...]] = {
    "T_M": ("group", "line", "V", "L", "clear_qtr", "iip"),
    "T_R": ("T", "gris", "iV"),
    "T_O": ("diag_line", "rect", "mid", "iL", "clear_half"),
}

#: Quarter / half name -> region sign pair (see checkers.outside_distance).
QUARTERS: dict[str, tuple[int, int]] = {
    "top left": (-1, 1),
    "top right": (1, 1),
    "bottom left": (-1, -1),
    "bottom right": (1, -1),
}
HALVES: dict[str, tuple[int, int]] = {"top": (0, 1), "bottom": (0, -1), "left": (-1, 0), "right": (1, 0)}
#: diag_line variant -> unit direction of the line (the sign does not matter to the checker).
DIAGONALS: dict[str, tuple[float, float]] = {
    "top left to bottom right": (0.70710678, -0.70710678),
    "bottom left to top right": (0.70710678, 0.70710678),
}
AXES: dict[str, tuple[float, float]] = {"horizontal": (1.0, 0.0), "vertical": (0.0, 1.0)}


def _cm(metres: float) -> str:
    return f"{metres * 100:g} cm"


def _join(blocks: tuple[str, ...]) -> str:
    """'the red moon, blue cube and yellow star'."""
    if len(blocks) == 1:
        return f"the {blocks[0]}"
    return "the " + ", ".join(blocks[:-1]) + " and " + blocks[-1]


def _points(state: BoardState) -> Points:
    return {n: np.array(v[:2], dtype=float) for n, v in state.blocks.items()}


@dataclass(frozen=True)
class TaskInstance:
    """One sampled task: which blocks, which variant, and the goal text given to the reasoner.

    ``params`` holds only JSON types; it always has ``phrasing`` (index of the goal template) and
    the task's variant (``axis``, ``diagonal``, ``quarter``, ``half``, ``midpoint``, ``origin``).
    """

    task: str
    blocks: tuple[str, ...]
    params: dict = field(hash=False)
    goal: str

    @property
    def spec(self) -> TaskSpec:
        return TASKS[self.task]

    @property
    def note(self) -> str:
        """Short task-specific note for the reasoner prompt: what counts as done."""
        return self.spec.note(self)

    def _best(self, P: Points) -> Fit:
        """The role assignment with the highest progress (first one on ties)."""
        return max(self.spec.fits(self, P), key=lambda fit: ck.score(fit[1]))

    def satisfied(self, P: Points, slack: float = 0.0) -> bool:
        """Success on raw positions, optionally with every limit tightened by ``slack``."""
        return any(ck.holds(cons, slack) for _, cons in self.spec.fits(self, P))

    def success(self, state: BoardState) -> bool:
        return self.satisfied(_points(state))

    def progress(self, state: BoardState) -> float:
        return self.progress_at(_points(state))

    def progress_at(self, P: Points) -> float:
        """Progress on raw positions (block name -> (x, y)), as :meth:`satisfied` takes them."""
        return ck.score(self._best(P)[1])

    def terms(self, state: BoardState) -> dict[str, float]:
        """Raw constraint values (metres, or ratios) under the best role assignment."""
        return {c.name: c.value for c in self._best(_points(state))[1]}

    def roles(self, state: BoardState) -> dict[str, str]:
        """Role -> block under the best assignment (e.g. {'apex': 'red moon', ...}); {} if roleless."""
        return dict(zip(self.spec.role_names, self._best(_points(state))[0]))

    def plan(self, state: BoardState) -> dict[str, tuple[float, float]]:
        """Target (x, y) for every block that must move; see planner.best_plan."""
        P = _points(state)
        return pl.best_plan(
            P,
            self.spec.proposals(self, P),
            lambda final: self.satisfied(final, pl.PLAN_SAFETY),
            lambda final, pts, strict: self.spec.rest_ok(self, final, pts, strict),
        )

    def to_dict(self) -> dict:
        return {
            "task": self.task,
            "blocks": list(self.blocks),
            "params": dict(self.params),
            "goal": self.goal,
        }


class TaskSpec:
    """A task family. Subclasses define the checker (``fits``), the planner's candidate layouts
    (``proposals``), the variants and the wording; sampling and serialisation are shared."""

    name: str = ""
    n_blocks: int = 0
    phrasings: tuple[str, ...] = ()
    role_names: tuple[str, ...] = ()

    # --- contract -------------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator, state: BoardState) -> TaskInstance:
        """A task instance that the given layout does not already solve.

        Raises RuntimeError if SAMPLE_TRIES draws all come out solved (only for degenerate layouts,
        e.g. clear_qtr with every block already outside every quarter's margin).
        """
        for _ in range(SAMPLE_TRIES):
            blocks, params = self._draw(rng, _points(state))
            params["phrasing"] = int(rng.integers(len(self.phrasings)))
            inst = TaskInstance(self.name, blocks, params, self._goal(blocks, params))
            if not inst.success(state):
                return inst
        raise RuntimeError(f"{self.name}: every sampled instance is already solved in this layout")

    def from_dict(self, data: dict) -> TaskInstance:
        if data["task"] != self.name:
            raise ValueError(f"{self.name}.from_dict got a {data['task']!r} instance")
        return TaskInstance(self.name, tuple(data["blocks"]), dict(data["params"]), data["goal"])

    # --- per task -------------------------------------------------------------------------------
    def _draw(self, rng: np.random.Generator, P: Points) -> tuple[tuple[str, ...], dict]:
        """Blocks and variant params (without ``phrasing``)."""
        return tuple(str(b) for b in rng.choice(BLOCKS, self.n_blocks, replace=False)), {}

    def _fields(self, blocks: tuple[str, ...], params: dict) -> dict:
        return {"blocks": _join(blocks)}

    def _goal(self, blocks: tuple[str, ...], params: dict) -> str:
        return self.phrasings[params["phrasing"]].format(**self._fields(blocks, params))

    def fits(self, inst: TaskInstance, P: Points) -> Iterator[Fit]:
        raise NotImplementedError

    def note(self, inst: TaskInstance) -> str:
        raise NotImplementedError

    def proposals(self, inst: TaskInstance, P: Points) -> Iterator[Points]:
        raise NotImplementedError

    def rest_ok(self, inst: TaskInstance, final: Points, pts: np.ndarray, strict: bool) -> np.ndarray:
        """Where blocks outside the proposal may rest (default: anywhere not in the way)."""
        return pl.anywhere(final, pts, strict)


# ------------------------------------------------------------------------------------------------
class Group(TaskSpec):
    name, n_blocks = "group", 4
    phrasings = (
        "group {blocks} together",
        "push {blocks} into one tight cluster",
        "gather {blocks} close together in one spot",
    )

    def fits(self, inst, P):
        yield (), ck.group(P, inst.blocks)

    def note(self, inst):
        return (
            f"Grouped means every one of the four blocks is within {_cm(ck.GROUP_RADIUS)} of the "
            "four blocks' common centre; touching each other is best. Other blocks do not matter."
        )

    def proposals(self, inst, P):
        others = [P[o] for o in P if o not in inst.blocks]
        half = pl.PLAN_SPACING * 0.55  # 2x2 slots 0.066 m apart, 0.047 m from their centre
        slots = [np.array([sx * half, sy * half]) for sx in (-1, 1) for sy in (-1, 1)]
        # Anchored on one block, which stays put: the rest gather around it, or all take the slots
        # of a 2x2 square with the anchor in one corner. An anchor keeps re-planning stable.
        for anchor in inst.blocks:
            greedy = self._gather(inst.blocks, P, P[anchor], others)
            if greedy is not None:
                yield greedy
            for corner in slots:
                centre = P[anchor] - corner
                yield min(
                    ({b: centre + s for b, s in zip(inst.blocks, perm)} for perm in permutations(slots)),
                    key=lambda prop: sum(np.linalg.norm(prop[b] - P[b]) for b in prop),
                )

    @staticmethod
    def _gather(blocks, P, centre, others) -> Points | None:
        """Keep blocks already near ``centre``; bring the rest to the nearest free spot near it."""
        radius = 0.6 * ck.GROUP_RADIUS
        disk = pl.GRID[np.linalg.norm(pl.GRID - centre, axis=1) <= radius]
        placed: Points = {}
        for b in sorted(blocks, key=lambda b: np.linalg.norm(P[b] - centre)):
            if np.linalg.norm(P[b] - centre) <= radius and all(
                np.linalg.norm(P[b] - q) >= pl.PLAN_SPACING for q in placed.values()
            ):
                placed[b] = P[b]
                continue
            spot = pl.free_spot(P[b], [*placed.values(), *others], disk)
            if spot is None:
                spot = pl.free_spot(P[b], placed.values(), disk)
            if spot is None:
                return None
            placed[b] = spot
        return placed


class GroupIsolate(TaskSpec):
    name, n_blocks = "gris", 2
    phrasings = (
        "group {blocks} together and keep every other block away from them",
        "put {blocks} next to each other, apart from all the other blocks",
        "bring {blocks} together in a spot with no other block nearby",
    )

    def fits(self, inst, P):
        yield (), ck.group(P, inst.blocks, ck.GRIS_RADIUS) + ck.isolation(P, inst.blocks)

    def note(self, inst):
        return (
            f"The two blocks count as grouped when their centres are at most {_cm(2 * ck.GRIS_RADIUS)} "
            f"apart, and isolated when every other block is more than {_cm(ck.ISOLATION_DISTANCE)} "
            "from both of them."
        )

    def rest_ok(self, inst, final, pts, strict):
        limit = pl.PLAN_ISOLATION if strict else ck.ISOLATION_DISTANCE * (1 + pl.PLAN_SAFETY)
        pair = np.array([final[b] for b in inst.blocks])
        return np.linalg.norm(pts[:, None] - pair[None], axis=-1).min(axis=1) >= limit

    def proposals(self, inst, P):
        a, b = inst.blocks
        others = np.array([P[o] for o in P if o not in inst.blocks])
        yield {a: P[a], b: P[b]}
        pair_gap = pl.PLAN_SPACING * 1.05  # inside 2 * GRIS_RADIUS * (1 - PLAN_SAFETY) = 0.0675 m
        for keep, move in ((a, b), (b, a)):
            dist = np.linalg.norm(pl.GRID - P[keep], axis=1)
            spot = pl.free_spot(P[move], others, pl.GRID[(dist >= pl.PLAN_SPACING) & (dist <= pair_gap)])
            if spot is not None:
                yield {keep: P[keep], move: spot}
        # Or move the pair somewhere already empty: the emptiest spot, and the nearest roomy one.
        clearance = np.linalg.norm(pl.GRID[:, None] - others[None], axis=-1).min(axis=1)
        roomy = clearance >= pl.PLAN_ISOLATION + pair_gap / 2
        mid = (P[a] + P[b]) / 2
        spots = [pl.GRID[np.argmax(clearance)]]
        if roomy.any():
            spots.append(pl.GRID[roomy][np.argmin(np.linalg.norm(pl.GRID[roomy] - mid, axis=1))])
        d = P[a] - P[b]
        u = d / np.linalg.norm(d) if np.linalg.norm(d) > 1e-9 else np.array([1.0, 0.0])
        for spot in spots:
            yield {a: spot + u * pair_gap / 2, b: spot - u * pair_gap / 2}


class IsolateInPlace(TaskSpec):
    name, n_blocks = "iip", 1
    phrasings = (
        "isolate the {target} where it is",
        "keep the {target} in place and move every other block away from it",
        "clear the space around the {target} without moving it",
    )

    def _draw(self, rng, P):
        crowded = [b for b in BLOCKS if not ck.holds(ck.isolation(P, (b,)))]
        target = str(rng.choice(crowded or list(BLOCKS)))
        return (target,), {"origin": [float(v) for v in P[target]]}

    def _fields(self, blocks, params):
        return {"target": blocks[0]}

    def fits(self, inst, P):
        yield (), ck.iip(P, inst.blocks[0], np.array(inst.params["origin"]))

    def note(self, inst):
        return (
            f"The {inst.blocks[0]} must stay within {_cm(ck.IIP_MAX_DRIFT)} of where it started, and "
            f"every other block must end up more than {_cm(ck.ISOLATION_DISTANCE)} from it. Push the "
            "neighbours away without touching it."
        )

    def rest_ok(self, inst, final, pts, strict):
        limit = pl.PLAN_ISOLATION if strict else ck.ISOLATION_DISTANCE * (1 + pl.PLAN_SAFETY)
        return np.linalg.norm(pts - final[inst.blocks[0]], axis=1) >= limit

    def proposals(self, inst, P):
        target = inst.blocks[0]
        origin = np.array(inst.params["origin"])
        if np.linalg.norm(P[target] - origin) <= pl.PLAN_BAND * ck.IIP_MAX_DRIFT:
            yield {target: P[target]}
        yield {target: origin}


def _line_proposals(P: Points, blocks, along, max_spread, min_spacing, lo=-np.inf, hi=np.inf, side=np.inf):
    """Lines of direction ``along`` near the blocks: each block keeps its order along the line and
    moves the least to fit a narrow band around a chosen offset (the median or any block's). A
    compact variant (neighbours one gap apart around the median) covers blocks spread too far."""
    along = np.asarray(along, dtype=float)
    across = np.array([-along[1], along[0]])
    pts = np.array([P[b] for b in blocks])
    a, q = pts @ along, pts @ across
    order = np.argsort(a, kind="stable")
    gap = max(min_spacing * pl.PLAN_STRETCH, pl.PLAN_SPACING)
    spread_out, compact = np.empty_like(a), np.empty_like(a)
    spread_out[order] = pl.spaced(a[order], gap, lo, hi)
    compact[order] = pl.spaced(np.full(len(a), np.median(a)), gap, lo, hi)
    half = pl.PLAN_BAND * max_spread
    for new_a in (spread_out, compact):
        for q0 in (float(np.median(q)), *q, 0.0):
            q0 = float(np.clip(q0, -side + half, side - half))
            new_q = np.clip(q, q0 - half, q0 + half)
            yield {b: new_a[i] * along + new_q[i] * across for i, b in enumerate(blocks)}


class Line(TaskSpec):
    name, n_blocks = "line", 4
    phrasings = (
        "arrange {blocks} in a {axis} line",
        "make a straight {axis} line out of {blocks}",
        "line up {blocks} along one {axis} line",
    )

    def _draw(self, rng, P):
        blocks, _ = super()._draw(rng, P)
        return blocks, {"axis": str(rng.choice(list(AXES)))}

    def _fields(self, blocks, params):
        return {"blocks": _join(blocks), "axis": params["axis"]}

    def fits(self, inst, P):
        yield (
            (),
            ck.straight_line(
                P, inst.blocks, np.array(AXES[inst.params["axis"]]), ck.LINE_MAX_SPREAD, ck.LINE_MIN_SPACING
            ),
        )

    def note(self, inst):
        across = "heights" if inst.params["axis"] == "horizontal" else "horizontal positions"
        return (
            f"A {inst.params['axis']} line: the four blocks' {across} differ by at most "
            f"{_cm(ck.LINE_MAX_SPREAD)}, and neighbours along the line are at least "
            f"{_cm(ck.LINE_MIN_SPACING)} apart (side by side, not stacked). The order does not matter."
        )

    def proposals(self, inst, P):
        k = 0 if inst.params["axis"] == "horizontal" else 1
        yield from _line_proposals(
            P,
            inst.blocks,
            AXES[inst.params["axis"]],
            ck.LINE_MAX_SPREAD,
            ck.LINE_MIN_SPACING,
            -pl.LIMITS[k],
            pl.LIMITS[k],
            pl.LIMITS[1 - k],
        )


class DiagonalLine(TaskSpec):
    name, n_blocks = "diag_line", 3
    phrasings = (
        "arrange {blocks} in a diagonal line running from the {diagonal}",
        "make a diagonal line with {blocks}, going from the {diagonal}",
        "line up {blocks} diagonally, from the {diagonal}",
    )

    def _draw(self, rng, P):
        blocks, _ = super()._draw(rng, P)
        return blocks, {"diagonal": str(rng.choice(list(DIAGONALS)))}

    def _fields(self, blocks, params):
        return {"blocks": _join(blocks), "diagonal": params["diagonal"]}

    def fits(self, inst, P):
        yield (
            (),
            ck.straight_line(
                P,
                inst.blocks,
                np.array(DIAGONALS[inst.params["diagonal"]]),
                ck.DIAG_MAX_SPREAD,
                ck.DIAG_MIN_SPACING,
            ),
        )

    def note(self, inst):
        return (
            f"The three blocks must lie on one 45-degree line from the {inst.params['diagonal']}: "
            f"their offsets across that line differ by at most {_cm(ck.DIAG_MAX_SPREAD)}, and "
            f"neighbours are at least {_cm(ck.DIAG_MIN_SPACING)} apart along it."
        )

    def proposals(self, inst, P):
        yield from _line_proposals(
            P, inst.blocks, DIAGONALS[inst.params["diagonal"]], ck.DIAG_MAX_SPREAD, ck.DIAG_MIN_SPACING
        )


class ApexShape(TaskSpec):
    """V (apex below a horizontal edge) and inverted V (apex above it)."""

    n_blocks = 3

    def __init__(self, name: str, sign: float, phrasings: tuple[str, ...]):
        self.name, self.sign, self.phrasings = name, sign, phrasings
        edge = "upper" if sign > 0 else "lower"
        self.role_names = (f"{edge} left", f"{edge} right", "apex")

    def fits(self, inst, P):
        for roles in permutations(inst.blocks):
            yield roles, ck.apex_shape(P, roles, self.sign)

    def note(self, inst):
        edge, side = ("upper", "below") if self.sign > 0 else ("lower", "above")
        return (
            f"Two blocks form a level {edge} edge (heights within {_cm(ck.V_MAX_EDGE_TILT)}, at least "
            f"{_cm(ck.V_MIN_WIDTH)} apart side to side); the third block is the apex, at least "
            f"{_cm(ck.V_MIN_DEPTH)} {side} the edge and within {_cm(ck.V_APEX_TOL)} of its midpoint "
            "horizontally. Any block may take any role."
        )

    def proposals(self, inst, P):
        s = self.sign
        width, depth = ck.V_MIN_WIDTH * pl.PLAN_STRETCH, ck.V_MIN_DEPTH * pl.PLAN_STRETCH
        for a, b, c in permutations(inst.blocks):
            (xa, ya), (xb, yb), (xc, yc) = P[a], P[b], P[c]
            for level in ((ya + yb) / 2, ya, yb):
                for xa2, xb2 in pl.widen(xa, xb, width):
                    ya2, yb2 = pl.band(ya, level, ck.V_MAX_EDGE_TILT), pl.band(yb, level, ck.V_MAX_EDGE_TILT)
                    xm, ym = (xa2 + xb2) / 2, (ya2 + yb2) / 2
                    xc2 = pl.band(xc, xm, ck.V_APEX_TOL)
                    lift = 0.0 if s * (ym - yc) >= depth else (yc + s * depth) - ym
                    # Either the apex moves to the edge, or the edge moves to the apex.
                    apex_y = ym - s * depth if lift else yc
                    yield {a: np.array([xa2, ya2]), b: np.array([xb2, yb2]), c: np.array([xc2, apex_y])}
                    if lift:
                        yield {
                            a: np.array([xa2, ya2 + lift]),
                            b: np.array([xb2, yb2 + lift]),
                            c: np.array([xc2, yc]),
                        }


class EllShape(TaskSpec):
    """L (arms up and right of the corner) and inverted L (arms down and left)."""

    n_blocks = 3

    def __init__(self, name: str, sign: float, phrasings: tuple[str, ...]):
        self.name, self.sign, self.phrasings = name, sign, phrasings
        self.role_names = (
            ("corner", "upper arm", "right arm") if sign > 0 else ("corner", "lower arm", "left arm")
        )

    def fits(self, inst, P):
        for roles in permutations(inst.blocks):
            yield roles, ck.ell_shape(P, roles, self.sign)

    def note(self, inst):
        up, right = ("above", "right of") if self.sign > 0 else ("below", "left of")
        return (
            f"One block is the corner; one sits at least {_cm(ck.L_MIN_ARM)} {up} it in the same column "
            f"and one at least {_cm(ck.L_MIN_ARM)} {right} it in the same row (each within "
            f"{_cm(ck.L_ALIGN_TOL)} of the corner's column / row). Any block may take any role."
        )

    def proposals(self, inst, P):
        s, arm, tol = self.sign, ck.L_MIN_ARM * pl.PLAN_STRETCH, ck.L_ALIGN_TOL

        def reach(base: float, value: float) -> float:  # value pushed at least `arm` past base
            return base + s * max(s * (value - base), arm)

        for c, v, h in permutations(inst.blocks):
            (xc, yc), (xv, yv), (xh, yh) = P[c], P[v], P[h]
            corners = (  # anchored on the corner, on the vertical arm, on the horizontal arm
                (xc, yc),
                (pl.band(xc, xv, tol), yv - s * max(s * (yv - yc), arm)),
                (xh - s * max(s * (xh - xc), arm), pl.band(yc, yh, tol)),
            )
            for x0, y0 in corners:
                yield {
                    c: np.array([x0, y0]),
                    v: np.array([pl.band(xv, x0, tol), reach(y0, yv)]),
                    h: np.array([reach(x0, xh), pl.band(yh, y0, tol)]),
                }


class TeeShape(TaskSpec):
    name, n_blocks = "T", 4
    role_names = ("bar left", "bar middle", "bar right", "stem")
    phrasings = (
        "make a T-shape with {blocks}",
        "arrange {blocks} into the letter T",
        "form a T out of {blocks}, three across the top and one below the middle",
    )

    def fits(self, inst, P):
        for stem in inst.blocks:
            for bar in permutations([b for b in inst.blocks if b != stem]):
                yield (*bar, stem), ck.tee_shape(P, (*bar, stem))

    def note(self, inst):
        return (
            f"Three blocks form a horizontal bar (heights within {_cm(ck.T_BAR_SPREAD)}, neighbours at "
            f"least {_cm(ck.T_BAR_MIN_SPACING)} apart); the fourth is the stem, within "
            f"{_cm(ck.T_STEM_TOL)} of the bar's centre horizontally and {_cm(ck.T_STEM_MIN_DROP)} to "
            f"{_cm(ck.T_STEM_MAX_DROP)} below it. Any block may take any role."
        )

    def proposals(self, inst, P):
        gap = max(ck.T_BAR_MIN_SPACING * pl.PLAN_STRETCH, pl.PLAN_SPACING)
        lo_drop, hi_drop = ck.T_STEM_MIN_DROP * pl.PLAN_STRETCH, ck.T_STEM_MAX_DROP * 0.6
        for stem in inst.blocks:
            bar = sorted((b for b in inst.blocks if b != stem), key=lambda b: P[b][0])
            xb = pl.spaced(np.array([P[b][0] for b in bar]), gap, -pl.LIMITS[0], pl.LIMITS[0])
            yb = np.array([P[b][1] for b in bar])
            xs, ys = P[stem]
            for level in (float(np.median(yb)), float(yb.mean())):
                yb2 = np.array([pl.band(y, level, ck.T_BAR_SPREAD) for y in yb])
                xm, ym = float(xb.mean()), float(yb2.mean())
                xs2 = pl.band(xs, xm, ck.T_STEM_TOL)
                drop = float(np.clip(ym - ys, lo_drop, hi_drop))
                # Either the stem moves under the bar, or the bar moves over the stem.
                for bar_shift, stem_y in ((0.0, ym - drop), ((ys + drop) - ym, ys)):
                    prop = {b: np.array([xb[i], yb2[i] + bar_shift]) for i, b in enumerate(bar)}
                    prop[stem] = np.array([xs2, stem_y])
                    yield prop


class Rectangle(TaskSpec):
    name, n_blocks = "rect", 4
    role_names = ("top left", "top right", "bottom left", "bottom right")
    phrasings = (
        "place {blocks} at the four corners of a rectangle",
        "make a rectangle with {blocks}",
        "arrange {blocks} as the corners of an upright rectangle",
    )

    def fits(self, inst, P):
        for roles in permutations(inst.blocks):
            yield roles, ck.rectangle(P, roles)

    def note(self, inst):
        return (
            f"One block per corner of an axis-aligned rectangle: blocks sharing a side line up within "
            f"{_cm(ck.RECT_ALIGN_TOL)}, and every side is at least {_cm(ck.RECT_MIN_SIDE)} long. Any "
            "block may take any corner."
        )

    def proposals(self, inst, P):
        """Per role assignment, each side lines up on the mean of its two blocks; for the two
        assignments that follow the current layout, also on either block alone, so a block that is
        already placed stays the reference while its partners are brought to it."""
        side, tol = ck.RECT_MIN_SIDE * pl.PLAN_STRETCH, ck.RECT_ALIGN_TOL
        top2, bottom2 = (sorted(inst.blocks, key=lambda b: -P[b][1])[k : k + 2] for k in (0, 2))
        left2, right2 = (sorted(inst.blocks, key=lambda b: P[b][0])[k : k + 2] for k in (0, 2))
        (tl, bl), (tr, br) = (sorted(half, key=lambda b: -P[b][1]) for half in (left2, right2))
        natural = {
            (*sorted(top2, key=lambda b: P[b][0]), *sorted(bottom2, key=lambda b: P[b][0])),
            (tl, tr, bl, br),
        }
        for roles in permutations(inst.blocks):
            tl, tr, bl, br = roles
            pairs = ((P[tl][0], P[bl][0]), (P[tr][0], P[br][0]), (P[tl][1], P[tr][1]), (P[bl][1], P[br][1]))
            refs = [tuple((u + v) / 2 for u, v in pairs)]
            if roles in natural:
                refs += product(*pairs)
            for left, right, top, bottom in refs:
                for x0, x1 in pl.widen(left, right, side):
                    for y0, y1 in pl.widen(bottom, top, side):
                        yield {
                            b: np.array([pl.band(P[b][0], x, tol), pl.band(P[b][1], y, tol)])
                            for b, x, y in ((tl, x0, y1), (tr, x1, y1), (bl, x0, y0), (br, x1, y0))
                        }


class Midpoint(TaskSpec):
    name, n_blocks = "mid", 3
    role_names = ("midpoint", "end", "other end")
    phrasings = (
        "put the {mid} halfway between the {a} and the {b}",
        "place the {mid} at the midpoint of the {a} and the {b}",
        "move blocks so that the {mid} sits exactly in the middle of the {a} and the {b}",
    )

    def _draw(self, rng, P):
        blocks, _ = super()._draw(rng, P)
        return blocks, {"midpoint": blocks[0]}

    def _fields(self, blocks, params):
        return {"mid": blocks[0], "a": blocks[1], "b": blocks[2]}

    def fits(self, inst, P):
        yield inst.blocks, ck.midpoint(P, inst.blocks)

    def note(self, inst):
        m, a, b = inst.blocks
        return (
            f"The {m} must sit at the middle of the segment from the {a} to the {b}, off by at most "
            f"{ck.MID_REL_TOL:.0%} of that segment's length, and the {a} and {b} must be at least "
            f"{_cm(ck.MID_MIN_SPAN)} apart. Only the {m} has to be the midpoint; moving an end works too."
        )

    def proposals(self, inst, P):
        m, a, b = inst.blocks
        span = float(np.linalg.norm(P[b] - P[a]))
        u = (P[b] - P[a]) / span if span > 1e-9 else np.array([1.0, 0.0])
        s0 = float(P[a] @ u)
        for lo, hi in pl.widen(s0, s0 + span, ck.MID_MIN_SPAN * pl.PLAN_STRETCH):
            pa, pb = P[a] + (lo - s0) * u, P[a] + (hi - s0) * u
            centre, off = (pa + pb) / 2, P[m] - (pa + pb) / 2
            radius = pl.PLAN_BAND * ck.MID_REL_TOL * (hi - lo)
            norm = float(np.linalg.norm(off))
            pm = P[m] if norm <= radius else centre + off * (radius / norm)
            yield {m: pm, a: pa, b: pb}
        for keep, move in ((a, b), (b, a)):  # or keep the midpoint block and mirror one end
            if 2 * np.linalg.norm(P[m] - P[keep]) >= ck.MID_MIN_SPAN * pl.PLAN_STRETCH:
                yield {m: P[m], keep: P[keep], move: 2 * P[m] - P[keep]}


class ClearRegion(TaskSpec):
    """Clear a quarter or a half of the board: every block centre out of it."""

    n_blocks = 0

    def __init__(self, name: str, key: str, regions: dict[str, tuple[int, int]], phrasings: tuple[str, ...]):
        self.name, self.key, self.regions, self.phrasings = name, key, regions, phrasings

    def _draw(self, rng, P):
        occupied = [r for r, signs in self.regions.items() if not ck.holds(ck.clear_region(P, signs))]
        return (), {self.key: str(rng.choice(occupied or list(self.regions)))}

    def _fields(self, blocks, params):
        return {"region": params[self.key]}

    def fits(self, inst, P):
        yield (), ck.clear_region(P, self.regions[inst.params[self.key]])

    def note(self, inst):
        return (
            f"Done when no block's centre lies in the {inst.params[self.key]} {self.key} of the board "
            f"(at least {_cm(ck.CLEAR_MARGIN)} past the centre line); blocks pushed out must not "
            "come back, and pushing them well past the line is safest."
        )

    def rest_ok(self, inst, final, pts, strict):
        limit = pl.PLAN_CLEAR_OUT if strict else ck.CLEAR_MARGIN * (1 + pl.PLAN_SAFETY)
        return ck.outside_distance(pts, self.regions[inst.params[self.key]]) >= limit

    def proposals(self, inst, P):
        yield {}


TASKS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        Group(),
        Line(),
        ApexShape(
            "V",
            1.0,
            (
                "make a V-shape with {blocks}",
                "arrange {blocks} into a V",
                "form the letter V using {blocks}",
            ),
        ),
        EllShape(
            "L",
            1.0,
            (
                "make an L-shape with {blocks}",
                "arrange {blocks} into the letter L",
                "form an L out of {blocks}",
            ),
        ),
        ClearRegion(
            "clear_qtr",
            "quarter",
            QUARTERS,
            (
                "clear every block out of the {region} quarter of the board",
                "move all the blocks out of the {region} quarter",
                "leave the {region} quarter of the board empty",
            ),
        ),
        IsolateInPlace(),
        TeeShape(),
        GroupIsolate(),
        ApexShape(
            "iV",
            -1.0,
            (
                "make an inverted V-shape with {blocks}",
                "arrange {blocks} into an upside-down V",
                "form an inverted V out of {blocks}, the point at the top",
            ),
        ),
        DiagonalLine(),
        Rectangle(),
        Midpoint(),
        EllShape(
            "iL",
            -1.0,
            (
                "make an inverted L-shape with {blocks}",
                "arrange {blocks} into an upside-down L, arms pointing down and to the left",
                "form an inverted L out of {blocks}",
            ),
        ),
        ClearRegion(
            "clear_half",
            "half",
            HALVES,
            (
                "clear every block out of the {region} half of the board",
                "move all the blocks out of the {region} half",
                "leave the {region} half of the board empty",
            ),
        ),
    )
}


def get_task(name: str) -> TaskSpec:
    try:
        return TASKS[name]
    except KeyError:
        raise KeyError(f"unknown Language Table task {name!r}; known: {', '.join(TASKS)}") from None
