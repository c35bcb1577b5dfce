"""Grounding for the packing skills: names and 2D image points <-> objects and 3D points.

The semantic actions (ERR's pick/place) speak in base-camera points, 0-1000 on both axes (u right,
v down). A :class:`Grounder` answers the three questions they ask; the ``sim`` implementation
(:class:`SimGrounder`) answers them from the simulator, and a perception backend (SAM 2 masks +
aligned depth, the perception issue) replaces it by implementing the same three methods:

* ``locate(label)``: a point on the named item or tray, or None if it is not visible;
* ``at_point(point, containers_only)``: what the camera sees there (an item, a tray or the table)
  and the 3D point; with ``containers_only`` items are looked through, which answers "which
  container surface is under this point" for place (a perception backend fits the tray's floor
  plane where items hide it);
* ``project(xyz)``: the image point of a world point (the camera model);
* ``estimate(label)``: the item's geometry for grasping (centre, yaw, size);
* ``forget()``: a new episode begins (a grounder with a memory of the scene drops it).

How the sim grounder sees: ``at_point`` casts the camera ray through the pixel (``mj_ray``), which
is exactly what a segmentation mask plus a depth image would give at that pixel, without
rendering. The robot's own geoms are ignored (as a segmenter that masks the robot out would).
``estimate`` reads the item's pose and known size from the simulator — the one privileged step; a
perception backend estimates it from the mask's 3D points instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from r3.sim.offscreen import mujoco
from r3.tasks.packing.state import resting_geometry
from r3.tasks.packing.workcell import ITEM_SPECS, TRAY_SPECS


@dataclass(frozen=True)
class Grounded:
    """What is at an image point: ``label`` (item name, "<size> tray" or "table") and the 3D point."""

    label: str
    xyz: tuple[float, float, float]

    @property
    def is_item(self) -> bool:
        return self.label in ITEM_SPECS

    @property
    def tray(self) -> str | None:
        return self.label.split()[0] if self.label.endswith(" tray") else None


@dataclass(frozen=True)
class ItemEstimate:
    """Item geometry for grasping as it lies now: centre (m), yaw (rad) of the horizontal axis to
    close across, and the size (m) across that axis, along the other horizontal one, and vertically."""

    centre: tuple[float, float, float]
    yaw: float
    size: tuple[float, float, float]


class Grounder(Protocol):
    def locate(self, label: str) -> tuple[float, float] | None: ...
    def at_point(self, point: tuple[float, float], containers_only: bool = False) -> Grounded | None: ...
    def project(self, xyz) -> tuple[float, float] | None: ...
    def estimate(self, label: str) -> ItemEstimate | None: ...
    def forget(self) -> None: ...


def ground_in_sim(env, source=None) -> tuple[Grounder, object]:
    """The ``sim`` grounding (``r3.lowlevel.GROUNDINGS``): the simulator's own poses and state."""
    return SimGrounder(env), env.state


class SimGrounder:
    """Grounds against a :class:`~r3.sim.packing.env.PackingEnv` through its ``camera``."""

    def __init__(self, env, camera: str = "base"):
        self.env, self.camera = env, camera
        self._geomid = np.zeros(1, dtype=np.int32)
        self._groups = np.ones(6, dtype=np.uint8)
        self._groups[1] = 0  # robot geoms live in group 1
        self._container_groups = self._groups.copy()
        self._container_groups[2] = 0  # items live in group 2

    def project(self, xyz) -> tuple[float, float] | None:
        """Base-camera point (0-1000) of a world point, None when behind the camera or off-image."""
        return self.env.camera_model(self.camera).normalised_point(xyz)

    def at_point(self, point, containers_only: bool = False) -> Grounded | None:
        origin, ray = self.env.camera_model(self.camera).ray(*point)
        dist = mujoco.mj_ray(
            self.env.model,
            self.env.data,
            origin,
            ray,
            self._container_groups if containers_only else self._groups,
            1,
            -1,
            self._geomid,
        )
        if dist < 0:
            return None
        label = self.env.geom_label.get(int(self._geomid[0]))
        if label is None or label == "robot":
            return None
        return Grounded(label, tuple(float(c) for c in origin + dist * ray))

    def locate(self, label: str) -> tuple[float, float] | None:
        if label.endswith(" tray"):
            tray = TRAY_SPECS[label.split()[0]]
            probes = [
                (tray.centre[0] + dx * tray.inner[0], tray.centre[1] + dy * tray.inner[1], tray.floor)
                for dx, dy in ((0, 0), (0.3, 0.3), (-0.3, -0.3), (0.3, -0.3), (-0.3, 0.3))
            ]
        else:
            est = self.estimate(label)
            if est is None:
                return None
            c, (sx, sy, sz) = np.asarray(est.centre), est.size
            R = np.array([[np.cos(est.yaw), -np.sin(est.yaw)], [np.sin(est.yaw), np.cos(est.yaw)]])
            probes = [
                (*(c[:2] + R @ (fx * sx, fy * sy)), c[2] + sz / 2 - 0.002)
                for fx, fy in ((0, 0), (0.25, 0.25), (-0.25, -0.25), (0.25, -0.25), (-0.25, 0.25))
            ]
        for probe in probes:
            point = self.project(probe)
            if point is not None:
                hit = self.at_point(point)
                if hit is not None and hit.label == label:
                    return point
        return None

    def forget(self) -> None:
        """Nothing to forget at a new episode: every answer is read from the simulator."""

    def estimate(self, label: str) -> ItemEstimate | None:
        item = self.env.state().items.get(label)
        if item is None:
            return None
        yaw, size = resting_geometry(label, item.quat)
        return ItemEstimate(item.pos, yaw, size)
