"""Test peer: a node whose topics cannot match r3's, until it is killed. It publishes and subscribes
std_msgs/String on the pusher command topic (another type), subscribes std_msgs/String to the
reasoner's steps, and asks for kept samples of the refusals topic, which keeps none."""

import rclpy
from rclpy.node import Node
from rclpy.qos import QoSDurabilityPolicy, QoSProfile
from std_msgs.msg import String

from r3.graph import names
from r3_msgs.msg import CommandRefusal


def main():
    rclpy.init()
    node = Node("mismatched_peer")
    commands = node.create_publisher(String, names.PUSHER_COMMAND, 10)
    node.create_subscription(String, names.PUSHER_COMMAND, lambda _m: None, 10)
    node.create_subscription(String, names.REASONER_STEPS, lambda _m: None, 10)
    node.create_subscription(
        CommandRefusal,
        names.PUSHER_REFUSALS,
        lambda _m: None,
        QoSProfile(depth=10, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL),
    )
    node.create_timer(0.1, lambda: commands.publish(String(data="move left 10 m")))
    rclpy.spin(node)


if __name__ == "__main__":
    main()
