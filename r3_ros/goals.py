"""Single-goal action servers: a newly accepted goal aborts the running one (as in ros2/examples'
single-goal server), and every terminal transition goes through one lock, so a goal that finishes
at the moment a new one preempts it is never ended twice (rclpy raises on an invalid transition)."""

from __future__ import annotations

import threading

from action_msgs.msg import GoalStatus
from rclpy.node import Node

#: The states of a goal that has ended, as its action's status topic reports them.
ENDED = (GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_CANCELED, GoalStatus.STATUS_ABORTED)


class SingleGoal:
    def __init__(self, node: Node):
        self._logger = node.get_logger()
        self._lock = threading.Lock()
        self._active = None

    def accept(self, handle) -> None:
        """``handle_accepted_callback`` of the action server."""
        with self._lock:
            if self._active is not None and self._active.is_active:
                self._logger.info("a new goal preempts the running one")
                self._active.abort()
            self._active = handle
        handle.execute()

    def end(self, handle, outcome: str) -> None:
        """Finish ``handle`` as "succeeded", "aborted" or "canceled", unless it is already over."""
        with self._lock:
            if handle.is_active:
                {"succeeded": handle.succeed, "aborted": handle.abort, "canceled": handle.canceled}[outcome]()
