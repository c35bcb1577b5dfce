"""When an ended episode's bag closes (``r3_recorder_node.closing.Drain``), on a made-up clock."""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET

import pytest

from r3_recorder_node.closing import DRAIN_TICK_S, REPAIR_S, WRITER_HEARTBEAT_S, Drain, KernelDrops, udp_drops
from r3_ros import DDS_PROFILES, DDS_PROFILES_LOCALHOST

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


def test_after_the_kernel_dropped_datagrams_a_quiet_bag_waits_for_their_repair():
    """A lost tail leaves no gap and no straggler until its writer's next heartbeat: a recorder frozen
    across END closed its bag 40 ms after it woke, without the last 7 of 30 large messages."""
    woke = 10.0 + DRAIN_TICK_S / 2
    d = drain()
    closed = [d.tick(10.0 + k * DRAIN_TICK_S, True, dropped_s=woke) for k in range(1, 100)]
    first = 10.0 + (closed.index(True) + 1) * DRAIN_TICK_S
    assert woke + REPAIR_S <= first < woke + REPAIR_S + DRAIN_TICK_S
    assert ticks(drain(), 10.0 + DRAIN_TICK_S, 1) == [True]  # without drops, at the first whole tick


def test_the_drops_counted_are_those_of_this_processs_sockets():
    """Linux counts, per socket, the datagrams it dropped because the receive buffer was full."""
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with receiver, sender:
        receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the kernel's least
        receiver.bind(("127.0.0.1", 0))
        before, drops = udp_drops(), KernelDrops(now_s=1.0)
        assert drops.new_since(2.0) is None
        for _ in range(50):
            sender.sendto(b"x" * 1000, receiver.getsockname())
        assert udp_drops() - before >= 40  # the buffer holds a few of the 50
        assert drops.new_since(3.0) == 2.0 and drops.new_since(4.0) is None  # seen once, with the poll before


@pytest.mark.parametrize("profile", [DDS_PROFILES, DDS_PROFILES_LOCALHOST])
def test_the_repair_wait_counts_the_heartbeats_of_r3s_writers(profile):
    period = ET.parse(profile).find(".//{*}data_writer/{*}times/{*}heartbeat_period")
    seconds = int(period.find("{*}sec").text) + int(period.find("{*}nanosec").text) / 1e9
    assert seconds == WRITER_HEARTBEAT_S
