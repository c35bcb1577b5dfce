"""Matching messages by stamp, without ROS: approximate sync of two streams (colour and depth), and
a wait for the message of one exact stamp.

message_filters is not among the pip ROS 2 wheels, and the rule is small: keep the last few items
of each stream, and as soon as a colour and a depth item lie within ``slop`` of each other, emit
the closest such pair and drop everything up to it.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from typing import Any


class PairSync:
    def __init__(self, slop_s: float = 0.02, queue_size: int = 5):
        if slop_s < 0 or queue_size < 1:
            raise ValueError(f"bad sync settings: slop_s={slop_s}, queue_size={queue_size}")
        self.slop_ns = int(slop_s * 1e9)
        self.queues = (deque(maxlen=queue_size), deque(maxlen=queue_size))

    def add(self, stream: int, stamp_ns: int, item: Any) -> tuple[int, Any, Any] | None:
        """Add an item of stream 0 or 1; returns ``(stamp of stream 0, item 0, item 1)`` on a match."""
        self.queues[stream].append((stamp_ns, item))
        best = None
        for i, (t0, _) in enumerate(self.queues[0]):
            for j, (t1, _) in enumerate(self.queues[1]):
                dt = abs(t0 - t1)
                if dt <= self.slop_ns and (best is None or dt < best[0] or (dt == best[0] and t0 > best[1])):
                    best = (dt, t0, i, j)
        if best is None:
            return None
        _, _, i, j = best
        (t0, a), (_, b) = self.queues[0][i], self.queues[1][j]
        for q, n in ((self.queues[0], i), (self.queues[1], j)):
            for _ in range(n + 1):
                q.popleft()
        return t0, a, b


class StampedBuffer:
    """The last ``size`` items by stamp, and a wait for the item of one exact stamp (what belongs to
    a frame but travels on another topic: a simulator's instance mask, the frame's detections)."""

    def __init__(self, size: int = 8):
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self.size = size
        self._items: OrderedDict[int, Any] = OrderedDict()
        self._cv = threading.Condition()

    def put(self, stamp_ns: int, item: Any) -> None:
        with self._cv:
            self._items[stamp_ns] = item
            while len(self._items) > self.size:
                self._items.popitem(last=False)
            self._cv.notify_all()

    def wait(self, stamp_ns: int, timeout_s: float) -> Any | None:
        """The item stamped ``stamp_ns``, waiting up to ``timeout_s`` for it; None if none came."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while stamp_ns not in self._items:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cv.wait(left)
            return self._items[stamp_ns]
