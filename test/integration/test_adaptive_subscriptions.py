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
        cameras.add("/r3_probe/frames", lambda _: lambda m: received.append(m.data), "std_msgs/msg/String")
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


@pytest.mark.parametrize("declared", [True, False])
def test_a_publisher_of_another_type_neither_chooses_the_type_nor_the_qos(declared, private_ros_env):
    """A hostile peer on a recorded topic with another message type (and best effort, which the
    subscription would have to remake itself for): with the type declared, it is never subscribed
    to, first or not; without, the type of the topic's first publishers stays, and so does the
    subscription. Either way the real publisher's kept samples arrive."""
    import rclpy
    from rclpy.qos import QoSDurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import Int32, String

    from r3_ros.adaptive_subscriptions import AdaptiveSubscriptions
    from r3_ros.qos import recorded

    domain = int(private_ros_env(in_process=True)["ROS_DOMAIN_ID"])
    contexts = [rclpy.Context() for _ in range(3)]  # viewer, hostile peer, real publisher
    for ctx in contexts:
        rclpy.init(context=ctx, domain_id=domain)
    viewer, hostile, real = (
        rclpy.create_node(n, context=c) for n, c in zip(("viewer", "hostile", "real"), contexts)
    )
    topic, received = "/r3_probe/commands", []
    subs = AdaptiveSubscriptions(viewer, 5)
    executor = rclpy.executors.SingleThreadedExecutor(context=contexts[0])
    executor.add_node(viewer)

    def until(condition, what):
        deadline = time.monotonic() + 30  # only a bound for a broken graph
        while not condition():
            assert time.monotonic() < deadline, what
            subs.refresh()
            executor.spin_once(timeout_sec=0.02)

    def publishers_seen(n):
        return lambda: len(viewer.get_publishers_info_by_topic(topic)) == n

    best_effort = QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT)
    try:
        if declared:
            subs.add(topic, lambda _: lambda m: received.append(m.data), "std_msgs/msg/String")
            hostile.create_publisher(Int32, topic, best_effort)
            until(publishers_seen(1), "the hostile publisher was not discovered")
            subs.refresh()
            assert topic not in subs  # nothing of the declared type yet
            real.create_publisher(String, topic, recorded(5)).publish(String(data="kept"))
        else:
            real.create_publisher(String, topic, recorded(5)).publish(String(data="kept"))
            until(publishers_seen(1), "the real publisher was not discovered")
            subs.add(topic, lambda _: lambda m: received.append(m.data))
            assert topic in subs
            hostile.create_publisher(Int32, topic, best_effort)
        first = subs.subscriptions.get(topic)
        until(lambda: received == ["kept"], "the real publisher's kept sample did not arrive")
        until(publishers_seen(2), "both publishers were not discovered")
        subs.refresh()
        assert subs.types[topic] == "std_msgs/msg/String"
        assert subs.subscriptions[topic] is first or declared
        qos = subs.subscriptions[topic].qos_profile
        assert qos.reliability == ReliabilityPolicy.RELIABLE
        assert qos.durability == QoSDurabilityPolicy.TRANSIENT_LOCAL
    finally:
        for node in (viewer, hostile, real):
            node.destroy_node()
        for ctx in contexts:
            rclpy.try_shutdown(context=ctx)
