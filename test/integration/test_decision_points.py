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


def test_clock_goes_out_at_each_decision_point_and_at_most_every_clock_period_between(tmp_path):
    """/clock wakes every node on sim time; the reasoner woke for it at each 0.1 s control step. Now it
    goes out at start-up and at each decision point (so a node on sim time stamps a decision with the
    time of its scene) and, between them, at most every ``names.CLOCK_PERIOD_NS``, never stale by more."""
    import rclpy
    from geometry_msgs.msg import Vector3Stamped
    from rosgraph_msgs.msg import Clock

    from r3_msgs.msg import PrivilegedState, SceneSnapshot
    from r3_ros.conversions import stamp_to_ns
    from r3_ros.qos import LATCHED, recorded

    domain = own_domain()
    sim = load_profile("sim_language_table", overrides={"r3_sim_node": {"settle_s": 0.2}})
    graph = Profile("sim_only", "", [sim.member("r3_sim_node")])
    client = Client("r3_clock_probe", domain)
    clocks, states, snapshots = [], [], []
    node = client.node
    node.create_subscription(Clock, names.CLOCK, lambda m: clocks.append(stamp_to_ns(m.clock)), recorded(50))
    node.create_subscription(
        PrivilegedState, names.PRIVILEGED_STATE, lambda m: states.append(stamp_to_ns(m.header.stamp)), LATCHED
    )
    node.create_subscription(
        SceneSnapshot,
        names.SCENE_SNAPSHOT,
        lambda m: snapshots.append(stamp_to_ns(m.header.stamp)),
        recorded(10),
    )
    command = node.create_publisher(Vector3Stamped, names.PUSHER_COMMAND, recorded(10))

    def spin_until(done, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not done() and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.05)

    with Supervisor(graph, tmp_path / "logs", env=dict(os.environ, ROS_DOMAIN_ID=str(domain))):
        try:
            # The start-up state too: it is latched with depth 1, so a state reader matched only after
            # the first command would get that command's state and never the start-up one.
            spin_until(lambda: command.get_subscription_count() > 0 and snapshots and clocks and states, 90)
            assert snapshots and clocks and states, "the simulator's start-up decision point did not arrive"
            for i in range(7):  # lock-step: each command once the state of the last one has arrived
                msg = Vector3Stamped()
                msg.header.frame_id, msg.vector.x = "board", 0.004 * (-1) ** i
                sent = len(states)
                command.publish(msg)
                spin_until(lambda: len(states) > sent, 30)  # noqa: B023 (called before the next loop)
            spin_until(lambda: len(snapshots) > 1, 30)  # settle_s after the last command
            spin_until(lambda: clocks[-1] >= snapshots[-1], 5)
        finally:
            client.close()
    assert len(states) == 8 and len(snapshots) == 2, (states, snapshots)
    assert set(snapshots) <= set(clocks), (snapshots, clocks)  # every decision point has its time
    assert clocks == sorted(clocks) and len(clocks) < len(states), (clocks, states)
    for state in states:  # no state more than a period ahead of the last clock
        assert 0 <= state - max(c for c in clocks if c <= state) < names.CLOCK_PERIOD_NS, (state, clocks)
