"""An Intel RealSense camera through pyrealsense2, for users without the vendor ROS driver.

Colour and depth stream together; depth is aligned to the colour image with ``rs.align``, so one
pinhole model (the colour stream's intrinsics) serves both, as the vendor driver's
``aligned_depth_to_color`` topics do. Anything with ``wait_for_frames(timeout_ms)`` can feed the
camera: a ``pipeline`` on a real device, or a ``syncer`` fed by ``rs.software_device`` in tests.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np


@dataclass
class RealSenseConfig:
    """``serial``: the device to open ("" = the first one found)."""

    serial: str = ""
    width: int = 640
    height: int = 480
    fps: int = 30

    def __post_init__(self):
        if self.width <= 0 or self.height <= 0 or self.fps <= 0:
            raise ValueError(f"bad stream settings {self.width}x{self.height} @ {self.fps} Hz")


@dataclass
class CameraReading:
    """One aligned pair: RGB uint8, depth float32 metres (0 = no reading), the colour intrinsics."""

    rgb: np.ndarray
    depth_m: np.ndarray
    k: np.ndarray
    distortion: list[float]
    frame_number: int


class RealSenseCamera:
    def __init__(self, source, depth_sensor, on_close=None):
        import pyrealsense2 as rs

        self._source = source
        self._align = rs.align(rs.stream.color)
        self._depth_scale = float(depth_sensor.get_option(rs.option.depth_units))
        self._on_close = on_close

    @classmethod
    def open(cls, config: RealSenseConfig) -> RealSenseCamera:
        """Start colour (rgb8) and depth (z16) on a connected device; a clear error when none is."""
        import pyrealsense2 as rs

        serials = [d.get_info(rs.camera_info.serial_number) for d in rs.context().query_devices()]
        if not serials:
            raise RuntimeError("no RealSense device found (check the USB connection and udev rules)")
        if config.serial and config.serial not in serials:
            raise RuntimeError(f"RealSense {config.serial} not found; connected: {', '.join(serials)}")
        rs_config = rs.config()
        if config.serial:
            rs_config.enable_device(config.serial)
        rs_config.enable_stream(rs.stream.color, config.width, config.height, rs.format.rgb8, config.fps)
        rs_config.enable_stream(rs.stream.depth, config.width, config.height, rs.format.z16, config.fps)
        pipeline = rs.pipeline()
        profile = pipeline.start(rs_config)
        return cls(pipeline, profile.get_device().first_depth_sensor(), on_close=pipeline.stop)

    def read(self, timeout_ms: int = 1000) -> CameraReading:
        """The next frameset holding both streams (the first ones after a start may hold one)."""
        deadline = time.monotonic() + timeout_ms / 1000.0
        while True:
            remaining = max(int((deadline - time.monotonic()) * 1000), 1)
            frames = self._source.wait_for_frames(remaining)  # raises RuntimeError on timeout
            if frames.get_color_frame() and frames.get_depth_frame():
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"no frameset with both colour and depth within {timeout_ms} ms")
        frames = self._align.process(frames)
        colour, depth = frames.get_color_frame(), frames.get_depth_frame()
        intr = colour.get_profile().as_video_stream_profile().get_intrinsics()
        k = np.array([[intr.fx, 0.0, intr.ppx], [0.0, intr.fy, intr.ppy], [0.0, 0.0, 1.0]])
        raw = np.asanyarray(depth.get_data())
        return CameraReading(
            rgb=np.asanyarray(colour.get_data()).copy(),
            depth_m=raw.astype(np.float32) * np.float32(self._depth_scale),
            k=k,
            distortion=list(intr.coeffs),
            frame_number=int(colour.get_frame_number()),
        )

    def close(self) -> None:
        if self._on_close is not None:
            self._on_close()
            self._on_close = None
