"""The packing loop over ROS 2: the sim_packing graph as processes (`r3 run --suite packing`), recorded,
deciding exactly as the in-process loop does (the policy seeing through the perception node), and the
simulated arm driver's MoveToPose action."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from r3.data.bags import COMPLETE, read_episode_info, read_messages
from r3.data.build import build_dataset
from r3.data.stats import dataset_stats
from r3.graph import names
from r3.graph.description import load_profile, unmatched_subscriptions
from r3.packing_episode import PackingCell, run_packing_episode
from r3.reasoning.backends import make_backend

pytestmark = [pytest.mark.ros, pytest.mark.slow]
R3 = [sys.executable, "-m", "r3.cli"]
DECISIONS = 3


def test_profile_is_wired():
    assert unmatched_subscriptions(load_profile("sim_packing")) == []


def test_packing_episode_through_the_graph_is_recorded_and_matches_in_process(tmp_path, private_ros_env):
    run = subprocess.run(
        R3
        + [
            "run",
            "--quiet",
            "--suite",
            "packing",
            "--task",
            "4",
            "--seed",
            "0",
            "--max-steps",
            str(DECISIONS),
            "--video",
            "none",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=420,
        env=private_ros_env(),
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    instructions = eval(re.search(r"^instructions: (\[.*\])$", run.stdout, re.MULTILINE).group(1))
    progress = float(re.search(r"^progress: (\d+)%", run.stdout, re.MULTILINE).group(1)) / 100

    # The profile's policy sees through the perception node: in-process, the same perception code.
    expected = run_packing_episode(
        "4",
        0,
        make_backend("expert"),
        cell=PackingCell.build(grounding="perception"),
        max_steps=DECISIONS,
        render=False,
    )
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
    seen = by_topic[names.DETECTED_OBJECTS]  # the policy's looks, each with the items' top surfaces
    assert len(seen) >= DECISIONS and {o.label for o in seen[0].objects} >= {"gelatin box", "foam brick"}
    assert all(math.isfinite(o.top_centre.z) for o in seen[0].objects)

    # The bag builds datasets as a Language Table bag does, read with the packing suite's tasks and grammar;
    # an rl dataset leaves out a step that repeats the one before (the expert retrying a failed move).
    repeats = sum(a.instruction == b.instruction for a, b in zip(expected.steps, expected.steps[1:]))
    for kind, rows in (("sft", DECISIONS), ("rl", DECISIONS - repeats)):
        report = build_dataset([bag], tmp_path / kind, kind)
        assert (report.rows, report.skipped, report.dropped["repeated"]) == (rows, [], DECISIONS - rows), (
            report
        )
        types = dataset_stats(tmp_path / kind)["instruction_types"]
        assert sum(types["4"].values()) == rows and "Invalid" not in types["4"], types


def test_without_perception_the_policy_ends_with_an_error_and_moves_nothing(private_ros_env):
    """SAFETY.md row 10: a packing policy that sees through perception and gets no detections ends the
    instruction with an error naming the missing node, the arm holding still."""
    env = private_ros_env()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "r3_packing_sim_node.main",
            "--ros-args",
            "-p",
            "grounding:=perception",
            "-p",
            "perception_timeout_s:=2.0",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        script = f"""
import time, rclpy
from rclpy.action import ActionClient
from rclpy.node import Node
from r3_msgs.action import FollowInstruction
from r3_msgs.srv import ResetScene
from sensor_msgs.msg import JointState
rclpy.init(); node = Node("probe")
joints = []
node.create_subscription(JointState, "{names.JOINT_STATES}", lambda m: joints.append(tuple(m.position)), 100)
reset = node.create_client(ResetScene, "{names.RESET_SCENE}")
follow = ActionClient(node, FollowInstruction, "{names.FOLLOW_INSTRUCTION}")
assert follow.wait_for_server(timeout_sec=60) and reset.wait_for_service(timeout_sec=10)
done = reset.call_async(ResetScene.Request(suite="packing", task="4", seed=0, episode_id="no-perception"))
rclpy.spin_until_future_complete(node, done, timeout_sec=60)
end = time.monotonic() + 1.0
while time.monotonic() < end: rclpy.spin_once(node, timeout_sec=0.05)
before = joints[-1]
goal = FollowInstruction.Goal(instruction="Pack the sugar box into the medium tray.", suite="packing", seed=2)
sent = follow.send_goal_async(goal); rclpy.spin_until_future_complete(node, sent, timeout_sec=30)
t = time.monotonic()
result = sent.result().get_result_async(); rclpy.spin_until_future_complete(node, result, timeout_sec=60)
end = time.monotonic() + 0.5
while time.monotonic() < end: rclpy.spin_once(node, timeout_sec=0.05)
print(result.result().result.reason)
print(f"{{time.monotonic() - t:.1f}}", all(j == before for j in joints[joints.index(before):]))
"""
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=180, env=env, check=False
        )
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    lines = out.stdout.splitlines()
    assert len(lines) == 2, out.stdout + out.stderr
    assert lines[0].startswith("error: perception: no detections for the frame stamped"), lines[0]
    assert "is r3_perception_node running?" in lines[0]
    seconds, still = lines[1].split()
    assert still == "True"  # no joint moved
    print(f"\nno perception: the instruction ended after {seconds} s (timeout 2 s), the arm still")


def test_move_to_pose_refuses_bad_targets_and_reaches_good_ones(private_ros_env):
    """The simulated driver's MoveToPose: a refusal reports why and moves nothing; a valid pose is reached."""
    env = private_ros_env()
    proc = subprocess.Popen(
        [sys.executable, "-m", "r3_packing_sim_node.main"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        script = f"""
import math, rclpy
from rclpy.action import ActionClient
from rclpy.node import Node
from r3_msgs.action import MoveToPose
rclpy.init(); node = Node("probe"); client = ActionClient(node, MoveToPose, "{names.MOVE_TO_POSE}")
assert client.wait_for_server(timeout_sec=60)
def move(x, y, z, frame="panda_link0", approach=0.0):
    goal = MoveToPose.Goal(gripper_opening=math.nan, approach_distance=approach)
    goal.target.header.frame_id = frame
    goal.target.pose.position.x, goal.target.pose.position.y, goal.target.pose.position.z = x, y, z
    goal.target.pose.orientation.x, goal.target.pose.orientation.w = 1.0, 0.0  # pointing down
    sent = client.send_goal_async(goal); rclpy.spin_until_future_complete(node, sent, timeout_sec=30)
    done = sent.result().get_result_async(); rclpy.spin_until_future_complete(node, done, timeout_sec=60)
    r = done.result().result
    print(r.reached, r.reason, r.position_error)
move(2.0, 0.0, 0.3); move(0.45, 0.0, math.nan); move(0.45, 0.0, 0.3, frame="camera"); move(0.45, 0.05, 0.30)
move(0.45, 0.0, 0.6, approach=0.2); move(0.5, 0.1, 0.15, approach=0.1)
"""
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env, check=False
        )
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    lines = out.stdout.splitlines()
    assert len(lines) == 6, out.stdout + out.stderr
    assert lines[0].startswith("False refused: outside the workspace")
    assert lines[1].startswith("False refused: target contains NaN or Inf")
    assert lines[2].startswith("False refused: target frame 'camera'")
    assert lines[4].startswith("False refused: the approach starts outside the workspace")
    for line in (lines[3], lines[5]):
        reached, reason, error = line.split()
        assert (
            (reached, reason) == ("True", "reached") and float(error) < 0.01 and not math.isnan(float(error))
        )


def test_the_arm_stops_on_a_stop_and_when_the_reasoner_falls_silent(private_ros_env):
    """SAFETY.md rows 3 and 4 for the packing arm: a stop on /r3/stop_motion naming the goal stops the
    arm before its next control step, and so does the watchdog once the FollowInstruction client (the
    reasoner; here this probe, by name) has been silent for ``client_timeout_s``; each within 0.2 s."""
    import time

    import rclpy
    from rclpy.action import ActionClient
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String

    from r3_msgs.action import FollowInstruction
    from r3_msgs.msg import Heartbeat
    from r3_msgs.srv import ResetScene
    from r3_ros.qos import STOP as STOP_QOS
    from r3_ros.stop import goal_key, new_goal_id

    env = private_ros_env(in_process=True)
    client_timeout_s = 0.5
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "r3_packing_sim_node.main",
            "--ros-args",
            "-p",
            "reasoner_node:=/r3_stop_probe",
            "-p",
            f"client_timeout_s:={client_timeout_s}",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    rclpy.init(domain_id=int(env["ROS_DOMAIN_ID"]))
    node = rclpy.create_node("r3_stop_probe")
    joints: list[tuple[float, tuple]] = []
    node.create_subscription(
        JointState, names.JOINT_STATES, lambda m: joints.append((time.monotonic(), tuple(m.position))), 100
    )
    beat_pub = node.create_publisher(Heartbeat, names.HEARTBEAT, 10)
    stop_pub = node.create_publisher(String, names.STOP_MOTION, STOP_QOS)
    reset = node.create_client(ResetScene, names.RESET_SCENE)
    follow = ActionClient(node, FollowInstruction, names.FOLLOW_INSTRUCTION)
    beating, last_beat = [True], [0.0]

    def spin(seconds: float, until=lambda: False) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not until():
            rclpy.spin_once(node, timeout_sec=0.005)
            if beating[0] and time.monotonic() - last_beat[0] >= 0.1:
                beat_pub.publish(Heartbeat(node=node.get_fully_qualified_name(), state="busy"))
                last_beat[0] = time.monotonic()

    def last_motion(after: float = -1.0) -> float:
        """Receipt time of the last joint state that differs from the one before it (by > 1 mrad)."""
        moves = [
            t for (t, p), (_, q) in zip(joints[1:], joints) if max(abs(a - b) for a, b in zip(p, q)) > 1e-3
        ]
        return max([after] + moves)

    def start(instruction: str):
        goal = FollowInstruction.Goal(instruction=instruction, suite="packing", seed=2)  # seed 2: no slip
        goal_id = new_goal_id()
        return goal_key(goal_id), follow.send_goal_async(goal, goal_uuid=goal_id)

    def reason_of(sent) -> str:
        spin(10, sent.done)
        result = sent.result().get_result_async()
        spin(30, result.done)
        assert result.done(), "the instruction did not end"
        return result.result().result.reason

    def reset_scene() -> None:
        done = reset.call_async(ResetScene.Request(suite="packing", task="4", seed=0, episode_id="stop-test"))
        spin(60, done.done)
        assert done.done() and done.result().ok
        spin(0.3)
        joints.clear()

    try:
        assert follow.wait_for_server(timeout_sec=60) and reset.wait_for_service(timeout_sec=10)
        spin(1.0)  # the node hears this probe's heartbeat

        # A stop naming the goal, 0.1 s into the motion (an instruction moves the arm for about 0.5 s).
        reset_scene()
        key, sent = start("Pack the sugar box into the medium tray.")
        spin(30, lambda: last_motion() > 0)
        assert last_motion() > 0, "the arm did not move"
        spin(0.1)
        stop_pub.publish(String(data=key))
        stopped_at = time.monotonic()
        assert reason_of(sent) == "canceled"  # no action cancel follows here: aborted, reason "canceled"
        spin(0.3)  # anything still coming counts
        stop_latency = last_motion(stopped_at) - stopped_at

        # The watchdog: silent from the first motion on; instructions back to back until one is stopped.
        reset_scene()
        reasons: list[str] = []
        for instruction in [
            "Transfer the gelatin box from the medium tray to the small tray.",
            "Transfer the gelatin box from the small tray to the medium tray.",
        ] * 4:
            _, sent = start(instruction)
            if beating[0]:
                spin(30, lambda: last_motion() > 0)
                assert last_motion() > 0, "the arm did not move"
                beating[0] = False
                deadline = last_beat[0] + client_timeout_s
            reasons.append(reason_of(sent))
            if reasons[-1].startswith("error"):
                break
        assert reasons[-1].startswith("error: /r3_stop_probe stopped responding"), reasons
        spin(0.3)
        watchdog_latency = last_motion(deadline) - deadline
    finally:
        node.destroy_node()
        rclpy.shutdown()
        proc.terminate()
        proc.wait(timeout=20)
    print(
        f"\npacking arm still: {stop_latency * 1000:.0f} ms after a stop, "
        f"{watchdog_latency * 1000:.0f} ms after the watchdog's deadline "
        f"({client_timeout_s:.1f} s of silence; {len(reasons)} instructions)"
    )
    assert stop_latency < 0.2 and watchdog_latency < 0.2
