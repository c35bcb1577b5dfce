"""Noticing that this process was frozen (SIGSTOP, a stopped VM, hours of starvation).

A driver that was frozen mid-goal wakes up with a goal its client may have given up on; acting on it
would replay a stale command. :class:`FreezeWatch` runs a thread that wakes every ``period_s`` and
remembers when a wake-up came more than ``deadline_s`` late. :meth:`FreezeWatch.frozen_since` then
tells a control loop, before each step, whether the process froze (or is just waking from a freeze
the thread has not seen yet) since a given moment, without racing the thread; :class:`GoalStop` is
that check, with the goal's others, as the simulated arm asks it before every control step.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class FreezeWatch:
    def __init__(self, deadline_s: float, period_s: float = 0.05):
        if not 0 < period_s < deadline_s:
            raise ValueError(f"need 0 < period_s < deadline_s, got {period_s} and {deadline_s}")
        self.deadline_s, self.period_s = deadline_s, period_s
        self._last_wake = time.monotonic()
        self._last_freeze_end, self._last_freeze_s = float("-inf"), 0.0
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="freeze-watch")
        self._thread.start()

    def _run(self) -> None:
        while not self._closed.wait(self.period_s):
            now = time.monotonic()
            gap = now - self._last_wake
            if gap > self.deadline_s:
                self._last_freeze_end, self._last_freeze_s = now, gap
            self._last_wake = now

    def close(self) -> None:
        """Stop the thread (a node's shutdown; a test's end): it would otherwise outlive its owner."""
        self._closed.set()
        self._thread.join()

    def frozen_since(self, t: float) -> float:
        """Seconds the process was frozen after monotonic time ``t`` (0.0 when it was not): a freeze
        the thread saw end after ``t``, or one still unseen because the thread has not run yet."""
        unseen = time.monotonic() - self._last_wake
        if unseen > self.deadline_s:
            return unseen
        return self._last_freeze_s if self._last_freeze_end > t else 0.0


def stale_goal(who: str, frozen_s: float, deadline_s: float) -> str:
    """The error that ends a goal ``who`` ran while it was frozen: the node that stood still is named,
    not the peer it could not hear meanwhile."""
    return (
        f"error: {who} was frozen or starved for {frozen_s:.1f} s "
        f"(deadline {deadline_s} s); its goal is stale, motion stopped"
    )


class GoalStop:
    """Why one goal's motion stopped; ``reason`` is None while it may move. Called before every control
    step (a ``should_stop``), it asks, in order, whether this process was frozen or starved for longer
    than ``freezes``' deadline since the goal started (by the time it runs again its client may have
    given up on the goal, so the goal is stale: MoveIt Servo's incoming-command timeout, applied to the
    goal being executed), then ``other()`` (a reason, or None). The first reason sticks: a client heard
    again does not restart the arm."""

    def __init__(self, freezes: FreezeWatch, who: str, other: Callable[[], str | None]):
        self.reason: str | None = None
        self._freezes, self._who, self._other = freezes, who, other
        self._started = time.monotonic()

    def __call__(self) -> bool:
        if self.reason is None and (frozen_s := self._freezes.frozen_since(self._started)):
            self.reason = stale_goal(self._who, frozen_s, self._freezes.deadline_s)
        if self.reason is None:
            self.reason = self._other()
        return self.reason is not None
