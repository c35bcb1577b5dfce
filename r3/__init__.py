"""r3: robot reasoners in natural language — the ROS-free core library.

Nothing under ``r3/`` imports rclpy; the ROS nodes in ``r3_*_node/`` convert
messages to the core types defined here and call into it.
"""

__version__ = "0.1.0"
