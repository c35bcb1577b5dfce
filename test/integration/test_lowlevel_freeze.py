"""A low-level node frozen while it waits for the simulator's state names its own freeze, not the
simulator. Found by a freeze campaign (SIGSTOP of each node of a running graph): the low-level node
frozen 4 s mid-instruction woke past its ``state_timeout_s`` and ended the episode with
"/r3_lowlevel_node: the simulator stopped publishing state", blaming the simulator it could not hear."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from r3.graph import names
from r3.graph.node_params import STATE_TIMEOUT_MIN_S

pytestmark = [pytest.mark.ros, pytest.mark.slow]

STATE_TIMEOUT_S = STATE_TIMEOUT_MIN_S  # the shortest the node takes, so the freeze is short
#: The command the node is frozen after (while it waits for that command's state).
FROZEN_AT_COMMAND = 3


def test_a_lowlevel_node_frozen_through_its_state_timeout_names_its_own_freeze(private_ros_env):
    """This probe plays the simulator (it answers each command with a state stamped 1 ms after it)
    and the reasoner (its heartbeat). At the third command it freezes the low-level node (SIGSTOP)
    for longer than its ``state_timeout_s``, and answers that command while the node stands still:
    the simulator was never late in the node's running time, so the instruction must not end
    blaming it, nor go on with the answer it finds as it wakes (which of the two its threads saw
    first was a race: a clean-clone run ended the instruction at its step budget)."""
    import rclpy
    from geometry_msgs.msg import Vector3Stamped
    from rclpy.action import ActionClient

    from r3.sim.language_table.env import LanguageTableEnv
    from r3_msgs.action import FollowInstruction
    from r3_msgs.msg import Heartbeat, PrivilegedState
    from r3_ros.conversions import board_state_to_msg, ns_to_stamp, stamp_to_ns
    from r3_ros.qos import HEARTBEAT, LATCHED

    env = private_ros_env(in_process=True)
    lowlevel = subprocess.Popen(
        [sys.executable, "-m", "r3_lowlevel_node.main", "--ros-args"]
        + ["-p", "reasoner_node:=/r3_freeze_probe", "-p", f"state_timeout_s:={STATE_TIMEOUT_S}"]
        + ["-p", "client_timeout_s:=5.0"],  # the watchdog on this probe is not what is checked here
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    rclpy.init(domain_id=int(env["ROS_DOMAIN_ID"]))
    node = rclpy.create_node("r3_freeze_probe")
    board = LanguageTableEnv(width=64, height=48)
    board.reset(seed=5, options={"task": "T"})

    def state(stamp_ns: int) -> PrivilegedState:
        msg = board_state_to_msg(board.state(), PrivilegedState())
        msg.header.stamp, msg.header.frame_id, msg.suite = ns_to_stamp(stamp_ns), "board", "language_table"
        return msg

    state_pub = node.create_publisher(PrivilegedState, names.PRIVILEGED_STATE, LATCHED)
    beat_pub = node.create_publisher(Heartbeat, names.HEARTBEAT, HEARTBEAT)
    commands: list[int] = []
    beat = [0.0]

    def answer(command: Vector3Stamped) -> None:
        commands.append(stamp_to_ns(command.header.stamp))
        if len(commands) != FROZEN_AT_COMMAND:
            state_pub.publish(state(commands[-1] + 1_000_000))

    node.create_subscription(Vector3Stamped, names.PUSHER_COMMAND, answer, 10)
    follow = ActionClient(node, FollowInstruction, names.FOLLOW_INSTRUCTION)

    def spin(seconds: float, until=lambda: False) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not until():
            rclpy.spin_once(node, timeout_sec=0.005)
            if time.monotonic() - beat[0] >= 0.1:
                beat_pub.publish(Heartbeat(node=node.get_fully_qualified_name(), state="busy"))
                beat[0] = time.monotonic()

    try:
        state_pub.publish(state(10**9))
        assert follow.wait_for_server(timeout_sec=60), "the low-level node did not come up"
        spin(1.0)  # it hears the state and this probe's heartbeat
        goal = FollowInstruction.Goal(
            instruction="move your arm to the top left corner", suite="language_table", max_steps=8, seed=0
        )
        accepted = follow.send_goal_async(goal)
        spin(30, accepted.done)
        assert accepted.done() and accepted.result().accepted
        result = accepted.result().get_result_async()
        spin(10, lambda: len(commands) >= FROZEN_AT_COMMAND or result.done())
        assert len(commands) == FROZEN_AT_COMMAND, ("the instruction ended first", commands)
        os.kill(lowlevel.pid, signal.SIGSTOP)
        try:
            spin(STATE_TIMEOUT_S + 1.5)  # frozen through its whole state timeout
            # The answer waits for it as it wakes: its timeout and the answer are both there then.
            state_pub.publish(state(commands[FROZEN_AT_COMMAND - 1] + 1_000_000))
            spin(0.2)
        finally:
            os.kill(lowlevel.pid, signal.SIGCONT)
        spin(STATE_TIMEOUT_S + 10, result.done)
        assert result.done(), "no result"
        reason = result.result().result.reason
    finally:
        node.destroy_node()
        rclpy.shutdown()
        lowlevel.terminate()
        lowlevel.wait(timeout=20)
    print(f"\nlow-level node frozen {STATE_TIMEOUT_S + 1.5:.1f} s mid-wait: {reason!r}")
    assert "simulator" not in reason, reason
    assert reason.startswith("error: /r3_lowlevel_node was frozen or starved"), reason


def test_an_answer_heard_only_after_the_state_timeout_counts_as_none():
    """The same race, made certain: the node's state wait is woken by an answer that came in only
    after its timeout (its executor ran before the waiting thread looked again). That answer went on
    as if on time, so whether a node frozen through its wait ended the goal was up to its threads."""
    import threading
    from types import SimpleNamespace

    from r3_lowlevel_node.main import LowLevelNode
    from r3_msgs.msg import PrivilegedState
    from r3_ros.conversions import ns_to_stamp

    answer = PrivilegedState()
    answer.header.stamp = ns_to_stamp(2_000_000)

    class LateAnswer(threading.Condition):
        def wait(self, timeout=None):
            time.sleep(node.state_timeout_s + 0.05)  # the waiting thread stood still past its timeout
            node.states["sim"] = (answer, time.monotonic())  # meanwhile the answer came in
            return True

    node = SimpleNamespace(state_cv=LateAnswer(), states={}, simulator="sim", refusal=(None, ""))
    node.state_timeout_s = 0.05
    assert LowLevelNode.wait_for_state_after(node, 1_000_000) is None
