"""r3_ros.action_client: a goal whose acceptance is taken the moment it leaves still reaches its sender.

Found on busy cores: the reasoner's FollowInstruction goal failed in ``send_goal_async`` with
``ValueError: list.remove(x): x not in list`` and the episode ended in that error. rclpy 9.1 made a
goal's future twice, the second after its lock; an answer taken in between completed it early."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.ros


def _answered_between_the_futures(executor, made: list):
    """rclpy's Future, but the second one made for one goal request waits, before any callback is
    added to it, until the executor has taken the server's answer: the interleaving of a thread that
    loses the core between the two (deterministic here)."""
    import rclpy.task

    class Future(rclpy.task.Future):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

        def add_done_callback(self, callback):
            if len(made) == 2 and self is made[1]:
                deadline = time.monotonic() + 5.0
                while not (made[0].done() or self.done()) and time.monotonic() < deadline:
                    executor.spin_once(timeout_sec=0.05)
            super().add_done_callback(callback)

    return Future


def test_a_goal_accepted_before_its_sender_looks_again_reaches_it(context, monkeypatch):
    """With rclpy 9.1's own ActionClient this raises rclpy's ValueError in ``send_goal_async``."""
    import rclpy.action.client
    from rclpy.action import ActionServer
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from r3_msgs.action import FollowInstruction
    from r3_ros.action_client import ActionClient

    node = Node("action_client_probe", context=context)

    def execute(handle):
        handle.succeed()
        return FollowInstruction.Result(success=True)

    ActionServer(node, FollowInstruction, "/action_client_probe", execute)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    made: list = []
    monkeypatch.setattr(rclpy.action.client, "Future", _answered_between_the_futures(executor, made))
    monkeypatch.setattr("r3_ros.action_client.Future", rclpy.action.client.Future)
    client = ActionClient(node, FollowInstruction, "/action_client_probe")
    assert client.wait_for_server(timeout_sec=5.0)
    try:
        sending = client.send_goal_async(FollowInstruction.Goal(instruction="x"))
        deadline = time.monotonic() + 5.0
        while not sending.done() and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        assert sending.done() and sending.result().accepted
        assert len(made) == 1  # one future per goal request
    finally:
        executor.shutdown()
        node.destroy_node()
