"""What a node still does after the first SIGINT: rclpy shuts its context down at once, while a goal
or an episode may still be winding down in a pool thread (a motion, a wait for a result, a bag being
closed). Those loops end at their next check (:func:`shutting_down`); whatever they still send then
is dropped without an error (:func:`unless_shut_down`): nobody is left to receive it, and a traceback
in the log would read as a fault.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rclpy._rclpy_pybind11 import InvalidHandle, RCLError


def shutting_down(node) -> bool:
    """rclpy has shut ``node``'s context down: nothing it sends goes out any more."""
    return not node.context.ok()


@contextmanager
def unless_shut_down(node) -> Iterator[None]:
    """Send inside: a send that fails because ``node``'s context has shut down (or its node, publisher
    or action server was destroyed since) is dropped; any other failure is raised."""
    try:
        yield
    except (RCLError, InvalidHandle):
        if not shutting_down(node):
            raise
