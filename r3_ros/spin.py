"""The main() every r3 node shares: init, spin a multi-threaded executor, shut down cleanly."""

from __future__ import annotations

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor


def run_node(node_class, args=None) -> None:
    rclpy.init(args=args)
    node = None
    try:
        node = node_class()
        executor = MultiThreadedExecutor(num_threads=4)
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.shutdown() if hasattr(node, "shutdown") else None
            node.destroy_node()
        rclpy.try_shutdown()
