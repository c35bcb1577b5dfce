"""A camera frame sent before its subscriber's reader existed or matched still arrives
(``r3_ros.adaptive_subscriptions``): the reasoner sees the cameras through these subscriptions, and a
simulator publishes a frame once per decision, right after the reset."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.ros

PUBLISHER = """
import sys, time, rclpy
from std_msgs.msg import String
from r3_ros.qos import recorded
rclpy.init()
node = rclpy.create_node("r3_probe_camera")
pub = node.create_publisher(String, "/r3_probe/frames", recorded(5) if sys.argv[1] == "keeping" else 5)
pub.publish(String(data="sent before anyone subscribed"))
print("published", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("publisher", ["keeping", "plain"])
def test_a_frame_sent_before_the_subscription_existed_arrives_from_a_keeping_publisher(
    publisher, private_ros_env
):
    import rclpy
    from std_msgs.msg import String

    from r3_ros.adaptive_subscriptions import AdaptiveSubscriptions

    env = private_ros_env(in_process=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", PUBLISHER, publisher], env=env, stdout=subprocess.PIPE, text=True
    )
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=int(env["ROS_DOMAIN_ID"]))
    node = rclpy.create_node("r3_probe_viewer", context=context)
    received: list[str] = []
    try:
        assert proc.stdout.readline().strip() == "published"
        cameras = AdaptiveSubscriptions(node, 5)
        cameras.add("/r3_probe/frames", lambda _: String, lambda _: lambda m: received.append(m.data))
        executor = rclpy.executors.SingleThreadedExecutor(context=context)
        executor.add_node(node)
        # The end of the wait is what it waits for, never a clock: the frame for a keeping publisher;
        # for a plain one, a subscription matched with it (then anything it would still send is in).
        matched = lambda: (
            "/r3_probe/frames" in cameras and cameras.subscriptions["/r3_probe/frames"].get_publisher_count()
        )
        deadline = time.monotonic() + 60  # only a bound for a broken graph
        while time.monotonic() < deadline and not (received if publisher == "keeping" else matched()):
            cameras.refresh()
            executor.spin_once(timeout_sec=0.05)
        if publisher == "plain":  # a publisher that keeps nothing: the frame is gone, as before
            assert matched()
            for _ in range(10):  # a frame kept by mistake would come with the match
                executor.spin_once(timeout_sec=0.05)
            assert received == []
        else:
            assert received == ["sent before anyone subscribed"]
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)
        proc.kill()
        proc.wait()
