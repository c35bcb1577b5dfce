"""A graph started by `r3 launch`, and a client that sends it hostile goals, calls and messages
over DDS and watches the actuator: the harness of the hostile-input tests."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from r3.data.bags import METADATA_FILE, read_episode_info, read_messages
from r3.graph import names
from r3.sim.language_table.scene import CONTROL_DT
from r3.workers import die_with_parent

R3 = [sys.executable, "-m", "r3.cli"]


def own_domain() -> int:
    """A ROS domain for one graph and its client, held by this process to its end (the client's
    participant outlives its shutdown, and killed members' participants linger for their lease:
    the next graph must not meet either)."""
    from ros_domains import claim_for_this_process

    return claim_for_this_process()


class Graph:
    """`r3 launch PROFILE` in ROS domain ``domain``, with its bags under ``root / "bags"``; ``pids``
    by member name."""

    def __init__(self, profile: str, root: Path, domain: int, sets: tuple[str, ...] = ()):
        self.root, self.bags, self.domain = root, root / "bags", domain
        args = [
            "launch",
            profile,
            "--logs",
            str(root / "logs"),
            "--set",
            f"r3_recorder_node.output_dir={self.bags}",
        ]
        for s in sets:
            args += ["--set", s]
        self.proc = subprocess.Popen(
            R3 + args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, ROS_DOMAIN_ID=str(domain)),
            # A caller killed on its timeout must not leave its graph serving in the domain.
            preexec_fn=die_with_parent,  # noqa: PLW1509
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=lambda: [self.lines.append(line) for line in self.proc.stderr])
        self._reader.start()

    @property
    def pids(self) -> dict[str, int]:
        return {
            m.group(1): int(m.group(2))
            for line in list(self.lines)
            if (m := re.search(r"started (\S+) \(pid (\d+)\)", line))
        }

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._reader.join(timeout=5)

    def bag_dirs(self) -> set[Path]:
        return {p for p in self.bags.iterdir() if p.is_dir()} if self.bags.is_dir() else set()


def tree(root: Path) -> set[Path]:
    """Every path under ``root`` (to prove nothing was written outside the bag folder)."""
    return set(root.rglob("*"))


def call_until_answered(rclpy, node, client, request, timeout_s: float = 60.0):
    """The first answer to ``request``, sent again every ``RESEND_S`` by r3_ros's ``call_resending``
    (only for idempotent calls): seeing the server (wait_for_service) does not mean the server has
    matched this client yet, and a request sent before it has is lost (CI, loaded: set_query
    unanswered for 60 s)."""
    from r3_ros.services import ServiceTimeout, call_resending

    assert client.wait_for_service(timeout_sec=timeout_s), f"{client.srv_name} is not offered"

    def spin() -> bool:  # the test's node has no executor of its own: this thread spins it
        rclpy.spin_once(node, timeout_sec=0.01)
        return True

    try:
        return call_resending(client, request, timeout_s, keep_waiting=spin)
    except ServiceTimeout as err:
        raise AssertionError(str(err)) from None


class Client:
    """An rclpy node in ROS domain ``domain`` that sends goals and records every joint state the
    actuator reports."""

    def __init__(self, name: str, domain: int):
        import rclpy
        from sensor_msgs.msg import JointState

        from r3_ros.commander import R3Commander

        self.rclpy = rclpy
        rclpy.init(domain_id=domain)
        self.node = rclpy.create_node(name)
        self.commander = R3Commander(self.node)
        # (received, positions, stamp ns, sent): received and sent on the monotonic clock
        self.joints: list[tuple[float, tuple[float, ...], int, float]] = []
        self.joint_states = self.node.create_subscription(
            JointState, names.JOINT_STATES, self._joint_state, 100
        )

    def _joint_state(self, msg, info) -> None:
        """Keep a joint state with when it was received and when its publisher sent it (DDS's source
        timestamp, moved onto the monotonic clock): under load a state can reach this client seconds
        after it was sent."""
        received, wall_ns = time.monotonic(), time.time_ns()
        sent = received - (wall_ns - info["source_timestamp"]) / 1e9
        stamp = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
        self.joints.append((received, tuple(msg.position), stamp, sent))

    def wait_for_heartbeat(self, node: str, timeout_s: float, ready=lambda state: True) -> bool:
        """``node`` (fully qualified) announces a state that is ``ready`` within ``timeout_s``."""
        from r3_msgs.msg import Heartbeat
        from r3_ros.qos import HEARTBEAT

        states: list[str] = []
        sub = self.node.create_subscription(
            Heartbeat, names.HEARTBEAT, lambda m: m.node == node and states.append(m.state), HEARTBEAT
        )
        deadline = time.monotonic() + timeout_s
        try:
            while not any(ready(s) for s in states) and time.monotonic() < deadline:
                self.rclpy.spin_once(self.node, timeout_sec=0.01)
            return any(ready(s) for s in states)
        finally:
            self.node.destroy_subscription(sub)

    def wait_until_ready(self, timeout_s: float) -> bool:
        """The graph's RunTask server is up and the actuator's joint states reach this client (a
        test that acts "after three moves" must see the moves of a fast episode from its start)."""
        deadline = time.monotonic() + timeout_s
        if not self.commander.wait_until_ready(timeout_s):
            return False
        while self.joint_states.get_publisher_count() == 0 and time.monotonic() < deadline:
            self.rclpy.spin_once(self.node, timeout_sec=0.01)
        return self.joint_states.get_publisher_count() > 0

    def close(self) -> None:
        self.node.destroy_node()
        self.rclpy.try_shutdown()

    def spin(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.rclpy.spin_once(self.node, timeout_sec=0.01)

    def call(self, client, request, timeout_s: float = 30.0):
        """``request``'s answer (an idempotent call: it may be sent more than once)."""
        return call_until_answered(self.rclpy, self.node, client, request, timeout_s)

    def action(self, client, goal, timeout_s: float = 60.0):
        """Send ``goal`` and wait for its result (the result message, or None when rejected)."""
        assert client.wait_for_server(timeout_sec=timeout_s), "the action server is not offered"
        sending = client.send_goal_async(goal)
        end = time.monotonic() + timeout_s
        while not sending.done() and time.monotonic() < end:
            self.rclpy.spin_once(self.node, timeout_sec=0.01)
        handle = sending.result()
        if not handle.accepted:
            return None
        done = handle.get_result_async()
        while not done.done() and time.monotonic() < end:
            self.rclpy.spin_once(self.node, timeout_sec=0.01)
        assert done.done(), f"no result within {timeout_s} s"
        return done.result().result

    def run_task(self, goal, timeout_s: float = 120.0, during=None):
        """RunTask ``goal`` to its end: (result, monotonic time of the result). ``during(handle)`` is
        called on every spin while the episode runs; ``last_task`` keeps the handle."""
        from r3_ros.commander import TaskStatus

        handle = self.last_task = self.commander.start_task(goal)
        end = time.monotonic() + timeout_s
        while handle.spin_once(0.01) not in (TaskStatus.DONE, TaskStatus.REJECTED):
            assert time.monotonic() < end, f"no RunTask result within {timeout_s} s"
            if during is not None:
                during(handle)
        return handle.result, time.monotonic()

    def steps_after(self, t: float, step_ns: int) -> tuple[int, int]:
        """Control steps reported after ``t`` by their joint-state stamps (sim time): (steps that were
        in flight at the freeze and completed after it, at most one; steps begun after it)."""
        before = [st for at, _, st, _ in self.joints if at <= t]
        last = max(before) if before else -1
        new = {st for at, _, st, _ in self.joints if at > t and st > last}
        in_flight = {last + step_ns} & new
        return len(in_flight), len(new - in_flight)

    def sent_after(self, t: float) -> list[tuple[float, ...]]:
        """Joint states sent after ``t`` (judged by when they were sent: a late state of an earlier
        episode, received after ``t``, does not count)."""
        return [p for _, p, _, sent in self.joints if sent > t]

    def moved_after(self, t: float) -> list[tuple[float, ...]]:
        """Joint states sent after ``t`` that differ from the last one sent before it."""
        before = [p for _, p, _, sent in self.joints if sent <= t]
        last = before[-1] if before else None
        return [p for p in self.sent_after(t) if p != last]


def freeze_the_simulator_mid_episode(graph: Graph, client: Client, goal) -> None:
    """SIGSTOP the simulator mid-instruction of ``goal``'s episode, until 2 s after its error result
    (a command is sent to it meanwhile); then no joint state it sends after the result arrived may
    show motion (judged by the states' DDS source stamps) but the report of the one control step whose
    physics ended before the freeze: a SIGSTOP between a step's last check and its publish (a few
    lines) sends that step's state only at the wake-up. A step frozen in its physics is undone, not
    finished (``test_command_refusals.py``, deterministically); no later step may show."""
    from geometry_msgs.msg import Vector3Stamped

    sim = graph.pids["r3_sim_node"]
    pub = client.node.create_publisher(Vector3Stamped, names.PUSHER_COMMAND, 10)
    frozen = []

    def freeze(_handle) -> None:
        if not frozen and len(client.moved_after(started)) >= 3:  # mid-instruction
            os.kill(sim, signal.SIGSTOP)
            frozen.append(time.monotonic())

    started = time.monotonic()
    try:
        result, ended = client.run_task(goal, during=freeze, timeout_s=60)
        assert frozen, "the episode ended before the simulator was frozen"
        # The low-level node's state timeout (2 s), or the reasoner's heartbeat timeout (5 s) when the
        # freeze came between two instructions or the simulator serves them: either names it.
        assert result.reason.startswith("error: ") and (
            "simulator" in result.reason or "r3_sim_node" in result.reason
        ), result.reason
        late = Vector3Stamped()
        late.vector.y = 0.01
        pub.publish(late)  # a command after the error, queued at the frozen simulator
        client.spin(max(0.0, ended + 2.0 - time.monotonic()))  # the late command is 2 s old at the wake-up
    finally:
        os.kill(sim, signal.SIGCONT)
    client.spin(2.0)
    client.node.destroy_publisher(pub)
    moved = client.moved_after(ended)
    before = [st for _, _, st, sent in client.joints if sent <= frozen[0]]
    finished = {max(before) + round(CONTROL_DT * 1e9)} if before else set()
    after = [(st, p) for _, p, st, sent in client.joints if sent > ended and p in moved]
    print(
        f"\nsimulator frozen {time.monotonic() - 2.0 - frozen[0]:.1f} s mid-episode: episode error after "
        f"{ended - frozen[0]:.2f} s; {len(moved)} joint states sent after it show motion"
    )
    assert len(after) <= 1 and {st for st, _ in after} <= finished, (
        f"joint states (stamp ns, position) sent after the error result show motion: {after}; "
        f"the last stamp sent before the freeze: {max(before, default=None)}"
    )


def closed(bag: Path, timeout_s: float = 10.0) -> Path:
    """``bag`` once the recorder has closed it (it closes a bag shortly after the episode's END)."""
    deadline = time.monotonic() + timeout_s
    # The sidecar gets the episode's reason last of all, after metadata.yaml.
    while not ((bag / METADATA_FILE).is_file() and read_episode_info(bag).reason):
        assert time.monotonic() < deadline, f"{bag} was not closed within {timeout_s} s"
        time.sleep(0.05)
    return bag


def bag_topics(bag: Path) -> dict[str, list]:
    closed(bag)
    by_topic: dict[str, list] = {}
    for topic, _, _, msg in read_messages(bag):
        by_topic.setdefault(topic, []).append(msg)
    return by_topic


def missing_decision_frames(bag: Path) -> tuple[int, int]:
    """(decision frames the bag's ReasonerSteps name, how many of them the bag lacks)."""
    topics = bag_topics(bag)
    frames = {(f.header.stamp.sec, f.header.stamp.nanosec) for f in topics.get(names.REASONER_FRAMES, [])}
    wanted = [(s.sec, s.nanosec) for step in topics.get(names.REASONER_STEPS, []) for s in step.image_stamps]
    return len(wanted), sum(1 for w in wanted if w not in frames)
