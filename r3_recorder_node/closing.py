"""When an ended episode's bag may close: once the messages sent before its END have stopped arriving.

A fixed wait after END is too long when nothing is on its way (every episode paid it) and too short
when this process was starved: its overdue timer then runs before the messages queued behind it.
The rule here: the episode's own records have all come (``expected``), at least ``min_wait_s`` has
passed, and one whole tick went by, on time, in which no message sent before END (by its DDS source
stamp) was written. Messages sent after END (a camera that keeps streaming) never hold the bag open.
The recorder restarts its tick when END comes, so the first tick after END ends a whole one and the
bag of a quiet episode closes one tick after END (before, the first tick came anywhere within a tick
of END and only the second could close: 20 to 40 ms, now 20).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: Seconds between the recorder's checks while a bag drains.
TICK_S = 0.02
#: A tick this much later than due means the process was starved: messages may be queued behind it.
LATE_FACTOR = 2.0
#: A window this much shorter than a tick is not a whole one (a timer fires at, not before, its time;
#: the margin is for the clocks read on either side of it).
WHOLE_FACTOR = 0.9


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

    def tick(self, now_s: float, expected_arrived: bool) -> bool:
        """True when the bag may close now."""
        previous, self.last_tick_s = self.last_tick_s, now_s
        waited = now_s - self.ended_s
        if waited >= self.max_wait_s:
            return True
        whole_and_on_time = WHOLE_FACTOR * TICK_S <= now_s - previous <= LATE_FACTOR * TICK_S
        quiet = whole_and_on_time and self.last_straggler_s < previous
        return expected_arrived and quiet and waited >= self.min_wait_s
