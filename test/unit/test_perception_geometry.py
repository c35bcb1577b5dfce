"""Back-projection and object statistics against geometry known exactly: analytic planes and
boxes, and the MuJoCo tabletop scene (camera about 1 m from the objects)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from r3.perception.camera import CameraModel, RGBDFrame, look_at
from r3.perception.geometry import backproject, masked_points, object_geometry, project, valid_depth
from r3.perception.sync import PairSync, StampedBuffer

MM = 1e-3


def plane_depth(camera: CameraModel, normal, offset) -> np.ndarray:
    """Optical-axis depth of the plane n . p = offset seen by ``camera`` (exact ray intersection)."""
    rows, cols = np.mgrid[0 : camera.height, 0 : camera.width].astype(np.float64)
    k, t = camera.k, camera.base_from_camera
    rays = np.stack([(cols - k[0, 2]) / k[0, 0], (rows - k[1, 2]) / k[1, 1], np.ones_like(cols)], axis=-1)
    n = np.asarray(normal, dtype=np.float64)
    origin, n_cam = t[:3, 3], t[:3, :3].T @ n  # rays are z = 1 scaled: depth = ray parameter
    return ((offset - n @ origin) / (rays @ n_cam)).astype(np.float64)


@pytest.fixture(scope="module")
def oblique_camera() -> CameraModel:
    k = np.array([[520.0, 0, 319.5], [0, 520.0, 239.5], [0, 0, 1]])
    return CameraModel(
        k=k, width=640, height=480, base_from_camera=look_at((0.1, -0.7, 0.75), (0.0, 0.05, 0.0))
    )


@pytest.mark.parametrize("normal, offset", [((0, 0, 1), 0.0), ((0, 0, 1), 0.12), ((0.3, 0.1, 1.0), 0.05)])
def test_backprojected_plane_lies_on_the_plane(oblique_camera, normal, offset):
    depth = plane_depth(oblique_camera, normal, offset)
    rows, cols = np.mgrid[0:480, 0:640]
    ok = (depth > 0) & (depth < 3)
    pts = backproject(cols[ok].astype(float), rows[ok].astype(float), depth[ok], oblique_camera)
    n = np.asarray(normal, float)
    assert np.abs(pts @ n - offset).max() / np.linalg.norm(n) < 1e-9
    # and back: the points project to the pixels they came from
    assert np.abs(project(pts, oblique_camera) - np.stack([cols[ok], rows[ok]], axis=1)).max() < 1e-6


def test_principal_axes_and_extent_of_a_rotated_box():
    half, yaw = np.array([0.10, 0.04, 0.02]), math.radians(30)
    g = np.stack(np.meshgrid(*[np.linspace(-h, h, 21) for h in half], indexing="ij"), -1).reshape(-1, 3)
    rot = np.array([[math.cos(yaw), -math.sin(yaw), 0], [math.sin(yaw), math.cos(yaw), 0], [0, 0, 1]])
    pts = g @ rot.T + [0.3, -0.2, 0.02]
    geom = object_geometry(pts)
    assert np.allclose(geom.centroid, [0.3, -0.2, 0.02], atol=1e-9)
    assert np.allclose(geom.extent, 2 * half, atol=1e-9)
    assert np.allclose(np.abs(geom.axes @ rot), np.eye(3), atol=1e-9)
    assert geom.top_height == pytest.approx(0.02 + 0.02 * 0.9, abs=2e-3)  # 95th percentile of 21 z levels


def test_invalid_depth_is_excluded(oblique_camera):
    depth = np.full((480, 640), 1.0, np.float32)
    depth[0, :4] = [0.0, np.nan, np.inf, -1.0]
    depth[1, :2] = [0.05, 5.0]  # outside 0.1-3 m
    valid = valid_depth(depth, oblique_camera)
    assert not valid[0, :4].any() and not valid[1, :2].any() and valid.sum() == 480 * 640 - 6


def test_normalised_points_map_to_pixels(oblique_camera):
    assert oblique_camera.normalised_to_pixel(0, 0) == (0, 0)
    assert oblique_camera.normalised_to_pixel(1000, 1000) == (639, 479)
    assert oblique_camera.normalised_to_pixel(500, 500) == (320, 240)
    assert (
        oblique_camera.normalised_to_pixel(-1, 10) is None
        and oblique_camera.normalised_to_pixel(10, 1000.5) is None
    )


def test_normalised_points_and_rays_round_trip(oblique_camera):
    for xyz in ((0.0, 0.05, 0.0), (0.2, -0.1, 0.1), (-0.15, 0.3, 0.02)):
        point = oblique_camera.normalised_point(xyz)
        origin, ray = oblique_camera.ray(*point)
        assert abs(np.linalg.norm(ray) - 1) < 1e-12
        along = np.subtract(xyz, origin) @ ray
        assert np.allclose(origin + along * ray, xyz, atol=1e-9)
    assert oblique_camera.normalised_point((0.1, -1.5, 0.75)) is None  # behind the camera
    # The image's centre pixel (319.5, 239.5 in pixel-centre coordinates) is the middle, 500/500.
    assert np.allclose(oblique_camera.ray(500, 500)[1], oblique_camera.base_from_camera[:3, 2])


def test_camera_model_validates():
    with pytest.raises(ValueError, match="focal"):
        CameraModel(k=np.diag([0.0, 1.0, 1.0]), width=4, height=4)
    with pytest.raises(ValueError, match="rigid"):
        CameraModel(k=np.eye(3), width=4, height=4, base_from_camera=np.diag([2.0, 1, 1, 1]))


def test_scene_table_plane_and_box_tops_within_a_millimetre(tabletop_frame, tabletop):
    frame = tabletop_frame
    valid = valid_depth(frame.depth_m, frame.camera)
    centre_depth = frame.depth_m[frame.instances > 0]
    assert 0.8 < float(np.median(centre_depth)) < 1.2  # the objects are about 1 m away
    table, _, _ = masked_points(frame, frame.instances == 0, valid)
    inside = (np.abs(table[:, 0]) < 0.49) & (np.abs(table[:, 1]) < 0.39)  # not the table's side faces
    assert inside.sum() > 50_000 and np.abs(table[inside, 2]).max() < 1 * MM
    for i, name in frame.instance_names.items():
        obj = tabletop.objects[name]
        pts, _, _ = masked_points(frame, frame.instances == i, valid)
        assert abs(object_geometry(pts).top_height - obj.top) < 1 * MM, name
        assert all(obj.contains(p, 1 * MM) for p in pts), name
        if obj.shape == "box":  # its top face, 2 mm in from the edges: every point at the top height
            inner = np.array([obj.contains((x, y, obj.top / 2), -2 * MM) for x, y, _ in pts])
            top = pts[inner & (pts[:, 2] > obj.top / 2)]
            assert len(top) > 100 and np.abs(top[:, 2] - obj.top).max() < 1 * MM, name


def test_top_surface_and_footprint_of_scene_objects(tabletop_frame, tabletop):
    """What a top-down grasp needs: the top face's centre, its long axis and the footprint size."""
    frame = tabletop_frame
    for i, name in frame.instance_names.items():
        obj = tabletop.objects[name]
        pts, _, _ = masked_points(frame, frame.instances == i)
        g = object_geometry(pts)
        assert np.abs(g.top_centre - [*obj.xy, obj.top]).max() < 3 * MM, name
        size = np.full(2, 2 * obj.size[0]) if obj.shape == "cylinder" else 2 * np.asarray(obj.size[:2])
        assert np.allclose(np.sort(g.footprint), np.sort(size), atol=3 * MM), name
        assert 0 <= g.bottom_height < 6 * MM, name  # the lowest visible pixels, a little above the table
        if obj.shape == "box" and obj.size[0] != obj.size[1]:  # a long axis to find
            long_axis = obj.yaw + (0 if obj.size[0] > obj.size[1] else math.pi / 2)
            assert abs(math.remainder(g.footprint_yaw - long_axis, math.pi)) < math.radians(2), name


def test_pair_sync_matches_the_closest_stamps_within_the_slop():
    sync = PairSync(slop_s=0.01)
    assert sync.add(0, 100_000_000, "c0") is None
    assert sync.add(1, 150_000_000, "d0") is None  # 50 ms apart: no pair
    assert sync.add(0, 148_000_000, "c1") == (148_000_000, "c1", "d0")
    assert sync.add(1, 200_000_000, "d1") is None and list(sync.queues[0]) == []


def test_frame_rejects_mismatched_shapes(oblique_camera):
    with pytest.raises(ValueError, match="do not match"):
        RGBDFrame(
            rgb=np.zeros((10, 10, 3), np.uint8), depth_m=np.zeros((10, 10), np.float32), camera=oblique_camera
        )


def test_stamped_buffer_waits_for_one_stamp_and_keeps_the_last_few():
    import threading

    buffer = StampedBuffer(size=2)
    assert buffer.wait(5, 0.01) is None
    threading.Timer(0.05, buffer.put, (5, "mask 5")).start()
    assert buffer.wait(5, 5.0) == "mask 5"  # arrives while waiting
    buffer.put(6, "mask 6")
    buffer.put(7, "mask 7")
    assert buffer.wait(5, 0.0) is None and buffer.wait(6, 0.0) == "mask 6"  # the oldest dropped
