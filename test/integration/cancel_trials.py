"""SAFETY.md's cancel row, measured on a launched Language Table graph: how long after a cancel the
last pusher command arrives, over ``CANCEL_TRIALS`` episodes (test_safety_graph for the low-level
node's graph, test_sim_controller for the simulator running the policy as its own controller)."""

from __future__ import annotations

import functools
import itertools
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from r3.graph import names

#: Control steps an expert episode of a cancel trial takes at least (4 s of simulated pushing; the
#: shortest T episodes take 10, about 0.1 s through the graph, which a slow cancel can miss).
MIN_CONTROL_STEPS = 40
CANCEL_TRIALS = 50


@contextmanager
def launched(profile: str, out: Path, env: dict[str, str]):
    """``r3 launch profile`` in ``env``'s ROS domain; yields this process's node and an R3Commander."""
    import rclpy

    from r3_ros.commander import R3Commander

    proc = subprocess.Popen(
        [sys.executable, "-m", "r3.cli", "launch", profile, "--logs", str(out / "logs")]
        + ["--set", f"r3_recorder_node.output_dir={out / 'bags'}"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    rclpy.init(domain_id=int(env["ROS_DOMAIN_ID"]))
    node = rclpy.create_node("r3_safety_test")
    try:
        commander = R3Commander(node)
        assert commander.wait_until_ready(60), "the graph did not come up"
        yield node, commander
    finally:
        node.destroy_node()
        rclpy.shutdown()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


@functools.cache
def long_episode_seeds() -> tuple[int, ...]:
    """The first T seeds whose expert episode takes at least MIN_CONTROL_STEPS control steps, run
    in process (the graph repeats them exactly, `test_graph`): a cancel sent at an episode's first
    motion then finds it running however slowly the stop travels, so every trial measures a stop."""
    from r3.episode import run_episode
    from r3.reasoning.backends import make_backend

    expert, seeds = make_backend("expert"), []
    for seed in itertools.count():
        episode = run_episode("T", seed, expert, render=False)
        if sum(s.control_steps for s in episode.steps) >= MIN_CONTROL_STEPS:
            seeds.append(seed)
        if len(seeds) == CANCEL_TRIALS:
            return tuple(seeds)


def cancel_stops_motion(node, commander, stop: bool) -> None:
    """``stop``: R3Commander's cancel, a stop on /r3/stop_motion naming the RunTask (which whoever runs
    the instruction honours at once: its instruction is of the RunTask's family), then the action
    cancel; otherwise the action cancel alone, as a plain ROS 2 client sends it (the reasoner's cancel
    callback then stops the instruction with a stop of its own). Each trial's episode is cancelled at
    its first motion; every one must end "canceled", and the 90th percentile of the time to its last
    command is bounded."""
    import rclpy
    from geometry_msgs.msg import Vector3Stamped

    from r3_msgs.action import RunTask
    from r3_ros.commander import TaskStatus

    commands: list[float] = []
    sub = node.create_subscription(
        Vector3Stamped, names.PUSHER_COMMAND, lambda _: commands.append(time.monotonic()), 100
    )
    latencies, reasons = [], []
    try:
        # Discovery first: an episode can be over in 2 s, before a new subscription hears anything.
        deadline = time.monotonic() + 30
        while sub.get_publisher_count() == 0 and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.05)
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.05)
        for trial, seed in enumerate(long_episode_seeds()):
            handle = commander.start_task(
                RunTask.Goal(suite="language_table", task="T", seed=seed, reset_scene=True)
            )
            deadline = time.monotonic() + 30
            while handle.spin_once(0.005) is TaskStatus.PENDING and time.monotonic() < deadline:
                pass
            commands.clear()  # a late command of the previous episode is not this one's motion
            while not commands and time.monotonic() < deadline:
                handle.spin_once(0.005)
            assert commands, f"trial {trial}: no motion within 30 s"
            canceled_at = time.monotonic()
            handle.cancel(stop=stop)
            while handle.spin_once(0.005) is not TaskStatus.DONE and time.monotonic() < canceled_at + 10:
                pass
            settle = time.monotonic() + 0.3  # anything still coming counts
            while time.monotonic() < settle:
                handle.spin_once(0.005)
            latencies.append(max(0.0, commands[-1] - canceled_at))
            reasons.append(handle.result.reason)
    finally:
        node.destroy_subscription(sub)
    ms = np.array(latencies) * 1000
    p50, p90 = np.percentile(ms, 50), np.percentile(ms, 90)
    buckets = np.histogram(ms, bins=[0, 1, 10, 25, 50, 100, 150, 500, np.inf])[0]
    print(
        f"\ncancel ({'stop and cancel' if stop else 'cancel only'}) -> last motion command received over "
        f"{len(ms)} trials: p50 {p50:.1f} ms, p90 {p90:.1f} ms, max {ms.max():.1f} ms; trials in "
        f"[0,1,10,25,50,100,150,500,inf) ms: {buckets.tolist()}"
    )
    assert set(reasons) == {"canceled"}, [(trial, r) for trial, r in enumerate(reasons) if r != "canceled"]
    # 50 trials estimate the 90th percentile (5 trials above it); their maximum, which a "p99" of 50
    # is, measures only the slowest moment of a loaded machine, so it is reported, not bounded.
    if stop:
        # SAFETY.md's target is 100 ms (one topic hop); a stop path that is lost leaves the action
        # cancel to stop the motion (80-130 ms and more), which shows in the 90th percentile.
        assert p90 < 100.0
    else:
        # One action-cancel hop through rclpy (client -> reasoner) before the reasoner's stop: the
        # target is not met reliably without the stop; this bound catches a cancel that does not stop
        # the instruction (seconds).
        assert p90 < 500.0
