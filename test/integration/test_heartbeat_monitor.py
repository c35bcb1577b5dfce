"""HeartbeatMonitor takes beats when asked, not by waking its node's executor for each, and dates
each beat by when DDS received it: a beat taken late still says how long its node has been silent.
A node whose own beat comes late logs the stall."""

from __future__ import annotations

import re
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


def test_a_beat_that_comes_late_is_logged_as_a_stall(context, capfd):
    """A process that stood still (here: nobody spun it for 1.6 s, as a send blocked inside DDS with
    the GIL held would leave it) says so in its log at its next beat: the cause of a false "stopped
    responding" can then be read from the logs. A beat on time logs nothing."""
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from r3_ros.heartbeat import PERIOD_S, HeartbeatPublisher

    node = Node("stalling", context=context)
    HeartbeatPublisher(node)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)

    def spin(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.02)

    spin(3 * PERIOD_S)
    assert "late" not in capfd.readouterr().err
    time.sleep(1.6)
    spin(2 * PERIOD_S)
    err = capfd.readouterr().err
    late = re.search(r"heartbeat (\d+\.\d) s late: this process stood still", err)
    assert late and 1.3 <= float(late.group(1)) < 5.0, err
    executor.shutdown()
    node.destroy_node()


def test_a_state_set_once_the_context_has_shut_down_is_not_sent_and_raises_nothing(context):
    """A node stopped by SIGINT mid-episode still finishes its work after rclpy shut its context
    down: the recorder closes the bag and then says "idle". That beat used to raise in the closing
    thread ("publisher's context is invalid") and cut its log line off."""
    from rclpy.node import Node

    from r3_ros.heartbeat import HeartbeatPublisher

    heartbeat = HeartbeatPublisher(Node("stopping", context=context), state="recording:e1")
    context.shutdown()
    heartbeat.state = "idle"  # raised RCLError
    assert heartbeat.state == "idle"
