"""Where a decision step's CPU time goes, through the graph and in process.

    python bench/profile_graph.py [--suite language_table|language_table_controller|packing]
        [--episodes 3] [--packing-steps 3] [--rate 200] [--top 12] [--out runs/profile_graph]
        [--set NODE.PARAM=VALUE ...]

Launches ``sim_language_table`` (``sim_language_table_controller``, ``sim_packing``) as bench_graph
does, with ``R3_PROFILE_DIR`` set, so every node samples its own stacks (``r3.profiling``: CPU time
of each thread charged to the stack it is on; py-spy cannot attach on every machine). After one
warm-up episode it raises the nodes' recording flag, runs the episodes of bench_graph through the
graph, lowers it, and reads each node's collapsed stacks; then samples the same episodes in process.
For each process it prints the CPU time and the functions with the largest share of it: by self time
(the innermost frame) and inclusive (anywhere on the stack), then what woke its executor per
decision step (a topic, a timer, an action) and the CPU the executor's own wait machinery took for
it. The raw stacks stay under --out, for flame graphs.
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

from bench_graph import in_process, language_table_side, packing_side, through_graph, warm_up
from common import COUNT, folder, positive

from r3.profiling import PROFILE_DIR_ENV, RECORDING_FLAG, WAKES_SUFFIX, StackSampler, read_wakes
from r3.workers import die_with_parent


def summary(raw: Path, top: int) -> str:
    """Self and inclusive shares of the functions in one collapsed-stack file."""
    own, anywhere, total = collections.Counter(), collections.Counter(), 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n, frames = int(count), [_short(f) for f in stack.split(";")]
        total += n
        own[frames[-1]] += n
        for f in set(frames):
            anywhere[f] += n
    if not total:
        return "  no samples\n"
    lines = []
    for title, counts in (("self", own), ("inclusive", anywhere)):
        lines.append(f"  top by {title}:")
        lines += [f"    {100 * n / total:5.1f}%  {f}" for f, n in counts.most_common(top)]
    return "\n".join(lines) + "\n"


def wake_summary(path: Path, steps: int, top: int) -> str:
    """What woke one node's executor, per decision step, with the wait machinery's CPU for it."""
    rows = read_wakes(path) if path.exists() else []
    if not rows:
        return "  no wake-ups recorded\n"
    wakes, cpu = sum(n for _, n, _ in rows), sum(s for _, _, s in rows)
    head = (
        f"  executor wake-ups: {wakes / steps:.1f} per decision step, "
        f"{cpu / steps * 1e3:.1f} ms of CPU in the wait itself ({cpu / wakes * 1e3:.2f} ms each)"
    )
    lines = [head]
    lines += [f"    {n / steps:6.1f}  {s / n * 1e3:5.2f} ms  {source}" for source, n, s in rows[:top]]
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--suite",
        choices=("language_table", "language_table_controller", "packing"),
        default="language_table",
        help="Language Table (task V; through the low-level node, or with the controller in the "
        "simulator) or grocery packing (task 4), as bench_graph runs them "
        "(default: %(default)s)",
    )
    p.add_argument("--episodes", type=COUNT, default=3, help="episodes per side (default: %(default)s)")
    p.add_argument(
        "--packing-steps",
        type=COUNT,
        default=3,
        help="decision steps of each packing episode (default: %(default)s)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NODE.PARAM=VALUE",
        help="a parameter of the launched graph, as r3 launch --set takes it (repeatable)",
    )
    p.add_argument("--rate", type=positive, default=200.0, help="samples per second (default: %(default)s)")
    p.add_argument("--top", type=COUNT, default=12, help="functions listed per view (default: %(default)s)")
    p.add_argument(
        "--out",
        type=folder,
        default="runs/profile_graph",
        help="stacks, logs and bags (default: %(default)s)",
    )
    args = p.parse_args()
    out = Path(args.out).resolve()
    stacks = out / "stacks"
    stacks.mkdir(parents=True, exist_ok=True)
    for old in stacks.iterdir():
        old.unlink()
    import rclpy

    from r3.reasoning import make_backend
    from r3.sim.language_table.env import LanguageTableEnv
    from r3_ros.commander import R3Commander

    backend = make_backend("expert")
    sides = {
        "language_table": lambda: language_table_side(args.episodes, backend, LanguageTableEnv()),
        "language_table_controller": lambda: language_table_side(
            args.episodes, backend, LanguageTableEnv(), "sim_language_table_controller"
        ),
        "packing": lambda: packing_side(args.episodes, args.packing_steps, backend),
    }
    side = sides[args.suite]()
    launch = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "r3.cli",
            "launch",
            side.profile,
            "--logs",
            str(out / "logs"),
            "--set",
            f"r3_recorder_node.output_dir={out / 'bags'}",
            *[word for item in (*side.sets, *args.set) for word in ("--set", item)],
        ],
        env={**os.environ, PROFILE_DIR_ENV: str(stacks)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=die_with_parent,  # noqa: PLW1509  (a profile killed must not leave its graph serving)
    )
    rclpy.init()
    node = rclpy.create_node("profile_graph_client")
    try:
        commander = R3Commander(node)
        if not commander.wait_until_ready(120):
            raise RuntimeError("the graph did not come up")
        through_graph(commander, warm_up(side))
        flag = stacks / RECORDING_FLAG
        flag.touch()
        time.sleep(0.5)  # every node's watcher has seen the flag
        seconds, steps, reasons = _graph_steps(commander, side)
        flag.unlink()
        if not steps:
            raise RuntimeError(f"no decision step ran through the graph: {reasons}")
        time.sleep(1.0)  # every node has written its stacks
        print(
            f"through the graph: {steps} decision steps in {seconds:.1f} s = "
            f"{seconds / steps * 1e3:.0f} ms each ({sorted(set(reasons))})\n"
        )
        total = 0.0
        for raw in sorted(stacks.glob("*.txt")):
            cpu = sum(int(line.rpartition(" ")[2]) for line in raw.read_text().splitlines()) / 1e6
            total += cpu
            print(f"{raw.stem}: {cpu:.2f} CPU s ({cpu / steps * 1e3:.0f} ms per decision step)")
            print(summary(raw, args.top))
            print(wake_summary(raw.with_name(raw.stem + WAKES_SUFFIX), steps, args.top))
        print(f"all nodes: {total / steps * 1e3:.0f} CPU ms per decision step\n")
    finally:
        node.destroy_node()
        rclpy.shutdown()
        launch.send_signal(signal.SIGINT)
        launch.wait(timeout=30)
    in_process(warm_up(side))
    sampler = StackSampler(args.rate)
    sampler.start()
    seconds, instructions = in_process(side)
    sampler.stop()
    raw = stacks / "in_process.txt"
    raw.write_text(sampler.collapsed())
    steps = sum(map(len, instructions))
    cpu = sum(sampler.stacks.values()) / 1e6
    print(
        f"in process: {steps} decision steps in {seconds:.1f} s = {seconds / steps * 1e3:.0f} ms each, "
        f"{cpu:.2f} CPU s ({cpu / steps * 1e3:.0f} ms per decision step)\n"
    )
    print(summary(raw, args.top))


def _graph_steps(commander, side) -> tuple[float, int, list[str]]:
    run = through_graph(commander, side)
    return run.seconds, sum(map(len, run.instructions)), run.reasons


if __name__ == "__main__":
    main()
