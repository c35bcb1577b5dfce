"""Service calls that survive a dropped response, and the server side that makes resending safe.

rmw_fastrtps drops a service response when the client's response reader has not matched at the
server within the writer's ``max_blocking_time`` (100 ms; "failed to send response (timeout):
client will not receive response"). Each pair of endpoints is matched on its own, so on a loaded
machine a request can arrive while its answer has nowhere to go, and the caller waits out its whole
timeout for nothing. The client therefore sends the request again every :data:`RESEND_S` until one
copy is answered (:func:`call_resending`). A ResetScene that arrives again for the episode just
reset is answered from :class:`ResetRecord`, not carried out twice (:meth:`ResetRecord.answer`, how
the simulator nodes serve ResetScene).

Services carry no caller, so a simulator cannot tell the reasoner's ResetScene from anyone else's;
what it can know is whether a running episode owns its scene. :class:`ResetRecord` follows the
episode events (``r3_ros.episode_topics.scene_resets``): while the reasoner whose episode last reset
the scene (or any reasoner: one restarted) runs an episode, whether it reset the scene or goes on
with it, every reset but that episode's own first one is refused, with the episode named, until its
END or that reasoner's publisher leaving the graph. Between episodes any client may reset the scene,
except for an episode that has ended. A simulator frozen (or starved) while a reset waited for it
wakes after the reasoner may have given that episode up, often before the END it sent meanwhile has
come: a reset that comes within :data:`RESEND_S` of such a freeze is refused as stale (the episode
of a reasoner still waiting for it ends with that error: the simulator was frozen).
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from r3.data.bags import check_bag_name
from r3.graph import names
from r3.safety.freeze import FreezeWatch
from r3.safety.goals import canonical_task, check_seed
from r3.suites import DEFAULT_SUITE
from r3_ros.executor import at_once

#: An unanswered request is sent again after this long.
RESEND_S = 1.0
#: How often a wait for an answer asks its ``keep_waiting()`` meanwhile; an answer ends it at once.
CHECK_S = 0.01
#: A reset that would move a running episode's scene waits at most this long for the START of its own
#: episode (the reasoner sends START, then ResetScene, on two DDS writers that need not arrive in
#: order), and at most once per :data:`CATCH_UP_EVERY_S`, so a flood of resets cannot stall the node.
CATCH_UP_S = 0.25
CATCH_UP_EVERY_S = 1.0
#: Started episodes remembered until their END (a reasoner killed mid-episode never sends one).
MAX_OPEN_EPISODES = 64
#: Ended episodes remembered, so that a reset still waiting for one is refused.
MAX_ENDED_EPISODES = 64


class Completion:
    """Wakes a waiting thread as soon as one of the futures it watches is done (in the thread that
    takes the answer: ``r3_ros.executor.at_once``). A wait that slept 10 ms between looks at
    ``future.done()`` saw a sub-millisecond answer 10 ms late: a service round trip between two
    nodes took 10.3 ms (median) that way and 0.7 ms with this."""

    def __init__(self, *futures) -> None:
        self._done = threading.Event()
        for future in futures:
            self.watch(future)

    def watch(self, future):
        future.add_done_callback(self._wake)
        return future

    @at_once
    def _wake(self, _future) -> None:
        self._done.set()

    def wait(self) -> None:
        """Until a watched future is done (returns at once from then on) or :data:`CHECK_S` passed."""
        self._done.wait(CHECK_S)


class ServiceTimeout(Exception):
    """No copy of the request was answered in time."""


def call_resending(client, request, timeout_s: float, keep_waiting: Callable[[], bool] = lambda: True):
    """The first answer to ``request`` within ``timeout_s``, sent again every :data:`RESEND_S`
    meanwhile; None once ``keep_waiting()`` says no (it may also raise to end the wait)."""
    completion = Completion()
    futures = [completion.watch(client.call_async(request))]
    start = time.monotonic()
    try:
        while True:
            answered = next((f for f in futures if f.done()), None)
            if answered is not None:
                return answered.result()
            if not keep_waiting():
                return None
            waited = time.monotonic() - start
            if waited > timeout_s:
                raise ServiceTimeout(f"{client.srv_name} did not answer within {timeout_s:.1f} s")
            if waited >= RESEND_S * len(futures):
                futures.append(completion.watch(client.call_async(request)))
            completion.wait()
    finally:
        for f in futures:
            if not f.done():
                client.remove_pending_request(f)


class ResetRecord:
    """The last ResetScene carried out (a repeat of it for the same episode gets the same answer) and
    the episodes started and not yet ended, whose scene no other reset may move."""

    def __init__(
        self,
        take_events: Callable[[], None] = lambda: None,
        publishers: Callable[[], dict[bytes, str]] | None = None,
        freezes: FreezeWatch | None = None,
    ) -> None:
        """``take_events()`` delivers the episode events received so far to :meth:`on_event`;
        ``publishers()`` returns the node name of each publisher of episode events in the graph now,
        by gid (None: publishers never leave and have no names); ``freezes`` watches the serving
        process for freezes (None: it never freezes)."""
        self._freezes = freezes
        self._key: tuple | None = None
        self._answer: tuple[str, str] = ("", "")
        self._take_events, self._publishers = take_events, publishers
        self._started: OrderedDict[str, bytes] = OrderedDict()  # START's publisher, in order, until END
        # The latest episodes ENDed by the publishers of their STARTs, whose resets are refused.
        self._ended: OrderedDict[str, None] = OrderedDict()
        self._caught_up_s = -CATCH_UP_EVERY_S
        self._scene_publisher: bytes | None = None  # the publisher of the START of the scene's episode

    def on_event(self, episode_id: str, start: bool, publisher: bytes) -> None:
        """An episode event (START when ``start``, else END) from the publisher with gid ``publisher``;
        an END counts only from the publisher of its START (anyone may publish one). A reasoner runs
        one episode at a time, so its START also ends the one it started before."""
        if not start:
            if self._started.get(episode_id) == publisher:
                del self._started[episode_id]
                self._ended[episode_id] = None
                while len(self._ended) > MAX_ENDED_EPISODES:
                    self._ended.popitem(last=False)
            return
        for earlier in [e for e, p in self._started.items() if p == publisher]:
            del self._started[earlier]
        self._started[episode_id] = publisher
        while len(self._started) > MAX_OPEN_EPISODES:
            self._started.popitem(last=False)
        if self._key and self._key[0] == episode_id and self._scene_publisher is None:
            self._scene_publisher = publisher  # its reset came before its START

    def owner(self, request) -> str:
        """The running episode whose scene ``request`` would move ("" = none). The scene belongs to the
        latest episode started, and not ended, by the publisher whose episode last reset it or by any
        ``names.EPISODE_SOURCE`` (a reasoner restarted), while that publisher is in the graph: an
        episode that goes on with the scene (``reset_scene=false``) owns it too. That episode's own
        first reset is not refused; a START from anyone else makes no owner."""
        named = self._publishers() if self._publishers is not None else None
        running = [
            (episode, publisher)
            for episode, publisher in self._started.items()
            if publisher == self._scene_publisher or names.is_episode_source((named or {}).get(publisher, ""))
        ]
        if not running:
            return ""
        for superseded, _ in running[:-1]:  # a later START of a reasoner ends them (one restarted)
            del self._started[superseded]
        latest, publisher = running[-1]
        if named is not None and publisher not in named:
            return ""  # its reasoner is gone without an END
        if request.episode_id == latest and (self._key[0] if self._key else "") != latest:
            return ""
        return latest

    def _owner_after_catching_up(self, request) -> str:
        """:meth:`owner`, once the events on their way have come: the START of the request's own
        episode (sent before it) is waited for, bounded, when a reset would be refused without it."""
        self._take_events()
        owner = self.owner(request)
        now = time.monotonic()
        if not owner or now - self._caught_up_s < CATCH_UP_EVERY_S:
            return owner
        self._caught_up_s, deadline = now, now + CATCH_UP_S
        while owner and request.episode_id not in self._started and time.monotonic() < deadline:
            time.sleep(CHECK_S / 2)
            self._take_events()
            owner = self.owner(request)
        return owner

    @staticmethod
    def key(request) -> tuple | None:
        return (request.episode_id, request.suite, request.task, request.seed) if request.episode_id else None

    def repeat(self, request, response):
        """``response`` filled in as the first time, when ``request`` repeats the last reset; else None."""
        if self._key is None or self.key(request) != self._key:
            return None
        response.ok, (response.goal, response.task_instance_json) = True, self._answer
        return response

    def remember(self, request, response) -> None:
        self._key, self._answer = self.key(request), (response.goal, response.task_instance_json)
        self._scene_publisher = self._started.get(request.episode_id)

    def answer(self, request, response, suite: str, reset: Callable[[str, int], object]) -> str | None:
        """Serve ResetScene ``request`` on a node simulating ``suite``: ``reset(task, seed)`` draws the
        scene of the canonical task from the checked seed and returns its task instance. The task when
        the scene was reset now; None when the request was refused or repeats the last reset (answered
        as the first time, not carried out twice): ``response`` says which."""
        if (request.suite or DEFAULT_SUITE) != suite:
            response.ok = False
            response.reason = f"suite {request.suite[:80]!r} is not simulated by this node"
            return None
        if self.repeat(request, response):
            return None  # the caller resent it: its first answer was lost
        if self._freezes is not None and (
            frozen_s := self._freezes.frozen_since(time.monotonic() - RESEND_S)
        ):
            response.ok = False
            response.reason = (
                f"this simulator was frozen or starved for {frozen_s:.1f} s just before; a reset that "
                "waited through it is stale (its episode may have ended), send it again"
            )
            return None
        if owner := self._owner_after_catching_up(request):
            response.ok = False
            response.reason = (
                f"episode {owner!r} is running on this scene; a reset would move it under that "
                "episode (resets are served between episodes)"
            )
            return None
        if request.episode_id in self._ended:
            response.ok = False
            response.reason = (
                f"episode {request.episode_id[:80]!r} has ended; its reset would move the scene after it"
            )
            return None
        try:
            if request.episode_id:  # stamped on every state and snapshot, and a bag's name elsewhere
                check_bag_name(request.episode_id)
            task = canonical_task(suite, request.task)
            instance = reset(task, check_seed(request.seed))
        except (KeyError, ValueError, RuntimeError) as exc:
            response.ok, response.reason = False, f"cannot reset task {request.task[:80]!r}: {exc}"
            return None
        response.ok, response.goal = True, instance.goal
        response.task_instance_json = json.dumps(instance.to_dict())
        self.remember(request, response)
        return task
