"""The main() every r3 node shares: init, spin a multi-threaded executor, shut down cleanly.

A node that cannot configure itself (a model path that does not exist, a server that does not
answer, a bad parameter) prints one ``fatal:`` line naming the problem and exits with status 1.
"""

from __future__ import annotations

import sys

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor


def run_node(node_class, args=None) -> None:
    rclpy.init(args=args)
    node = None
    try:
        node = node_class()
        executor = MultiThreadedExecutor(num_threads=8)  # long action callbacks never starve the rest
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception as exc:  # configuration failed: one line, then a non-zero exit
        if node is not None:
            raise
        print(f"fatal: {exc}", file=sys.stderr, flush=True)
        rclpy.try_shutdown()
        sys.exit(1)
    finally:
        if node is not None:
            if hasattr(node, "shutdown"):
                node.shutdown()
            node.destroy_node()
        rclpy.try_shutdown()
