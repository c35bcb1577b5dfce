"""Messages anyone may publish on r3's input topics are checked on arrival: camera_info a node
projects with, and detections a packing policy acts on (``r3_ros.conversions``). Found by a hostile
client: a camera_info with a focal length of 1e30 or NaN was used as it came, and a DetectedObjects
message with an infinite yaw failed every packing instruction."""

from __future__ import annotations

import math

import numpy as np
import pytest
from geometry_msgs.msg import Point

from r3_msgs.msg import DetectedObject, DetectedObjects
from r3_ros.conversions import (
    MAX_DETECTIONS,
    camera_info_msg,
    check_camera_info,
    check_detections,
    ns_to_stamp,
)

K = np.array([[277.0, 0.0, 160.0], [0.0, 277.0, 120.0], [0.0, 0.0, 1.0]])


def info(k=K, width=320, height=240):
    return camera_info_msg(np.asarray(k, dtype=float), width, height, ns_to_stamp(0), "camera")


def with_k(index: int, value: float):
    k = K.copy().reshape(9)
    k[index] = value
    return info(k.reshape(3, 3))


def test_a_real_camera_info_passes():
    assert check_camera_info(info()) is not None


@pytest.mark.parametrize(
    "bad, says",
    [
        (with_k(0, 1e30), "focal lengths"),
        (with_k(4, 0.0), "focal lengths"),
        (with_k(0, -277.0), "focal lengths"),
        (with_k(2, math.nan), "not finite"),
        (with_k(5, math.inf), "not finite"),
        (with_k(2, 1e4), "principal point"),
        (with_k(8, 0.0), r"K\[8\]=0"),
        (info(width=0), "size"),
        (info(height=100_000), "size"),
    ],
)
def test_a_camera_info_no_camera_has_is_refused(bad, says):
    with pytest.raises(ValueError, match=says):
        check_camera_info(bad)


def detection(label="sugar box", top=(0.5, 0.1, 0.1), yaw=0.3, footprint=(0.05, 0.03), bottom=0.02):
    d = DetectedObject(label=label, score=1.0, mask_id=1, valid_points=500)
    d.top_centre = Point(x=top[0], y=top[1], z=top[2])
    d.footprint_yaw, d.footprint, d.bottom_height = yaw, list(footprint), bottom
    return DetectedObjects(objects=[d])


def test_detections_with_and_without_a_3d_estimate_pass():
    nan = math.nan
    assert check_detections(detection()) is not None
    assert check_detections(detection(top=(nan, nan, nan), yaw=nan, footprint=(nan, nan), bottom=nan))


@pytest.mark.parametrize(
    "bad",
    [
        detection(yaw=math.inf),
        detection(top=(math.nan, math.nan, 0.1)),  # a place half missing
        detection(top=(1e30, 0.1, 0.1)),
        detection(footprint=(-0.05, 0.03)),
        detection(bottom=-math.inf),
        detection(label="x" * 1000),
        DetectedObjects(objects=[DetectedObject()] * (MAX_DETECTIONS + 1)),
    ],
    ids=["inf_yaw", "nan_xy", "far", "negative_footprint", "inf_bottom", "long_label", "too_many"],
)
def test_detections_that_are_no_objects_are_refused(bad):
    with pytest.raises(ValueError):
        check_detections(bad)
