"""Cameras and frames as the core sees them: numpy arrays plus a pinhole model with its pose.

Pixel convention (the one ROS camera_info and OpenCV use): integer pixel ``(u, v)`` is the centre of
column ``u`` and row ``v``, so a centred principal point is ``cx = (width - 1) / 2``. Image points
from the reasoner come in 0-1000 normalised coordinates over the whole image (0 = left/top edge,
1000 = right/bottom edge).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import transforms3d

NORMALISED_MAX = 1000.0


def pose_matrix(xyz_quat) -> np.ndarray:
    """``[x, y, z, qx, qy, qz, qw]`` (a ROS pose, as node parameters give it) -> a 4x4 transform.

    >>> pose_matrix([1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 1.0])[:3, 3].tolist()
    [1.0, 2.0, 3.0]
    """
    if len(xyz_quat) != 7:
        raise ValueError(f"a pose is [x, y, z, qx, qy, qz, qw], got {list(xyz_quat)}")
    x, y, z, qx, qy, qz, qw = (float(v) for v in xyz_quat)
    quat = np.array([qw, qx, qy, qz])
    if not np.isfinite([x, y, z, *quat]).all() or np.linalg.norm(quat) < 1e-9:
        raise ValueError(f"a pose needs finite numbers and a non-zero quaternion, got {list(xyz_quat)}")
    t = np.eye(4)
    t[:3, :3] = transforms3d.quaternions.quat2mat(quat / np.linalg.norm(quat))
    t[:3, 3] = (x, y, z)
    return t


@dataclass
class CameraModel:
    """Pinhole intrinsics ``k`` (3x3) and ``base_from_camera`` (4x4: optical frame -> robot base).

    The optical frame is x right, y down, z forward (REP 103's ``*_optical_frame``).
    ``min_depth_m`` / ``max_depth_m`` bound the depth readings that count as valid.
    """

    k: np.ndarray
    width: int
    height: int
    base_from_camera: np.ndarray = field(default_factory=lambda: np.eye(4))
    name: str = "camera"
    min_depth_m: float = 0.1
    max_depth_m: float = 3.0

    def __post_init__(self):
        self.k = np.asarray(self.k, dtype=np.float64).reshape(3, 3)
        self.base_from_camera = np.asarray(self.base_from_camera, dtype=np.float64).reshape(4, 4)
        if self.width <= 0 or self.height <= 0:
            raise ValueError(
                f"camera {self.name!r}: width and height must be positive, got {self.width}x{self.height}"
            )
        if self.k[0, 0] <= 0 or self.k[1, 1] <= 0:
            raise ValueError(f"camera {self.name!r}: focal lengths must be positive, got K={self.k.tolist()}")
        if not 0 <= self.min_depth_m < self.max_depth_m:
            raise ValueError(
                f"camera {self.name!r}: need 0 <= min_depth_m < max_depth_m, "
                f"got {self.min_depth_m}, {self.max_depth_m}"
            )
        rot = self.base_from_camera[:3, :3]
        if not np.allclose(rot @ rot.T, np.eye(3), atol=1e-6) or not np.allclose(
            self.base_from_camera[3], [0, 0, 0, 1]
        ):
            raise ValueError(f"camera {self.name!r}: base_from_camera is not a rigid transform")

    def normalised_to_pixel(self, u: float, v: float) -> tuple[int, int] | None:
        """0-1000 image coordinates -> integer pixel (column, row); None outside the image."""
        if not (0.0 <= u <= NORMALISED_MAX and 0.0 <= v <= NORMALISED_MAX):
            return None
        col = min(int(u / NORMALISED_MAX * self.width), self.width - 1)
        row = min(int(v / NORMALISED_MAX * self.height), self.height - 1)
        return col, row

    def normalised_point(self, xyz) -> tuple[float, float] | None:
        """0-1000 image coordinates of a base-frame point; None behind the camera or off the image."""
        t = self.base_from_camera
        p = t[:3, :3].T @ (np.asarray(xyz, dtype=np.float64) - t[:3, 3])
        if p[2] <= 0:
            return None
        col = self.k[0, 0] * p[0] / p[2] + self.k[0, 2] + 0.5  # + 0.5: from pixel centres to the image edge
        row = self.k[1, 1] * p[1] / p[2] + self.k[1, 2] + 0.5
        if not (0 <= col < self.width and 0 <= row < self.height):
            return None
        return float(col / self.width * NORMALISED_MAX), float(row / self.height * NORMALISED_MAX)

    def ray(self, u: float, v: float) -> tuple[np.ndarray, np.ndarray]:
        """Origin and unit direction, in the base frame, of the ray through 0-1000 point (u, v)."""
        col = u / NORMALISED_MAX * self.width - 0.5
        row = v / NORMALISED_MAX * self.height - 0.5
        t = self.base_from_camera
        direction = t[:3, :3] @ np.array(
            [(col - self.k[0, 2]) / self.k[0, 0], (row - self.k[1, 2]) / self.k[1, 1], 1.0]
        )
        return t[:3, 3].copy(), direction / np.linalg.norm(direction)


@dataclass
class RGBDFrame:
    """One synchronised colour + depth pair, depth aligned to colour.

    ``depth_m`` is float32 metres; 0 or NaN marks a missing reading. ``instances`` and
    ``instance_names`` are simulator ground truth (per-pixel instance id, id -> name) and are set
    only by simulators, for the ``sim`` segmenter.
    """

    rgb: np.ndarray
    depth_m: np.ndarray
    camera: CameraModel
    stamp_ns: int = 0
    instances: np.ndarray | None = None
    instance_names: dict[int, str] | None = None

    def __post_init__(self):
        h, w = self.camera.height, self.camera.width
        if self.rgb.shape != (h, w, 3) or self.depth_m.shape != (h, w):
            raise ValueError(
                f"frame shapes rgb {self.rgb.shape} / depth {self.depth_m.shape} do not match "
                f"camera {self.camera.name!r} ({w}x{h})"
            )
        if self.instances is not None and self.instances.shape != (h, w):
            raise ValueError(
                f"instance mask shape {self.instances.shape} does not match camera "
                f"{self.camera.name!r} ({w}x{h})"
            )


def look_at(eye, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """``base_from_camera`` of an optical frame at ``eye`` looking at ``target`` (image up ~ ``up``)."""
    eye, target, up = (np.asarray(a, dtype=np.float64) for a in (eye, target, up))
    z = target - eye
    z /= np.linalg.norm(z)
    x = np.cross(z, up)
    if np.linalg.norm(x) < 1e-9:
        raise ValueError("look_at: viewing direction is parallel to up")
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    t = np.eye(4)
    t[:3, :3] = np.stack([x, y, z], axis=1)
    t[:3, 3] = eye
    return t
