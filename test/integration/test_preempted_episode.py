"""An episode preempted by a newer RunTask goal ends "canceled", wherever in the episode the newer goal
comes: during an instruction, or between two (while the reasoner decides)."""

from __future__ import annotations

import time

import pytest
from hostile import Client, Graph, own_domain
from serving import KNOWN_VALID, stand_in_server

from r3_ros.commander import TaskStatus

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def test_an_episode_preempted_while_its_reasoner_decides_ends_canceled(tmp_path):
    """Found in a clean-clone run: an episode preempted before its first decision ended "step_budget",
    as if it had run out of steps, where one preempted during an instruction ended "canceled" (the
    reason looked only at a cancel request and a stop). Here the model takes 3 s to answer and the
    second goal comes meanwhile."""
    from r3_msgs.action import RunTask

    def goal(**fields):
        return RunTask.Goal(suite="language_table", task="V", seed=3, reset_scene=True, **fields)

    with stand_in_server(KNOWN_VALID, delay_s=3.0) as (url, requests):
        backend = f"r3_reasoner_node.backend=openai:{url},model=stand-in"
        graph = Graph("sim_language_table_controller", tmp_path, own_domain(), sets=(backend,))
        client = Client("r3_preempting_client", graph.domain)
        try:
            assert client.wait_until_ready(90), "the graph did not come up:\n" + "".join(graph.lines)
            first = client.commander.start_task(goal())
            end = time.monotonic() + 60
            while not requests:  # the reasoner has asked the model: it is deciding the first step
                assert time.monotonic() < end, "the reasoner never asked the model"
                first.spin_once(0.01)
            second = client.commander.start_task(goal(max_steps=1))
            for handle in (first, second):
                while handle.status not in (TaskStatus.DONE, TaskStatus.REJECTED):
                    assert time.monotonic() < end + 60, "no result within 120 s"
                    handle.spin_once(0.01)
            assert (first.result.reason, first.result.steps) == ("canceled", 1), first.result.reason
            assert second.result.reason in ("success", "step_budget"), second.result.reason
        finally:
            client.close()
            graph.stop()
