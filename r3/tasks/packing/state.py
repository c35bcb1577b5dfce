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


def resting_geometry(name: str, quat) -> tuple[float, tuple[float, float, float]]:
    """How an item lies now: the yaw (rad) of the horizontal axis a top-down grasp closes across,
    and its sizes ``(across, along, vertical)`` (m). Upright items give the item's yaw and its
    nominal size; a tipped box stands on whichever face is down, and a cylinder on its side is
    grasped across its diameter.

    >>> yaw_, size = resting_geometry("sugar box", (0.7071068, 0.7071068, 0.0, 0.0))  # on its side
    >>> round(yaw_, 3), [round(v, 3) for v in size]
    (0.0, [0.038, 0.15, 0.089])
    """
    from r3.tasks.packing.workcell import ITEM_SPECS

    w, x, y, z = (float(v) for v in quat)
    R = np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )
    spec = ITEM_SPECS[name]
    size = spec.size
    if spec.shape == "cylinder":
        if abs(R[2, 2]) >= max(abs(R[2, 0]), abs(R[2, 1])):  # standing on an end
            return float(np.arctan2(R[1, 0], R[0, 0])), (size[0], size[1], size[2])
        axis = float(np.arctan2(R[1, 2], R[0, 2]))  # on its side: close across the diameter
        return axis + np.pi / 2, (size[0], size[2], size[0])
    vertical = int(np.argmax(np.abs(R[2, :])))
    across, along = sorted((i for i in range(3) if i != vertical), key=lambda i: size[i])
    height = float(np.abs(R[2, :]) @ np.asarray(size))  # the vertical extent, also when leaning
    return float(np.arctan2(R[1, across], R[0, across])), (size[across], size[along], height)


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
    #: Yaw (rad) of the direction the fingers close along, for a top-down hand; None when unknown.
    tcp_yaw: float | None = None
    gripper_opening: float = 0.0
    joints: tuple[float, ...] = field(default_factory=tuple)

    def tray_of(self, item: str) -> str | None:
        """The tray an item is in (None: on the table, or held)."""
        return None if item == self.held else self.items[item].tray

    def in_tray(self, tray: str) -> list[str]:
        return [name for name in self.items if self.tray_of(name) == tray]
