"""Free-space search for item footprints in a rectangle (tray floor or table band).

Footprints are the axis-aligned bounding boxes of the items' rotated rectangles (exact at yaw 0 and
pi/2, where layouts put them; conservative in between, where a grasp may have turned them), and a
gap of :data:`~r3.tasks.packing.workcell.PLACE_GAP` keeps neighbours from touching. Used by the
layout sampler (random spots) and by the packing policy (deterministic corner-first spots).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from r3.tasks.packing.workcell import ITEM_SPECS, PLACE_GAP

Rect = tuple[tuple[float, float], tuple[float, float]]  # (x range, y range)
Box = tuple[float, float, float, float]  # centre x, centre y, half x, half y
#: Candidate grid spacing (m).
GRID = 0.01


#: Extra room along an item's grasp axis for the closed fingers (pad thickness plus slack).
FINGER_CLEARANCE = 0.014


def half_extents(item: str, yaw: float, fingers: bool = False) -> tuple[float, float]:
    """Half sizes along world x and y of the item's footprint rotated by ``yaw`` (its bounding box);
    ``fingers`` widens the grasp axis by the closed finger pads."""
    sx, sy, _ = ITEM_SPECS[item].size
    sx += 2 * FINGER_CLEARANCE if fingers else 0.0
    if ITEM_SPECS[item].shape == "cylinder" and not fingers:
        return sx / 2, sy / 2
    c, s = abs(math.cos(yaw)), abs(math.sin(yaw))
    return (c * sx + s * sy) / 2, (s * sx + c * sy) / 2


def footprint(item: str, x: float, y: float, yaw: float) -> Box:
    hx, hy = half_extents(item, yaw)
    return (x, y, hx, hy)


def overlaps(a: Box, b: Box, gap: float = PLACE_GAP) -> bool:
    return abs(a[0] - b[0]) < a[2] + b[2] + gap and abs(a[1] - b[1]) < a[3] + b[3] + gap


YAWS = (0.0, math.pi / 2)


#: A test of a spot's centre (x, y): whether a spot may be chosen (None: every spot may).
Keep = Callable[[float, float], bool] | None


def candidates(
    item: str, rect: Rect, occupied: list[Box], margin: float = 0.006, yaws=YAWS, keep: Keep = None
) -> list[tuple[float, float, float]]:
    """Every grid spot ``(x, y, yaw)`` in ``rect`` where the item fits without touching ``occupied``
    (and that ``keep`` keeps: a place named by an image point keeps the spots the camera shows)."""
    out = []
    (x0, x1), (y0, y1) = rect
    for yaw in yaws:
        hx, hy = half_extents(item, yaw, fingers=True)
        xs = np.arange(x0 + hx + margin, x1 - hx - margin + 1e-9, GRID)
        ys = np.arange(y0 + hy + margin, y1 - hy - margin + 1e-9, GRID)
        for x in xs:
            for y in ys:
                box = (float(x), float(y), hx, hy)
                if not any(overlaps(box, o) for o in occupied) and (keep is None or keep(box[0], box[1])):
                    out.append((float(x), float(y), yaw))
    return out


def random_spot(
    item: str, rect: Rect, occupied: list[Box], rng: np.random.Generator, yaws=YAWS, keep: Keep = None
):
    found = candidates(item, rect, occupied, yaws=yaws, keep=keep)
    return None if not found else found[int(rng.integers(len(found)))]


def corner_spot(item: str, rect: Rect, occupied: list[Box], yaws=YAWS):
    """The free spot nearest the rectangle's low corner (packs items tightly, leaving room for more)."""
    spots = corner_spots(item, rect, occupied, yaws)
    return spots[0] if spots else None


def corner_spots(
    item: str,
    rect: Rect,
    occupied: list[Box],
    yaws=YAWS,
    count: int = 1,
    spacing: float = 0.04,
    keep: Keep = None,
) -> list[tuple[float, float, float]]:
    """Up to ``count`` free spots, nearest the low corner first, each ``spacing`` from the others
    (alternatives for when the hand cannot reach the first one without touching a neighbour)."""
    (x0, _), (y0, _) = rect
    free = candidates(item, rect, occupied, yaws=yaws, keep=keep)
    found = sorted(free, key=lambda c: (round(c[0] - x0 + c[1] - y0, 4), c[2]))
    chosen: list[tuple[float, float, float]] = []
    for spot in found:
        if len(chosen) == count:
            break
        if all(math.hypot(spot[0] - c[0], spot[1] - c[1]) >= spacing for c in chosen):
            chosen.append(spot)
    return chosen
