"""When an ended episode's bag closes (``r3_recorder_node.closing.Drain``), on a made-up clock."""

from __future__ import annotations

from r3_recorder_node.closing import DRAIN_TICK_S, Drain

END_NS = 1_000_000_000  # END's source stamp


def drain(min_wait_s: float = 0.0, max_wait_s: float = 5.0) -> Drain:
    return Drain(END_NS, ended_s=10.0, min_wait_s=min_wait_s, max_wait_s=max_wait_s)


def ticks(d: Drain, start_s: float, count: int, arrived: bool = True) -> list[bool]:
    return [d.tick(start_s + k * DRAIN_TICK_S, arrived) for k in range(count)]


def test_a_quiet_bag_closes_one_whole_tick_after_end():
    assert ticks(drain(), 10.0 + DRAIN_TICK_S, 1) == [True]


def test_a_first_tick_sooner_than_a_whole_one_after_end_does_not_close():
    """A timer not restarted at END fires anywhere within a tick of it: that window is not whole."""
    assert ticks(drain(), 10.0 + DRAIN_TICK_S / 4, 2) == [False, True]


def test_a_message_sent_before_end_and_written_after_it_keeps_the_bag_open_one_more_tick():
    d = drain()
    d.wrote(END_NS - 1, 10.0 + DRAIN_TICK_S / 2)  # a straggler within the first tick after END
    assert ticks(d, 10.0 + DRAIN_TICK_S, 2) == [False, True]
    d = drain()
    assert d.tick(10.0 + DRAIN_TICK_S, False) is False  # the episode's own records not yet in
    d.wrote(END_NS - 1, 10.0 + 1.5 * DRAIN_TICK_S)  # a straggler between the first and second tick
    assert ticks(d, 10.0 + 2 * DRAIN_TICK_S, 2) == [False, True]


def test_messages_sent_after_end_never_hold_the_bag_open():
    d = drain()
    for k in range(1, 3):
        d.wrote(END_NS + k, 10.0 + k * DRAIN_TICK_S / 3)  # a camera streaming on
    assert ticks(d, 10.0 + DRAIN_TICK_S, 1) == [True]


def test_a_late_tick_never_closes_since_messages_may_be_queued_behind_it():
    """The process was starved (frozen) for a second: the overdue tick runs first, before what
    arrived meanwhile; only a tick on time after it may close."""
    d = drain()
    assert not d.tick(11.0, True)  # 49 ticks late
    d.wrote(END_NS - 5, 11.001)  # the queued straggler, taken right after the late tick
    assert not d.tick(11.0 + DRAIN_TICK_S, True)
    assert d.tick(11.0 + 2 * DRAIN_TICK_S, True)


def test_the_episodes_own_records_are_waited_for_up_to_the_longest_wait():
    d = drain(max_wait_s=1.0)
    assert not any(ticks(d, 10.0 + DRAIN_TICK_S, 10, arrived=False))
    assert d.tick(11.0, False)  # the bag closes without them after max_wait_s


def test_the_shortest_wait_holds_even_when_quiet():
    d = drain(min_wait_s=4.5 * DRAIN_TICK_S)
    closed = ticks(d, 10.0 + DRAIN_TICK_S, 6)
    assert closed.index(True) == 4  # the first tick at or after 4.5 ticks
