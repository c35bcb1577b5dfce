"""The recorder's QoS rule: its subscription to a topic matches every publisher there, and takes
the samples they keep for late readers only when all of them keep some."""

from __future__ import annotations

import pytest
from rclpy.qos import QoSDurabilityPolicy, QoSProfile, ReliabilityPolicy

from r3_ros.qos import LATCHED, SENSOR, can_match, recorded, recording

VOLATILE = QoSProfile(depth=5)


@pytest.mark.parametrize(
    ("offered", "reliability", "durability"),
    [
        ([recorded(5)], ReliabilityPolicy.RELIABLE, QoSDurabilityPolicy.TRANSIENT_LOCAL),
        ([recorded(5), LATCHED], ReliabilityPolicy.RELIABLE, QoSDurabilityPolicy.TRANSIENT_LOCAL),
        ([recorded(5), VOLATILE], ReliabilityPolicy.RELIABLE, QoSDurabilityPolicy.VOLATILE),
        ([SENSOR], ReliabilityPolicy.BEST_EFFORT, QoSDurabilityPolicy.VOLATILE),
        ([recorded(5), SENSOR], ReliabilityPolicy.BEST_EFFORT, QoSDurabilityPolicy.VOLATILE),
    ],
)
def test_the_recording_subscription_matches_every_publisher(offered, reliability, durability):
    qos = recording(offered)
    assert (qos.reliability, qos.durability) == (reliability, durability)
    assert all(can_match(q, qos) for q in offered)
    assert qos.depth >= 100  # a burst of images waits while a bag is written
