"""A refused pusher command is answered (/pusher/refusals), and its sender ends the instruction on
the answer with the simulator's reason, not after its state timeout with "stopped publishing state".
The low-level node also sends no command before the simulator's command subscription is matched (a
command published earlier would be lost, and the instruction would hang until its state timeout)."""

from __future__ import annotations

import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest

from r3.graph import names

pytestmark = [pytest.mark.ros, pytest.mark.slow]

#: Far longer than the test: a result before it can only come from the refusal.
STATE_TIMEOUT_S = 60.0


@pytest.mark.parametrize(
    "listens_after_s, beside",
    [(0.0, None), (1.5, None), (0.0, "echo"), (1.5, "recorder")],
    ids=[
        "listening",
        "subscribes_late",
        "beside_an_echo_that_cannot_match",
        "subscribes_late_beside_a_recorder",
    ],
)
def test_the_lowlevel_node_ends_the_instruction_on_the_simulators_refusal(
    listens_after_s, beside, private_ros_env
):
    """This probe plays the simulator (the latched state; its command subscription made
    ``listens_after_s`` after the goal is accepted) and the reasoner (its heartbeat), and refuses the
    first pusher command by its stamp. Beside it: an ``echo`` whose QoS cannot match the command
    publisher (transient local) must not hold the commands back; a ``recorder`` (another process's
    reader, matched from the start) must not let the first command go before the simulator listens
    (a driver that makes its state publisher before its command subscription, or discovery that
    announces them apart)."""
    import rclpy
    from geometry_msgs.msg import Vector3Stamped
    from rclpy.action import ActionClient

    from r3.sim.language_table.env import LanguageTableEnv
    from r3_msgs.action import FollowInstruction
    from r3_msgs.msg import CommandRefusal, Heartbeat, PrivilegedState
    from r3_ros.conversions import board_state_to_msg, ns_to_stamp
    from r3_ros.qos import HEARTBEAT, LATCHED, REFUSALS

    env = private_ros_env(in_process=True)
    lowlevel = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "r3_lowlevel_node.main",
            "--ros-args",
            "-p",
            "reasoner_node:=/r3_refusal_probe",
            "-p",
            f"state_timeout_s:={STATE_TIMEOUT_S}",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    rclpy.init(domain_id=int(env["ROS_DOMAIN_ID"]))
    node = rclpy.create_node("r3_refusal_probe")
    recorder_context = rclpy.Context()  # a second DDS participant, as a recorder in its own process
    rclpy.init(context=recorder_context, domain_id=int(env["ROS_DOMAIN_ID"]))
    recorder = rclpy.create_node("r3_recorder_probe", context=recorder_context)
    board = LanguageTableEnv(width=64, height=48)
    board.reset(seed=5, options={"task": "T"})
    state = board_state_to_msg(board.state(), PrivilegedState())
    state.header.stamp, state.header.frame_id, state.suite = ns_to_stamp(10**9), "board", "language_table"
    state_pub = node.create_publisher(PrivilegedState, names.PRIVILEGED_STATE, LATCHED)
    refusal_pub = node.create_publisher(CommandRefusal, names.PUSHER_REFUSALS, REFUSALS)
    beat_pub = node.create_publisher(Heartbeat, names.HEARTBEAT, HEARTBEAT)
    commands: list[Vector3Stamped] = []

    def refuse(command: Vector3Stamped) -> None:
        commands.append(command)
        refusal_pub.publish(
            CommandRefusal(
                header=command.header,
                command_topic=names.PUSHER_COMMAND,
                reason="refused: off the reachable board area (probe)",
                refused_so_far=len(commands),
            )
        )

    follow = ActionClient(node, FollowInstruction, names.FOLLOW_INSTRUCTION)

    def spin(seconds: float, until=lambda: False) -> None:
        end, beat = time.monotonic() + seconds, 0.0
        while time.monotonic() < end and not until():
            rclpy.spin_once(node, timeout_sec=0.005)
            if time.monotonic() - beat >= 0.1:
                beat_pub.publish(Heartbeat(node=node.get_fully_qualified_name(), state="busy"))
                beat = time.monotonic()

    try:
        state_pub.publish(state)
        if beside == "echo":
            node.create_subscription(Vector3Stamped, names.PUSHER_COMMAND, lambda _: None, LATCHED)
        if beside == "recorder":
            recorder.create_subscription(Vector3Stamped, names.PUSHER_COMMAND, lambda _: None, 10)
        if not listens_after_s:
            node.create_subscription(Vector3Stamped, names.PUSHER_COMMAND, refuse, 10)
        assert follow.wait_for_server(timeout_sec=60), "the low-level node did not come up"
        spin(1.0)  # it hears the state and this probe's heartbeat
        goal = FollowInstruction.Goal(
            instruction="move your arm to the top left corner", suite="language_table", max_steps=50, seed=0
        )
        sent = follow.send_goal_async(goal)
        spin(30, sent.done)
        assert sent.done() and sent.result().accepted
        started = time.monotonic()
        if listens_after_s:
            spin(listens_after_s)
            node.create_subscription(Vector3Stamped, names.PUSHER_COMMAND, refuse, 10)
        result = sent.result().get_result_async()
        spin(STATE_TIMEOUT_S / 2, result.done)
        assert result.done(), "no result long after the refusal"
        reason = result.result().result.reason
        spin(0.5)  # a command after the refusal would arrive now
    finally:
        node.destroy_node()
        recorder.destroy_node()
        rclpy.shutdown()
        rclpy.shutdown(context=recorder_context)
        lowlevel.terminate()
        lowlevel.wait(timeout=20)
    print(f"\nrefused command: the instruction ended {time.monotonic() - 0.5 - started:.2f} s after it began")
    assert reason == "error: the simulator refused: off the reachable board area (probe)", reason
    assert len(commands) == 1, "the low-level node sent a command after the refusal"
    assert np.isfinite([commands[0].vector.x, commands[0].vector.y]).all()


def test_a_command_gone_stale_while_the_simulator_was_frozen_is_refused_naming_its_freeze(private_ros_env):
    """A command that waited out the deadline at a frozen (SIGSTOPped) simulator is refused as stale,
    and the refusal says the simulator stood still: its sender, which reports the refusal, was on time.
    Before, a simulator frozen 1.2 s mid-episode ended it with "/r3_lowlevel_node: the simulator
    refused: stale, sent 1.19 s ago", which reads as the low-level node's lateness."""
    import os
    import signal

    import rclpy
    from geometry_msgs.msg import Vector3Stamped

    from r3_msgs.msg import CommandRefusal
    from r3_ros.qos import REFUSALS

    env = private_ros_env(in_process=True)
    sim = subprocess.Popen(
        [sys.executable, "-m", "r3_sim_node.main"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    rclpy.init(domain_id=int(env["ROS_DOMAIN_ID"]))
    node = rclpy.create_node("r3_stale_probe")
    refusals: list[str] = []
    node.create_subscription(
        CommandRefusal, names.PUSHER_REFUSALS, lambda m: refusals.append(m.reason), REFUSALS
    )
    command_pub = node.create_publisher(Vector3Stamped, names.PUSHER_COMMAND, 10)

    def spin(seconds: float, until=lambda: False) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not until():
            rclpy.spin_once(node, timeout_sec=0.01)

    try:
        spin(
            60, lambda: command_pub.get_subscription_count() and node.count_publishers(names.PUSHER_REFUSALS)
        )
        spin(1.0)  # both ends matched
        os.kill(sim.pid, signal.SIGSTOP)
        try:
            command = Vector3Stamped()
            command.header.frame_id, command.vector.x = "board", 0.01
            command_pub.publish(command)
            spin(1.5)  # past the simulator's 1 s command deadline
        finally:
            os.kill(sim.pid, signal.SIGCONT)
        spin(10, lambda: refusals)
    finally:
        node.destroy_node()
        rclpy.shutdown()
        sim.terminate()
        sim.wait(timeout=20)
    assert len(refusals) == 1, refusals
    print(f"\nrefusal: {refusals[0]!r}")
    assert refusals[0].startswith("refused: stale, sent 1."), refusals[0]
    assert "/r3_sim_node was frozen or starved for 1." in refusals[0], refusals[0]


def stall_at_the_tenth_substep(monkeypatch) -> list[None]:
    """Stall the process in the tenth physics substep from now past ``PUSHER_COMMAND_DEADLINE_S`` (a freeze
    played in this process, deterministically); one item per substep taken."""
    from r3.graph.names import PUSHER_COMMAND_DEADLINE_S
    from r3.sim.offscreen import mujoco

    substeps, mj_step = [], mujoco.mj_step

    def stalling(model, data) -> None:
        substeps.append(None)
        if len(substeps) == 10:
            time.sleep(
                PUSHER_COMMAND_DEADLINE_S + 0.2
            )  # the process stands still here (the fault, not a wait)
        mj_step(model, data)

    monkeypatch.setattr(mujoco, "mj_step", stalling)
    return substeps


def test_a_step_the_simulator_was_frozen_in_the_middle_of_is_undone_not_finished(
    private_ros_env, monkeypatch
):
    """Found by a freeze campaign: the simulator frozen (SIGSTOP) for 4 s in the middle of a step, then
    woken, finished that step, and the pusher moved after the client had its error result for it. The
    freeze is played in this process, deterministically: the command's tenth physics substep stalls
    past ``PUSHER_COMMAND_DEADLINE_S``. The step is undone and refused as stale; no state goes out."""
    import rclpy
    from geometry_msgs.msg import Vector3Stamped

    from r3_sim_node.main import SimNode

    rclpy.init(domain_id=int(private_ros_env(in_process=True)["ROS_DOMAIN_ID"]))
    sim = SimNode()
    try:
        board, steps, published = sim.env.state(), sim.env.elapsed_steps, sim.published
        substeps = stall_at_the_tenth_substep(monkeypatch)
        command = Vector3Stamped()
        command.vector.x = 0.02
        sim.on_command(command, {"source_timestamp": time.time_ns()})
    finally:
        sim.shutdown()
        sim.destroy_node()
        rclpy.try_shutdown()
    assert len(substeps) == 10, "the step went on after the stall"
    assert sim.refused_commands == 1
    assert sim.env.state() == board and sim.env.elapsed_steps == steps
    assert sim.published is published  # no joint state of a moved pusher went out


def test_a_controller_step_the_simulator_was_frozen_in_the_middle_of_is_undone_not_finished(
    private_ros_env, monkeypatch
):
    """As above, for a simulator whose controller serves FollowInstruction (``controller``): its step
    took no deadline, and a step frozen in its middle was finished once the process ran again, after
    the goal's client had its error. The step is undone and refused as stale; no state goes out."""
    import rclpy

    from r3_ros.instruction_server import Ended
    from r3_sim_node.main import SimNode

    domain = int(private_ros_env(in_process=True)["ROS_DOMAIN_ID"])
    rclpy.init(args=["--ros-args", "-p", "controller:=scripted"], domain_id=domain)
    sim = SimNode()
    try:
        board, steps, published = sim.env.state(), sim.env.elapsed_steps, sim.published
        handle = SimpleNamespace(goal_id=SimpleNamespace(uuid=bytes(16)))
        sim.guard = SimpleNamespace(command=lambda _handle, send: send())  # no stop
        _, stamp = sim.begin(handle)
        substeps = stall_at_the_tenth_substep(monkeypatch)
        with pytest.raises(Ended) as ended:
            sim.step(handle, np.array([0.02, 0.0]), stamp)
    finally:
        sim.shutdown()
        sim.destroy_node()
        rclpy.try_shutdown()
    assert ended.value.reason.startswith("error: the simulator refused: stale, sent 1."), ended.value.reason
    assert len(substeps) == 10, "the step went on after the stall"
    assert sim.refused_commands == 1
    assert sim.env.state() == board and sim.env.elapsed_steps == steps
    assert sim.published is published  # no joint state of a moved pusher went out
