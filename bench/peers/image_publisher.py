"""Bench peer: publishes 640x480 rgb8 images at a fixed rate, stamped with the wall clock."""

import sys
import time

import numpy as np
import rclpy
from rclpy.clock import Clock, ClockType
from sensor_msgs.msg import Image

from r3_ros.conversions import image_to_msg


def main(rate_hz: float, count: int) -> None:
    rclpy.init()
    node = rclpy.create_node("bench_image_publisher")
    pub = node.create_publisher(Image, "/bench/image", 10)
    clock = Clock(clock_type=ClockType.SYSTEM_TIME)
    frame = np.random.default_rng(0).integers(0, 255, (480, 640, 3), dtype=np.uint8)
    while pub.get_subscription_count() == 0:
        rclpy.spin_once(node, timeout_sec=0.05)
    time.sleep(0.5)
    period, start = 1.0 / rate_hz, time.monotonic()
    for i in range(count):
        pub.publish(image_to_msg(frame, clock.now().to_msg(), "camera"))
        time.sleep(max(0.0, start + (i + 1) * period - time.monotonic()))
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    main(float(sys.argv[1]), int(sys.argv[2]))
