"""The packing skills' grounder and scene state from perception and proprioception only.

:class:`PerceivedScene` implements :class:`~r3.lowlevel.grounding.Grounder` and the state reader of
:class:`~r3.lowlevel.semantic.SemanticActions` on what a real cell has: the base camera's detected
objects and GroundPoint (a :class:`PerceptionSource`: in-process :class:`LocalPerception`, or the
perception node over ROS), the calibrated tray planes (``r3.tasks.packing.workcell``), the item
catalogue (sizes for free-space checks) and the arm's joint readings. What the simulator knows and
a camera does not is estimated here, each rule kept simple and named:

* an item's grasp geometry comes from its top surface and footprint (``DetectedObject``'s
  ``top_centre``, ``footprint_yaw``, ``footprint``); its bottom is the support under it (the tray
  floor or the table: a tray wall or a neighbour often hides an item's lowest part);
* the hand holds an item when the gripper is closed on something (opening between
  :data:`HELD_MIN_OPENING` and nearly open) and a lifted item is seen at the hand; the held item's
  yaw follows the hand, its size is remembered from when it rested;
* an item is still when its top centre moved less than ``still_tolerance`` over the last
  ``still_window_s`` of observations;
* a container point (place) is where the pixel's ray meets a tray floor or the table plane.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from r3.lowlevel.grounding import POINT_SCALE, Grounded, ItemEstimate
from r3.perception.camera import CameraModel
from r3.perception.pipeline import Perception
from r3.perception.segmenters import SimSegmenter
from r3.sim.packing import scene
from r3.tasks.packing.state import STILL_STEPS, ItemState, PackingState
from r3.tasks.packing.workcell import ITEM_SPECS, TABLE_EXTENT, TRAY_SPECS, tray_of

#: Gripper opening (m) above which closed fingers are taken to hold something between them.
HELD_MIN_OPENING = 0.004
#: A held item's top centre lies this close (m, horizontally) to the TCP ...
HELD_RADIUS = 0.05
#: ... and its lowest visible point this far (m) above the support's top (tray wall or table).
LIFTED = 0.015


@dataclass(frozen=True)
class SeenItem:
    """One item with a 3D estimate, as a DetectedObject reports it (base frame, metres, radians)."""

    label: str
    top_centre: tuple[float, float, float]
    footprint_yaw: float
    footprint: tuple[float, float]  # along footprint_yaw, across it
    bottom_height: float


@dataclass(frozen=True)
class PerceivedFrame:
    """The items seen in one frame, by label."""

    stamp_ns: int
    items: dict[str, SeenItem]


@dataclass(frozen=True)
class ArmReading:
    """Proprioception: the TCP (forward kinematics of the joint readings), the yaw of the direction
    the fingers close along (None: the hand does not point down), gripper opening and arm joints."""

    tcp: tuple[float, float, float]
    tcp_yaw: float | None
    gripper_opening: float
    joints: tuple[float, ...]


class PerceptionSource(Protocol):
    """What perception and the arm report; ``observe`` and ``ground`` refer to a frame taken after
    the last motion ended."""

    camera: CameraModel

    def observe(self) -> PerceivedFrame: ...

    def ground(self, u: float, v: float) -> tuple[str, tuple[float, float, float]] | str:
        """GroundPoint (purpose pick) at a 0-1000 point: (item label, 3D point), or why not."""

    def arm(self) -> ArmReading: ...


def seen_item(detection) -> SeenItem | None:
    """A core :class:`~r3.perception.grounding.Detection` as a :class:`SeenItem` (None without 3D)."""
    g = detection.geometry
    if g is None:
        return None
    return SeenItem(detection.label, tuple(float(v) for v in g.top_centre), float(g.footprint_yaw),
                    (float(g.footprint[0]), float(g.footprint[1])), float(g.bottom_height))


def _yaw_quat(yaw: float) -> tuple[float, float, float, float]:
    return (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))


def _support_top(xy) -> tuple[float, float]:
    """(floor, top of what surrounds it) under a point: a tray's floor and wall top, or the table."""
    for tray in TRAY_SPECS.values():
        if tray.contains_xy(xy):
            return tray.floor, tray.top
    return 0.0, 0.0


class PerceivedScene:
    """Grounder and state reader for :class:`~r3.lowlevel.semantic.SemanticActions` built on a
    :class:`PerceptionSource` (see the module docstring for the estimation rules)."""

    def __init__(self, source: PerceptionSource, still_window_s: float = 0.25, still_tolerance: float = 0.003):
        if still_window_s <= 0 or still_tolerance <= 0:
            raise ValueError("still_window_s and still_tolerance must be positive")
        self.source = source
        self.still_window_ns, self.still_tolerance = round(still_window_s * 1e9), still_tolerance
        self._sizes: dict[str, tuple[float, float, float]] = {}  # last resting (across, along, vertical)
        self._yaws: dict[str, float] = {}  # last resting across-yaw
        self._tracks: dict[str, list[tuple[int, np.ndarray]]] = {}

    # ------------------------------------------------------------------ Grounder
    def project(self, xyz) -> tuple[float, float] | None:
        cam = self.source.camera
        t = cam.base_from_camera
        p = t[:3, :3].T @ (np.asarray(xyz, float) - t[:3, 3])
        if p[2] <= 0:
            return None
        col = cam.k[0, 0] * p[0] / p[2] + cam.k[0, 2] + 0.5  # continuous: 0 = the image's left edge
        row = cam.k[1, 1] * p[1] / p[2] + cam.k[1, 2] + 0.5
        if not (0 <= col < cam.width and 0 <= row < cam.height):
            return None
        return float(col / cam.width * POINT_SCALE), float(row / cam.height * POINT_SCALE)

    def at_point(self, point, containers_only: bool = False) -> Grounded | None:
        if not containers_only:
            hit = self.source.ground(*point)
            if not isinstance(hit, str):
                return Grounded(hit[0], tuple(float(c) for c in hit[1]))
        return self._container_at(point)

    def locate(self, label: str) -> tuple[float, float] | None:
        if label.endswith(" tray"):  # a fixture: the middle of its calibrated floor
            tray = TRAY_SPECS.get(label.split()[0])
            return None if tray is None else self.project((*tray.centre, tray.floor))
        seen = self.source.observe().items.get(label)
        if seen is None:
            return None
        c = np.asarray(seen.top_centre)
        along = np.array([math.cos(seen.footprint_yaw), math.sin(seen.footprint_yaw), 0.0])
        for offset in (0.0, 0.2, -0.2):  # the top centre, else a little along the item
            point = self.project(c + offset * seen.footprint[0] * along)
            if point is not None:
                hit = self.source.ground(*point)
                if not isinstance(hit, str) and hit[0] == label:
                    return point
        return None

    def estimate(self, label: str) -> ItemEstimate | None:
        frame = self.source.observe()
        return self._estimate(label, frame, self.source.arm(), self._held(frame, self.source.arm()))

    # ------------------------------------------------------------------ state reader
    def state(self) -> PackingState:
        frame, arm = self.source.observe(), self.source.arm()
        held = self._held(frame, arm)
        items = {}
        for label, seen in frame.items.items():
            est = self._estimate(label, frame, arm, held)
            still = self._track(label, frame.stamp_ns, np.asarray(seen.top_centre))
            items[label] = ItemState(pos=est.centre, quat=_yaw_quat(est.yaw), still_steps=STILL_STEPS if still else 0)
        return PackingState(items=items, held=held, tcp=arm.tcp, tcp_yaw=arm.tcp_yaw,
                            gripper_opening=arm.gripper_opening, joints=arm.joints)

    # ------------------------------------------------------------------ estimation rules
    def _held(self, frame: PerceivedFrame, arm: ArmReading) -> str | None:
        if not HELD_MIN_OPENING < arm.gripper_opening < scene.MAX_OPENING - 0.005:
            return None
        tcp = np.asarray(arm.tcp)
        best, best_d = None, HELD_RADIUS
        for label, seen in frame.items.items():
            d = float(np.hypot(*(np.asarray(seen.top_centre[:2]) - tcp[:2])))
            lifted = seen.bottom_height > _support_top(seen.top_centre)[1] + LIFTED
            if d < best_d and lifted and seen.bottom_height < tcp[2]:
                best, best_d = label, d
        return best

    def _estimate(self, label: str, frame: PerceivedFrame, arm: ArmReading, held: str | None) -> ItemEstimate | None:
        seen = frame.items.get(label)
        if seen is None:
            return None
        if label == held and label in self._sizes:
            # In the hand: the yaw turns with the hand, the size is the one measured at rest, and the
            # top (hidden by the hand) is the lowest visible point plus the height.
            size = self._sizes[label]
            yaw = self._yaws[label]
            if arm.tcp_yaw is not None:
                yaw = min((arm.tcp_yaw, arm.tcp_yaw + math.pi / 2),
                          key=lambda c: abs(math.remainder(c - self._yaws[label], math.pi)))
            centre = (arm.tcp[0], arm.tcp[1], seen.bottom_height + size[2] / 2)
            return ItemEstimate(centre, yaw, size)
        bottom = _support_top(seen.top_centre)[0]
        along, across = seen.footprint
        yaw = seen.footprint_yaw + math.pi / 2  # the grasp closes across the long axis
        if across > along:
            along, across, yaw = across, along, seen.footprint_yaw
        top = seen.top_centre[2]
        size = (across, along, max(top - bottom, 0.0))
        if label != held:
            self._sizes[label], self._yaws[label] = size, yaw
        return ItemEstimate((seen.top_centre[0], seen.top_centre[1], (top + bottom) / 2), yaw, size)

    def _track(self, label: str, stamp_ns: int, p: np.ndarray) -> bool:
        """Record an observation; whether the item stayed within the tolerance over the window."""
        track = self._tracks.setdefault(label, [])
        if not track or track[-1][0] != stamp_ns:
            track.append((stamp_ns, p))
        keep = [(t, q) for t, q in track if stamp_ns - t <= 4 * self.still_window_ns]
        self._tracks[label] = keep
        window = [(t, q) for t, q in keep if stamp_ns - t <= self.still_window_ns]
        spans = stamp_ns - window[0][0] >= self.still_window_ns
        return spans and all(np.linalg.norm(q - p) < self.still_tolerance for _, q in window)

    def _container_at(self, point) -> Grounded | None:
        """Where the pixel's ray meets a tray floor (nearest first) or the table top."""
        cam = self.source.camera
        col, row = point[0] / POINT_SCALE * cam.width - 0.5, point[1] / POINT_SCALE * cam.height - 0.5
        t = cam.base_from_camera
        ray = t[:3, :3] @ np.array([(col - cam.k[0, 2]) / cam.k[0, 0], (row - cam.k[1, 2]) / cam.k[1, 1], 1.0])
        origin = t[:3, 3]
        if ray[2] >= 0:
            return None
        hits = []
        for name, tray in TRAY_SPECS.items():
            p = origin + (tray.floor - origin[2]) / ray[2] * ray
            if tray.contains_xy(p):
                hits.append((float(origin[2] - tray.floor), f"{name} tray", p))
        p = origin + (0.0 - origin[2]) / ray[2] * ray
        (x0, x1), (y0, y1) = TABLE_EXTENT
        if x0 <= p[0] <= x1 and y0 <= p[1] <= y1 and tray_of((p[0], p[1], 0.0)) is None:
            hits.append((float(origin[2]), "table", p))
        if not hits:
            return None
        _, label, p = min(hits, key=lambda h: h[0])
        return Grounded(label, tuple(float(c) for c in p))


class LocalPerception:
    """:class:`PerceptionSource` in-process: renders the env's base camera (RGB, depth, instance
    masks) and runs the same :class:`~r3.perception.pipeline.Perception` the perception node runs,
    with the ``sim`` segmenter; the arm reading is the joint state and its forward kinematics."""

    def __init__(self, env, camera: str = "base"):
        self.env, self.camera_name = env, camera
        self.perception = Perception(SimSegmenter())
        self.perception.set_query(list(ITEM_SPECS))
        self._key: bytes | None = None
        self._frame: PerceivedFrame | None = None

    @property
    def camera(self) -> CameraModel:
        return self.env.camera_model(self.camera_name)

    def observe(self) -> PerceivedFrame:
        key = scene_key(self.env)
        if key != self._key:  # something moved: a new frame
            stamp = self.env.elapsed_steps * round(scene.CONTROL_DT * 1e9)
            detections = self.perception.process(self.env.rgbd_frame(self.camera_name, stamp))
            seen = [seen_item(d) for d in detections]
            self._frame, self._key = PerceivedFrame(stamp, {s.label: s for s in seen if s is not None}), key
        return self._frame

    def ground(self, u: float, v: float):
        frame = self.observe()
        r = self.perception.ground_point("", u, v, "pick", frame.stamp_ns)
        if not r.ok:
            return r.reason
        return self.perception.detections[r.mask_id - 1].label, tuple(float(c) for c in r.target)

    def arm(self) -> ArmReading:
        return arm_reading(self.env)


def arm_reading(env) -> ArmReading:
    """The simulated arm's proprioception: joint positions, finger opening, and the TCP pose that
    forward kinematics gives for them (MuJoCo's, as a real driver's URDF model would)."""
    tcp, R = env.tcp_pose()
    joints = env.data.qpos[env.arm_qpos]
    opening = float(env.data.qpos[env.finger_qpos].sum())
    yaw = float(np.arctan2(R[1, 1], R[0, 1])) if R[2, 2] < -0.9 else None
    return ArmReading(tuple(float(v) for v in tcp), yaw, opening, tuple(float(v) for v in joints))


def scene_key(env) -> bytes:
    """Changes whenever anything in the simulated scene may have moved (a new frame is due)."""
    return env.data.qpos.tobytes() + env.elapsed_steps.to_bytes(8, "little")
