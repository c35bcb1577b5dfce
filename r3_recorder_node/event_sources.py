"""Who sent each episode event, found without holding up anyone else's events.

The recorder takes episode events only from one node, known by the name its publisher has in the
ROS graph. That name comes with ROS's own discovery messages, which can lag the DDS endpoint by
seconds on a loaded machine, so an event whose publisher has no name yet waits for it (up to
``wait_s``). Waiting inside the event callback let a writer that never gets a name (a forged one)
hold every later event, the real reasoner's START included, ``wait_s`` per event; here an event
waits in a queue of its own publisher, behind that publisher's earlier events only, and is looked
at again at each check. The queue is bounded: beyond ``max_pending`` events, the oldest event of the
publisher with the most waiting is dropped, so a flood from one writer cannot push out another's.
ROS-free: times are monotonic seconds, publishers DDS gids.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

#: Events waiting for their publisher's name, all publishers together.
MAX_PENDING = 64
#: Publishers of events whose names are remembered (a gid's name never changes); the one named longest
#: ago is forgotten first. At least ``MAX_PENDING``, so no waiting event's name is forgotten at once.
MAX_KNOWN = 1024


@dataclass(frozen=True)
class Decided:
    """An event and the node name of its publisher ("" when none came within ``wait_s``)."""

    event: object
    info: dict
    sender: str


@dataclass(frozen=True)
class _Waiting:
    event: object
    info: dict
    gid: bytes
    since_s: float


class EventSources:
    """Episode events in the order they came from each publisher, each handed on with its sender.

    ``names()`` returns the publishers' node names by gid as the graph knows them now (without the
    ones it does not name yet); it is asked only while an event's publisher is not yet known.
    """

    def __init__(
        self,
        names: Callable[[], dict[bytes, str]],
        wait_s: float,
        max_pending: int = MAX_PENDING,
        max_known: int = MAX_KNOWN,
    ):
        self._names, self.wait_s, self.max_pending, self.max_known = names, wait_s, max_pending, max_known
        self._known: OrderedDict[bytes, str] = OrderedDict()
        self._waiting: list[_Waiting] = []
        self.dropped = 0  # events pushed out of a full queue

    def add(self, event, info: dict, gid: bytes, now_s: float) -> None:
        self._waiting.append(_Waiting(event, info, gid, now_s))
        if len(self._waiting) > self.max_pending:
            busiest = Counter(w.gid for w in self._waiting).most_common(1)[0][0]
            self._waiting.remove(next(w for w in self._waiting if w.gid == busiest))
            self.dropped += 1

    @property
    def pending(self) -> int:
        return len(self._waiting)

    def decided(self, now_s: float) -> list[Decided]:
        """The events whose sender is settled now, in arrival order; the rest keep waiting, each
        behind its own publisher's earlier ones."""
        unknown = {w.gid for w in self._waiting if w.gid not in self._known}
        if unknown:
            graph = self._names()
            for gid in unknown & graph.keys():
                self._remember(gid, graph[gid])
        out, still, held = [], [], set()
        for w in self._waiting:
            name = self._known.get(w.gid)
            if w.gid in held or (name is None and now_s - w.since_s < self.wait_s):
                held.add(w.gid)
                still.append(w)
            else:
                out.append(Decided(w.event, w.info, name or ""))
        self._waiting = still
        return out

    def _remember(self, gid: bytes, name: str) -> None:
        self._known[gid] = name
        self._known.move_to_end(gid)
        while len(self._known) > self.max_known:
            self._known.popitem(last=False)
