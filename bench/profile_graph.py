"""Where a Language Table decision step's time goes, through the graph and in process (py-spy).

    python bench/profile_graph.py [--episodes 3] [--rate 200] [--top 12] [--out runs/profile_graph]

Launches ``sim_language_table``, waits until it serves, then records every node process with
``py-spy record --nonblocking`` (collapsed stacks) while the episodes of bench_graph run through the
graph; then records the same episodes in process. For each process it prints the samples (CPU-busy
time: py-spy leaves idle threads out), and the functions with the largest share of them: by self
time (the innermost frame) and inclusive (anywhere on the stack). The raw stacks stay under --out,
for flame graphs.
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, no install

from bench_graph import in_process, through_graph
from common import cpu_seconds, process_tree

PY_SPY = Path(sys.executable).with_name("py-spy")


def summary(raw: Path, top: int, rate: int, within: str = "") -> str:
    """Self and inclusive shares of the functions in one collapsed-stack file (only the stacks
    through a function named ``within``, when given)."""
    own, anywhere, total = collections.Counter(), collections.Counter(), 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or within not in stack:
            continue
        n, frames = int(count), [_short(f) for f in stack.split(";")]
        total += n
        own[frames[-1]] += n
        for f in set(frames):
            anywhere[f] += n
    if not total:
        return "  no samples\n"
    lines = [f"  {total} samples ({total / rate:.1f} s{' of ' + within if within else ''})"]
    for title, counts in (("self", own), ("inclusive", anywhere)):
        lines.append(f"  top by {title}:")
        lines += [f"    {100 * n / total:5.1f}%  {f}" for f, n in counts.most_common(top)]
    return "\n".join(lines) + "\n"


def _short(frame: str) -> str:
    """``function (path:line)`` -> ``function (file)``: one entry per function, not per line."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    parts = Path(path).parts
    for anchor in ("site-packages", "r3", "r3_ros"):
        if anchor in parts:
            path = "/".join(parts[parts.index(anchor) + (anchor == "site-packages") :])
            break
    return f"{name} ({path})"


def record(pid: int, out: Path, rate: int, idle: bool) -> subprocess.Popen:
    return subprocess.Popen(
        [
            str(PY_SPY),
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "--rate",
            str(rate),
            "--nonblocking",
            "--output",
            str(out),
        ]
        + (["--idle"] if idle else []),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=3)
    p.add_argument("--rate", type=int, default=200, help="samples per second (default: %(default)s)")
    p.add_argument("--top", type=int, default=12)
    p.add_argument("--out", default="runs/profile_graph")
    p.add_argument(
        "--idle",
        action="store_true",
        help="wall-clock view: idle samples too, and the reasoner's "
        "episode thread (what a decision step waits on) by itself",
    )
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    episodes = [("V", seed) for seed in range(args.episodes)]
    import rclpy

    from r3.reasoning import make_backend
    from r3.sim.language_table.env import LanguageTableEnv
    from r3_ros.commander import R3Commander

    launch = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "r3.cli",
            "launch",
            "sim_language_table",
            "--logs",
            str(out / "logs"),
            "--set",
            f"r3_recorder_node.output_dir={out / 'bags'}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    rclpy.init()
    node = rclpy.create_node("profile_graph_client")
    try:
        commander = R3Commander(node)
        if not commander.wait_until_ready(120):
            raise RuntimeError("the graph did not come up")
        through_graph(commander, episodes[:1])  # warm: first episode's imports and caches
        nodes = {pid: cmd for pid, cmd in process_tree(launch.pid).items() if "python" in cmd.split()[0]}
        names = {
            pid: next((Path(w).name for w in cmd.split() if Path(w).name.startswith("r3_")), f"pid{pid}")
            for pid, cmd in nodes.items()
        }
        spies = {pid: record(pid, out / f"{names[pid]}.txt", args.rate, args.idle) for pid in nodes}
        time.sleep(1.0)
        cpu = {pid: cpu_seconds(pid) for pid in nodes}
        seconds, steps, reasons = through_graph(commander, episodes)
        cpu = {pid: cpu_seconds(pid) - c for pid, c in cpu.items()}
        for spy in spies.values():
            spy.send_signal(signal.SIGINT)
        for spy in spies.values():
            spy.wait(timeout=60)
        print(
            f"through the graph: {steps} decision steps in {seconds:.1f} s = "
            f"{seconds / steps * 1e3:.0f} ms each "
            f"({sorted(set(reasons))})\n"
        )
        for pid in nodes:
            print(
                f"{names[pid]} (pid {pid}): {cpu[pid]:.2f} CPU s during the episodes "
                f"({cpu[pid] / steps * 1e3:.0f} ms "
                f"per decision step)"
            )
            raw = out / f"{names[pid]}.txt"
            print(summary(raw, args.top, args.rate) if raw.exists() else "  no profile written\n")
            if args.idle and names[pid] == "r3_reasoner_node" and raw.exists():
                print(
                    "  the episode thread alone:\n"
                    + summary(raw, args.top, args.rate, within="_execute_goal")
                )
    finally:
        node.destroy_node()
        rclpy.shutdown()
        launch.send_signal(signal.SIGINT)
        launch.wait(timeout=30)
    backend, env = make_backend("expert"), LanguageTableEnv()
    in_process(episodes[:1], backend, env)  # the same warm-up
    spy = record(os.getpid(), out / "in_process.txt", args.rate, args.idle)
    time.sleep(1.0)
    cpu = cpu_seconds(os.getpid())
    seconds, steps = in_process(episodes, backend, env)
    cpu = cpu_seconds(os.getpid()) - cpu
    spy.send_signal(signal.SIGINT)
    spy.wait(timeout=60)
    print(
        f"in process: {steps} decision steps in {seconds:.1f} s = {seconds / steps * 1e3:.0f} ms each, "
        f"{cpu:.2f} CPU s ({cpu / steps * 1e3:.0f} ms per decision step)\n"
    )
    print(summary(out / "in_process.txt", args.top, args.rate))


if __name__ == "__main__":
    main()
