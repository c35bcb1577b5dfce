"""A second graph is not started on a ROS domain where r3 nodes of the same names beat."""

from __future__ import annotations

import threading

import pytest

pytestmark = pytest.mark.ros


def test_the_probe_hears_a_beating_node_of_a_name_asked_and_not_one_gone(context, monkeypatch):
    """``r3_ros.graph_probe.running`` (what `r3 launch` asks before it starts a graph) names a node
    of the names asked that beats on its domain, and not one that no longer beats (a graph stopped or
    killed, its discovery entry not yet expired). The listening bound is this test's: the probe
    returns once it hears the node, and discovery on a loaded machine takes seconds."""
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from r3_ros.graph_probe import running
    from r3_ros.heartbeat import HeartbeatPublisher

    monkeypatch.setenv("ROS_DOMAIN_ID", str(context.get_domain_id()))  # the probe's, as the node's
    node = Node("r3_sim_node", context=context)
    HeartbeatPublisher(node)
    executor, stop = SingleThreadedExecutor(context=context), threading.Event()
    executor.add_node(node)
    spinner = threading.Thread(target=lambda: [executor.spin_once(0.05) for _ in iter(stop.is_set, True)])
    spinner.start()
    try:
        assert running(["r3_reasoner_node", "r3_sim_node"], listen_s=60) == ["r3_sim_node"]
    finally:
        stop.set()
        spinner.join()
        executor.remove_node(node)
        node.destroy_node()
    assert running(["r3_sim_node"], listen_s=1.0) == []
