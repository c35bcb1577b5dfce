"""r3_ros.node.R3Node: no QoS-event waitable per topic (each was polled on every executor wake-up),
and the diagnosis they gave kept by one audit: a peer that cannot match is named once, with why."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.ros


@pytest.fixture
def contexts(private_ros_env):
    """Two contexts on one private domain: two DDS participants, as two processes have."""
    import rclpy

    domain = int(private_ros_env(in_process=True)["ROS_DOMAIN_ID"])
    pair = (rclpy.Context(), rclpy.Context())
    for ctx in pair:
        rclpy.init(context=ctx, domain_id=domain)
    yield pair
    for ctx in pair:
        rclpy.try_shutdown(context=ctx)


@pytest.fixture
def context(contexts):
    return contexts[0]


def _wait_for(condition, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_topics_carry_no_event_waitables_unless_asked(context):
    from rclpy.event_handler import PublisherEventCallbacks
    from rclpy.node import Node
    from std_msgs.msg import String

    from r3_ros.node import R3Node

    plain = Node("plain_probe", context=context)
    node = R3Node("r3_probe", context=context)
    for n in (plain, node):
        for i in range(3):
            n.create_publisher(String, f"/probe/out{i}", 10)
            n.create_subscription(String, f"/probe/in{i}", lambda _m: None, 10)
    assert len(list(plain.waitables)) >= 6  # rclpy's default: handlers on every topic
    assert len(list(node.waitables)) == 0
    asked = []
    node.create_publisher(
        String, "/probe/asked", 10, event_callbacks=PublisherEventCallbacks(matched=asked.append)
    )
    assert len(list(node.waitables)) >= 1  # its own handlers stay
    plain.destroy_node()
    node.destroy_node()


def test_audit_names_each_peer_that_cannot_match_once(contexts):
    from rclpy.node import Node
    from rclpy.qos import QoSDurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import Int32, String

    from r3_ros.node import R3Node

    context, elsewhere = contexts
    node = R3Node("r3_audited", context=context)
    node.create_publisher(String, "/audit/volatile", QoSProfile(depth=1))
    node.create_subscription(
        String,
        "/audit/reliable",
        lambda _m: None,
        QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE),
    )
    node.create_subscription(String, "/audit/typed", lambda _m: None, 1)
    peer = Node("peer", namespace="/cell", context=elsewhere)
    # Asks for kept samples of a volatile writer; offers best effort to a reliable reader; another type.
    peer.create_subscription(
        String,
        "/audit/volatile",
        lambda _m: None,
        QoSProfile(depth=1, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL),
    )
    peer.create_publisher(
        String, "/audit/reliable", QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
    )
    peer.create_publisher(Int32, "/audit/typed", 1)
    friend = Node("friend", context=elsewhere)  # compatible with everything: never named
    friend.create_subscription(String, "/audit/volatile", lambda _m: None, 1)
    friend.create_publisher(String, "/audit/reliable", 1)

    topics = ("/audit/volatile", "/audit/reliable", "/audit/typed")

    def discovered(infos, n):  # endpoints first, their node names later
        return len(infos) == n and all(i.node_name in ("peer", "friend") for i in infos)

    assert _wait_for(
        lambda: (
            discovered(node.get_subscriptions_info_by_topic(topics[0]), 2)
            and discovered(node.get_publishers_info_by_topic(topics[1]), 2)
            and discovered(node.get_publishers_info_by_topic(topics[2]), 1)
        )
    )
    warnings = node.audit_qos()
    assert len(warnings) == 3, warnings
    by_topic = {t: [w for w in warnings if f" {t}," in w] for t in topics}
    assert all(len(found) == 1 and "/cell/peer" in found[0] for found in by_topic.values()), warnings
    assert "it asks reliable, transient_local, this node offers reliable, volatile" in by_topic[topics[0]][0]
    assert "it offers best_effort, volatile, this node asks reliable, volatile" in by_topic[topics[1]][0]
    assert "it uses std_msgs/msg/Int32, this node std_msgs/msg/String" in by_topic[topics[2]][0]
    assert not any("friend" in w for w in warnings)
    assert node.audit_qos() == []  # once per peer and topic
    for n in (node, peer, friend):
        n.destroy_node()
