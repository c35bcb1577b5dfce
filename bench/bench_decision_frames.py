"""Decision frames in the bags under CPU stress: are the frames every step decided on all recorded?

    python bench/bench_decision_frames.py [--episodes 20] [--profile sim_language_table]
                                          [--no-stress] [--smoke] [--json PATH]

Starts a busy loop on every core for the whole run, a graph with `r3 launch`, and runs ``episodes``
RunTask episodes through it. For each bag it counts the frames the ReasonerSteps name
(``image_stamps``) that the bag lacks: on ``/r3/reasoner/frames`` (the reliable record of the
reasoner's input) and, for comparison, on the camera topic (best effort, for live viewing). SAFETY.md
quotes the first figure; it must be 0.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, no install
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test" / "integration"))

from common import COUNT, Report, parser
from hostile import Client, Graph, bag_topics

from r3.graph import names

#: Per graph profile: the suite, its tasks, and the decision steps per episode (0: the graph's default).
TASKS = {
    "sim_language_table": ("language_table", ["V", "T", "L", "line", "clear_qtr"], 0),
    "sim_packing": ("packing", ["4", "1", "7"], 3),
}


def _busy() -> None:
    while True:
        pass


def _stamps(messages) -> set[tuple[int, int]]:
    return {(m.header.stamp.sec, m.header.stamp.nanosec) for m in messages}


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--episodes", type=COUNT, default=20, help="episodes to run (default: %(default)s)")
    p.add_argument("--profile", default="sim_language_table", choices=sorted(TASKS), help="graph profile")
    p.add_argument("--no-stress", action="store_true", help="no busy loops (the baseline)")
    args = p.parse_args(argv)
    if args.smoke:  # one episode, no busy loops: CI checks that the benchmark runs, not the figure
        args.episodes, args.no_stress = 1, True
    report = Report("decision_frames", vars(args))
    from r3_msgs.action import RunTask

    os.environ.setdefault("MUJOCO_GL", "osmesa")
    hogs = (
        []
        if args.no_stress
        else [multiprocessing.Process(target=_busy, daemon=True) for _ in range(os.cpu_count() or 1)]
    )
    for hog in hogs:
        hog.start()
    suite, tasks, max_steps = TASKS[args.profile]
    domain = int(os.environ.get("ROS_DOMAIN_ID", "0"))  # the caller's domain, as for any r3 command
    workdir = tempfile.TemporaryDirectory(prefix="r3-frames-")  # the graph's bags and logs
    graph = Graph(args.profile, Path(workdir.name), domain)
    client = Client("r3_bench_frames", domain)
    wanted = missing = missing_camera = errors = 0
    try:
        if not client.wait_until_ready(300):
            print("the graph did not come up:\n" + "".join(graph.lines), file=sys.stderr)
            return 1
        for i in range(args.episodes):
            goal = RunTask.Goal(
                suite=suite,
                task=tasks[i % len(tasks)],
                seed=i,
                reset_scene=True,
                max_steps=max_steps,
            )
            t0 = time.monotonic()
            result, _ = client.run_task(goal, timeout_s=900)
            errors += result.reason.startswith("error")
            if not result.bag:
                print(f"episode {i}: no bag ({result.reason})")
                continue
            topics = bag_topics(Path(result.bag))
            named = [
                (s.sec, s.nanosec) for step in topics.get(names.REASONER_STEPS, []) for s in step.image_stamps
            ]
            frames, camera = (
                _stamps(topics.get(names.REASONER_FRAMES, [])),
                _stamps(topics.get(names.CAMERA_IMAGE, []) + topics.get(names.WRIST_IMAGE, [])),
            )
            lost, lost_camera = sum(n not in frames for n in named), sum(n not in camera for n in named)
            wanted, missing, missing_camera = (
                wanted + len(named),
                missing + lost,
                missing_camera + lost_camera,
            )
            print(
                f"episode {i} ({goal.task}, seed {i}): {result.reason}, {len(named)} decision frames, "
                f"{lost} missing from the bag's decision frames, {lost_camera} from its camera topic "
                f"({time.monotonic() - t0:.1f} s)",
                flush=True,
            )
    finally:
        client.close()
        graph.stop()
        workdir.cleanup()
        for hog in hogs:
            hog.terminate()
    stress = "busy loop on every core" if hogs else "no stress"
    note = f"{args.episodes} episodes, {errors} ended in an error, {stress}, {wanted} decision frames"
    report.add("decision frames missing from /r3/reasoner/frames", missing, "frames", note=note)
    report.add("decision frames missing from the camera topic (best effort)", missing_camera, "frames")
    report.finish(args.json)
    return 0 if missing == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
