"""The recorder's open bag (``r3_recorder_node.open_bag.OpenBag``): what goes in, what a full bag
drops and says, and when an ended episode's bag may close."""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import pytest
from rclpy.serialization import serialize_message
from std_msgs.msg import String

from r3.data.bags import INCOMPLETE, EpisodeBagWriter, EpisodeInfo, read_episode_info, read_messages
from r3.graph import names
from r3_recorder_node.closing import DRAIN_TICK_S, REPAIR_S
from r3_recorder_node.open_bag import MB, OpenBag

STARTED_NS = 1_000
CHATTER = "/r3_probe/chatter"


def open_bag(tmp_path, **limits) -> OpenBag:
    writer = EpisodeBagWriter(tmp_path, EpisodeInfo(episode_id="V-s3-x", suite="language_table", task="V"))
    return OpenBag(writer, STARTED_NS, {"max_bag_mb": 16384, "min_free_mb": 0, **limits})


def chatter(text: str) -> bytes:
    return serialize_message(String(data=text))


def test_messages_sent_before_start_stay_out_and_the_rest_go_in(tmp_path):
    bag = open_bag(tmp_path)
    assert bag.write(CHATTER, "std_msgs/msg/String", chatter("late"), STARTED_NS - 1) == ""
    assert bag.write(CHATTER, "std_msgs/msg/String", chatter("a"), STARTED_NS) == ""
    assert bag.write(CHATTER, "std_msgs/msg/String", chatter("own")) == ""  # the recorder's own: no stamp
    bag.writer.close(success=True, progress=1.0, steps=0, reason="success")
    assert [m.data for _, _, _, m in read_messages(bag.writer.path)] == ["a", "own"]
    assert bag.recorded[CHATTER] == 2 and not bag.dropped


def test_a_full_bag_drops_all_but_episode_events_and_says_what_it_dropped(tmp_path):
    bag = open_bag(tmp_path, max_bag_mb=1)
    big = chatter("x" * MB)
    why = bag.write(CHATTER, "std_msgs/msg/String", big, STARTED_NS)
    assert why == "the bag reached max_bag_mb (1 MB)" and bag.full == why
    assert bag.write(CHATTER, "std_msgs/msg/String", big, STARTED_NS) == ""  # said once
    assert bag.write(CHATTER, "std_msgs/msg/String", big, STARTED_NS) == ""
    event = serialize_message(String(data="an episode event"))
    bag.write(names.EPISODE_EVENTS, "std_msgs/msg/String", event)
    assert bag.dropped == {CHATTER: 2} and bag.recorded == {CHATTER: 1, names.EPISODE_EVENTS: 1}
    complete, reason = bag.outcome(True, "success")
    assert not complete
    assert reason == f"success; the bag reached max_bag_mb (1 MB), dropped 2 on {CHATTER}"
    bag.writer.close(success=True, progress=1.0, steps=0, reason=reason, complete=complete)
    assert read_episode_info(bag.writer.path).status == INCOMPLETE


def test_a_disk_short_of_room_fills_the_bag(tmp_path):
    bag = open_bag(tmp_path, min_free_mb=1 << 40)  # more than any disk has free
    assert bag.check_room().startswith("the disk holding the bag has less than min_free_mb")
    assert bag.check_room() == ""  # said once
    assert bag.outcome(True, "success")[0] is False


def test_an_ended_bag_closes_once_every_step_and_its_frame_have_come(tmp_path):
    """What the bag adds to the drain's rule (``test_recorder_closing.py``): END's step count, met by
    the frames and step records written. Ticks on time, nothing straggling (the records here are
    stamped after END), so only the records decide."""
    bag = open_bag(tmp_path)
    record = serialize_message(String(data="record"))
    end_ns, ended = STARTED_NS + 10, time.monotonic()
    assert not bag.may_close(ended, steps_recorded=True)  # no END yet
    bag.end(SimpleNamespace(steps=1), end_ns, ended, 0.0, 5.0)
    tick = iter(ended + k * DRAIN_TICK_S for k in range(1, 10))
    assert not bag.may_close(next(tick), steps_recorded=True)  # nothing of the step yet
    bag.write(names.REASONER_FRAMES, "std_msgs/msg/String", record, end_ns + 1)
    assert not bag.may_close(next(tick), steps_recorded=True)  # its step record is missing
    assert bag.may_close(next(tick), steps_recorded=False)  # unless steps are not recorded
    bag.write(names.REASONER_STEPS, "std_msgs/msg/String", record, end_ns + 1)
    assert bag.may_close(next(tick), steps_recorded=True)


def write_numbered(bag: OpenBag, texts_and_numbers, publisher=b"p1", best_effort=False) -> None:
    for text, number in texts_and_numbers:
        bag.write(CHATTER, "std_msgs/msg/String", chatter(text), STARTED_NS, (publisher, number), best_effort)


def test_a_gap_in_a_publishers_numbers_makes_the_bag_incomplete_and_says_how_many(tmp_path):
    """Found by a hostile client: a recorder frozen for seconds, or made to subscribe again mid-episode,
    lost 4-15 of 96 states and still marked the bag complete."""
    bag = open_bag(tmp_path)
    write_numbered(bag, [("a", 7), ("b", 8), ("e", 11)])
    write_numbered(bag, [("x", 1), ("y", 2)], publisher=b"p2")  # another publisher counts on its own
    assert bag.missed == {CHATTER: 2}
    assert bag.outcome(True, "success") == (False, f"success; never received 2 on {CHATTER}")


def test_a_sample_that_comes_again_is_filed_once(tmp_path):
    """A remade subscription takes a publisher's kept samples once more."""
    bag = open_bag(tmp_path)
    write_numbered(bag, [("a", 1), ("b", 2), ("a", 1), ("b", 2), ("c", 3)])
    assert bag.outcome(True, "success") == (True, "success")
    bag.writer.close(success=True, progress=1.0, steps=0, reason="success")
    assert [m.data for _, _, _, m in read_messages(bag.writer.path)] == ["a", "b", "c"]


def test_best_effort_drops_are_counted_and_leave_the_bag_complete(tmp_path):
    bag = open_bag(tmp_path)
    write_numbered(bag, [("a", 1), ("d", 4)], best_effort=True)
    assert bag.outcome(True, "success") == (True, f"success; never received (best effort) 2 on {CHATTER}")


def test_what_came_before_start_opens_no_gap(tmp_path):
    """The first sample of the episode from a publisher has nothing before it in the bag: the numbers
    of samples sent before START are not the episode's."""
    bag = open_bag(tmp_path)
    bag.write(CHATTER, "std_msgs/msg/String", chatter("late"), STARTED_NS - 1, (b"p1", 3))
    write_numbered(bag, [("a", 9), ("b", 10)])
    assert not bag.missed and bag.outcome(True, "success") == (True, "success")


@pytest.mark.parametrize("output_dir", ["", "  "])
def test_an_empty_output_dir_is_refused_at_launch(tmp_path, monkeypatch, output_dir):
    """Found by a hostile user: output_dir "" recorded the bags into the recorder's working folder."""
    from r3.data.bags import bag_root

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="^output_dir is empty"):
        bag_root(output_dir)
    assert not any(tmp_path.iterdir())


def test_drops_before_end_hold_the_bag_for_their_repair_and_drops_only_after_it_do_not(tmp_path):
    """A lost tail needs its writer's next heartbeat (``closing.REPAIR_S``); a camera flooding the
    recorder after END (every poll sees new drops) must not keep the bag open to its longest wait."""
    end_ns = STARTED_NS + 10
    for since, held in ((-0.001, True), (0.0, False)):  # the poll before: before END was taken, or not
        bag = open_bag(tmp_path / str(held))
        ended = time.monotonic()
        bag.end(SimpleNamespace(steps=0), end_ns, ended, 0.0, 5.0)
        bag.saw_drops(ended + DRAIN_TICK_S / 2, ended + since)
        closed = [bag.may_close(ended + k * DRAIN_TICK_S, steps_recorded=False) for k in range(1, 200)]
        repaired = math.ceil((REPAIR_S + DRAIN_TICK_S / 2) / DRAIN_TICK_S)  # the first tick REPAIR_S after
        assert closed.index(True) + 1 == (repaired if held else 1)
