"""How r3_sim_node finds a decision point (publishes the frame and snapshot the reasoner decides on):
the end of each FollowInstruction goal, at once; for commands from anything else, ``settle_s`` of
wall time without a command."""

from __future__ import annotations

import os
import time

import pytest
from hostile import Client, own_domain

from r3.graph import names
from r3.graph.description import Profile, load_profile
from r3.graph.supervisor import Supervisor

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def test_the_end_of_each_instruction_is_a_decision_point(tmp_path):
    """settle_s is 10 s here, twice what the reasoner waits for an observation (5 s): every step
    after the first is decided on the frame the end of the previous instruction brought. Before, the
    second step's observation timed out ("sent no state and image for this episode")."""
    from r3_msgs.action import RunTask

    domain = own_domain()
    profile = load_profile(
        "sim_language_table",
        overrides={
            "r3_sim_node": {"settle_s": 10.0},
            "r3_reasoner_node": {"recorder_node": "", "observation_timeout_s": 5.0},
        },
    )
    graph = Profile("no_recorder", "", [m for m in profile.members if m.name != "r3_recorder_node"])
    client = Client("r3_decision_points_client", domain)
    with Supervisor(graph, tmp_path / "logs", env=dict(os.environ, ROS_DOMAIN_ID=str(domain))):
        try:
            assert client.wait_until_ready(90), "the graph did not come up"
            goal = RunTask.Goal(suite="language_table", task="V", seed=0, max_steps=3, reset_scene=True)
            result, _ = client.run_task(goal, timeout_s=120)
        finally:
            client.close()
    assert not result.reason.startswith("error"), result.reason
    assert result.steps >= 2, (result.steps, result.reason, list(result.instructions))


def test_commands_from_elsewhere_settle_after_settle_s(tmp_path):
    """A teleoperator's command (no FollowInstruction goal around it) still ends in a decision point."""
    import rclpy
    from geometry_msgs.msg import Vector3Stamped

    from r3_msgs.msg import SceneSnapshot
    from r3_ros.qos import recorded

    domain = own_domain()
    sim = load_profile("sim_language_table", overrides={"r3_sim_node": {"settle_s": 0.2}})
    graph = Profile("sim_only", "", [sim.member("r3_sim_node")])
    client = Client("r3_teleoperator", domain)
    snapshots: list[int] = []
    node = client.node
    node.create_subscription(
        SceneSnapshot, names.SCENE_SNAPSHOT, lambda m: snapshots.append(m.control_step), recorded(10)
    )
    command = node.create_publisher(Vector3Stamped, names.PUSHER_COMMAND, recorded(10))
    with Supervisor(graph, tmp_path / "logs", env=dict(os.environ, ROS_DOMAIN_ID=str(domain))):
        try:
            deadline = time.monotonic() + 90
            while (command.get_subscription_count() == 0 or not snapshots) and time.monotonic() < deadline:
                rclpy.spin_once(node, timeout_sec=0.05)
            assert snapshots == [0], "the simulator's start-up decision point did not arrive"
            msg = Vector3Stamped()
            msg.header.frame_id, msg.vector.x = "board", 0.005
            command.publish(msg)
            deadline = time.monotonic() + 30
            while 1 not in snapshots and time.monotonic() < deadline:
                rclpy.spin_once(node, timeout_sec=0.05)
        finally:
            client.close()
    assert snapshots == [0, 1]
