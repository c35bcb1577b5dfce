"""r3_realsense_node: an Intel RealSense camera on pyrealsense2, for machines without the vendor driver.

Publishes what the vendor driver (realsense2_camera with ``align_depth.enable:=true``) publishes,
under the same names: colour (rgb8), depth aligned to colour (16UC1 millimetres) and a camera_info
for each (the colour intrinsics, since depth is aligned). Stamps are this node's clock when a
frameset arrives. With the vendor driver running instead, start no r3_realsense_node: the rest of
the graph reads the same topics (README, "Cameras").
"""

from __future__ import annotations

import threading

from sensor_msgs.msg import CameraInfo, Image

from r3.graph import names
from r3.graph.node_params import NODE_PARAMETERS
from r3.perception.realsense import RealSenseCamera, RealSenseConfig
from r3_ros.conversions import camera_info_msg, depth_to_msg, image_to_msg
from r3_ros.heartbeat import HeartbeatPublisher
from r3_ros.node import R3Node
from r3_ros.params import declare_parameters
from r3_ros.spin import run_node


class RealSenseNode(R3Node):
    def __init__(self, camera: RealSenseCamera | None = None):
        """``camera``: an already open camera (tests feed one from rs.software_device); None opens
        the device the parameters name."""
        super().__init__("r3_realsense_node")
        self.p = declare_parameters(self, NODE_PARAMETERS["r3_realsense_node"])
        self.camera = camera or RealSenseCamera.open(
            RealSenseConfig(self.p["serial"], self.p["width"], self.p["height"], self.p["fps"])
        )
        self.image_pub = self.create_publisher(Image, names.CAMERA_IMAGE, 5)
        self.info_pub = self.create_publisher(CameraInfo, names.CAMERA_INFO, 5)
        self.depth_pub = self.create_publisher(Image, names.CAMERA_DEPTH, 5)
        self.depth_info_pub = self.create_publisher(CameraInfo, names.CAMERA_DEPTH_INFO, 5)
        self.heartbeat = HeartbeatPublisher(self)
        self.running = threading.Event()
        self.running.set()
        self.capture = threading.Thread(target=self.capture_loop, daemon=True)
        self.capture.start()
        self.get_logger().info(
            f"streaming RealSense colour + aligned depth as {names.CAMERA_IMAGE}, {names.CAMERA_DEPTH}"
        )

    def capture_loop(self) -> None:
        while self.running.is_set():
            try:
                reading = self.camera.read(self.p["read_timeout_ms"])
            except RuntimeError as exc:  # a timeout: the device stalled or was unplugged
                if self.running.is_set():
                    self.get_logger().warn(f"no frames: {exc}", throttle_duration_sec=5.0)
                continue
            stamp, frame_id = self.get_clock().now().to_msg(), self.p["frame_id"]
            h, w = reading.depth_m.shape
            info = camera_info_msg(reading.k, w, h, stamp, frame_id)
            info.d = [float(c) for c in reading.distortion]
            self.image_pub.publish(image_to_msg(reading.rgb, stamp, frame_id))
            self.depth_pub.publish(depth_to_msg(reading.depth_m, stamp, frame_id))
            self.info_pub.publish(info)
            self.depth_info_pub.publish(info)

    def shutdown(self) -> None:
        self.running.clear()
        self.capture.join(timeout=5.0)
        self.camera.close()


def main(args=None) -> None:
    run_node(RealSenseNode, args)


if __name__ == "__main__":
    main()
