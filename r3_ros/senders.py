"""Who sent each message, found without holding up anyone else's messages.

Some messages count only from one node, known by the name its publisher has in the ROS graph: the
recorder's episode events (the reasoner's), the reasoner's simulator state (the simulator's). That
name comes with ROS's own discovery messages, which can lag the DDS endpoint by seconds on a loaded
machine, so a message whose publisher has no name yet waits for it (up to ``wait_s``). Waiting
inside the callback let a writer that never gets a name (a forged one) hold every later message,
the real sender's included, ``wait_s`` per message; here a message waits in a queue of its own
publisher, behind that publisher's earlier messages only, and is looked at again at each check. The
queue is bounded: beyond ``max_pending`` messages, the oldest of the publisher with the most waiting
is dropped, so a flood from one writer cannot push out another's. ROS-free: times are monotonic
seconds, publishers DDS gids.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

#: How long a message waits for its publisher's name (a recorder started after the reasoner received a
#: START from '_NODE_NAME_UNKNOWN_': discovery can lag the DDS endpoint by seconds on a loaded machine).
NAME_WAIT_S = 5.0
#: Messages waiting for their publisher's name, all publishers together.
MAX_PENDING = 64
#: Publishers whose names are remembered (a gid's name never changes); the one named longest
#: ago is forgotten first. At least ``MAX_PENDING``, so no waiting message's name is forgotten at once.
MAX_KNOWN = 1024


@dataclass(frozen=True)
class Decided:
    """A message and the node name of its publisher ("" when none came within ``wait_s``)."""

    message: object
    info: dict
    sender: str


@dataclass(frozen=True)
class _Waiting:
    message: object
    info: dict
    gid: bytes
    since_s: float


class Senders:
    """Messages in the order they came from each publisher, each handed on with its sender.

    ``names()`` returns the publishers' node names by gid as the graph knows them now (without the
    ones it does not name yet); it is asked only while a message's publisher is not yet known.
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
        self.dropped = 0  # messages pushed out of a full queue

    def add(self, message, info: dict, gid: bytes, now_s: float) -> None:
        self._waiting.append(_Waiting(message, info, gid, now_s))
        if len(self._waiting) > self.max_pending:
            busiest = Counter(w.gid for w in self._waiting).most_common(1)[0][0]
            self._waiting.remove(next(w for w in self._waiting if w.gid == busiest))
            self.dropped += 1

    @property
    def pending(self) -> int:
        return len(self._waiting)

    def decided(self, now_s: float) -> list[Decided]:
        """The messages whose sender is settled now, in arrival order; the rest keep waiting, each
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
                out.append(Decided(w.message, w.info, name or ""))
        self._waiting = still
        return out

    def _remember(self, gid: bytes, name: str) -> None:
        self._known[gid] = name
        self._known.move_to_end(gid)
        while len(self._known) > self.max_known:
            self._known.popitem(last=False)
