"""The packing skills' grounder and scene state from perception and proprioception only.

:class:`PerceivedScene` implements :class:`~r3.lowlevel.grounding.Grounder` and the state reader of
:class:`~r3.lowlevel.semantic.SemanticActions` on what a real cell has: the base camera's detected
objects and GroundPoint (a :class:`PerceptionSource`: in-process :class:`LocalPerception`, or the
perception node over ROS), the calibrated tray planes (``r3.tasks.packing.workcell``), the item
catalogue (sizes) and the arm's joint readings. What the simulator knows and
a camera does not is estimated here, each rule kept simple and named:

* an item's grasp geometry comes from its top surface and footprint (``DetectedObject``'s
  ``top_centre``, ``footprint_yaw``, ``footprint``); its bottom is the support under it (the tray
  floor or the table: a tray wall or a neighbour often hides an item's lowest part);
* the hand holds an item when the gripper is closed on something (opening between
  :data:`HELD_MIN_OPENING` and nearly open) and a lifted item is seen at the hand, or none is and
  the item held at the last look, or else the one last seen resting under the hand, has vanished
  (hidden in the hand); the held item is centred
  on the TCP, its yaw follows the hand, its size is remembered from when it rested;
* a measured size that matches one of the item's resting poses in the catalogue within a
  centimetre is taken as the catalogue's (see :func:`_known_size`);
* a yaw within the camera's resolution of the trays' axes is axis-aligned, a round footprint has
  yaw 0 (both as layouts and placements leave items; see :func:`_snap_yaw`);
* objects stay where they were unless the hand moves them: while the arm is away from home, a
  resting item that shows clearly fewer pixels than at its last clear view (the arm hides part of
  it, which would bias its top centre) or none at all keeps that view;
* an item is still when its top centre moved less than ``still_tolerance`` over the last
  ``still_window_s`` of observations;
* a container point (place) is where the pixel's ray meets a tray floor or the table plane.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from r3.lowlevel.grounding import Grounded, ItemEstimate
from r3.perception.camera import CameraModel
from r3.perception.pipeline import ANY_LABEL, Perception
from r3.perception.segmenters import SimSegmenter
from r3.sim.packing import scene
from r3.tasks.packing.state import STILL_STEPS, ItemState, PackingState
from r3.tasks.packing.workcell import ITEM_SPECS, TABLE_EXTENT, TRAY_SPECS, tray_of

#: Gripper opening (m) above which closed fingers are taken to hold something between them.
HELD_MIN_OPENING = 0.004
#: A resting item showing fewer than this fraction of the pixels of its last clear view is partly
#: hidden (by the arm) and keeps that view; so does an item hidden entirely.
OCCLUDED = 0.85
#: Joints within this (rad) of home: the arm is out of the camera's way, every view is clear.
HOME_TOLERANCE = 0.05
#: Footprints whose length and width differ by less than this (m) are round (a standing can).
ROUND = 0.006
#: Yaws this close (rad) to the trays' axes are axis-aligned: at 320x240 a pixel (about 5 mm) over a
#: 7.5 cm edge is 4 degrees.
AXIS_SNAP = math.radians(4)
#: A measured size within this (m) of a catalogue pose's on every axis is taken as that pose's.
SIZE_MATCH = 0.01
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
    pixels: int  # masked pixels with valid depth


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
    return SeenItem(
        detection.label,
        tuple(float(v) for v in g.top_centre),
        float(g.footprint_yaw),
        (float(g.footprint[0]), float(g.footprint[1])),
        float(g.bottom_height),
        int(g.valid_points),
    )


def _yaw_quat(yaw: float) -> tuple[float, float, float, float]:
    return (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))


def _snap_yaw(yaw: float, elongation: float) -> float:
    """A yaw within the camera's resolution of the trays' axes is taken as axis-aligned (as layouts
    and placements leave items), and a round footprint (``elongation`` below :data:`ROUND`) has no
    axis of its own: it gets yaw 0. A yaw a few degrees off would grow the item's free-space box."""
    if elongation < ROUND:
        return 0.0
    nearest = round(yaw / (math.pi / 2)) * (math.pi / 2)
    return nearest if abs(yaw - nearest) < AXIS_SNAP else yaw


def _known_size(label: str, measured: tuple[float, float, float]) -> tuple[float, float, float]:
    """The catalogue's size of the item in the resting pose that matches the measurement
    ``(across, along, vertical)`` within :data:`SIZE_MATCH` on every axis, else the measurement
    (the packing items are known products; a millimetre matters for the fingers beside a tray wall)."""
    spec = ITEM_SPECS.get(label)
    if spec is None:
        return measured
    d = spec.size
    if spec.shape == "cylinder":
        poses = [(d[0], d[1], d[2]), (d[0], d[2], d[0])]  # standing; lying, closed across the diameter
    else:
        poses = [(*sorted(d[i] for i in range(3) if i != v), d[v]) for v in range(3)]
    best = min(poses, key=lambda p: max(abs(a - b) for a, b in zip(p, measured)))
    return best if max(abs(a - b) for a, b in zip(best, measured)) < SIZE_MATCH else measured


def _support_top(xy) -> tuple[float, float]:
    """(floor, top of what surrounds it) under a point: a tray's floor and wall top, or the table."""
    for tray in TRAY_SPECS.values():
        if tray.contains_xy(xy):
            return tray.floor, tray.top
    return 0.0, 0.0


class PerceivedScene:
    """Grounder and state reader for :class:`~r3.lowlevel.semantic.SemanticActions` built on a
    :class:`PerceptionSource` (see the module docstring for the estimation rules)."""

    def __init__(
        self, source: PerceptionSource, still_window_s: float = 0.25, still_tolerance: float = 0.003
    ):
        if still_window_s <= 0 or still_tolerance <= 0:
            raise ValueError("still_window_s and still_tolerance must be positive")
        self.source = source
        self.still_window_ns, self.still_tolerance = round(still_window_s * 1e9), still_tolerance
        self._sizes: dict[str, tuple[float, float, float]] = {}  # last resting (across, along, vertical)
        self._yaws: dict[str, float] = {}  # last resting across-yaw
        self._tracks: dict[str, list[tuple[int, np.ndarray]]] = {}
        self._rest: dict[str, SeenItem] = {}  # the last clear view of each resting item
        self._holding: str | None = None  # the item held at the last look

    # ------------------------------------------------------------------ Grounder
    def project(self, xyz) -> tuple[float, float] | None:
        return self.source.camera.normalised_point(xyz)

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
        seen = self._look()[1].get(label)
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
        _, items, arm, held = self._look()
        return self._estimate(label, items, arm, held)

    # ------------------------------------------------------------------ state reader
    def state(self) -> PackingState:
        stamp_ns, items, arm, held = self._look()
        out = {}
        for label in items.keys() | ({held} if held else set()):
            est = self._estimate(label, items, arm, held)
            seen = items.get(label)
            still = seen is not None and self._track(label, stamp_ns, np.asarray(seen.top_centre))
            out[label] = ItemState(
                pos=est.centre, quat=_yaw_quat(est.yaw), still_steps=STILL_STEPS if still else 0
            )
        return PackingState(
            items=out,
            held=held,
            tcp=arm.tcp,
            tcp_yaw=arm.tcp_yaw,
            gripper_opening=arm.gripper_opening,
            joints=arm.joints,
        )

    def forget(self) -> None:
        """A new episode: nothing seen before counts."""
        self._sizes.clear()
        self._yaws.clear()
        self._tracks.clear()
        self._rest.clear()
        self._holding = None

    # ------------------------------------------------------------------ estimation rules
    def _look(self) -> tuple[int, dict[str, SeenItem], ArmReading, str | None]:
        """One look: (stamp, the item views the scene holds, arm, held item). Items keep their last
        clear view while resting (:data:`OCCLUDED`: the arm, away from home, hides part of them, or
        all); the held item is seen as it is now."""
        frame, arm = self.source.observe(), self.source.arm()
        held = self._held(frame, arm)
        at_home = len(arm.joints) == len(scene.HOME_Q) and bool(
            np.max(np.abs(np.subtract(arm.joints, scene.HOME_Q))) < HOME_TOLERANCE
        )
        items = {}
        for label, seen in frame.items.items():
            rest = self._rest.get(label)
            if label == held:
                self._rest.pop(label, None)
                items[label] = seen
            elif rest is None or at_home or seen.pixels >= OCCLUDED * rest.pixels:
                self._rest[label] = items[label] = seen
            else:
                items[label] = rest
        for label, rest in self._rest.items():  # hidden now, resting where it was last seen
            if label not in items and label != held:
                items[label] = rest
        return frame.stamp_ns, items, arm, held

    def _held(self, frame: PerceivedFrame, arm: ArmReading) -> str | None:
        if not HELD_MIN_OPENING < arm.gripper_opening < scene.MAX_OPENING - 0.005:
            self._holding = None
            return None
        tcp = np.asarray(arm.tcp)
        best, best_d = None, HELD_RADIUS
        for label, seen in frame.items.items():
            d = float(np.hypot(*(np.asarray(seen.top_centre[:2]) - tcp[:2])))
            lifted = seen.bottom_height > _support_top(seen.top_centre)[1] + LIFTED
            if d < best_d and lifted and seen.bottom_height < tcp[2]:
                best, best_d = label, d
        if best is None and self._holding is not None and self._holding not in frame.items:
            best = self._holding  # still closed on it, now hidden by the hand
        if best is None:  # a small item can vanish in the hand: the one last seen resting under it
            for label, rest in self._rest.items():
                d = float(np.hypot(*(np.asarray(rest.top_centre[:2]) - tcp[:2])))
                if label not in frame.items and d < best_d and label in self._sizes:
                    best, best_d = label, d
        self._holding = best
        return best

    def _estimate(
        self, label: str, items: dict[str, SeenItem], arm: ArmReading, held: str | None
    ) -> ItemEstimate | None:
        seen = items.get(label)
        if seen is None and label == held:  # hidden in the hand: its centre at the finger pads
            return ItemEstimate(arm.tcp, self._held_yaw(label, arm), self._sizes[label])
        if seen is None:
            return None
        if label == held and label in self._sizes:
            # In the hand: the yaw turns with the hand, the size is the one measured at rest, and the
            # top (hidden by the hand) is the lowest visible point plus the height.
            size = self._sizes[label]
            centre = (arm.tcp[0], arm.tcp[1], seen.bottom_height + size[2] / 2)
            return ItemEstimate(centre, self._held_yaw(label, arm), size)
        bottom = _support_top(seen.top_centre)[0]
        along, across = seen.footprint
        yaw = seen.footprint_yaw + math.pi / 2  # the grasp closes across the long axis
        if across > along:
            along, across, yaw = across, along, seen.footprint_yaw
        yaw = _snap_yaw(yaw, along - across)
        top = seen.top_centre[2]
        size = _known_size(label, (across, along, max(top - bottom, 0.0)))
        if label != held:
            self._sizes[label], self._yaws[label] = size, yaw
        return ItemEstimate((seen.top_centre[0], seen.top_centre[1], (top + bottom) / 2), yaw, size)

    def _held_yaw(self, label: str, arm: ArmReading) -> float:
        """The held item turns with the hand: of the hand's two axes, the one its rest yaw was nearest."""
        if arm.tcp_yaw is None:
            return self._yaws[label]
        return min(
            (arm.tcp_yaw, arm.tcp_yaw + math.pi / 2),
            key=lambda c: abs(math.remainder(c - self._yaws[label], math.pi)),
        )

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
        origin, ray = self.source.camera.ray(*point)
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


def ground_by_perception(env, source: PerceptionSource | None = None) -> tuple[PerceivedScene, object]:
    """The ``perception`` grounding (``r3.lowlevel.GROUNDINGS``): the scene as ``source`` (default: the
    env's base camera, perceived in process) detects it, and the state it derives from that."""
    scene = PerceivedScene(source or LocalPerception(env))
    return scene, scene.state


class LocalPerception:
    """:class:`PerceptionSource` in-process: renders the env's base camera (RGB, depth, instance
    masks) and runs the same :class:`~r3.perception.pipeline.Perception` the perception node runs,
    with the ``sim`` segmenter; the arm reading is the joint state and its forward kinematics."""

    def __init__(self, env, camera: str = "base"):
        self.env, self.camera_name = env, camera
        self.perception = Perception(SimSegmenter())
        self.perception.set_query(list(ITEM_SPECS))
        self._frames = OncePerScene(env, self._perceive)

    @property
    def camera(self) -> CameraModel:
        return self.env.camera_model(self.camera_name)

    def observe(self) -> PerceivedFrame:
        return self._frames()

    def _perceive(self) -> PerceivedFrame:
        stamp = self.env.elapsed_steps * scene.STEP_NS
        detections = self.perception.process(self.env.rgbd_frame(self.camera_name, stamp))
        seen = [seen_item(d) for d in detections]
        return PerceivedFrame(stamp, {s.label: s for s in seen if s is not None})

    def ground(self, u: float, v: float):
        frame = self.observe()
        r = self.perception.ground_point(ANY_LABEL, u, v, "pick", frame.stamp_ns)
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


class OncePerScene:
    """``make()`` once per state of the simulated scene: called again only when something may have
    moved since (:func:`scene_key`: a new frame is due) or when asked ``again``; else its last value."""

    def __init__(self, env, make: Callable[[], object]):
        self.env, self.make = env, make
        self._key: bytes | None = None
        self._value = None

    def __call__(self, again: bool = False):
        key = scene_key(self.env)
        if again or key != self._key:
            self._value, self._key = self.make(), key
        return self._value
