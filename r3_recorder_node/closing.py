"""When an ended episode's bag may close: once the messages sent before its END have stopped arriving.

A fixed wait after END is too long when nothing is on its way (every episode paid it) and too short
when this process was starved: its overdue timer then runs before the messages queued behind it.
The rule here: the episode's own records have all come (``expected``), at least ``min_wait_s`` has
passed, and one whole drain tick went by, on time, in which no message sent before END (by its DDS
source stamp) was written. Messages sent after END (a camera that keeps streaming) never hold the bag
open. The recorder ticks every ``DRAIN_TICK_S`` from END on, so the first tick after END ends a whole
one and the bag of a quiet episode closes one drain tick after END.

Why a drain tick can be short: what the episode's own nodes sent before END is already received when
END is. The reasoner sends END only once the simulator's result (sent after its last state, image and
snapshot) has come back, every writer sends from the publishing thread (rmw_fastrtps' synchronous
mode), and the recorder (UDP only) takes all of its samples from one socket, read by one thread in
the order they came. The tick is for what no such order covers: a publisher outside the episode (a
camera streaming beside it) whose sample was on its way when END came, which on one host takes well
under a millisecond, a few for a large frame's fragments.

What no tick can see: a sample the kernel dropped because this process's socket buffer was full (it
stood still, frozen or starved, while a burst came). A reliable writer sends it again once its next
heartbeat is answered, but a lost tail (the writer's last samples) leaves no gap among the samples
that did come, so nothing says it is missing until that heartbeat. So once the kernel has dropped
datagrams addressed to this process (``udp_drops``), the bag closes no sooner than ``REPAIR_S``
after the drop was seen: three heartbeats of r3's writers (found when a recorder frozen across END
closed its bag 40 ms after it woke, complete, without the last 7 of 30 messages of 200 kB). Drops
seen only after END was taken are of samples sent after END (a camera flooding the recorder) and
hold nothing open (``OpenBag.saw_drops``). A writer outside r3 with Fast DDS's default heartbeat,
3 s, repairs a tail later than this waits.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

#: Seconds between the recorder's takes while an episode records.
TICK_S = 0.02
#: Seconds between its checks while an ended episode's bag drains (the module's docstring says why
#: this suffices; 20 ms before, a quarter of each Language Table episode's overhead through the graph).
DRAIN_TICK_S = 0.005
#: A tick this much later than due means the process was starved: messages may be queued behind it.
LATE_FACTOR = 2.0
#: A window this much shorter than a tick is not a whole one (a timer fires at, not before, its time;
#: the margin is for the clocks read on either side of it).
WHOLE_FACTOR = 0.9
#: The heartbeat period of r3's reliable writers (``heartbeat_period`` in config/fastdds*.xml).
WRITER_HEARTBEAT_S = 0.1
#: After datagrams to this process were dropped, the bag waits this long for their repair.
REPAIR_S = 3 * WRITER_HEARTBEAT_S


@dataclass
class Drain:
    """One ended episode's drain; times are monotonic seconds, stamps DDS source nanoseconds."""

    end_sent_ns: int  # END's source stamp
    ended_s: float  # when END was taken
    min_wait_s: float  # close no earlier than this after END
    max_wait_s: float  # close at the latest this long after END, whatever is missing
    last_tick_s: float = field(init=False)
    last_straggler_s: float = field(init=False)  # when a message sent before END was last written

    def __post_init__(self) -> None:
        self.last_tick_s = self.ended_s
        self.last_straggler_s = -math.inf

    def wrote(self, sent_ns: int | None, now_s: float) -> None:
        """A message went into the bag (``sent_ns`` None: one of the recorder's own)."""
        if sent_ns is not None and sent_ns < self.end_sent_ns:
            self.last_straggler_s = now_s

    def tick(self, now_s: float, expected_arrived: bool, dropped_s: float = -math.inf) -> bool:
        """True when the bag may close now; ``dropped_s``: when the kernel was last seen dropping
        datagrams addressed to this process."""
        previous, self.last_tick_s = self.last_tick_s, now_s
        waited = now_s - self.ended_s
        if waited >= self.max_wait_s:
            return True
        whole_and_on_time = WHOLE_FACTOR * DRAIN_TICK_S <= now_s - previous <= LATE_FACTOR * DRAIN_TICK_S
        quiet = whole_and_on_time and self.last_straggler_s < previous and now_s - dropped_s >= REPAIR_S
        return expected_arrived and quiet and waited >= self.min_wait_s


class KernelDrops:
    """This process's count of dropped datagrams (:func:`udp_drops`), read at each poll."""

    def __init__(self, now_s: float):
        self.count, self.polled_s = udp_drops(), now_s

    def new_since(self, now_s: float) -> float | None:
        """When the poll before this one was, if the kernel has dropped datagrams since (None: it has
        not)."""
        count, since = udp_drops(), self.polled_s
        dropped, self.count, self.polled_s = count > self.count, count, now_s
        return since if dropped else None


def udp_drops() -> int:
    """How many datagrams addressed to this process's UDP sockets the kernel has dropped (their
    receive buffers were full), from /proc: Linux's count per socket. 0 where there is no /proc."""
    sockets = set()
    try:
        for fd in os.listdir("/proc/self/fd"):
            try:
                link = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:  # closed meanwhile
                continue
            if link.startswith("socket:["):
                sockets.add(link[len("socket:[") : -1])
        dropped = 0
        for table in ("/proc/self/net/udp", "/proc/self/net/udp6"):
            with open(table) as rows:
                next(rows)  # the header
                for row in rows:
                    fields = row.split()
                    if fields[9] in sockets:  # its inode
                        dropped += int(fields[-1])
        return dropped
    except OSError:
        return 0
