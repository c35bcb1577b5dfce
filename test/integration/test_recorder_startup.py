"""A graph that records never runs an episode unrecorded (CI, under CPU load: a reasoner that had not
yet heard a slow recorder took the graph for one without a recorder; the bag then lacked the first
steps, or was never written). The reasoner's ``recorder_node`` says which recorder the graph has;
a goal waits for it, bounded, and fails naming it; ``''`` is a graph without a recorder."""

from __future__ import annotations

import os
import re
import time

import pytest
from hostile import Client, bag_topics, own_domain

from r3.data.bags import COMPLETE, read_episode_info
from r3.graph import names
from r3.graph.description import Profile, load_profile
from r3.graph.supervisor import Supervisor

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def _split(tmp_path, reasoner: dict, recorder: dict | None = None) -> tuple[Profile, Profile]:
    """sim_language_table without its recorder, and the recorder alone (started when the test says)."""
    full = load_profile(
        "sim_language_table",
        overrides={
            "r3_recorder_node": {"output_dir": str(tmp_path / "bags"), **(recorder or {})},
            "r3_reasoner_node": reasoner,
        },
    )
    recorder = [m for m in full.members if m.name == "r3_recorder_node"]
    rest = [m for m in full.members if m.name != "r3_recorder_node"]
    return Profile("without_recorder", "", rest), Profile("recorder", "", recorder)


def _still(client: Client) -> bool:
    """No joint state the simulator published differs from another: neither a reset nor a motion
    happened (the first one may reach the client after the goal went out: joint states are not
    latched, and the simulator publishes them only when the scene changes or is reset)."""
    return len({positions for _, positions, _, _ in client.joints}) <= 1


def test_a_goal_waits_for_the_recorder_and_is_recorded_from_its_first_step(tmp_path):
    from r3_msgs.action import RunTask
    from r3_ros.commander import TaskStatus

    domain = own_domain()
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain))
    graph, late_recorder = _split(tmp_path, {})
    client = Client("r3_recorder_startup_client", domain)
    with Supervisor(graph, tmp_path / "logs", env=env):
        try:
            assert client.wait_until_ready(90), "the graph did not come up"
            sent = time.monotonic()
            handle = client.commander.start_task(
                RunTask.Goal(suite="language_table", task="T", seed=5, reset_scene=True)
            )
            waited = 0
            while waited < 300:  # 3 s of spinning: the episode must wait, not run unrecorded
                assert handle.spin_once(0.01) not in (TaskStatus.DONE, TaskStatus.REJECTED)
                waited += 1
            assert _still(client), "the pusher moved before the recorder was up"
            with Supervisor(late_recorder, tmp_path / "recorder_logs", env=env):
                while handle.spin_once(0.01) not in (TaskStatus.DONE, TaskStatus.REJECTED):
                    assert time.monotonic() - sent < 120, "no result within 120 s"
                result = handle.result
        finally:
            client.close()
    assert result.reason in ("success", "step_budget"), result.reason
    assert result.bag, "the result names no bag"
    topics = bag_topics(tmp_path / "bags" / result.episode_id)
    assert [s.step for s in topics[names.REASONER_STEPS]] == list(range(result.steps))
    info = read_episode_info(tmp_path / "bags" / result.episode_id)
    assert info.status == COMPLETE and info.steps == result.steps


def test_without_its_recorder_a_goal_fails_naming_it_and_moves_nothing(tmp_path):
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    from r3_msgs.action import RunTask

    domain = own_domain()
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain))
    graph, _ = _split(tmp_path, {"startup_timeout_s": 3.0})
    client = Client("r3_recorder_startup_client", domain)
    goal = RunTask.Goal(suite="language_table", task="T", seed=5, reset_scene=True)
    with Supervisor(graph, tmp_path / "logs", env=env):
        try:
            assert client.wait_until_ready(90), "the graph did not come up"
            ready = client.wait_for_heartbeat("/r3_lowlevel_node", 90, lambda s: s != "waiting_for_state")
            assert ready, "the low-level node never saw the simulator"
            # That this client hears the low-level node does not mean the reasoner has yet (each pair
            # of endpoints is matched on its own): until it has, its 3 s wait names the low-level node.
            # Every goal fails and moves nothing; one soon names the missing recorder.
            for _ in range(5):
                result, _ = client.run_task(goal, timeout_s=60)
                assert result.reason.startswith("error: ") and result.bag == "", result.reason
                assert _still(client), "a goal that could not be recorded moved the pusher"
                if "/r3_recorder_node" in result.reason:
                    break
            assert "/r3_recorder_node" in result.reason, result.reason
            # The graph keeps serving: told it has no recorder, the next goal runs, unrecorded.
            setter = client.node.create_client(SetParameters, "/r3_reasoner_node/set_parameters")
            unset = Parameter(
                name="recorder_node",
                value=ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=""),
            )
            assert client.call(setter, SetParameters.Request(parameters=[unset])).results[0].successful
            result, _ = client.run_task(goal, timeout_s=90)
        finally:
            client.close()
    assert result.reason in ("success", "step_budget") and result.bag == "", result.reason
    assert not (tmp_path / "bags").exists()


def test_a_goal_waits_until_the_recorder_has_a_publisher_of_every_topic(tmp_path):
    """Discovery is waited for before START, under the startup bound, not in the episode's 5 s
    handshake (CI, loaded: a recorder that had not yet discovered one publisher of its topics within
    ``recorder_timeout_s`` of START failed the episode with "did not start recording"). Here the
    slow discovery is a topic whose publisher comes 3 s after the goal, well past a 1 s handshake."""
    from std_msgs.msg import String

    from r3_msgs.action import RunTask
    from r3_ros.commander import TaskStatus

    late_topic = "/late/topic"
    topics = load_profile("sim_language_table").member("r3_recorder_node").parameters["topics"]
    domain = own_domain()
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain))
    graph, recorder = _split(tmp_path, {"recorder_timeout_s": 1.0}, {"topics": [*topics, late_topic]})
    client = Client("r3_recorder_startup_client", domain)
    with Supervisor(Profile("full", "", graph.members + recorder.members), tmp_path / "logs", env=env):
        try:
            assert client.wait_until_ready(90), "the graph did not come up"
            waiting = client.wait_for_heartbeat(
                "/r3_recorder_node", 90, lambda state: state == names.RECORDER_WAITING
            )
            assert waiting, f"the recorder never said {names.RECORDER_WAITING!r}"
            sent = time.monotonic()
            handle = client.commander.start_task(
                RunTask.Goal(suite="language_table", task="T", seed=5, reset_scene=True)
            )
            while time.monotonic() - sent < 3.0:
                assert handle.spin_once(0.01) not in (TaskStatus.DONE, TaskStatus.REJECTED), handle.result
            assert _still(client), "the pusher moved before every recorded topic had a publisher"
            late = client.node.create_publisher(String, late_topic, 10)
            while handle.spin_once(0.01) not in (TaskStatus.DONE, TaskStatus.REJECTED):
                assert time.monotonic() - sent < 120, "no result within 120 s"
            result = handle.result
            client.node.destroy_publisher(late)
        finally:
            client.close()
    assert result.reason in ("success", "step_budget"), result.reason
    topics = bag_topics(tmp_path / "bags" / result.episode_id)
    assert [s.step for s in topics[names.REASONER_STEPS]] == list(range(result.steps))
    assert read_episode_info(tmp_path / "bags" / result.episode_id).status == COMPLETE
    log = (tmp_path / "logs" / "r3_recorder_node.log").read_text()
    warned = re.search(r"no publisher seen yet of (.*)$", log, re.MULTILINE)  # every topic still missing
    assert warned and late_topic in warned.group(1).split(", "), log
