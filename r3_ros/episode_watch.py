"""An episode's waits, always bounded: a dead node ends the episode with an error naming it, never a hang.

The low-level and simulator nodes, the perception node the low-level policy sees through (if any),
and the recorder once it records the episode, are watched through their heartbeats
(``r3_ros/heartbeat.py``) and through the exits a process manager reports (``MemberExits``, faster
than any heartbeat); the episode as a whole has a time budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from rclpy.node import Node

from r3.graph.supervisor import MemberExits
from r3_ros.heartbeat import RUN_CLIENT_TIMEOUT_S, HeartbeatMonitor, HeartbeatPublisher
from r3_ros.recording import RecorderHandshake
from r3_ros.services import Completion
from r3_ros.shutdown import shutting_down


class EpisodeError(RuntimeError):
    """Ends an episode with ``error: <message>``; the message names the node or part at fault."""


class EpisodeWatch:
    """The nodes an episode depends on, and its time budget. ``param`` is the node's live parameter
    mapping (``lowlevel_node``, ``sim_node``, ``perception_node``, ``heartbeat_timeout_s``,
    ``max_episode_s``, ``startup_timeout_s``), read at each use."""

    def __init__(self, node: Node, param: Mapping, heartbeat: HeartbeatPublisher | None = None):
        self.node, self.node_name, self.param = node, node.get_fully_qualified_name(), param
        self.heartbeat = heartbeat  # this node's own: how long it stood still
        self.monitor = HeartbeatMonitor(node)
        self.exits = MemberExits.from_environment()  # members a supervisor saw exit
        self.deadline = float("inf")
        self.recorder = ""  # watched too while it records the episode

    def start(self) -> None:
        """A new episode: its time budget runs from now, and no recorder is watched yet."""
        self.deadline = time.monotonic() + self.param["max_episode_s"]
        self.recorder = ""
        if self.heartbeat is not None:
            self.heartbeat.mark_stillness()

    def check_alive(self) -> None:
        """Raise when a watched node has gone silent or the episode has run out of time."""
        timeout = self.param["heartbeat_timeout_s"]
        optional = (self.param["perception_node"], self.recorder)  # '' = none
        watched = [self.param["lowlevel_node"], self.param["sim_node"], *filter(None, optional)]
        if shutting_down(self.node):  # a SIGINT: this node's own beats have stopped, so no verdict would come
            raise EpisodeError(f"{self.node_name} is shutting down")
        if self.heartbeat is not None and (still_s := self.heartbeat.stood_still_s()) > RUN_CLIENT_TIMEOUT_S:
            # Its client has counted it dead and stopped the task, and the low-level watchdog the
            # instruction; going on would move the robot for an episode reported failed.
            raise EpisodeError(
                f"{self.node_name} stood still for {still_s:.1f} s (frozen or starved); its clients "
                f"count it dead after {RUN_CLIENT_TIMEOUT_S:.0f} s, so the episode ends here"
            )
        for member_exit in self.exits.read():  # the process manager's word: faster than any heartbeat
            raise EpisodeError(member_exit)
        for node in self.monitor.dead(watched, timeout):
            raise EpisodeError(f"{node} stopped responding (no heartbeat for {timeout:.1f} s)")
        if time.monotonic() > self.deadline:
            raise EpisodeError(f"the episode ran past its time budget of {self.param['max_episode_s']:.0f} s")

    def gone(self, node: str) -> bool:
        """``node`` (fully qualified) exited, as the process manager reports, or fell silent."""
        name = node.rsplit("/", 1)[-1]
        if any(line.split(" ", 1)[0] == name for line in self.exits.read()):
            return True
        return bool(self.monitor.dead([node], self.param["heartbeat_timeout_s"]))

    def waiting(self, stopping: bool) -> bool:
        """False once the goal is ``stopping``; raises when a watched node is gone."""
        if stopping:
            return False
        self.check_alive()
        return True

    def wait_until_graph_up(self, recording: RecorderHandshake) -> None:
        """Wait until :meth:`graph_not_up` says nothing, or end the goal with what it says.

        Bounded by ``startup_timeout_s``: on a cold machine the first start of the graph's processes
        (imports, MuJoCo model compilation) can take longer than any single call should.
        """
        timeout = self.param["startup_timeout_s"]
        deadline = time.monotonic() + timeout
        while why := self.graph_not_up(recording):
            if time.monotonic() > deadline:
                raise EpisodeError(f"after {timeout:.1f} s, {why}")
            for member_exit in self.exits.read():
                raise EpisodeError(member_exit)
            time.sleep(0.02)

    def graph_not_up(self, recording: RecorderHandshake) -> str:
        """Why no episode may start yet ("" = it may): the low-level node must be up and have seen the
        simulator before it gets an instruction, the perception node it sees through (if any) must
        have been heard (one never heard is not watched by :meth:`check_alive`, and the policy then
        waited ``perception_timeout_s`` for it, holding the simulator), and the graph's recorder (if
        it has one) must be up before START, which opens the bag. The perception node goes before the
        recorder: the recorder waits for its topic too, and would be named instead."""
        node, perception = self.param["lowlevel_node"], self.param["perception_node"]
        state = self.monitor.state(node)
        if state is None:
            return f"{node} is not running"
        if state == "waiting_for_state":
            return f"{node} has no simulator state"
        if perception and self.monitor.state(perception) is None:
            return f"{perception} is not running (perception_node names it: the policy sees through it)"
        if why := recording.not_up():
            return f"{why} (recorder_node names it; set it to '' for a graph without a recorder)"
        return ""


def wait_future(
    future,
    what: str,
    keep_waiting: Callable[[], bool],
    timeout_s: float | None = None,
    since: float | None = None,
    instead: Callable[[], object] = lambda: None,
):
    """``future``'s result, within ``timeout_s`` of ``since`` (default now); None once ``keep_waiting()``
    says no (it may also raise to end the wait, as :meth:`EpisodeWatch.waiting` does). ``instead()``,
    asked between looks, may give the answer another way (not None: a lost answer found elsewhere)."""
    deadline = None if timeout_s is None else (time.monotonic() if since is None else since) + timeout_s
    completion = Completion(future)
    while not future.done():
        if (found := instead()) is not None:
            return found
        if not keep_waiting():
            return None
        if deadline is not None and time.monotonic() > deadline:
            raise EpisodeError(f"{what} did not answer within {timeout_s:.1f} s")
        completion.wait()
    return future.result()
