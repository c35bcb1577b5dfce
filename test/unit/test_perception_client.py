"""``RosPerception``'s waits end once the goal they serve must stop, not at ``timeout_s``."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.ros


class Node:
    """Enough of a node for the client: somewhere for its GroundPoint client and its subscription."""

    def create_client(self, *args, **kwargs):
        return None

    def create_subscription(self, *args, **kwargs):
        return None


def test_a_wait_for_detections_ends_once_its_goal_must_stop():
    """Found on a sim_packing graph without its perception node: the packing simulator's instruction
    waited out ``perception_timeout_s`` (30 s) for detections that never came, holding the
    simulator's lock, after its goal had been cancelled: the reset that followed was answered 27 s
    after the cancel. The wait now asks the goal's stop between its looks."""
    from r3_ros.perception_client import PerceptionUnavailable, RosPerception

    frames: list[bool] = []
    perception = RosPerception(Node(), None, lambda resend=False: frames.append(resend) or 1, None, 5.0)
    stop_at = time.monotonic() + 0.2
    perception.should_stop = lambda: time.monotonic() > stop_at  # a cancel 0.2 s into the wait
    started = time.monotonic()
    with pytest.raises(PerceptionUnavailable, match=r"^the goal stopped while it waited for perception$"):
        perception.observe()
    assert time.monotonic() - started < 1.0
    assert frames == [False]  # the frame went out once; no resend came before the stop
