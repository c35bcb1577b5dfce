"""Who sent each message (``r3_ros.senders``), on a made-up clock and graph."""

from __future__ import annotations

from r3_ros.senders import Senders

REASONER, HOSTILE, LATE = b"reasoner", b"hostile", b"late"


class Graph:
    """The graph's view of the publishers: by gid, the ones it names now; counts the lookups."""

    def __init__(self, **named: str):
        self.named = {gid.encode(): name for gid, name in named.items()}
        self.lookups = 0

    def __call__(self) -> dict[bytes, str]:
        self.lookups += 1
        return dict(self.named)


def decided(sources: Senders, now_s: float) -> list[tuple[str, str]]:
    return [(d.message, d.sender) for d in sources.decided(now_s)]


def test_an_event_from_a_named_publisher_is_decided_at_once():
    sources = Senders(Graph(reasoner="r3_reasoner_node"), wait_s=5.0)
    sources.add("start A", {}, REASONER, 0.0)
    assert decided(sources, 0.0) == [("start A", "r3_reasoner_node")]
    assert sources.pending == 0


def test_a_publisher_never_named_holds_up_only_its_own_events_and_is_refused_after_the_wait():
    sources = Senders(Graph(reasoner="r3_reasoner_node"), wait_s=5.0)
    for k in range(3):
        sources.add(f"forged {k}", {}, HOSTILE, 0.0)
    sources.add("start B", {}, REASONER, 0.1)
    assert decided(sources, 0.1) == [("start B", "r3_reasoner_node")]
    assert decided(sources, 4.9) == []
    assert decided(sources, 5.0) == [(f"forged {k}", "") for k in range(3)]


def test_a_publisher_named_late_has_its_events_in_the_order_they_came():
    graph = Graph()
    sources = Senders(graph, wait_s=5.0)
    sources.add("start A", {}, LATE, 0.0)
    sources.add("end A", {}, LATE, 0.5)
    assert decided(sources, 1.0) == []
    graph.named[LATE] = "r3_reasoner_node"
    assert decided(sources, 1.5) == [("start A", "r3_reasoner_node"), ("end A", "r3_reasoner_node")]


def test_each_event_of_an_unnamed_publisher_waits_its_own_time_for_the_name():
    sources = Senders(Graph(), wait_s=5.0)
    sources.add("start A", {}, LATE, 0.0)
    sources.add("end A", {}, LATE, 4.0)
    assert decided(sources, 5.0) == [("start A", "")]
    assert decided(sources, 8.9) == []
    assert decided(sources, 9.0) == [("end A", "")]


def test_a_flood_from_one_publisher_keeps_the_queue_bounded_and_pushes_out_only_its_own_events():
    graph = Graph()
    sources = Senders(graph, wait_s=5.0, max_pending=8)
    sources.add("start A", {}, LATE, 0.0)
    for k in range(1000):
        sources.add(f"forged {k}", {}, HOSTILE, 0.0)
    assert sources.pending == 8 and sources.dropped == 993
    graph.named[LATE] = "r3_reasoner_node"
    assert decided(sources, 1.0) == [("start A", "r3_reasoner_node")]


def test_the_graph_is_asked_only_while_a_publisher_is_not_yet_known():
    graph = Graph(reasoner="r3_reasoner_node")
    sources = Senders(graph, wait_s=5.0)
    sources.add("start A", {}, REASONER, 0.0)
    decided(sources, 0.0)
    sources.add("end A", {}, REASONER, 1.0)
    decided(sources, 1.0)
    assert graph.lookups == 1


def test_names_are_remembered_for_the_publishers_heard_from_most_recently():
    graph = Graph(g0="node_0", g1="node_1", g2="node_2")
    sources = Senders(graph, wait_s=5.0, max_known=2)
    for k, gid in enumerate((b"g0", b"g1", b"g2", b"g2", b"g0")):
        sources.add(f"e{k}", {}, gid, float(k))
        assert decided(sources, float(k)) == [(f"e{k}", f"node_{gid[-1] - ord('0')}")]
    assert graph.lookups == 4  # g2 the second time was remembered; g0, forgotten, was looked up again
