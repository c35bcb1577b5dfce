"""A stopped instruction of the low-level node ends only once nothing it sent can still move the pusher."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest

pytestmark = [pytest.mark.ros]

#: How late the simulator's answer to the stopped goal's last command comes (the command in flight).
ANSWER_LATE_S = 0.2


class StoppedGuard:
    """A ``MotionGuard`` whose goal is stopped as its command goes out (the stop overtakes it)."""

    def command(self, handle, send) -> None:
        send()

    def stopping(self, handle) -> bool:
        return True


def test_a_stopped_instruction_ends_only_once_its_last_command_is_answered(private_ros_env):
    """Found by review: on a stop the low-level node ended the goal at once, while its last command was
    still on its way to the simulator, which stepped it after the reasoner had sent the RunTask's error
    result (the result waits for the goal's end). The stop comes here with the command, and the
    simulator answers it ``ANSWER_LATE_S`` later: the step takes that answer before the goal ends."""
    import rclpy

    from r3.sim.language_table.env import LanguageTableEnv
    from r3_lowlevel_node.main import LowLevelNode
    from r3_msgs.msg import PrivilegedState
    from r3_ros.conversions import board_state_to_msg, ns_to_stamp, stamp_to_ns
    from r3_ros.instruction_server import Ended

    board = LanguageTableEnv(width=64, height=48)
    board.reset(seed=5, options={"task": "T"})

    def state(stamp_ns: int) -> PrivilegedState:
        msg = board_state_to_msg(board.state(), PrivilegedState())
        msg.header.stamp, msg.header.frame_id = ns_to_stamp(stamp_ns), "board"
        return msg

    rclpy.init(domain_id=int(private_ros_env(in_process=True)["ROS_DOMAIN_ID"]))
    node = LowLevelNode()
    answers = []

    def answer_late(command) -> None:  # the simulator, over a link slower than the stop
        answer = state(stamp_to_ns(command.header.stamp) + 1_000_000)
        answers.append(threading.Timer(ANSWER_LATE_S, node.on_state, (answer, {})))
        answers[-1].start()

    try:
        node.on_state(state(10**9), {})  # the simulator's state before the command (no GUID: b"")
        node.guard, node.command_pub = StoppedGuard(), SimpleNamespace(publish=answer_late)
        handle = SimpleNamespace(is_active=True)
        try:
            _, stamp = node.step(handle, np.array([0.01, 0.0]), ns_to_stamp(10**9))
        except Ended as end:
            pytest.fail(f"the goal ended ({end.reason}) before its last command was answered")
    finally:
        for timer in answers:
            timer.cancel()
        node.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    assert stamp_to_ns(stamp) == 10**9 + 1_000_000  # the answer's
