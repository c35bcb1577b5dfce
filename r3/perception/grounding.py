"""ERR's 2D-to-3D grounding rules, and the measurement of one segmented object.

- pick: x, y from the centroid of the mask's valid points, z = the 95th percentile of their heights
  (the top surface, robust to a few stray pixels);
- place: the valid depth pixel of the mask nearest to the centre of the mask's box, back-projected
  (the middle of a container, even when the container is hollow or its rim is thin).
Invalid depth (0, NaN, outside the camera's range) never counts; an object with fewer than
``min_valid_pixels`` valid pixels gets a reason instead of a 3D estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from r3.perception.camera import RGBDFrame
from r3.perception.geometry import ObjectGeometry, mask_box, masked_points, object_geometry
from r3.perception.segmenters import Segment

PURPOSES = ("pick", "place")
TOO_FEW_VALID = "too_few_valid_depth_pixels"


@dataclass
class GroundingConfig:
    min_valid_pixels: int = 20

    def __post_init__(self):
        if self.min_valid_pixels < 1:
            raise ValueError(f"min_valid_pixels must be >= 1, got {self.min_valid_pixels}")


@dataclass
class Detection:
    """A segmented object with its 3D estimate; ``geometry`` is None (and ``reason`` says why)
    when too few of its pixels have valid depth."""

    label: str
    score: float
    mask_id: int
    box: tuple[int, int, int, int]
    mask: np.ndarray
    valid_points: int
    geometry: ObjectGeometry | None
    reason: str = ""


def unknown_purpose(purpose: str) -> str:
    return f"unknown_purpose: {purpose[:80]!r} (expected pick or place)"


def measure(
    frame: RGBDFrame, segment: Segment, mask_id: int, config: GroundingConfig, valid: np.ndarray | None = None
) -> Detection:
    points, _, _ = masked_points(frame, segment.mask, valid)
    enough = len(points) >= config.min_valid_pixels
    return Detection(
        label=segment.label,
        score=segment.score,
        mask_id=mask_id,
        box=segment.box or (0, 0, 0, 0),
        mask=segment.mask,
        valid_points=len(points),
        geometry=object_geometry(points) if enough else None,
        reason="" if enough else TOO_FEW_VALID,
    )


def ground(
    frame: RGBDFrame, mask: np.ndarray, purpose: str, config: GroundingConfig, valid: np.ndarray | None = None
) -> tuple[np.ndarray | None, str]:
    """(3D target in the base frame, "") or (None, reason) for one object mask."""
    if purpose not in PURPOSES:
        return None, unknown_purpose(purpose)
    points, cols, rows = masked_points(frame, mask, valid)
    if len(points) < config.min_valid_pixels:
        return None, TOO_FEW_VALID
    if purpose == "pick":
        geometry = object_geometry(points)
        return np.array([geometry.centroid[0], geometry.centroid[1], geometry.top_height]), ""
    x0, y0, x1, y1 = mask_box(mask)
    nearest = int(np.argmin((cols - (x0 + x1) / 2.0) ** 2 + (rows - (y0 + y1) / 2.0) ** 2))
    return points[nearest].copy(), ""
