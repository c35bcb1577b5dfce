"""``RecorderHandshake``'s wait for "recording": the graph's matching (rcl graph queries, about 0.2 ms
each look) is asked only once the recorder's heartbeat and its bag name the episode."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest

from r3.graph import names

pytestmark = pytest.mark.ros


class Node:
    """Enough of a node for the handshake: its subscription, and the graph's answers, counted; the
    publisher of gid ``b"recorder"`` on the bags topic is the recorder, ``b"forger"`` another node."""

    def __init__(self):
        self.graph_queries = 0
        self.callbacks = {}
        self.logged: list[str] = []

    def create_subscription(self, msg_type, topic, callback, *args, **kwargs):
        self.callbacks[topic] = callback

    def get_publishers_info_by_topic(self, topic):
        return [
            SimpleNamespace(endpoint_gid=list(gid), node_name=name, node_namespace="/")
            for gid, name in ((b"recorder", "r3_recorder_node"), (b"forger", "r3_forger"))
        ]

    def get_logger(self):
        return SimpleNamespace(error=lambda line, **kwargs: self.logged.append(line))

    def say_bag(self, path: str, gid: bytes = b"recorder") -> None:
        """``path`` on the bags topic from publisher ``gid``, with its message info where the callback
        takes one (as rclpy decides)."""
        from std_msgs.msg import String

        callback = self.callbacks[names.RECORDER_BAGS]
        info = {"publisher_gid": {"data": gid}}
        args = (String(data=path), info)[: len(inspect.signature(callback).parameters)]
        callback(*args)

    def get_subscriptions_info_by_topic(self, topic):
        self.graph_queries += 1
        return [SimpleNamespace(node_name="r3_recorder_node", node_namespace="/")]


class Monitor:
    def __init__(self, states):
        self.states = iter(states)

    def state(self, node):
        return next(self.states)


def test_the_graph_is_asked_only_once_the_recorder_names_the_episode():
    from r3_ros.recording import RecorderHandshake

    node = Node()
    looks = ["idle", "idle", "idle", names.recording_state("V-s0-x")]
    handshake = RecorderHandshake(node, Monitor(looks), {"recorder_node": "/r3_recorder_node"}, [])
    node.say_bag("/bags/V-s0-x")
    missing = [handshake.not_yet_recording("V-s0-x") for _ in looks]
    assert [bool(m) for m in missing] == [True, True, True, False], missing
    assert "its heartbeat says 'idle'" in missing[0][0]
    assert node.graph_queries == 1  # the last look only


def test_a_bag_named_by_another_node_than_the_recorder_is_refused():
    """Found by a hostile client: a node that answered each START with '/elsewhere/<episode id>' on the
    recorder's bags topic made the RunTask result name that path (the bag, complete, was elsewhere)."""
    from r3_ros.recording import RecorderHandshake

    node = Node()
    looks = [names.recording_state("V-s0-x")] * 2
    param = {"recorder_node": "/r3_recorder_node", "recorder_timeout_s": 1.0}
    handshake = RecorderHandshake(node, Monitor(looks), param, [])
    node.say_bag("/bags/V-s0-x")
    node.say_bag("/elsewhere/V-s0-x", gid=b"forger")
    assert handshake.wait_recording("V-s0-x", check=lambda: None) == "/bags/V-s0-x"
    assert any("'/r3_forger'" in line for line in node.logged), node.logged


def test_a_reasoner_frozen_through_the_recorders_deadline_names_its_own_freeze():
    """Found by freezing the reasoner (SIGSTOP, 6 s) just after an episode's START: it woke past the
    recorder's deadline before hearing the recorder's "recording" (sent at once), and ended the
    episode blaming the recorder, in its result and in the bag. The episode's check (its own
    stillness first) now goes before the recorder's verdict."""
    from r3_ros.episode_watch import EpisodeError
    from r3_ros.recording import RecorderHandshake

    param = {"recorder_node": "/r3_recorder_node", "recorder_timeout_s": -1.0}  # past already
    handshake = RecorderHandshake(Node(), Monitor(["idle"] * 3), param, [])

    def check() -> None:
        raise EpisodeError("/r3_reasoner_node stood still for 6.0 s (frozen or starved)")

    with pytest.raises(EpisodeError, match="stood still"):
        handshake.wait_recording("V-s0-x", check)


class LivingMonitor(Monitor):
    """A recorder that keeps beating (``dead`` names nobody)."""

    def dead(self, nodes, timeout):
        return []


def test_an_episode_that_ended_before_its_bag_was_named_still_names_it():
    """Found through the graph: with the reasoner's recorder_timeout_s at 0.1 s every episode ended with
    "did not start recording ... within 0.1 s" and a result naming no bag ('') while the recorder
    opened that episode's bag and closed it, incomplete, with the error. After END the reasoner now
    waits, bounded, for the recorder to name it; here the name comes during that wait."""
    from r3_ros.recording import RecorderHandshake

    node = Node()
    param = {"recorder_node": "/r3_recorder_node", "recorder_timeout_s": 5.0, "heartbeat_timeout_s": 5.0}
    handshake = RecorderHandshake(node, LivingMonitor(["idle"]), param, [])
    node.say_bag("/bags/V-s0-earlier")
    looks = []

    def exits() -> list[str]:  # the recorder names the episode's bag on the second look
        looks.append(1)
        if len(looks) == 2:
            node.say_bag("/bags/V-s0-x")
        return []

    assert handshake.wait_named("V-s0-x", exits) == "/bags/V-s0-x"


def test_no_bag_is_waited_for_from_a_recorder_that_is_gone():
    """A recorder whose exit the process manager reported names no bag: the result comes at once,
    naming none, and the log says why."""
    from r3_ros.recording import RecorderHandshake

    node = Node()
    node.get_logger = lambda: SimpleNamespace(warning=node.logged.append)
    param = {"recorder_node": "/r3_recorder_node", "recorder_timeout_s": 60.0, "heartbeat_timeout_s": 5.0}
    handshake = RecorderHandshake(node, LivingMonitor(["idle"]), param, [])
    exit_line = "r3_recorder_node exited (signal SIGKILL)"
    assert handshake.wait_named("V-s0-x", lambda: [exit_line]) == ""
    assert node.logged == [f"/r3_recorder_node named no bag for V-s0-x ({exit_line})"]
