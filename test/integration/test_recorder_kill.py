"""SIGKILL the real recorder node mid-episode: its bag repairs to a readable, incomplete bag.

What the recorder had received when it died cannot be known from outside, so the check is the
part that can: every decision step `r3 run` had seen (printed) well before the kill is in the
repaired bag, in order, and the bag opens with `rosbags`.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from rosbags.rosbag2 import Reader

from r3.data.bags import INCOMPLETE, STREAM_FILE, read_episode_info, read_messages, repair_bag
from r3.graph import names

pytestmark = pytest.mark.ros
R3 = [sys.executable, "-m", "r3.cli"]


def _collect(proc: subprocess.Popen, lines: list[tuple[float, str]]) -> threading.Thread:
    thread = threading.Thread(target=lambda: [lines.append((time.monotonic(), line)) for line in proc.stdout])
    thread.start()
    return thread


def test_killed_recorder_leaves_a_repairable_bag(tmp_path, private_ros_env):
    env = private_ros_env()
    launch = subprocess.Popen(
        R3
        + [
            "launch",
            "sim_language_table",
            "--logs",
            str(tmp_path / "logs"),
            "--set",
            f"r3_recorder_node.output_dir={tmp_path / 'bags'}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    run = subprocess.Popen(
        R3
        + [
            "run",
            "--use-running-graph",
            "--task",
            "T",
            "--seed",
            "5",
            "--out",
            str(tmp_path),
            "--video",
            "none",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    launch_lines: list[tuple[float, str]] = []
    run_lines: list[tuple[float, str]] = []
    readers = [_collect(launch, launch_lines), _collect(run, run_lines)]
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(" step 1 " in line for _, line in run_lines):
            time.sleep(0.05)
        pids = {
            m.group(1): int(m.group(2))
            for _, line in launch_lines
            if (m := re.search(r"started (r3_\w+) \(pid (\d+)\)", line))
        }
        # Freeze the low-level node, so the episode cannot end (and its bag close) before the kill
        # however fast the graph runs; then give the recorder ample time for the steps r3 run has
        # printed (on 2 loaded cores a process can be delayed by a second or more).
        os.kill(pids["r3_lowlevel_node"], signal.SIGSTOP)
        time.sleep(2.0)
        seen = [int(m.group(1)) for _, line in run_lines if (m := re.search(r" step (\d+) ", line))]
        assert seen, "".join(line for _, line in run_lines + launch_lines)
        os.kill(pids["r3_recorder_node"], signal.SIGKILL)
        os.kill(pids["r3_lowlevel_node"], signal.SIGCONT)
        launch.wait(timeout=30)  # the launcher stops the graph once a member is gone
        run.wait(timeout=30)
    finally:
        for proc in (run, launch):
            if proc.poll() is None:
                proc.kill()
        for reader in readers:
            reader.join(timeout=5)
    text = "".join(line for _, line in launch_lines)
    assert "r3_recorder_node was killed by SIGKILL" in text, text
    (bag,) = [p for p in (tmp_path / "bags").iterdir() if p.is_dir()]
    assert (bag / STREAM_FILE).is_file()

    report = repair_bag(bag)
    assert report.repaired and report.messages > 0
    info = read_episode_info(bag)
    assert info.status == INCOMPLETE and info.message_count == report.messages and "repaired" in info.reason
    steps = [msg.step for _, _, _, msg in read_messages(bag, {names.REASONER_STEPS})]
    assert steps[: len(seen)] == seen == list(range(len(seen)))
    with Reader(bag) as reader:
        assert reader.message_count == report.messages
        assert {names.CAMERA_IMAGE, names.REASONER_STEPS} <= {c.topic for c in reader.connections}
