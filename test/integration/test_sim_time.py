"""On sim time an r3 node takes ``/clock`` when it reads its time, not through an executor woken for
each message, and its time is still the simulator's latest: read at once, and kept within
``CLOCK_TAKE_S`` of wall time for what reads the clock without asking (an action goal's stamp),
also after sim time is switched off and on while the node runs."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.ros


def test_sim_time_is_taken_when_read_and_wakes_no_executor(context):
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from rclpy.time_source import CLOCK_TOPIC

    from r3.profiling import WakeLedger
    from r3_ros.executor import count_wakes
    from r3_ros.node import CLOCK_TAKE_S

    node, simulator, clock_pub, publish = _on_sim_time_with_a_clock(context, "simulator")

    # Read without any executor: the latest /clock received is the node's time.
    for seconds in range(1, 40):
        publish(seconds)
    deadline = time.monotonic() + 10
    while node.now().nanoseconds != 39 * 10**9 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert node.now().nanoseconds == 39 * 10**9

    # Spun, with /clock coming: no wake-up for it, and the time follows within CLOCK_TAKE_S.
    executor = SingleThreadedExecutor(context=context)
    wakes = WakeLedger()
    count_wakes(executor, wakes)
    wakes.start()
    executor.add_node(node)
    publish(100)
    end = time.monotonic() + 4 * CLOCK_TAKE_S
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=0.02)
    assert node.get_clock().now().nanoseconds == 100 * 10**9  # set by the timer, not by now()
    assert wakes.wakes[CLOCK_TOPIC] == 0, dict(wakes.wakes)
    assert sum(wakes.wakes.values()) > 0  # the ledger does count this executor's wake-ups

    # Sim time switched off and on again while running: the system clock, then /clock again.
    node.set_parameters([Parameter("use_sim_time", value=False)])
    assert abs(node.now().nanoseconds / 1e9 - time.time()) < 5
    node.set_parameters([Parameter("use_sim_time", value=True)])
    deadline = time.monotonic() + 10
    while clock_pub.get_subscription_count() < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    publish(200)
    deadline = time.monotonic() + 10
    while node.now().nanoseconds != 200 * 10**9 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert node.now().nanoseconds == 200 * 10**9
    executor.shutdown()
    simulator.destroy_node()
    node.destroy_node()


def test_a_clock_no_time_can_hold_is_dropped_and_the_node_keeps_its_time(context):
    """Anyone may publish on /clock. A negative time made rclpy's clock callback raise inside the
    node's clock timer, which ended the node (one message stopped the reasoner, then the graph)."""
    from rclpy.executors import SingleThreadedExecutor

    from r3_ros.node import CLOCK_TAKE_S

    node, attacker, _, publish = _on_sim_time_with_a_clock(context, "attacker")

    publish(7)
    deadline = time.monotonic() + 10
    while node.now().nanoseconds != 7 * 10**9 and time.monotonic() < deadline:
        time.sleep(0.01)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    publish(-1)  # taken by the node's clock timer while it spins
    end = time.monotonic() + 4 * CLOCK_TAKE_S
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=0.02)  # raised here before
    assert node.now().nanoseconds == 7 * 10**9
    publish(8)
    deadline = time.monotonic() + 10
    while node.now().nanoseconds != 8 * 10**9 and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.02)
    assert node.now().nanoseconds == 8 * 10**9
    executor.shutdown()
    attacker.destroy_node()
    node.destroy_node()


def _on_sim_time_with_a_clock(context, publisher: str):
    """An R3Node on sim time and a node ``publisher`` whose /clock it has matched: (node, publisher
    node, its /clock publisher, publish(seconds))."""
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from rclpy.time_source import CLOCK_TOPIC
    from rosgraph_msgs.msg import Clock

    from r3_ros.node import R3Node

    node = R3Node("on_sim_time", context=context, parameter_overrides=[Parameter("use_sim_time", value=True)])
    peer = Node(publisher, context=context)
    clock_pub = peer.create_publisher(Clock, CLOCK_TOPIC, 10)
    deadline = time.monotonic() + 10
    while clock_pub.get_subscription_count() < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert clock_pub.get_subscription_count() == 1

    def publish(seconds: int) -> None:
        msg = Clock()
        msg.clock.sec = seconds
        clock_pub.publish(msg)

    return node, peer, clock_pub, publish
