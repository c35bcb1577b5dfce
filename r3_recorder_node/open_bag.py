"""The bag of the episode a recorder is writing, with the rules that bound it: what was sent before the
episode's START stays out, a bag past ``max_bag_mb`` or on a disk short of ``min_free_mb`` takes no
more messages but its episode events (a flood on a recorded topic cannot fill the disk under the rest
of the graph), and after END it closes once its drain says so (``closing.Drain``). ROS-free: the node
hands over serialised messages, their DDS source stamps and their publishers' sequence numbers.

DDS numbers each publisher's samples 1, 2, 3, ...: a gap between two samples of one publisher, both
sent in the episode, is messages the bag never got (a recorder that fell behind a publisher that
keeps only its last few samples, a subscription remade mid-episode). A bag that misses messages of
a reliable topic is incomplete and says how many; on a best-effort topic (a camera driver's) drops
are expected, so the reason counts them and the bag stays complete. A sample that comes again (a
remade subscription takes a publisher's kept samples once more) is filed once.
"""

from __future__ import annotations

import math
import shutil
import time
from collections import Counter
from collections.abc import Mapping

from r3.data.bags import EpisodeBagWriter
from r3.graph import names
from r3_recorder_node.closing import Drain

MB = 1 << 20


class OpenBag:
    """One episode's bag while it records. ``limits`` is the node's live parameter mapping
    (``max_bag_mb``, ``min_free_mb``), read at each use; ``started_ns`` is START's source stamp and
    ``source`` the DDS gid of START's publisher (its END must come from the same one)."""

    def __init__(self, writer: EpisodeBagWriter, started_ns: int, limits: Mapping, source: bytes = b""):
        self.writer, self.started_ns, self.limits, self.source = writer, started_ns, limits, source
        self.recorded: Counter[str] = Counter()  # messages written, by topic
        self.dropped: Counter[str] = Counter()  # messages of the episode not written, by topic
        self.missed: Counter[str] = Counter()  # of reliable topics, never received (sequence gaps)
        self.missed_best_effort: Counter[str] = Counter()  # the same on best-effort topics
        self.sequences: dict[tuple[str, bytes], int] = {}  # last sequence number, by topic and publisher
        self.full = ""  # why the bag takes no more messages but its episode events ("" while it does)
        self.drain: Drain | None = None  # once END has come
        self.dropped_s = -math.inf  # when the kernel was last seen dropping datagrams to this process
        self.ended = None  # the END event, once it has come

    @property
    def episode_id(self) -> str:
        return self.writer.info.episode_id

    def write(
        self,
        topic: str,
        msgtype: str,
        data: bytes,
        sent_ns: int | None = None,
        sequence: tuple[bytes, int | None] | None = None,
        best_effort: bool = False,
    ) -> str:
        """``data`` into the bag, unless it was sent (``sent_ns``; None: one of the recorder's own)
        before START, it came before (``sequence``: its publisher's gid and number), or the bag is
        full; why the bag has just become full ("" when it has not)."""
        if sent_ns is not None and sent_ns < self.started_ns:
            return ""  # the episode before's, however late it came
        if sequence is not None and sequence[1] is not None:
            key, number = (topic, sequence[0]), sequence[1]
            last = self.sequences.get(key)
            if last is not None and number <= last:
                return ""  # filed already
            if last is not None and number > last + 1:
                (self.missed_best_effort if best_effort else self.missed)[topic] += number - last - 1
            self.sequences[key] = number
        if self.full and topic != names.EPISODE_EVENTS:
            self.dropped[topic] += 1
            return ""
        self.writer.write(topic, msgtype, time.time_ns(), data)
        self.recorded[topic] += 1
        if self.drain is not None:
            self.drain.wrote(sent_ns, time.monotonic())
        cap = self.limits["max_bag_mb"]
        if not self.full and self.writer.size_bytes >= cap * MB:
            return self._fill(f"the bag reached max_bag_mb ({cap} MB)")
        return ""

    def check_room(self) -> str:
        """Why the bag has just become full because its disk is short of room ("" when it has not)."""
        floor = self.limits["min_free_mb"]
        if not self.full and shutil.disk_usage(self.writer.path).free < floor * MB:
            return self._fill(f"the disk holding the bag has less than min_free_mb ({floor} MB) free")
        return ""

    def _fill(self, why: str) -> str:
        self.full = why
        return why

    def end(self, event, end_sent_ns: int, now_s: float, min_wait_s: float, max_wait_s: float) -> None:
        """END ``event`` (sent at ``end_sent_ns``) came: from now on the bag drains."""
        self.drain = Drain(end_sent_ns, now_s, min_wait_s, max_wait_s)
        self.ended = event

    def saw_drops(self, now_s: float, since_s: float) -> None:
        """The kernel dropped datagrams addressed to this process between ``since_s`` (the poll
        before) and ``now_s``: a sample of the episode may be lost until its writer repairs it
        (``closing``). Drops only after END was taken are of samples sent after it (a camera
        flooding this process), which never hold the bag open."""
        if self.drain is None or since_s < self.drain.ended_s:
            self.dropped_s = now_s

    def may_close(self, now_s: float, steps_recorded: bool) -> bool:
        """After END, at each poll: the episode's step records (where ``steps_recorded``) and a frame
        for each have come, and the drain's rule holds."""
        if self.ended is None:
            return False
        return self.drain.tick(now_s, self.records_arrived(steps_recorded), self.dropped_s)

    def records_arrived(self, steps_recorded: bool) -> bool:
        """After END: a frame for each of its steps, and its step records (where ``steps_recorded``)."""
        came, steps = self.recorded + self.dropped, self.ended.steps
        return came[names.REASONER_FRAMES] >= steps and (
            not steps_recorded or came[names.REASONER_STEPS] >= steps
        )

    def outcome(self, complete: bool, reason: str) -> tuple[bool, str]:
        """(complete, reason) for the episode file: a full bag, or one that missed messages of a
        reliable topic, is incomplete and says what it dropped or missed."""
        if self.full:
            dropped = _counts(self.dropped) or "nothing"
            complete, reason = False, f"{reason}; {self.full}, dropped {dropped}"
        if self.missed:
            complete, reason = False, f"{reason}; never received {_counts(self.missed)}"
        if self.missed_best_effort:
            reason = f"{reason}; never received (best effort) {_counts(self.missed_best_effort)}"
        return complete, reason


def _counts(by_topic: Counter[str]) -> str:
    return ", ".join(f"{n} on {topic}" for topic, n in sorted(by_topic.items()))
