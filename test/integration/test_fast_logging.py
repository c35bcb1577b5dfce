"""r3's nodes log through rclpy's logger without ``inspect.getframeinfo`` (``r3_ros.fast_logging``),
which read the caller's source and scanned every loaded module at each line: about 1 ms a line, on the
path between a reset request and its answer and between an episode's end and its result. A line
must still name its own file, function and line on /rosout, and the once and throttle filters must
still key on the call site."""

from __future__ import annotations

import inspect
import time

import pytest

pytestmark = pytest.mark.ros


def _log_here(logger) -> int:
    logger.info("from the helper")
    return inspect.currentframe().f_lineno - 1


def test_log_lines_name_their_call_site_without_reading_source(context, monkeypatch):
    import rclpy
    from rcl_interfaces.msg import Log
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.impl import rcutils_logger
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    from r3_ros.fast_logging import speed_up_rclpy_logging

    monkeypatch.setattr(rcutils_logger, "inspect", rcutils_logger.inspect)  # restored after the test
    assert speed_up_rclpy_logging()

    def no_source_reading(*args, **kwargs):
        raise AssertionError("the logger read its caller's source")

    monkeypatch.setattr(inspect, "getframeinfo", no_source_reading)
    node = rclpy.create_node("r3_fast_logging_probe", context=context)
    lines: list[Log] = []
    qos = QoSProfile(
        depth=1000, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )
    node.create_subscription(Log, "/rosout", lines.append, qos)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        logger = node.get_logger()
        line = _log_here(logger)
        for _ in range(3):
            logger.info("once", once=True)
            logger.info("throttled", throttle_duration_sec=60.0)
        deadline = time.monotonic() + 10
        while len([m for m in lines if m.name == logger.name]) < 3 and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        executor.spin_once(timeout_sec=0.2)
    finally:
        executor.shutdown()
        node.destroy_node()
    ours = [m for m in lines if m.name == logger.name]
    assert [m.msg for m in ours] == ["from the helper", "once", "throttled"]
    helper = ours[0]
    assert (helper.file, helper.function, helper.line) == (__file__, "_log_here", line)
    assert ours[1].function == ours[2].function == inspect.currentframe().f_code.co_name
