"""HeartbeatMonitor takes beats when asked, not by waking its node's executor for each, and dates
each beat by when DDS received it: a beat taken late still says how long its node has been silent."""

from __future__ import annotations

import time

import pytest

from r3.graph import names

pytestmark = pytest.mark.ros


def test_beats_are_taken_when_asked_and_dated_by_their_reception(context):
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from r3.profiling import WakeLedger
    from r3_msgs.msg import Heartbeat
    from r3_ros.executor import count_wakes
    from r3_ros.heartbeat import HeartbeatMonitor, HeartbeatPublisher
    from r3_ros.qos import HEARTBEAT

    watcher = Node("watcher", context=context)
    monitor = HeartbeatMonitor(watcher)
    HeartbeatPublisher(watcher)  # a verdict needs the watcher's own beats
    beating = Node("beating", context=context)
    HeartbeatPublisher(beating, state="busy")
    executor = SingleThreadedExecutor(context=context)
    wakes = WakeLedger()
    count_wakes(executor, wakes)
    wakes.start()
    for node in (watcher, beating):
        executor.add_node(node)

    deadline = time.monotonic() + 10
    while monitor.state("/beating") != "busy" and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
    assert monitor.state("/beating") == "busy" and monitor.silent_for("/beating") < 0.5
    assert wakes.wakes[names.HEARTBEAT] == 0, dict(wakes.wakes)
    assert sum(wakes.wakes.values()) > 0  # the ledger does count this executor's wake-ups

    # One beat from a node that then stays silent, taken 0.6 s after it arrived: silent since it came.
    once = Node("once", context=context).create_publisher(Heartbeat, names.HEARTBEAT, HEARTBEAT)
    deadline = time.monotonic() + 10
    while once.get_subscription_count() < 1 and time.monotonic() < deadline:  # the watcher's monitor
        time.sleep(0.01)
    once.publish(Heartbeat(node="/once", state="idle"))
    time.sleep(0.6)  # nothing spins: no drain timer takes it meanwhile
    assert monitor.state("/once") == "idle"
    assert 0.55 <= monitor.silent_for("/once") < 5.0

    executor.remove_node(beating)
    beating.destroy_node()
    deadline = time.monotonic() + 10
    while not monitor.dead(["/beating"], 0.6) and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
    assert monitor.dead(["/beating", "/watcher"], 0.6) == ["/beating"]
    executor.shutdown()
