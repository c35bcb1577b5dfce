"""A small MuJoCo tabletop with known geometry: boxes and cylinders on a table, one RGB-D camera.

Perception's tests and benchmark measure against it (it needs no other simulator), and it shows
how a simulator fills an :class:`~r3.perception.camera.RGBDFrame` for the ``sim`` segmenter. The
table top is the plane z = 0 of the base frame. It is a simulator, so it lives here: perception
itself (the real robot's SAM 2 path included) never loads MuJoCo.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np

from r3.perception.camera import CameraModel, RGBDFrame, look_at
from r3.sim.offscreen import mujoco


@dataclass(frozen=True)
class SceneObject:
    name: str
    shape: str  # "box" (half sizes x, y, z) or "cylinder" (radius, half height)
    size: tuple[float, ...]
    xy: tuple[float, float]
    rgba: tuple[float, float, float, float]
    yaw: float = 0.0

    @property
    def top(self) -> float:
        return 2.0 * self.size[-1]

    def contains(self, p: np.ndarray, margin: float) -> bool:
        """Whether base-frame point ``p`` lies inside the object grown by ``margin`` metres."""
        d = np.asarray(p[:2]) - np.asarray(self.xy)
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        local = np.array([c * d[0] + s * d[1], -s * d[0] + c * d[1]])
        if not -margin <= p[2] <= self.top + margin:
            return False
        if self.shape == "cylinder":
            return float(np.hypot(*local)) <= self.size[0] + margin
        return bool(np.all(np.abs(local) <= np.asarray(self.size[:2]) + margin))


OBJECTS = (
    SceneObject("red box", "box", (0.04, 0.03, 0.025), (-0.12, 0.05), (0.85, 0.15, 0.15, 1), 0.4),
    SceneObject("blue cylinder", "cylinder", (0.03, 0.05), (0.08, 0.10), (0.15, 0.3, 0.85, 1)),
    SceneObject("green box", "box", (0.05, 0.05, 0.015), (0.12, -0.08), (0.2, 0.7, 0.25, 1), -0.3),
    SceneObject("yellow cylinder", "cylinder", (0.025, 0.03), (-0.05, -0.12), (0.9, 0.8, 0.1, 1)),
    SceneObject("white tall box", "box", (0.02, 0.02, 0.07), (0.0, 0.2), (0.9, 0.9, 0.9, 1)),
)
TABLE_HALF = (0.5, 0.4)


def instances_from_mujoco_segmentation(seg: np.ndarray, geom_to_object: dict[int, int]) -> np.ndarray:
    """MuJoCo's segmentation render (HxWx2: object id, object type) -> per-pixel instance ids.

    ``geom_to_object`` maps geom ids to instance ids (>= 1); every other pixel gets 0. Simulators
    use it to fill :attr:`~r3.perception.camera.RGBDFrame.instances` for the ``sim`` segmenter.
    """
    lut = np.zeros(max(geom_to_object, default=0) + 2, dtype=np.int32)
    for geom, instance in geom_to_object.items():
        lut[geom] = instance
    ids = seg[..., 0]
    is_geom = (seg[..., 1] == int(mujoco.mjtObj.mjOBJ_GEOM)) & (ids >= 0) & (ids < len(lut))
    return np.where(is_geom, lut[np.clip(ids, 0, len(lut) - 1)], 0)


class TabletopScene:
    """Renders RGB, depth (metres along the optical axis) and instance masks from one camera."""

    def __init__(
        self,
        width: int = 640,
        height: int = 480,
        fovy_deg: float = 55.0,
        eye=(0.0, -0.6, 0.8),
        target=(0.0, 0.03, 0.0),
        objects=OBJECTS,
    ):
        self.objects = {o.name: o for o in objects}
        base_from_camera = look_at(eye, target)
        f = 0.5 * height / math.tan(math.radians(fovy_deg) / 2)
        # MuJoCo's principal point is the image centre in continuous coordinates: (W - 1) / 2 in
        # the pixel-centre convention of camera.py.
        k = np.array([[f, 0, (width - 1) / 2], [0, f, (height - 1) / 2], [0, 0, 1]])
        self.camera = CameraModel(
            k=k,
            width=width,
            height=height,
            base_from_camera=base_from_camera,
            name="table_camera",
            min_depth_m=0.2,
            max_depth_m=2.5,
        )
        self.model = mujoco.MjModel.from_xml_string(self._xml(base_from_camera, fovy_deg, width, height))
        self.data = mujoco.MjData(self.model)
        mujoco.mj_forward(self.model, self.data)
        self._geom_to_instance = {self.model.geom(o.name).id: i + 1 for i, o in enumerate(objects)}
        self.instance_names = {i + 1: o.name for i, o in enumerate(objects)}
        self._renderer = mujoco.Renderer(self.model, height, width)
        # Free the GL context even if close() is never called (before interpreter teardown).
        self._close_renderer = weakref.finalize(self, self._renderer.close)

    def render(self, stamp_ns: int = 0) -> RGBDFrame:
        r = self._renderer
        r.update_scene(self.data, camera="cam")
        rgb = r.render().copy()
        r.enable_depth_rendering()
        r.update_scene(self.data, camera="cam")
        depth = r.render().astype(np.float32)
        r.disable_depth_rendering()
        r.enable_segmentation_rendering()
        r.update_scene(self.data, camera="cam")
        seg = r.render()
        r.disable_segmentation_rendering()
        instances = instances_from_mujoco_segmentation(seg, self._geom_to_instance)
        return RGBDFrame(
            rgb=rgb,
            depth_m=depth,
            camera=self.camera,
            stamp_ns=stamp_ns,
            instances=instances,
            instance_names=dict(self.instance_names),
        )

    def close(self) -> None:
        self._close_renderer()

    @staticmethod
    def _xml(base_from_camera: np.ndarray, fovy_deg: float, width: int, height: int) -> str:
        rot, eye = base_from_camera[:3, :3], base_from_camera[:3, 3]
        # MuJoCo cameras look along their -z with +y up: x = optical x, y = -optical y.
        xyaxes = " ".join(f"{v:.9f}" for v in (*rot[:, 0], *(-rot[:, 1])))
        geoms = []
        for o in OBJECTS:
            size = " ".join(str(s) for s in o.size)
            geoms.append(
                f'<geom name="{o.name}" type="{o.shape}" size="{size}" pos="{o.xy[0]} {o.xy[1]} {o.top / 2}" '
                f'euler="0 0 {o.yaw}" rgba="{" ".join(map(str, o.rgba))}"/>'
            )
        return f"""
<mujoco model="perception_tabletop">
  <compiler angle="radian"/>
  <visual><global offwidth="{width}" offheight="{height}"/><map znear="0.05" zfar="20"/></visual>
  <worldbody>
    <light pos="0 0 2" dir="0 0 -1" diffuse="0.8 0.8 0.8"/>
    <geom name="table" type="box" size="{TABLE_HALF[0]} {TABLE_HALF[1]} 0.02" pos="0 0 -0.02"
          rgba="0.55 0.45 0.35 1"/>
    {"".join(geoms)}
    <camera name="cam" pos="{eye[0]:.9f} {eye[1]:.9f} {eye[2]:.9f}" xyaxes="{xyaxes}" fovy="{fovy_deg}"/>
  </worldbody>
</mujoco>"""
