"""Subscriptions that adapt their QoS to the topic's publishers, as ``ros2 bag record`` does.

A simulator publishes a camera frame once per decision, right after a reset; a frame sent before
its writer had matched a new reader never reaches that reader (DDS matches the two sides
asynchronously). r3's own publishers keep their last samples for late readers
(``r3_ros.qos.recorded``), and a subscription made here takes them: it is made once the topic has
publishers, with the QoS that matches all of them (``r3_ros.qos.recording``), and made again when
a publisher it cannot match appears. A real camera driver keeps nothing; then it is a plain
subscription. The recorder records through these, the reasoner sees the cameras through them.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Callable

from r3_ros.qos import can_match, recording


def message_class(msgtype: str):
    """'sensor_msgs/msg/Image' -> the rclpy message class."""
    package, kind, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{package}.{kind}"), name)


class AdaptiveSubscriptions:
    """The node's adaptive subscriptions; :meth:`refresh` (on a timer) makes and remakes them."""

    def __init__(self, node, depth: int, raw: bool = False, callback_group=None):
        self.node, self.depth, self.raw, self.group = node, depth, raw, callback_group
        self.wanted: dict[str, tuple[Callable[[str], Callable], str | None]] = {}
        self.subscriptions: dict[str, object] = {}
        self.types: dict[str, str] = {}  # topic -> the type its subscription takes

    def add(self, topic: str, callback: Callable[[str], Callable], msgtype: str | None = None) -> None:
        """Subscribe to ``topic`` once it has publishers of ``msgtype`` ('sensor_msgs/msg/Image');
        ``callback(type name)`` gives the subscription's callback. Without a ``msgtype``, the type
        most of the topic's publishers offer when it is first subscribed, kept from then on.
        Publishers of another type are left out, whatever they offer: DDS never matches them (the
        node's QoS audit names them), and letting them choose the type or the QoS would leave the
        subscription deaf to the topic's real publishers."""
        self.wanted[topic] = (callback, msgtype)
        self.refresh()

    def __contains__(self, topic: str) -> bool:
        return topic in self.subscriptions

    def refresh(self) -> None:
        for topic, (callback, wanted_type) in self.wanted.items():
            publishers = self.node.get_publishers_info_by_topic(topic)
            current = self.subscriptions.get(topic)
            msgtype = wanted_type or self.types.get(topic)
            if msgtype is None and publishers:
                msgtype = Counter(e.topic_type for e in publishers).most_common(1)[0][0]
            offered = [e.qos_profile for e in publishers if e.topic_type == msgtype]
            if not offered or (current and all(can_match(q, current.qos_profile) for q in offered)):
                continue
            qos = recording(offered, self.depth)
            if current:
                self.node.get_logger().warning(
                    f"{topic}: a publisher offers QoS the subscription cannot match; subscribing "
                    f"again ({qos.reliability.name.lower()}, {qos.durability.name.lower()})"
                )
                self.node.destroy_subscription(current)
            self.types[topic] = msgtype
            self.subscriptions[topic] = self.node.create_subscription(
                message_class(msgtype), topic, callback(msgtype), qos, raw=self.raw, callback_group=self.group
            )
