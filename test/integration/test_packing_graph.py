"""The packing loop over ROS 2: the sim_packing graph as processes (`r3 run --suite packing`), recorded,
deciding exactly as the in-process loop does, and the simulated arm driver's MoveToPose action."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from r3.data.bags import COMPLETE, read_episode_info, read_messages
from r3.graph import names
from r3.graph.description import load_profile, unmatched_subscriptions
from r3.packing_episode import run_packing_episode
from r3.reasoning.backends import make_backend

pytestmark = [pytest.mark.ros, pytest.mark.slow]
R3 = [sys.executable, "-m", "r3.cli"]
DECISIONS = 3


def _env() -> dict:
    """A ROS domain of its own, so no other graph under test answers /r3/run_task."""
    return dict(os.environ, ROS_DOMAIN_ID=str((int(os.environ["ROS_DOMAIN_ID"]) + 40) % 101))


def test_profile_is_wired():
    assert unmatched_subscriptions(load_profile("sim_packing")) == []


def test_packing_episode_through_the_graph_is_recorded_and_matches_in_process(tmp_path):
    run = subprocess.run(R3 + ["run", "--quiet", "--suite", "packing", "--task", "4", "--seed", "0",
                               "--max-steps", str(DECISIONS), "--video", "none", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=420, env=_env(), check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    instructions = eval(re.search(r"^instructions: (\[.*\])$", run.stdout, re.MULTILINE).group(1))
    progress = float(re.search(r"^progress: (\d+)%", run.stdout, re.MULTILINE).group(1)) / 100

    expected = run_packing_episode("4", 0, make_backend("expert"), max_steps=DECISIONS, render=False)
    assert instructions == [s.instruction for s in expected.steps]
    assert progress == pytest.approx(expected.progress, abs=0.01)

    bag = Path(re.search(r"^bag:\s+(\S+)$", run.stdout, re.MULTILINE).group(1))
    info = read_episode_info(bag)
    assert info.status == COMPLETE and info.task == "4" and info.seed == 0 and info.steps == DECISIONS
    by_topic: dict[str, list] = {}
    for topic, _, _, msg in read_messages(bag):
        by_topic.setdefault(topic, []).append(msg)
    for topic in (names.CAMERA_IMAGE, names.WRIST_IMAGE):
        assert len(by_topic[topic]) >= DECISIONS + 1
        assert (by_topic[topic][0].width, by_topic[topic][0].height) == (320, 240)
    steps = by_topic[names.REASONER_STEPS]
    assert [s.step for s in steps] == list(range(DECISIONS))
    assert all(s.valid and s.suite == "packing" for s in steps)
    assert len(by_topic[names.INSTRUCTION_OUTCOMES]) == DECISIONS
    assert by_topic[names.SCENE_SNAPSHOT][0].format == "r3-packing-snapshot/1"
    assert by_topic[names.PRIVILEGED_STATE][-1].suite == "packing"


def test_move_to_pose_refuses_bad_targets_and_reaches_good_ones():
    """The simulated driver's MoveToPose: a refusal reports why and moves nothing; a valid pose is reached."""
    env = _env()
    proc = subprocess.Popen([sys.executable, "-m", "r3_packing_sim_node.main"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        script = f"""
import math, rclpy
from rclpy.action import ActionClient
from rclpy.node import Node
from r3_msgs.action import MoveToPose
rclpy.init(); node = Node("probe"); client = ActionClient(node, MoveToPose, "{names.MOVE_TO_POSE}")
assert client.wait_for_server(timeout_sec=60)
def move(x, y, z, frame="panda_link0"):
    goal = MoveToPose.Goal(gripper_opening=math.nan)
    goal.target.header.frame_id = frame
    goal.target.pose.position.x, goal.target.pose.position.y, goal.target.pose.position.z = x, y, z
    goal.target.pose.orientation.x, goal.target.pose.orientation.w = 1.0, 0.0  # pointing down
    sent = client.send_goal_async(goal); rclpy.spin_until_future_complete(node, sent, timeout_sec=30)
    done = sent.result().get_result_async(); rclpy.spin_until_future_complete(node, done, timeout_sec=60)
    r = done.result().result
    print(r.reached, r.reason, r.position_error)
move(2.0, 0.0, 0.3); move(0.45, 0.0, math.nan); move(0.45, 0.0, 0.3, frame="camera"); move(0.45, 0.05, 0.30)
"""
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env,
                             check=False)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    lines = out.stdout.splitlines()
    assert len(lines) == 4, out.stdout + out.stderr
    assert lines[0].startswith("False refused: outside the workspace")
    assert lines[1].startswith("False refused: target contains NaN or Inf")
    assert lines[2].startswith("False refused: target frame 'camera'")
    reached, reason, error = lines[3].split()
    assert (reached, reason) == ("True", "reached") and float(error) < 0.01 and not math.isnan(float(error))
