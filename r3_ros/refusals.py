"""Callbacks that refuse instead of dying: the one wrapper every r3 node puts around its callbacks.

An exception escaping a service, action or subscription callback ends rclpy's executor, and with it
the node and (under a supervisor) the whole graph: a bad seed once killed the simulator that way.
Wrapped, the same exception becomes an ordinary refusal carrying its message: a service answers
``ok=False`` with the reason, an action goal ends aborted with ``reason="error: ..."``, a message
is dropped with an error in the log. The node keeps serving.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from rclpy.node import Node


def _why(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def refusing_service(node: Node, callback: Callable) -> Callable:
    """A service callback whose exceptions answer ``ok=False, reason=<the exception>``
    (every r3 service response has those two fields)."""

    @functools.wraps(callback)
    def serve(request, response):
        try:
            return callback(request, response)
        except Exception as exc:  # noqa: BLE001 - any failure is a refusal, never a dead node
            node.get_logger().error(f"refused a {type(request).__name__}: {_why(exc)}")
            response.ok, response.reason = False, f"error: {_why(exc)}"
            return response

    return serve


def refusing_action(
    node: Node, callback: Callable, result_type, end: Callable[[object, str], None]
) -> Callable:
    """An action execute callback whose exceptions end the goal aborted (through ``end``, e.g.
    ``SingleGoal.end``) with ``result.reason = "error: <the exception>"``."""

    @functools.wraps(callback)
    def execute(handle):
        try:
            return callback(handle)
        except Exception as exc:  # noqa: BLE001
            node.get_logger().error(f"goal refused: {_why(exc)}")
            end(handle, "aborted")
            return result_type(reason=f"error: {_why(exc)}")

    return execute


def refusing_message(node: Node, callback: Callable) -> Callable:
    """A subscription (or timer) callback whose exceptions drop the message with an error logged."""

    @functools.wraps(callback)
    def receive(*args):
        try:
            return callback(*args)
        except Exception as exc:  # noqa: BLE001
            node.get_logger().error(
                f"{callback.__name__}: message refused: {_why(exc)}", throttle_duration_sec=1.0
            )
            return None

    return receive
