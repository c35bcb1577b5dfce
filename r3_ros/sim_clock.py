"""/clock as r3's simulators publish it: at every reset, frame and decision point, and in between, while
the robot moves, at most every ``names.CLOCK_PERIOD_NS`` of simulated time (each message wakes every
node on sim time; a control step is 0.05-0.1 s)."""

from __future__ import annotations

from rclpy.node import Node
from rosgraph_msgs.msg import Clock

from r3.graph import names
from r3_ros.conversions import ns_to_stamp
from r3_ros.qos import recorded


class SimClockPublisher:
    def __init__(self, node: Node):
        self._pub = node.create_publisher(Clock, names.CLOCK, recorded(10))
        self.published_ns: int | None = None  # the last time sent

    def publish(self, now_ns: int, again: bool = False) -> None:
        """At a reset, frame or decision point: now, unless it is out already (``again``: even so; a
        frame sent again for a reader that missed it, one frozen for seconds, may have missed its
        time too, and a node on sim time refuses a frame far ahead of its clock)."""
        if again or now_ns != self.published_ns:
            self._pub.publish(Clock(clock=ns_to_stamp(now_ns)))
            self.published_ns = now_ns

    def publish_if_due(self, now_ns: int) -> None:
        """During a motion: now, if the last was ``names.CLOCK_PERIOD_NS`` ago or more."""
        if self.published_ns is None or now_ns - self.published_ns >= names.CLOCK_PERIOD_NS:
            self.publish(now_ns)
