"""r3_execution_node over DDS: MoveToPose goals through the real node and the real ``moveit``
executor code, with moveit_py replaced by the stand-in in stand_ins/moveit (moveit_py cannot be
installed here). What is tested is the node's contract: refusals before any plan, the approach as
two plans (the second with the straight-line planner), an unplannable pose refused, a missing
moveit_py named in one fatal line."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros
STAND_INS = Path(__file__).parent / "stand_ins"


def test_without_moveit_py_the_node_exits_naming_what_to_install(ros_env):
    try:
        import moveit  # noqa: F401

        pytest.skip("moveit_py is installed here")
    except ImportError:
        pass
    done = subprocess.run(
        [sys.executable, "-m", "r3_execution_node.main"],
        env=ros_env,
        capture_output=True,
        check=False,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "fatal: the 'moveit' executor needs moveit_py" in done.stderr and "moveit-py" in done.stderr


def test_move_to_pose_goals_through_the_node(ros_env, tmp_path):
    import rclpy
    from rclpy.action import ActionClient
    from rclpy.node import Node

    from r3.execution.base import top_down_quat
    from r3.graph import names
    from r3_msgs.action import MoveToPose

    log = tmp_path / "plans.jsonl"
    env = {
        **ros_env,
        "PYTHONPATH": os.pathsep.join([str(STAND_INS), ros_env.get("PYTHONPATH", "")]),
        "R3_STANDIN_LOG": str(log),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "r3_execution_node.main"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    rclpy.init()
    node = Node("execution_test_client")
    client = ActionClient(node, MoveToPose, names.MOVE_TO_POSE)

    def move(xyz, frame="panda_link0", approach=0.0, opening=math.nan):
        goal = MoveToPose.Goal(gripper_opening=opening, max_velocity_scaling=0.5, approach_distance=approach)
        goal.target.header.frame_id = frame
        p, o = goal.target.pose.position, goal.target.pose.orientation
        p.x, p.y, p.z = xyz
        o.w, o.x, o.y, o.z = top_down_quat(0.0)
        sent = client.send_goal_async(goal)
        rclpy.spin_until_future_complete(node, sent, timeout_sec=30)
        result = sent.result().get_result_async()
        rclpy.spin_until_future_complete(node, result, timeout_sec=30)
        return result.result().result

    def plans():
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    try:
        assert client.wait_for_server(timeout_sec=60), (
            proc.stdout.read() if proc.poll() is not None else "no server"
        )
        done = move((0.5, 0.1, 0.1), approach=0.12)
        assert done.reached and done.reason == "reached" and done.position_error < 1e-6
        assert [(p["planner"], round(p["position"][2], 3)) for p in plans()] == [
            ("", 0.22),
            ("pilz_lin", 0.1),
        ]
        for xyz, frame, why in [
            ((0.5, 0.0, math.nan), "panda_link0", "NaN or Inf"),
            ((1.5, 0.0, 0.3), "panda_link0", "outside the workspace"),
            ((0.5, 0.0, 0.3), "camera_link", "is not the robot base frame"),
            ((0.5, 0.1, 0.6), "", "approach starts outside the workspace"),
        ]:
            before = len(plans())
            refused = move(xyz, frame, approach=0.25 if "approach" in why else 0.0)
            assert not refused.reached and refused.reason.startswith("refused") and why in refused.reason
            assert len(plans()) == before  # refused before anything was planned
        before = len(plans())
        far = move((0.8, 0.5, 0.7))  # inside the box, beyond the stand-in arm's reach
        assert not far.reached and far.reason == "refused: unreachable: no IK solution for the goal"
        assert len(plans()) == before  # refused by IK, before planning
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
        proc.terminate()
        proc.wait(timeout=10)
