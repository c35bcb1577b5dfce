"""A frozen simulator of the controller graph (``sim_language_table_controller``: the pusher's policy
runs in the simulator's process) moves nothing after the episode's error result."""

from __future__ import annotations

import pytest
from hostile import Client, Graph, freeze_the_simulator_mid_episode, own_domain

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def test_a_frozen_controller_simulator_executes_no_step_after_the_episode_error(tmp_path):
    """As ``test_a_frozen_simulator_executes_no_stale_command_after_the_episode_error`` for the low-level
    graph: a step frozen in the middle was finished once the simulator ran again, after the error
    result. The graph serves a valid episode afterwards."""
    from r3_msgs.action import RunTask

    def goal(seed: int):
        return RunTask.Goal(suite="language_table", task="T", seed=seed, reset_scene=True)

    graph = Graph("sim_language_table_controller", tmp_path, own_domain())
    client = Client("r3_hostile_controller_client", graph.domain)
    try:
        assert client.wait_until_ready(90), "the graph did not come up:\n" + "".join(graph.lines)
        freeze_the_simulator_mid_episode(graph, client, goal(11))
        result, _ = client.run_task(goal(3))
        assert result.reason == "success", result.reason
    finally:
        client.close()
        graph.stop()
