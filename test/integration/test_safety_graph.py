"""Safety of the running graph (SAFETY.md): cancel, the actuator watchdog, hostile model outputs,
killing each node in turn, and replaying recorded outputs. Each test prints the figure it measures."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from cancel_trials import cancel_stops_motion, launched

from r3.data.bags import INCOMPLETE, read_episode_info, read_messages
from r3.graph import names
from r3.safety.fuzz import hostile_outputs

pytestmark = [pytest.mark.ros, pytest.mark.slow]
R3 = [sys.executable, "-m", "r3.cli"]


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    with launched("sim_language_table", tmp_path_factory.mktemp("safety"), dict(os.environ)) as nodes:
        yield nodes


@pytest.mark.parametrize("stop", [True, False], ids=["stop_and_cancel", "cancel_only"])
def test_cancel_stops_motion_commands(graph, stop):
    """``stop_and_cancel``: R3Commander's cancel, a stop on /r3/stop_motion naming the RunTask (which
    the low-level node honours at once: its instruction is of the RunTask's family), then the action
    cancel. ``cancel_only``: the action cancel alone, as a plain ROS 2 client sends it; the reasoner's
    cancel callback then stops the instruction with a stop of its own."""
    cancel_stops_motion(*graph, stop)


def test_pusher_stops_when_the_command_stream_stops(graph):
    from geometry_msgs.msg import Vector3Stamped
    from sensor_msgs.msg import JointState

    node, _ = graph
    import rclpy

    states: list[tuple[float, tuple]] = []
    sub = node.create_subscription(
        JointState, names.JOINT_STATES, lambda m: states.append((time.monotonic(), tuple(m.position))), 100
    )
    pub = node.create_publisher(Vector3Stamped, names.PUSHER_COMMAND, 10)
    try:
        for i in range(10):  # 1 s of commands at 10 Hz, back and forth
            cmd = Vector3Stamped()
            cmd.vector.x = 0.01 if i % 2 == 0 else -0.01
            pub.publish(cmd)
            last_command = time.monotonic()
            end = last_command + 0.1
            while time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.01)
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.01)
    finally:
        node.destroy_subscription(sub)
        node.destroy_publisher(pub)
    changes = [t for (t, p), (_, q) in zip(states[1:], states) if p != q]
    assert changes, "the pusher never moved"
    stop_latency = max(0.0, changes[-1] - last_command)
    print(f"\ncommand stream stopped -> pusher still after {stop_latency * 1000:.1f} ms")
    assert stop_latency < 0.2


def _run(
    args: list[str], out: Path, env: dict[str, str], timeout: float = 240
) -> subprocess.CompletedProcess:
    """`r3 run` in ``env``: a domain of its own, so that it starts and supervises its own graph."""
    return subprocess.run(
        R3 + ["run", "--quiet", "--video", "none", "--out", str(out)] + args,
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def _only_bag(out: Path) -> Path:
    (bag,) = [p for p in (out / "bags").iterdir() if p.is_dir()]
    return bag


def _topics(bag: Path) -> dict[str, list]:
    by_topic: dict[str, list] = {}
    for topic, _, _, msg in read_messages(bag):
        by_topic.setdefault(topic, []).append(msg)
    return by_topic


def test_hostile_outputs_through_the_graph_command_no_motion(tmp_path, private_ros_env):
    """Also: each step's record carries its answer's finish reason (a replay of the bag needs it)."""
    answers = tmp_path / "hostile.jsonl"
    hostile = hostile_outputs(20, seed=5, huge_every=10)
    answers.write_text("".join(json.dumps({"text": t, "finish_reason": f}) + "\n" for _, t, f in hostile))
    # Refusals never end this episode, so all 20 hostile answers reach the guard.
    run = _run(
        ["--reasoner", f"replay:{answers}", "--set", "r3_reasoner_node.max_consecutive_invalid=100"],
        tmp_path / "all",
        private_ros_env(),
    )
    assert run.returncode == 0, run.stdout + run.stderr
    topics = _topics(_only_bag(tmp_path / "all"))
    assert len(topics[names.REASONER_STEPS]) == 20 and not any(s.valid for s in topics[names.REASONER_STEPS])
    assert [s.finish_reason for s in topics[names.REASONER_STEPS]] == [f for *_, f in hostile]
    assert names.PUSHER_COMMAND not in topics and names.INSTRUCTION_OUTCOMES not in topics
    # With the default guard, the third refusal in a row ends the episode with the robot still.
    run = _run(["--reasoner", f"replay:{answers}"], tmp_path / "default", private_ros_env())
    assert run.returncode == 1 and "3 consecutive invalid reasoner outputs" in run.stderr
    topics = _topics(_only_bag(tmp_path / "default"))
    assert len(topics[names.REASONER_STEPS]) == 3 and names.PUSHER_COMMAND not in topics


def test_replaying_a_recorded_episode_through_the_graph_repeats_every_decision(tmp_path, private_ros_env):
    first = _run(["--task", "V", "--seed", "3"], tmp_path / "expert", private_ros_env())
    assert first.returncode == 0, first.stdout + first.stderr
    recorded = _only_bag(tmp_path / "expert")
    second = _run(
        ["--task", "V", "--seed", "3", "--reasoner", f"replay:{recorded}"],
        tmp_path / "replay",
        private_ros_env(),
    )
    assert second.returncode == 0, second.stdout + second.stderr
    decisions = [
        [(s.valid, s.error, s.instruction) for s in _topics(b)[names.REASONER_STEPS]]
        for b in (recorded, _only_bag(tmp_path / "replay"))
    ]
    assert decisions[0] == decisions[1] and decisions[0]


@pytest.mark.parametrize(
    "victim", ["r3_lowlevel_node", "r3_sim_node", "r3_reasoner_node", "r3_recorder_node"]
)
def test_killing_a_node_ends_the_episode_with_an_error_naming_it(victim, tmp_path, private_ros_env):
    proc = subprocess.Popen(
        R3 + ["run", "--task", "T", "--seed", "5", "--out", str(tmp_path), "--video", "none"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=private_ros_env(),
    )
    lines: list[tuple[float, str]] = []
    reader = threading.Thread(target=lambda: [lines.append((time.monotonic(), line)) for line in proc.stdout])
    reader.start()
    try:
        deadline = time.monotonic() + 90
        stepping = lambda: any("step 1 " in line for _, line in lines)
        while time.monotonic() < deadline and proc.poll() is None and not stepping():
            time.sleep(0.02)
        assert stepping(), "".join(line for _, line in lines)
        pids = {
            m.group(1): int(m.group(2))
            for _, line in lines
            if (m := re.search(r"started (\S+) \(pid (\d+)\)", line))
        }
        assert victim in pids, "".join(line for _, line in lines)
        # The low-level node frozen first, so the episode is still running at the kill however fast
        # the graph is (its heartbeat timeout, 5 s, is far behind the supervisor's word on the kill).
        os.kill(pids["r3_lowlevel_node"], signal.SIGSTOP)
        steps_before = sum(1 for _, line in lines if re.search(r"-+ step \d+ -+", line))
        killed_at = time.monotonic()
        os.kill(pids[victim], signal.SIGKILL)
        if victim != "r3_lowlevel_node":  # a killed node may be reaped already, its pid free for reuse
            os.kill(pids["r3_lowlevel_node"], signal.SIGCONT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(timeout=5)
    text = "".join(line for _, line in lines)
    assert proc.returncode == 1, text
    outcome = [(t, line) for t, line in lines if line.startswith("outcome:")]
    # The process manager's word ended it ("killed by SIGKILL"), not a heartbeat timeout ("stopped
    # responding") nor the time budget. How soon is a figure, not a bound: on a loaded machine the
    # supervisor's poll and the DDS round trips wait for a core (2.9 s once in CI with three workers).
    assert outcome and f"error: {victim} was killed by SIGKILL" in outcome[0][1], text
    ended_after = outcome[0][0] - killed_at
    print(f"\nkill -9 {victim}: the episode ended with an error naming it after {ended_after:.2f} s")
    for name, pid in pids.items():
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            continue  # gone (and reaped, perhaps while this loop looked)
        assert "zombie" in status.lower(), f"{name} (pid {pid}) is still running"
    info = read_episode_info(_only_bag(tmp_path))
    assert info.status == INCOMPLETE
    steps = _topics(_only_bag(tmp_path)).get(names.REASONER_STEPS, [])
    # Every step but the last one the client saw is in the bag. The last may be missing when the
    # recorder or its publisher is the victim: a reliable sample that reached the client but not the
    # recorder (a shared-memory port that overflowed while the recorder waited for a core) is
    # repaired from the writer's history on the next heartbeat, and a SIGKILLed writer has none.
    # Seen once at a load of 8: the bag kept 1 of the 2 steps with the reasoner killed.
    lost_at_most = 1 if victim in ("r3_recorder_node", "r3_reasoner_node") else 0
    assert len(steps) >= steps_before - lost_at_most


def test_the_simulator_refuses_out_of_range_commands(graph):
    """Four bad commands (over the per-step limit, NaN, Inf, just over the limit) move nothing; the
    valid one after them moves the pusher by exactly its step. The publisher is matched first, so a
    lost command cannot pass for a refused one."""
    from geometry_msgs.msg import Vector3Stamped
    from sensor_msgs.msg import JointState

    node, _ = graph
    import rclpy

    states: list[tuple] = []
    sub = node.create_subscription(
        JointState, names.JOINT_STATES, lambda m: states.append(tuple(m.position)), 100
    )
    pub = node.create_publisher(Vector3Stamped, names.PUSHER_COMMAND, 10)

    def spin(seconds: float, until=lambda: False) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not until():
            rclpy.spin_once(node, timeout_sec=0.01)

    def send(x: float, y: float) -> None:
        cmd = Vector3Stamped()
        cmd.vector.x, cmd.vector.y = x, y
        pub.publish(cmd)

    try:
        spin(30, lambda: pub.get_subscription_count() > 0 and sub.get_publisher_count() > 0)
        assert pub.get_subscription_count() > 0 and sub.get_publisher_count() > 0, (
            "the simulator is not connected"
        )
        spin(0.5)  # discovery is mutual: give the simulator's side time to match this publisher too
        send(0.0, 0.0)  # a valid null step: where the pusher is now, and proof the commands arrive
        spin(10, lambda: bool(states))
        assert len(states) == 1, "the simulator answered no valid command"
        before = np.array(states[0])
        for x, y in [(0.5, 0.0), (float("nan"), 0.0), (0.0, float("inf")), (0.0301, 0.0)]:
            send(x, y)
            spin(0.3)
        assert len(states) == 1, "an out-of-range command moved the pusher"
        step = np.array([-0.01 if before[0] > 0 else 0.01, 0.0])  # towards the middle of the board
        send(*step)
        spin(10, lambda: len(states) > 1)
    finally:
        node.destroy_subscription(sub)
        node.destroy_publisher(pub)
    # Only the valid commands produced a step; the four out-of-range ones moved nothing.
    assert len(states) == 2
    np.testing.assert_allclose(np.array(states[1]) - before, step, atol=5e-4)
