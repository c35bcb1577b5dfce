"""Stopping motion fast: the stop topic, and the checks an arm's action server makes before each command.

Cancelling an action through rclpy is a service round trip served by the server's executor, 40-110 ms
per hop on a loaded 2-core machine, and a cancelled RunTask took two hops (client -> reasoner ->
low-level) before its motion stopped. A stop is one ``std_msgs/String`` on ``names.STOP_MOTION``
(reliable, volatile) naming one goal by its id (:func:`goal_key`), and it stops that goal's whole
family: a goal started on behalf of another gets an id whose first 8 bytes are its parent's
(:func:`new_goal_id`; the reasoner starts each FollowInstruction so for its RunTask). So the stop a
client publishes when it cancels a RunTask reaches the node moving the arm in one topic hop, and the
reasoner, whose RunTask cancel callback also publishes a stop for the running instruction, covers
clients that only cancel through the action. A stop names goals, never "whatever runs now", so a
late stop cannot stop the next episode. The action cancel still follows every stop: the stop is the
fast path, the cancel the reliable one and the one that gives the goal its final status
(:func:`end_stopped`).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from std_msgs.msg import String
from unique_identifier_msgs.msg import UUID

from r3.graph import names
from r3_ros.heartbeat import HeartbeatMonitor
from r3_ros.qos import STOP
from r3_ros.shutdown import shutting_down, unless_shut_down

#: Bytes of a goal id that name its family (64 random bits: families never collide by chance).
FAMILY_BYTES = 8
#: Stopped families remembered per node; a stop may arrive before the goal it stops.
REMEMBERED = 256
#: How long a stopped goal waits for the action cancel that follows the stop before it ends anyway.
CANCEL_WAIT_S = 1.0


def goal_key(goal_id: UUID) -> str:
    """The text form of an action goal id, as a stop names it."""
    return str(uuid.UUID(bytes=bytes(bytearray(goal_id.uuid))))


def family(key: str) -> bytes:
    """The family of goal ``key``: the first ``FAMILY_BYTES`` of its id. ValueError if not a goal id."""
    return uuid.UUID(key).bytes[:FAMILY_BYTES]


def new_goal_id(parent: str | None = None) -> UUID:
    """A goal id chosen by the client (``send_goal_async(goal_uuid=...)``), so that a stop can name
    the goal before the server has accepted it; random, or of goal ``parent``'s family."""
    raw = uuid.uuid4().bytes
    if parent is not None:
        raw = family(parent) + raw[FAMILY_BYTES:]
    return UUID(uuid=list(raw))


class StopPublisher:
    def __init__(self, node: Node):
        self._node = node
        self._pub = node.create_publisher(String, names.STOP_MOTION, STOP)

    def stop(self, key: str) -> None:
        """Stop goal ``key`` (and its family); dropped once this node is shutting down."""
        with unless_shut_down(self._node):
            self._pub.publish(String(data=key))


class StopListener:
    """Stops received on ``names.STOP_MOTION``, in a callback group of their own so that a busy node
    still takes them at once; ``on_stop(key)`` is called with each. ``lock`` is held while a stop is
    recorded: a command sent under it after checking :meth:`requested` cannot follow a stop already
    received."""

    def __init__(self, node: Node, on_stop: Callable[[str], None] | None = None):
        self.lock = threading.RLock()
        self._families: OrderedDict[bytes, None] = OrderedDict()
        self._on_stop = on_stop
        self._logger = node.get_logger()
        node.create_subscription(
            String, names.STOP_MOTION, self._receive, STOP, callback_group=MutuallyExclusiveCallbackGroup()
        )

    def _receive(self, msg: String) -> None:
        try:
            stopped = family(msg.data)
        except ValueError:
            self._logger.warning(  # at most once a second: a flood of them must not flood the log
                f"ignored a stop that names no goal id: {msg.data[:80]!r}", throttle_duration_sec=1.0
            )
            return
        with self.lock:
            self._families[stopped] = None
            while len(self._families) > REMEMBERED:
                self._families.popitem(last=False)
        if self._on_stop is not None:
            self._on_stop(msg.data)

    def requested(self, key: str) -> bool:
        """A stop for goal ``key``'s family was received."""
        with self.lock:
            return family(key) in self._families


class MotionGuard:
    """What an action server that moves an actuator checks before every motion command of a goal:
    the goal's cancel, a stop of the goal's family, and (the watchdog) the heartbeat of the client that
    sent it, ``client``, silent for ``client_timeout_s`` (the node's parameters
    ``r3.graph.node_params.MOTION_GUARD``)."""

    def __init__(self, node: Node, monitor: HeartbeatMonitor, client_timeout_s: float, client: str):
        self.client_timeout_s = client_timeout_s
        self.client = client
        self.monitor = monitor
        self.stops = StopListener(node)
        self.node, self.node_name = node, node.get_fully_qualified_name()

    def stopping(self, handle) -> bool:
        """The goal was cancelled, stopped or preempted, or this node is shutting down."""
        return (
            handle.is_cancel_requested
            or not handle.is_active
            or self.stops.requested(goal_key(handle.goal_id))
            or shutting_down(self.node)
        )

    def stop_reason(self, handle, watch_client: bool = True) -> str | None:
        """Why ``handle`` must not move any more ("canceled" or "error: ..."); None when it may."""
        if shutting_down(self.node):  # a SIGINT: no command would go out any more
            return f"error: {self.node_name} is shutting down; motion stopped"
        if handle.is_cancel_requested or self.stops.requested(goal_key(handle.goal_id)):
            return "canceled"
        if watch_client and self.monitor.dead([self.client], self.client_timeout_s):
            return (
                f"error: {self.client} stopped responding for {self.client_timeout_s:.1f} s; motion stopped"
            )
        return None

    def command(self, handle, send: Callable[[], None], watch_client: bool = True) -> str | None:
        """Call ``send`` (publish one command) unless the goal must stop; the reason when it must.
        Checked and sent under the stop lock, so no command goes out after a stop was received."""
        with self.stops.lock:
            reason = self.stop_reason(handle, watch_client)
            if reason is None:
                send()
        return reason


def end_stopped(handle, reason: str, end: Callable[[object, str], None]) -> None:
    """End a goal that stopped for ``reason`` through ``end(handle, outcome)`` (``SingleGoal.end``).
    A stop is followed by the action cancel: wait for it (at most ``CANCEL_WAIT_S``) so that the goal
    ends "canceled"; without one it ends aborted, its result saying "canceled". An error ends it aborted."""
    if reason == "canceled":
        deadline = time.monotonic() + CANCEL_WAIT_S
        while not handle.is_cancel_requested and handle.is_active and time.monotonic() < deadline:
            time.sleep(0.005)
        end(handle, "canceled" if handle.is_cancel_requested else "aborted")
    else:
        end(handle, "aborted")
