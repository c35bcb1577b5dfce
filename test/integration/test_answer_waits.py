"""A wait for an answer over DDS (a service response, an action's acceptance or result) ends when the
answer comes, not at its next look (r3_ros.services.Completion). The waits used to sleep 10 ms
between looks at ``future.done()``; a response that came back in under a millisecond was seen 10 ms
later, which made every GroundPoint call and every instruction's acceptance cost 10 ms more."""

from __future__ import annotations

import threading
import time

import pytest

pytestmark = pytest.mark.ros

#: Longer than the test may take: a wait that only woke at its next look would show.
LOOK_S = 30.0
#: How long the server takes to answer; the client's first look comes before the answer.
ANSWER_AFTER_S = 0.2


@pytest.fixture
def slow_server(context, monkeypatch):
    """A ResetScene server answering after ANSWER_AFTER_S and a client of it, spun by r3's executor;
    the waits look at their futures only every LOOK_S."""
    from rclpy.callback_groups import ReentrantCallbackGroup
    from rclpy.node import Node

    from r3_msgs.srv import ResetScene
    from r3_ros import services
    from r3_ros.executor import QueueAwareExecutor

    monkeypatch.setattr(services, "CHECK_S", LOOK_S)
    node = Node("answer_waits", context=context)

    def answer(request, response):
        time.sleep(ANSWER_AFTER_S)
        response.ok, response.goal = True, f"answer to {request.episode_id}"
        return response

    group = ReentrantCallbackGroup()
    node.create_service(ResetScene, "/answer_waits/reset", answer, callback_group=group)
    client = node.create_client(ResetScene, "/answer_waits/reset", callback_group=group)
    executor = QueueAwareExecutor(num_threads=4, context=context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    assert client.wait_for_service(timeout_sec=10.0)
    yield client, ResetScene.Request
    executor.shutdown()
    node.destroy_node()


def _looks():
    """A keep_waiting() that counts how often the wait looked."""
    looks = []

    def keep_waiting() -> bool:
        looks.append(time.monotonic())
        return True

    return looks, keep_waiting


def test_a_service_answer_ends_the_wait_when_it_comes(slow_server):
    from r3_ros.services import call_resending

    client, request = slow_server
    looks, keep_waiting = _looks()
    started = time.monotonic()
    response = call_resending(
        client, request(episode_id="first"), timeout_s=2 * LOOK_S, keep_waiting=keep_waiting
    )
    waited = time.monotonic() - started
    assert response.goal == "answer to first"
    assert waited < LOOK_S / 2, f"the answer ended the wait only at the next look ({waited:.1f} s)"
    assert len(looks) == 1  # one look before the answer came; none while it was on its way


def test_a_future_answer_ends_wait_future_when_it_comes(slow_server):
    from r3_ros.episode_watch import wait_future

    client, request = slow_server
    looks, keep_waiting = _looks()
    started = time.monotonic()
    response = wait_future(client.call_async(request(episode_id="second")), "reset", keep_waiting, 2 * LOOK_S)
    waited = time.monotonic() - started
    assert response.goal == "answer to second"
    assert waited < LOOK_S / 2, f"the answer ended the wait only at the next look ({waited:.1f} s)"
    assert len(looks) == 1
