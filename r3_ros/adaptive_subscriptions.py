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

from collections.abc import Callable

from r3_ros.qos import can_match, recording


class AdaptiveSubscriptions:
    """The node's adaptive subscriptions; :meth:`refresh` (on a timer) makes and remakes them."""

    def __init__(self, node, depth: int, raw: bool = False, callback_group=None):
        self.node, self.depth, self.raw, self.group = node, depth, raw, callback_group
        self.wanted: dict[str, tuple[Callable[[str], type], Callable[[str], Callable]]] = {}
        self.subscriptions: dict[str, object] = {}

    def add(
        self, topic: str, message_class: Callable[[str], type], callback: Callable[[str], Callable]
    ) -> None:
        """Subscribe to ``topic`` once it has publishers: ``message_class(type name)`` and
        ``callback(type name)`` give the subscription's class and callback."""
        self.wanted[topic] = (message_class, callback)
        self.refresh()

    def __contains__(self, topic: str) -> bool:
        return topic in self.subscriptions

    def refresh(self) -> None:
        for topic, (message_class, callback) in self.wanted.items():
            publishers = self.node.get_publishers_info_by_topic(topic)
            offered = [e.qos_profile for e in publishers]
            current = self.subscriptions.get(topic)
            if not offered or (current and all(can_match(q, current.qos_profile) for q in offered)):
                continue
            qos = recording(offered, self.depth)
            if current:
                self.node.get_logger().warning(
                    f"{topic}: a publisher offers QoS the subscription cannot match; subscribing "
                    f"again ({qos.reliability.name.lower()}, {qos.durability.name.lower()})"
                )
                self.node.destroy_subscription(current)
            msgtype = publishers[0].topic_type
            self.subscriptions[topic] = self.node.create_subscription(
                message_class(msgtype), topic, callback(msgtype), qos, raw=self.raw, callback_group=self.group
            )
