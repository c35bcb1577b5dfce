"""Every r3 node stops cleanly on a double SIGINT (launch forwards one on top of the shell's).

Each node is started as its own process, waited for until its heartbeat arrives, then sent SIGINT
and, while it shuts down, a few more 10 ms apart. It must exit 0 with no traceback.
r3_realsense_node is not here: it cannot start without a RealSense device, and it shares the
same main (r3_ros.spin.run_node) as the others.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ros, pytest.mark.slow]
STAND_INS = Path(__file__).parent / "stand_ins"
#: After the first SIGINT, this many more this far apart: at least one lands while the node shuts down.
FOLLOW_UPS, FOLLOW_UP_GAP_S = 5, 0.01

NODES = [
    "r3_sim_node",
    "r3_lowlevel_node",
    "r3_reasoner_node",
    "r3_recorder_node",
    "r3_packing_sim_node",
    "r3_perception_node",
    "r3_execution_node",
]  # the execution node over the moveit_py stand-in


@pytest.fixture(scope="module")
def domain():
    """A ROS domain of this module's own: a node of the same name left by another test must not
    answer for the one started here (its heartbeat would let the SIGINT arrive during start-up)."""
    from ros_domains import claim_for_this_process

    return claim_for_this_process()  # this process's heartbeat monitor joins it


@pytest.fixture(scope="module")
def heartbeats(domain):
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from r3_ros.heartbeat import HeartbeatMonitor

    rclpy.init(domain_id=domain)
    node = Node("r3_signal_test")
    monitor = HeartbeatMonitor(node)
    executor = SingleThreadedExecutor()
    executor.add_node(node)

    def wait_for(name: str, proc: subprocess.Popen, timeout_s: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and proc.poll() is None:
            executor.spin_once(timeout_sec=0.1)
            if monitor.silent_for(f"/{name}") < 1.0:
                return True
        return False

    yield wait_for
    executor.shutdown()
    node.destroy_node()
    rclpy.try_shutdown()


@pytest.mark.parametrize("name", NODES)
def test_a_node_exits_zero_on_a_double_sigint(name, heartbeats, domain, ros_env, tmp_path):
    env = {
        **ros_env,
        "ROS_DOMAIN_ID": str(domain),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(STAND_INS), ros_env.get("PYTHONPATH")])),
    }
    args = ["--ros-args", "-p", f"output_dir:={tmp_path}"] if name == "r3_recorder_node" else []
    proc = subprocess.Popen(
        [sys.executable, "-m", f"{name}.main", *args],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert heartbeats(name, proc), f"{name} never sent a heartbeat:\n{proc.communicate(timeout=10)[0]}"
        proc.send_signal(signal.SIGINT)
        for _ in range(FOLLOW_UPS):
            time.sleep(FOLLOW_UP_GAP_S)
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=30)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output
    assert "Traceback" not in output, output
