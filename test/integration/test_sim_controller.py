"""r3_sim_node with a ``controller``: the pusher's policy runs in the simulator's process and serves
FollowInstruction itself (no r3_lowlevel_node, no DDS hop per control step). It must carry out an
instruction exactly as the low-level node's loop and the in-process loop do, publish each command it
applies for the record, take no one else's commands, stop a goal whose process was frozen, refuse a
bad goal before anything moves, and give the same episode through the graph as in process."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from cancel_trials import cancel_stops_motion, launched

from r3.graph import names

pytestmark = [pytest.mark.ros, pytest.mark.slow]
PROBE = "r3_controller_probe"


class Probe:
    """This test process as the reasoner: a heartbeat, the FollowInstruction client, ResetScene, and
    what the simulator publishes."""

    def __init__(self, node, lowlevel_node: bool = False):
        """``lowlevel_node``: the graph has r3_lowlevel_node, which a reset must leave holding a state."""
        from geometry_msgs.msg import Vector3Stamped
        from rclpy.action import ActionClient

        from r3_msgs.action import FollowInstruction
        from r3_msgs.msg import Heartbeat, PrivilegedState, SceneSnapshot
        from r3_msgs.srv import ResetScene
        from r3_ros.qos import HEARTBEAT, LATCHED

        self.node = node
        self.commands: list[tuple[float, Vector3Stamped]] = []
        self.states: list = []
        self.snapshots: list = []
        node.create_subscription(
            Vector3Stamped, names.PUSHER_COMMAND, lambda m: self.commands.append((time.monotonic(), m)), 100
        )
        node.create_subscription(PrivilegedState, names.PRIVILEGED_STATE, self.states.append, LATCHED)
        node.create_subscription(SceneSnapshot, names.SCENE_SNAPSHOT, self.snapshots.append, 10)
        self.command_pub = node.create_publisher(Vector3Stamped, names.PUSHER_COMMAND, 10)
        self.beat_pub = node.create_publisher(Heartbeat, names.HEARTBEAT, HEARTBEAT)
        self.reset_client = node.create_client(ResetScene, names.RESET_SCENE)
        self.follow = ActionClient(node, FollowInstruction, names.FOLLOW_INSTRUCTION)
        self.last_beat = 0.0
        self.beats: dict[str, str] = {}  # each node's latest heartbeat state
        node.create_subscription(
            Heartbeat, names.HEARTBEAT, lambda m: self.beats.update({m.node: m.state}), HEARTBEAT
        )
        self.lowlevel_node = lowlevel_node

    def spin(self, seconds: float, until=lambda: False) -> None:
        import rclpy

        from r3_msgs.msg import Heartbeat

        end = time.monotonic() + seconds
        while time.monotonic() < end and not until():
            rclpy.spin_once(self.node, timeout_sec=0.005)
            if time.monotonic() - self.last_beat >= 0.1:
                self.beat_pub.publish(Heartbeat(node=self.node.get_fully_qualified_name(), state="busy"))
                self.last_beat = time.monotonic()

    def reset(self, task: str, seed: int) -> None:
        from r3_msgs.srv import ResetScene

        assert self.reset_client.wait_for_service(timeout_sec=60), "the simulator did not come up"
        done = self.reset_client.call_async(
            ResetScene.Request(suite="language_table", task=task, seed=seed, episode_id=f"{task}-{seed}")
        )
        self.spin(30, done.done)
        assert done.done() and done.result().ok, done.result()
        if self.lowlevel_node:  # as the reasoner waits (EpisodeWatch.wait_until_graph_up): once the
            # low-level node has heard a state; before, a goal waits state_timeout_s for one and ends
            # "no state from the simulator" (a clean-clone run's burst test, discovery slow on busy cores)
            self.spin(30, lambda: self.beats.get("/r3_lowlevel_node") not in (None, "waiting_for_state"))
            assert self.beats.get("/r3_lowlevel_node") == "idle", self.beats
        self.spin(0.5)  # its state, and this probe's heartbeat heard there

    def send(self, instruction: str, max_steps: int, seed: int = 0, suite: str = "language_table"):
        from r3_msgs.action import FollowInstruction

        assert self.follow.wait_for_server(timeout_sec=60)
        goal = FollowInstruction.Goal(instruction=instruction, suite=suite, max_steps=max_steps, seed=seed)
        sent = self.follow.send_goal_async(goal)
        self.spin(10, sent.done)
        assert sent.done() and sent.result().accepted
        return sent.result().get_result_async()

    def result(self, answer, seconds: float = 30):
        self.spin(seconds, answer.done)
        assert answer.done(), "the instruction did not end"
        return answer.result().result


@contextmanager
def controller_sim(env: dict[str, str], log: Path, lowlevel_node: bool = False):
    """r3_sim_node running the scripted controller, watching this probe's heartbeat (``lowlevel_node``:
    the simulator without one, and r3_lowlevel_node serving FollowInstruction instead)."""
    import rclpy

    guard = ["-p", f"reasoner_node:=/{PROBE}"]
    members = [["r3_sim_node.main"], ["r3_lowlevel_node.main", *guard]]
    if not lowlevel_node:
        members = [["r3_sim_node.main", "-p", "controller:=scripted", *guard]]
    procs = []
    with open(log, "w") as out:
        for module, *args in members:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", module, "--ros-args", *args],
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
    rclpy.init(domain_id=int(env["ROS_DOMAIN_ID"]))
    node = rclpy.create_node(PROBE)
    try:
        yield procs[0], Probe(node, lowlevel_node)
    finally:
        node.destroy_node()
        rclpy.shutdown()
        for proc in procs:
            proc.send_signal(signal.SIGCONT)
            proc.terminate()
            proc.wait(timeout=20)


def test_the_controller_carries_out_an_instruction_as_the_in_process_loop_does(tmp_path, private_ros_env):
    """The commands it publishes are the scripted policy's actions from the same state and seed, one per
    control step, each stamped with the state it was decided on; the result counts them and carries the
    last state's stamp; the decision points (snapshots) are the reset and the instruction's end, none
    in between however slow a control step is (idle time marks none: once a CI machine's 50 ms
    without a step made two mid-instruction)."""
    from r3.instructions.language_table import parse
    from r3.lowlevel.pushing import ScriptedPushingPolicy
    from r3.sim.language_table.env import LanguageTableEnv
    from r3_ros.conversions import stamp_to_ns

    instruction, seed = "move the green cube to the left side of the blue moon", 7
    with controller_sim(private_ros_env(in_process=True), tmp_path / "sim.log") as (_, probe):
        probe.reset("T", 5)
        first = stamp_to_ns(probe.states[-1].header.stamp)
        answer = probe.send(instruction, max_steps=40, seed=seed)
        result = probe.result(answer)
        probe.spin(0.5)  # the decision point's snapshot, sent before the result, may come after it
    env = LanguageTableEnv(width=64, height=48)
    env.reset(seed=5, options={"task": "T"})
    policy = ScriptedPushingPolicy()
    policy.reset(parse(instruction), env.state(), np.random.default_rng(seed))
    expected = []
    for _ in range(40):
        action = policy.act(env.state())
        if action is None:
            break
        expected.append(action)
        env.step(action)
    sent = [(m.vector.x, m.vector.y) for _, m in probe.commands]
    assert result.success and result.reason == ("done" if len(expected) < 40 else "step_budget"), result
    assert result.steps == len(expected) == len(sent) > 0
    np.testing.assert_array_equal(np.array(sent), np.array(expected))
    stamps = [stamp_to_ns(m.header.stamp) for _, m in probe.commands]
    step_ns = stamps[1] - stamps[0]
    assert stamps == [first + i * step_ns for i in range(len(stamps))]
    finished = stamp_to_ns(result.finished)
    assert finished == stamps[-1] + step_ns
    assert [stamp_to_ns(s.header.stamp) for s in probe.snapshots] == [first, finished]


def test_commands_from_anyone_else_move_nothing_and_a_bad_goal_is_refused(tmp_path, private_ros_env):
    """The controller owns the pusher: a teleoperator's commands on /pusher/command are not taken. A goal
    that does not parse, or names another suite, is refused with a reason before anything moves."""
    from geometry_msgs.msg import Vector3Stamped

    from r3_ros.conversions import stamp_to_ns

    with controller_sim(private_ros_env(in_process=True), tmp_path / "sim.log") as (_, probe):
        probe.reset("T", 5)
        before = probe.states[-1]
        for _ in range(20):
            command = Vector3Stamped()
            command.header.stamp, command.vector.x = before.header.stamp, 0.01
            probe.command_pub.publish(command)
            probe.spin(0.01)
        probe.spin(0.5)
        assert stamp_to_ns(probe.states[-1].header.stamp) == stamp_to_ns(before.header.stamp)
        assert probe.states[-1].effector == before.effector
        unparsable = probe.result(probe.send("fly to the moon", max_steps=20)).reason
        other_suite = probe.result(probe.send("move the red pentagon left", 20, suite="packing")).reason
        assert unparsable.startswith("parse_error: ") and other_suite.startswith("error: invalid goal: ")
        assert stamp_to_ns(probe.states[-1].header.stamp) == stamp_to_ns(before.header.stamp)
        assert len(probe.commands) == 20  # this probe's own, heard by itself; none from the controller


def test_a_goal_whose_simulator_was_frozen_stops(tmp_path, private_ros_env):
    """SIGSTOP of the simulator's process for longer than its command deadline, in the middle of an
    instruction: once it runs again the goal ends with an error naming the freeze, and no command
    follows."""
    with controller_sim(private_ros_env(in_process=True), tmp_path / "sim.log") as (sim, probe):
        probe.reset("T", 5)
        answer = probe.send("move your arm to the top left corner", max_steps=400)
        probe.spin(30, lambda: len(probe.commands) >= 3)
        assert probe.commands, "the pusher did not move"
        os.kill(sim.pid, signal.SIGSTOP)
        time.sleep(1.5)
        os.kill(sim.pid, signal.SIGCONT)
        resumed = time.monotonic()
        result = probe.result(answer)
        probe.spin(0.3)
    # Between steps the freeze check ends the goal; a freeze in the middle of a step refuses it as stale.
    stale = r"the simulator refused: stale, sent [\d.]+ s ago .*; "
    frozen = rf"error: ({stale})?/r3_sim_node was frozen or starved for \d"
    assert re.match(frozen, result.reason), result.reason
    after = [t for t, _ in probe.commands if t > resumed + 0.2]  # what was in flight at the freeze
    assert after == [], f"{len(after)} commands after the freeze"


def test_an_episode_through_the_controller_graph_matches_in_process(tmp_path, private_ros_env):
    """``r3 run --profile sim_language_table_controller``: the same instructions as in process, and a
    complete bag with one recorded command per control step and a state after each."""
    from r3.data.bags import COMPLETE, read_episode_info, read_messages
    from r3.episode import run_episode
    from r3.reasoning.backends import make_backend

    run = subprocess.run(
        [sys.executable, "-m", "r3.cli", "run", "--quiet", "--video", "none"]
        + [
            "--profile",
            "sim_language_table_controller",
            "--task",
            "V",
            "--seed",
            "3",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=private_ros_env(),
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    instructions = eval(re.search(r"^instructions: (\[.*\])$", run.stdout, re.MULTILINE).group(1))
    expected = run_episode("V", 3, make_backend("expert"), render=False)
    assert instructions == expected.instructions
    bag = Path(re.search(r"^bag:\s+(\S+)$", run.stdout, re.MULTILINE).group(1))
    assert read_episode_info(bag).status == COMPLETE
    counts: dict[str, int] = {}
    for topic, *_ in read_messages(bag):
        counts[topic] = counts.get(topic, 0) + 1
    control_steps = sum(s.control_steps for s in expected.steps)
    assert counts[names.PUSHER_COMMAND] == control_steps
    assert counts[names.PRIVILEGED_STATE] == control_steps + 1  # the reset's, then one per step
    assert counts[names.REASONER_STEPS] == len(expected.steps)


@pytest.mark.parametrize("stop", [True, False], ids=["stop_and_cancel", "cancel_only"])
def test_cancel_stops_the_controllers_motion(stop, tmp_path, private_ros_env):
    """SAFETY.md's cancel row for the controller graph (``cancel_trials``), as for the low-level node's."""
    with launched("sim_language_table_controller", tmp_path, private_ros_env(in_process=True)) as nodes:
        cancel_stops_motion(*nodes, stop)


@pytest.mark.parametrize("lowlevel_node", [False, True], ids=["controller_in_the_simulator", "lowlevel_node"])
def test_a_burst_of_goals_runs_one_at_a_time_and_the_simulator_keeps_serving(
    lowlevel_node, tmp_path, private_ros_env
):
    """Twenty goals in quick succession from a hostile client (each sent once the one before is
    accepted: a client's service reader keeps 10 answers, and twenty at once lose some of theirs):
    each new one preempts the running one (or the one before ended first), never two run at once
    (one command per control step, stamps rising), the last one completes, and the simulator serves a
    goal after the burst."""
    from r3_ros.conversions import stamp_to_ns
    from r3_ros.goals import PREEMPTED

    env = private_ros_env(in_process=True)
    with controller_sim(env, tmp_path / "sim.log", lowlevel_node) as (_, probe):
        probe.reset("T", 5)
        corners = ["move your arm to the top left corner", "move your arm to the bottom right corner"]
        answers = [probe.send(corners[k % 2], max_steps=200) for k in range(20)]
        results = [probe.result(answer) for answer in answers]
        after = probe.result(probe.send("move the red pentagon left", max_steps=30))
        probe.spin(0.3)
    reasons = [r.reason for r in results]
    assert set(reasons[:-1]) <= {PREEMPTED, "done"} and PREEMPTED in reasons, reasons
    assert results[-1].success and after.success, (reasons[-1], after.reason)
    stamps = [stamp_to_ns(m.header.stamp) for _, m in probe.commands]
    assert stamps == sorted(set(stamps))  # one command per control step: no two goals stepped at once
