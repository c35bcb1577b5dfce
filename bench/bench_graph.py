"""Graph benchmarks: decision-step overhead of the ROS graph against the in-process loop, and
image topic latency through rclpy at 640x480 30 Hz. Run: python bench/bench_graph.py"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def image_latency(rate_hz: float, count: int) -> dict:
    import rclpy
    from rclpy.clock import Clock, ClockType
    from sensor_msgs.msg import Image

    from r3_ros.conversions import stamp_to_ns

    rclpy.init()
    node = rclpy.create_node("bench_image_subscriber")
    clock = Clock(clock_type=ClockType.SYSTEM_TIME)
    latencies = []
    node.create_subscription(Image, "/bench/image",
                             lambda m: latencies.append((clock.now().nanoseconds - stamp_to_ns(m.header.stamp)) / 1e6), 10)
    peer = subprocess.Popen([sys.executable, str(ROOT / "bench" / "peers" / "image_publisher.py"), str(rate_hz), str(count)])
    deadline = time.monotonic() + count / rate_hz + 30
    while peer.poll() is None and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.01)
    for _ in range(20):
        rclpy.spin_once(node, timeout_sec=0.01)
    peer.wait(timeout=10)
    node.destroy_node()
    rclpy.shutdown()
    lat = np.array(latencies)
    return {"sent": count, "received": len(lat), "p50_ms": float(np.percentile(lat, 50)),
            "p99_ms": float(np.percentile(lat, 99))}


def in_process(episodes: list[tuple[str, int]]) -> tuple[float, int]:
    from r3.episode import run_episode
    from r3.reasoning import make_backend
    from r3.sim.language_table.env import LanguageTableEnv

    backend, env = make_backend("expert"), LanguageTableEnv()
    start, steps = time.perf_counter(), 0
    for task, seed in episodes:
        steps += len(run_episode(task, seed, backend, env=env, render=True).steps)
    return time.perf_counter() - start, steps


def through_graph(episodes: list[tuple[str, int]], out: Path) -> tuple[float, int, list]:
    import rclpy

    from r3_msgs.action import RunTask
    from r3_ros.commander import R3Commander, TaskStatus

    launch = subprocess.Popen([sys.executable, "-m", "r3.cli", "launch", "sim_language_table", "--logs", str(out / "logs"),
                               "--set", f"r3_recorder_node.output_dir={out / 'bags'}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rclpy.init()
    node = rclpy.create_node("bench_graph_client")
    commander = R3Commander(node)
    try:
        if not commander.wait_until_ready(60):
            raise RuntimeError("the graph did not come up")
        steps, elapsed, outcomes = 0, 0.0, []
        for task, seed in episodes:
            start = time.perf_counter()
            handle = commander.start_task(RunTask.Goal(suite="language_table", task=task, seed=seed, reset_scene=True))
            while handle.spin_once() is not TaskStatus.DONE:
                pass
            elapsed += time.perf_counter() - start
            steps += handle.result.steps
            outcomes.append(handle.result.reason)
        return elapsed, steps, outcomes
    finally:
        node.destroy_node()
        rclpy.shutdown()
        launch.send_signal(2)
        launch.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=4, help="episodes per side (default: 4)")
    parser.add_argument("--frames", type=int, default=300, help="images for the latency test (default: 300)")
    parser.add_argument("--out", default="runs/bench_graph", help="bags and logs of the graph side")
    args = parser.parse_args()
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    episodes = [("V", seed) for seed in range(args.episodes)]
    lat = image_latency(30.0, args.frames)
    print(f"image topic 640x480 rgb8 @30 Hz through rclpy: {lat['received']}/{lat['sent']} received, "
          f"latency p50 {lat['p50_ms']:.2f} ms, p99 {lat['p99_ms']:.2f} ms")
    t_local, n_local = in_process(episodes)
    t_graph, n_graph, outcomes = through_graph(episodes, Path(args.out))
    per_local, per_graph = t_local / n_local, t_graph / n_graph
    print(f"in-process loop: {n_local} decision steps, {per_local * 1000:.0f} ms per step")
    print(f"through the graph: {n_graph} decision steps, {per_graph * 1000:.0f} ms per step ({outcomes})")
    print(f"graph / in-process per decision step: {per_graph / per_local:.2f}x")


if __name__ == "__main__":
    main()
