"""Fast DDS segments in /dev/shm: a process killed with SIGKILL leaves its segment, unlocked; the
supervisor removes it before it starts a graph, and never touches a live process's segment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from r3.graph.description import Profile
from r3.graph.shared_memory import SHM_ROOT, stale_segments
from r3.graph.supervisor import Supervisor

pytestmark = pytest.mark.ros

NODE = """
import sys, time, rclpy
from std_msgs.msg import String
rclpy.init()
node = rclpy.create_node(sys.argv[1])
pub = node.create_publisher(String, "/shm_sweep_probe", 10)
node.create_subscription(String, "/shm_sweep_probe", lambda m: None, 10)
print("up", flush=True)
while True:
    pub.publish(String(data="x" * 1000))
    rclpy.spin_once(node, timeout_sec=0.05)
"""


def locks_of(pid: int) -> set[Path]:
    """The segment lock files in /dev/shm that process ``pid`` holds an flock on (/proc/locks)."""
    inodes = set()
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "FLOCK" in fields and fields[4] == str(pid):
            inodes.add(int(fields[5].rsplit(":", 1)[1]))
    return {p for p in SHM_ROOT.glob("fastdds_*_el") if p.stat().st_ino in inodes and "port" not in p.name}


def test_a_killed_nodes_segment_is_swept_and_a_live_ones_is_kept(private_ros_env, tmp_path):
    env = private_ros_env()  # the nodes are not r3's: Fast DDS's own profile, shared memory included
    env.pop("FASTDDS_DEFAULT_PROFILES_FILE", None)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    nodes = [
        subprocess.Popen([sys.executable, "-c", NODE, name], env=env, stdout=subprocess.PIPE, text=True)
        for name in ("shm_victim", "shm_survivor")
    ]
    victim, survivor = nodes
    try:
        for node in nodes:
            assert node.stdout.readline().strip() == "up"
        deadline = time.monotonic() + 30
        while not (locks_of(victim.pid) and locks_of(survivor.pid)) and time.monotonic() < deadline:
            time.sleep(0.1)  # each participant makes its segment once it has something to send
        victim_locks, survivor_locks = locks_of(victim.pid), locks_of(survivor.pid)
        assert victim_locks and survivor_locks
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        stale = set(stale_segments(min_age_s=0))
        assert victim_locks <= stale and not survivor_locks & stale
        old = time.time() - 3600
        for lock in victim_locks:  # as if the kill had happened an hour ago
            os.utime(lock, (old, old))
        echoed: list[str] = []
        with Supervisor(Profile("empty", "", []), tmp_path / "logs", env=env, echo=echoed.append):
            pass
        assert any("Fast DDS shared-memory segments left by processes that died" in e for e in echoed)
        for lock in victim_locks:
            assert not lock.exists() and not lock.with_name(lock.name.removesuffix("_el")).exists()
        assert all(lock.exists() for lock in survivor_locks)
    finally:
        for node in nodes:
            node.kill()
            node.wait(timeout=10)
