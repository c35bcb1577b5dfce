"""``RecorderHandshake``'s wait for "recording": the graph's matching (rcl graph queries, about 0.2 ms
each look) is asked only once the recorder's heartbeat and its bag name the episode."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from r3.graph import names

pytestmark = pytest.mark.ros


class Node:
    """Enough of a node for the handshake: its subscription, and the graph's answers, counted."""

    def __init__(self):
        self.graph_queries = 0

    def create_subscription(self, *args, **kwargs):
        return None

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
    handshake.bag = "/bags/V-s0-x"
    missing = [handshake.not_yet_recording("V-s0-x") for _ in looks]
    assert [bool(m) for m in missing] == [True, True, True, False], missing
    assert "its heartbeat says 'idle'" in missing[0][0]
    assert node.graph_queries == 1  # the last look only
