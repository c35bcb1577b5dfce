"""Graph benchmarks: the ROS graph's cost per decision step against the in-process loop, and image
topic latency through rclpy at 640x480 30 Hz.

    python bench/bench_graph.py [--passes 3] [--episodes 4] [--packing-episodes 1] [--frames 300]
                                [--smoke] [--json PATH]

- image latency: each pass a fresh publisher process sends ``frames`` 640x480 rgb8 images at 30 Hz,
  stamped with the wall clock; p50 and p99 of receive time minus stamp, and how many arrived;
- decision step: each pass runs the same Language Table episodes (task V, seeds 0..episodes-1, the
  expert with full reasoning, rendering at decisions) in process and through the launched
  ``sim_language_table`` graph, then the same again against ``sim_language_table_controller`` (the
  pusher's controller in the simulator's process, no low-level node: "controller in the simulator"
  in the figures' names) (rendering at decisions too: its camera's video rate set to 0; one
  launch for all passes, its start-up and a first episode on each side left out; a pass whose sides'
  instructions differ stops the benchmark), and reports wall ms per decision step on each
  side and their ratio within the pass (target <= 1.5x); an episode's end through the graph (from
  its last step's feedback to the result, which comes once the bag is closed); and the CPU time
  per decision step on each side (this process; the sum over the graph's node processes), which a
  loaded machine does not inflate, and its ratio;
- packing decision step: the same for grocery packing (task 4, seeds 0..packing_episodes-1, the
  expert, ``packing_steps`` decisions each) in process with perception grounding and through the
  launched ``sim_packing`` graph (the policy sees through the perception node there; rendering for
  perception on both sides, the graph also renders both cameras at each decision for the reasoner).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, no install

import numpy as np
from common import COUNT, Report, cpu_seconds, folder, integer, parser, process_tree

from r3.workers import die_with_parent

ROOT = Path(__file__).resolve().parents[1]


def image_latency(node, rate_hz: float, count: int) -> dict:
    """One stream of ``count`` images from a fresh publisher process to ``node``'s subscription."""
    import rclpy
    from rclpy.clock import Clock, ClockType
    from sensor_msgs.msg import Image

    from r3_ros.conversions import stamp_to_ns

    clock = Clock(clock_type=ClockType.SYSTEM_TIME)
    latencies = []
    sub = node.create_subscription(
        Image,
        "/bench/image",
        lambda m: latencies.append((clock.now().nanoseconds - stamp_to_ns(m.header.stamp)) / 1e6),
        10,
    )
    peer = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "peers" / "image_publisher.py"), str(rate_hz), str(count)],
        preexec_fn=die_with_parent,  # noqa: PLW1509
    )
    deadline = time.monotonic() + count / rate_hz + 30
    while peer.poll() is None and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.01)
    for _ in range(20):
        rclpy.spin_once(node, timeout_sec=0.01)
    peer.wait(timeout=10)
    node.destroy_subscription(sub)
    if not latencies:
        raise RuntimeError("no image arrived")
    lat = np.array(latencies)
    return {
        "received": len(lat),
        "p50_ms": float(np.percentile(lat, 50)),
        "p99_ms": float(np.percentile(lat, 99)),
    }


@dataclass(frozen=True)
class Side:
    """One suite's comparison: its episodes, how one runs in process, and the graph that runs them."""

    suite: str
    label: str  # what its figures are called
    episodes: list[tuple[str, int]]
    max_steps: int  # 0 = the suite's own budget
    run_local: Callable[[str, int], list[str]]  # (task, seed) -> the episode's instructions
    profile: str
    sets: tuple[str, ...] = ()


#: The Language Table graphs compared with the in-process loop: the low-level node's, and the one whose
#: simulator runs the pusher's controller in its own process.
LANGUAGE_TABLE_GRAPHS = {
    "sim_language_table": "decision step",
    "sim_language_table_controller": "decision step, controller in the simulator",
}


def language_table_side(episodes: int, backend, env, profile: str = "sim_language_table") -> Side:
    """Task V from seeds 0..episodes-1 with full reasoning (``run_episode``'s default), rendering at
    decisions on both sides: the profile's 5 Hz video frames are work the in-process loop does not do."""
    from r3.episode import run_episode

    return Side(
        "language_table",
        LANGUAGE_TABLE_GRAPHS[profile],
        [("V", seed) for seed in range(episodes)],
        0,
        lambda task, seed: run_episode(task, seed, backend, env=env, render=True).instructions,
        profile,
        ("r3_sim_node.camera_rate_hz=0",),
    )


def packing_side(episodes: int, steps: int, backend) -> Side:
    """Task 4 from seeds 0..episodes-1, ``steps`` decisions each, the expert; in process the policy
    grounds through the same perception as the graph's policy sees (``grounding="perception"``)."""
    from r3.packing_episode import PackingCell, run_packing_episode

    cell = PackingCell.build(grounding="perception")

    def packing(task: str, seed: int) -> list[str]:
        trajectory = run_packing_episode(task, seed, backend, cell=cell, max_steps=steps, render=False)
        return [s.instruction for s in trajectory.steps]

    return Side(
        "packing", "packing decision step", [("4", s) for s in range(episodes)], steps, packing, "sim_packing"
    )


def warm_up(side: Side) -> Side:
    """The side's first episode alone, run untimed before measuring: the RunTask server answers
    before the graph is up (the first episode waits up to seconds for the low-level node's first
    state and the recorder), and first runs pay imports and caches once."""
    return replace(side, episodes=side.episodes[:1])


def in_process(side: Side) -> tuple[float, list[list[str]]]:
    """Wall seconds and each episode's instructions."""
    start = time.perf_counter()
    instructions = [side.run_local(task, seed) for task, seed in side.episodes]
    return time.perf_counter() - start, instructions


@dataclass
class GraphRun:
    """A side's episodes through the graph: wall seconds in all, each episode's instructions, how it
    ended, and its end (seconds from its last step's feedback to the result, which the reasoner
    sends once the episode's bag is closed)."""

    seconds: float
    instructions: list[list[str]]
    reasons: list[str]
    ends: list[float]


def through_graph(commander, side: Side) -> GraphRun:
    """The side's episodes with full reasoning, as in process (reasoning_budget -1; 0 would ask
    for the instruction only)."""
    from r3_msgs.action import RunTask
    from r3_ros.commander import TaskStatus

    run = GraphRun(0.0, [], [], [])
    for task, seed in side.episodes:
        start = time.perf_counter()
        goal = RunTask.Goal(
            suite=side.suite,
            task=task,
            seed=seed,
            max_steps=side.max_steps,
            reasoning_budget=-1,
            reset_scene=True,
        )
        fed_back = [start]  # when each step's feedback came
        handle = commander.start_task(goal, on_feedback=lambda _, at=fed_back: at.append(time.perf_counter()))
        while handle.spin_once() is not TaskStatus.DONE:
            pass
        done = time.perf_counter()
        run.seconds += done - start
        run.ends.append(done - fed_back[-1])
        run.instructions.append(list(handle.result.instructions))
        run.reasons.append(handle.result.reason)
    return run


def same_episodes(
    episodes: list[tuple[str, int]], local: list[list[str]], graph: list[list[str]], reasons: list[str]
) -> None:
    """Per-step figures compare like with like only if both sides ran the same episodes."""
    for (task, seed), a, b, reason in zip(episodes, local, graph, reasons):
        if a != b:
            raise RuntimeError(f"task {task} seed {seed}: in process {a}, through the graph {b} ({reason})")


def compare(report: Report, side: Side, passes: int, out: Path) -> None:
    """Launch ``side.profile`` once, then per pass the episodes in process and through the graph (a
    client node of its own for each graph)."""
    import rclpy

    from r3_ros.commander import R3Commander

    launch = subprocess.Popen(
        [sys.executable, "-m", "r3.cli", "launch", side.profile, "--logs", str(out / "logs")]
        + [a for s in (f"r3_recorder_node.output_dir={out / 'bags'}", *side.sets) for a in ("--set", s)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=die_with_parent,  # noqa: PLW1509  (a benchmark killed must not leave its graph serving)
    )
    node = rclpy.create_node(f"bench_graph_{side.suite}_client")
    try:
        commander = R3Commander(node)
        if not commander.wait_until_ready(120):
            raise RuntimeError(f"the {side.profile} graph did not come up")
        nodes = [pid for pid, cmd in process_tree(launch.pid).items() if "python" in cmd.split()[0]]
        in_process(warm_up(side))
        through_graph(commander, warm_up(side))
        local, graph, local_cpu, graph_cpu, ends, outcomes = [], [], [], [], [], set()
        for _ in range(passes):
            cpu = time.process_time()
            t_local, local_instructions = in_process(side)
            n_steps = sum(map(len, local_instructions))
            local_cpu.append((time.process_time() - cpu) / n_steps * 1e3)
            cpu = sum(cpu_seconds(pid) for pid in nodes)
            run = through_graph(commander, side)
            same_episodes(side.episodes, local_instructions, run.instructions, run.reasons)
            graph_cpu.append((sum(cpu_seconds(pid) for pid in nodes) - cpu) / n_steps * 1e3)
            local.append(t_local / n_steps * 1e3)
            graph.append(run.seconds / n_steps * 1e3)
            ends.append(float(np.median(run.ends)) * 1e3)
            outcomes.update(run.reasons)
    finally:
        node.destroy_node()
        launch.send_signal(2)
        launch.wait(timeout=60)
    tasks = ", ".join(sorted({t for t, _ in side.episodes}))
    what = side.label
    note = f"{len(side.episodes)} episodes of task {tasks} per pass, {n_steps} decision steps"
    report.add(f"{what}, in process", local, "ms", note=note)
    report.add(
        f"{what}, through the graph", graph, "ms", note=f"the same {n_steps} steps; ended: {sorted(outcomes)}"
    )
    report.add(
        f"{what}, graph / in process (target <= 1.5)",
        [g / w for g, w in zip(graph, local)],
        "x",
        note="within each pass",
    )
    report.add(
        f"{what}: an episode's end through the graph",
        ends,
        "ms",
        note="median over the pass's episodes, from the last step's feedback to the result (the bag closed)",
    )
    report.add(f"{what} CPU, in process", local_cpu, "ms", note="this process")
    report.add(f"{what} CPU, through the graph", graph_cpu, "ms", note=f"all {len(nodes)} node processes")
    report.add(
        f"{what} CPU, graph / in process",
        [g / w for g, w in zip(graph_cpu, local_cpu)],
        "x",
        note="within each pass; the machine's other load does not enter CPU time",
    )


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--passes", type=COUNT, default=3, help="passes per figure (default: %(default)s)")
    p.add_argument(
        "--episodes",
        type=COUNT,
        default=4,
        help="Language Table episodes per side and pass (default: %(default)s)",
    )
    p.add_argument(
        "--packing-episodes",
        type=integer(0),
        default=1,
        help="packing episodes per side and pass; 0 = no packing figures (default: %(default)s)",
    )
    p.add_argument(
        "--packing-steps",
        type=COUNT,
        default=3,
        help="decision steps of each packing episode (default: %(default)s)",
    )
    p.add_argument("--frames", type=COUNT, default=300, help="images per latency pass (default: %(default)s)")
    p.add_argument("--out", type=folder, default="runs/bench_graph", help="bags and logs of the graph side")
    args = p.parse_args()
    if args.smoke:
        args.passes, args.episodes, args.frames = 1, 1, 30
        args.packing_episodes, args.packing_steps = 1, 1
    report = Report("graph", vars(args))
    import rclpy

    import r3_ros  # noqa: F401  r3's DDS profile for this client, as for every r3 process: before rclpy.init
    from r3.reasoning import make_backend
    from r3.sim.language_table.env import LanguageTableEnv

    rclpy.init()
    node = rclpy.create_node("bench_graph_client")
    backend = make_backend("expert")
    try:
        lat = [image_latency(node, 30.0, args.frames) for _ in range(args.passes)]  # before the graph runs
        note = f"{args.frames} frames per pass, {min(r['received'] for r in lat)} or more received"
        report.add(
            "image 640x480 rgb8 @30 Hz through rclpy, latency p50",
            [r["p50_ms"] for r in lat],
            "ms",
            note=note,
        )
        report.add("image 640x480 rgb8 @30 Hz through rclpy, latency p99", [r["p99_ms"] for r in lat], "ms")
        env = LanguageTableEnv()
        for profile in LANGUAGE_TABLE_GRAPHS:
            side = language_table_side(args.episodes, backend, env, profile)
            compare(report, side, args.passes, Path(args.out) / profile)
        env.close()
        if args.packing_episodes:
            side = packing_side(args.packing_episodes, args.packing_steps, backend)
            compare(report, side, args.passes, Path(args.out) / "packing")
    finally:
        node.destroy_node()
        rclpy.shutdown()
    report.finish(args.json)


if __name__ == "__main__":
    main()
