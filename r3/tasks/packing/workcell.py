"""Geometry and vocabulary (items, trays) of the packing workcell that tasks, grammar, policy and simulator
share (no physics here).

Frames: the world frame has its origin at the robot base on the table top, +x away from the robot
(towards the trays), +y to the robot's left, +z up; the table top is z = 0. Sizes are metres,
masses kilograms.

Item sizes and masses follow the YCB objects where one exists (cracker box, sugar box, soup can,
gelatin box, foam brick, tuna fish can, mug), shrunk where needed so that each item's narrow side
fits the 8 cm opening of a Panda hand; the can opener, candy box and nesquik canister are our own
estimates. Every item rests on a flat face in its upright pose; ``grasp_width`` is the size across
which a top-down grasp closes (the item's local x axis).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Grocery items of the packing suite.
ITEMS: tuple[str, ...] = (
    "can opener",
    "candy box",
    "coffee mug",
    "cracker box",
    "foam brick",
    "gelatin box",
    "nesquik canister",
    "soup can",
    "sugar box",
    "tuna fish can",
)
#: Tray sizes.
TRAYS: tuple[str, ...] = ("small", "medium", "large")


@dataclass(frozen=True)
class ItemSpec:
    """``shape`` "box" (``size`` = full x, y, z) or "cylinder" (``size`` = diameter, diameter, height)."""

    name: str
    shape: str
    size: tuple[float, float, float]
    mass: float
    rgba: tuple[float, float, float, float]

    @property
    def height(self) -> float:
        return self.size[2]

    @property
    def grasp_width(self) -> float:
        return self.size[0]


ITEM_SPECS: dict[str, ItemSpec] = {
    s.name: s
    for s in (
        ItemSpec("can opener", "box", (0.040, 0.150, 0.030), 0.12, (0.55, 0.55, 0.60, 1)),
        ItemSpec("candy box", "box", (0.050, 0.100, 0.040), 0.15, (0.85, 0.20, 0.55, 1)),
        ItemSpec("coffee mug", "cylinder", (0.070, 0.070, 0.085), 0.12, (0.15, 0.15, 0.18, 1)),
        ItemSpec("cracker box", "box", (0.060, 0.150, 0.180), 0.41, (0.85, 0.15, 0.10, 1)),
        ItemSpec("foam brick", "box", (0.050, 0.075, 0.050), 0.03, (0.20, 0.35, 0.85, 1)),
        ItemSpec("gelatin box", "box", (0.028, 0.085, 0.073), 0.10, (0.90, 0.75, 0.20, 1)),
        ItemSpec("nesquik canister", "cylinder", (0.072, 0.072, 0.130), 0.40, (0.95, 0.85, 0.10, 1)),
        ItemSpec("soup can", "cylinder", (0.066, 0.066, 0.100), 0.35, (0.80, 0.10, 0.12, 1)),
        ItemSpec("sugar box", "box", (0.038, 0.089, 0.150), 0.51, (0.95, 0.90, 0.55, 1)),
        ItemSpec("tuna fish can", "cylinder", (0.072, 0.072, 0.033), 0.17, (0.25, 0.45, 0.70, 1)),
    )
}
assert tuple(ITEM_SPECS) == ITEMS


@dataclass(frozen=True)
class TraySpec:
    """A fixed open tray: ``centre`` (x, y) of the floor, ``inner`` full inner size (x, y)."""

    name: str
    centre: tuple[float, float]
    inner: tuple[float, float]
    wall_height: float = 0.035
    wall: float = 0.008
    floor: float = 0.008

    def contains_xy(self, xy, margin: float = 0.0) -> bool:
        """Whether a point lies over the tray's inner floor, shrunk by ``margin``."""
        d = np.abs(np.asarray(xy[:2], dtype=float) - self.centre)
        return bool(np.all(d <= np.asarray(self.inner) / 2 - margin))

    @property
    def top(self) -> float:
        return self.floor + self.wall_height


TRAY_SPECS: dict[str, TraySpec] = {
    "small": TraySpec("small", (0.52, 0.28), (0.19, 0.19)),
    "medium": TraySpec("medium", (0.55, 0.02), (0.22, 0.22)),
    "large": TraySpec("large", (0.53, -0.27), (0.30, 0.24)),
}
assert tuple(TRAY_SPECS) == TRAYS

#: Where items rest on the open table at the start: a band in front of the trays.
TABLE_REGION = ((0.22, 0.36), (-0.42, 0.42))
#: Where removed items are put down: the band plus the table's free edges beside it.
DROP_REGION = ((0.20, 0.40), (-0.50, 0.50))
#: The table top (x range, y range); anything resting on it outside every tray is "on the table".
TABLE_EXTENT = ((-0.25, 0.90), (-0.60, 0.60))
#: Free space kept between item footprints when placing.
PLACE_GAP = 0.012


def tray_of(xyz, z_max: float = 0.25) -> str | None:
    """The tray whose inner floor the point is over (and not far above), or None."""
    for name, tray in TRAY_SPECS.items():
        if tray.contains_xy(xyz) and float(xyz[2]) <= z_max:
            return name
    return None
