"""ERR's grounding rules on simulator RGB-D frames (the ``sim`` segmenter), and the reasons given
when grounding cannot produce a target."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from r3.perception.annotate import annotate
from r3.perception.camera import NORMALISED_MAX
from r3.perception.grounding import TOO_FEW_VALID, GroundingConfig, ground
from r3.perception.pipeline import (
    ANY_LABEL,
    NO_FRAME,
    NO_OBJECT,
    OUTSIDE_IMAGE,
    STALE_FRAME,
    Perception,
    PerceptionConfig,
)
from r3.perception.segmenters import make_segmenter

MM = 1e-3
NOW = 1_000_000_000  # the frames' stamp


def to_normalised(frame, col, row):
    """A pixel's centre in 0-1000 coordinates."""
    return (col + 0.5) / frame.camera.width * NORMALISED_MAX, (
        row + 0.5
    ) / frame.camera.height * NORMALISED_MAX


@pytest.fixture
def perception(tabletop_frame):
    p = Perception(make_segmenter("sim"))
    p.process(tabletop_frame)
    return p


@pytest.mark.parametrize("purpose", ["pick", "place"])
def test_points_on_visible_objects_ground_to_the_true_object(tabletop, tabletop_frame, perception, purpose):
    frame, rng = tabletop_frame, np.random.default_rng(0)
    rows, cols = np.nonzero(frame.instances > 0)
    picks = rng.choice(len(rows), 300, replace=False)
    hits = 0
    for row, col in zip(rows[picks], cols[picks]):
        truth = tabletop.objects[frame.instance_names[int(frame.instances[row, col])]]
        result = perception.ground_point(ANY_LABEL, *to_normalised(frame, col, row), purpose, NOW)
        detection = perception.detections[result.mask_id - 1] if result.ok else None
        if result.ok and detection.label == truth.name and truth.contains(result.target, 5 * MM):
            hits += 1 if purpose == "place" or abs(result.target[2] - truth.top) < 1 * MM else 0
    assert hits / len(picks) >= 0.95


def test_place_target_is_the_valid_pixel_nearest_the_box_centre(tabletop, tabletop_frame):
    frame = tabletop_frame
    mask = frame.instances == next(i for i, n in frame.instance_names.items() if n == "green box")
    target, reason = ground(frame, mask, "place", GroundingConfig())
    assert reason == ""
    obj = tabletop.objects["green box"]
    assert abs(target[2] - obj.top) < 1 * MM and np.hypot(*(target[:2] - obj.xy)) < 0.03
    # knock out the centre pixels: the next nearest valid pixel is used instead
    rows, cols = np.nonzero(mask)
    cx, cy = (cols.min() + cols.max()) / 2, (rows.min() + rows.max()) / 2
    holed = dataclasses.replace(frame, depth_m=frame.depth_m.copy())
    holed.depth_m[int(cy) - 3 : int(cy) + 4, int(cx) - 3 : int(cx) + 4] = 0.0
    moved, _ = ground(holed, mask, "place", GroundingConfig())
    assert 0 < np.linalg.norm(moved - target) < 0.02


@pytest.mark.parametrize("bad", [0.0, np.nan, 10.0])
def test_an_object_without_valid_depth_gets_a_reason(tabletop_frame, bad):
    frame = dataclasses.replace(tabletop_frame, depth_m=tabletop_frame.depth_m.copy())
    red = next(i for i, n in frame.instance_names.items() if n == "red box")
    frame.depth_m[frame.instances == red] = bad
    p = Perception(make_segmenter("sim"), PerceptionConfig(GroundingConfig(min_valid_pixels=20)))
    p.set_query(["red box", "green box"])
    red_det, green_det = p.process(frame)
    assert red_det.geometry is None and red_det.reason == TOO_FEW_VALID and red_det.valid_points == 0
    assert green_det.geometry is not None and green_det.reason == ""
    rows, cols = np.nonzero(frame.instances == red)
    result = p.ground_point("red box", *to_normalised(frame, cols[0], rows[0]), "pick", NOW)
    assert not result.ok and result.reason == TOO_FEW_VALID and result.mask_id == 0


def test_grounding_failures_name_their_reason(tabletop_frame):
    p = Perception(make_segmenter("sim"), PerceptionConfig(max_frame_age_s=0.5))
    assert p.ground_point("x", 500, 500, "pick", NOW).reason == NO_FRAME
    p.process(tabletop_frame)
    assert p.ground_point("x", 2, 2, "pick", NOW).reason == NO_OBJECT  # the background
    assert p.ground_point("x", 1200, 500, "pick", NOW).reason.startswith(OUTSIDE_IMAGE)
    assert p.ground_point("x", 500, 500, "pick", NOW + 600_000_000).reason.startswith(STALE_FRAME)
    ahead = p.ground_point("x", 500, 500, "pick", 0).reason  # a clock switched to sim time, no /clock
    assert ahead == f"{STALE_FRAME}: newest frame is stamped {NOW / 1e9:.2f} s ahead of this node's clock"
    assert p.ground_point("x", 500, 500, "push", NOW).reason.startswith("unknown_purpose")


def test_grounding_on_an_old_frame_names_the_newer_frames_refused_and_why(tabletop_frame):
    """Found by a hostile client: while the node skipped every newer frame (a depth image of another
    size), GroundPoint answered a bare ``stale_frame``; the cause was only in the node's log."""
    p = Perception(make_segmenter("sim"), PerceptionConfig(max_frame_age_s=0.5))
    why = "ValueError: frame shapes rgb (240, 320, 3) / depth (4, 4) do not match camera"
    p.refuse_frame(why)
    assert (
        p.ground_point("x", 500, 500, "pick", NOW).reason == f"{NO_FRAME}: the last frame was refused: {why}"
    )
    p.process(tabletop_frame)
    for _ in range(3):
        p.refuse_frame(why)
    assert p.ground_point("x", 500, 500, "pick", NOW + 600_000_000).reason == (
        f"{STALE_FRAME}: newest frame is 0.60 s old; the last 3 frames were refused: {why}"
    )
    p.process(tabletop_frame)  # a frame processed again: the refusals are behind it
    assert p.ground_point("x", 500, 500, "pick", NOW + 600_000_000).reason == (
        f"{STALE_FRAME}: newest frame is 0.60 s old"
    )
    assert p.set_query(["red box", " "]) == "empty label in the query"


def test_a_query_too_long_to_serve_is_refused_and_the_old_one_kept(tabletop_frame):
    p = Perception(make_segmenter("sim"))
    assert p.set_query(["blue cylinder"]) == ""
    assert p.set_query(["mug"] * 100_000) == "a query of 100,000 names; at most 64"
    too_long = "a label of 1,000,000 characters in the query; at most 200"
    assert p.set_query(["mug", "m" * 1_000_000]) == too_long
    assert [d.label for d in p.process(tabletop_frame)] == ["blue cylinder"]


def test_query_selects_objects_and_annotation_marks_them(tabletop_frame):
    p = Perception(make_segmenter("sim"))
    assert p.set_query(["blue cylinder", "no such thing", "white tall box"]) == ""
    detections = p.process(tabletop_frame)
    assert [(d.label, d.mask_id) for d in detections] == [("blue cylinder", 1), ("white tall box", 2)]
    image = annotate(tabletop_frame.rgb, detections)
    assert image.shape == tabletop_frame.rgb.shape and image.dtype == np.uint8
    changed = np.any(image != tabletop_frame.rgb, axis=-1)
    assert changed[detections[0].mask].mean() > 0.9 and not changed[tabletop_frame.instances == 0].all()
    assert p.set_query([]) == "" and p.process(tabletop_frame) == []
