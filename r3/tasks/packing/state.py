"""The packing scene as plain numbers: what checkers, policy and expert read (no simulator types)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from r3.tasks.packing.workcell import tray_of

#: An item counts as still below this speed (m/s) ...
STILL_SPEED = 0.02
#: ... for this many consecutive control steps (R^3 Appendix A.2).
STILL_STEPS = 30


def tilt(quat) -> float:
    """Angle (rad) between the item's local z axis and the world z axis; quat is w, x, y, z."""
    _w, x, y, _z = (float(v) for v in quat)
    cos = 1.0 - 2.0 * (x * x + y * y)
    return float(np.arccos(np.clip(cos, -1.0, 1.0)))


def yaw(quat) -> float:
    w, x, y, z = (float(v) for v in quat)
    return float(np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z)))


@dataclass(frozen=True)
class ItemState:
    """One item: centre of mass ``pos`` (world, m), ``quat`` (w, x, y, z), linear ``speed`` (m/s) and
    ``still_steps``, the consecutive control steps it has been slower than :data:`STILL_SPEED`."""

    pos: tuple[float, float, float]
    quat: tuple[float, float, float, float]
    speed: float = 0.0
    still_steps: int = STILL_STEPS

    @property
    def still(self) -> bool:
        return self.still_steps >= STILL_STEPS

    @property
    def tray(self) -> str | None:
        return tray_of(self.pos)

    @property
    def tilt(self) -> float:
        return tilt(self.quat)

    @property
    def yaw(self) -> float:
        return yaw(self.quat)


@dataclass(frozen=True)
class PackingState:
    """Items in the scene (unused ones are absent), the held item, and the end effector."""

    items: dict[str, ItemState]
    held: str | None = None
    tcp: tuple[float, float, float] = (0.0, 0.0, 0.0)
    gripper_opening: float = 0.0
    joints: tuple[float, ...] = field(default_factory=tuple)

    def tray_of(self, item: str) -> str | None:
        """The tray an item is in (None: on the table, or held)."""
        return None if item == self.held else self.items[item].tray

    def in_tray(self, tray: str) -> list[str]:
        return [name for name in self.items if self.tray_of(name) == tray]
