"""``r3 sim``: run simulated Language Table episodes in-process (no ROS).

``r3 sim demo`` runs one episode, prints every decision step and writes a video and a summary;
``r3 sim table`` measures a reasoner's success rate per task over many scenes (by default the
expert's, the reference the trained reasoners are compared with).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
from pathlib import Path

import numpy as np

WRAP = 100


def _backend(spec: str):
    from r3.reasoning.backends import make_backend

    backend = make_backend(spec)
    backend.load()
    return backend


def _budget(n: int | None):
    from r3.reasoning.backends.base import ReasoningBudget

    return ReasoningBudget(max_reasoning_tokens=n)


# ------------------------------------------------------------------------------------ demo
def _print_step(record, previous_progress: float) -> None:
    print(f"\n== step {record.step} " + "=" * 60)
    if record.reasoning:
        print(textwrap.fill(record.reasoning, WRAP, initial_indent="  ", subsequent_indent="  "))
    if record.valid:
        print(f"  Instruction: {record.instruction}")
    else:
        print(f"  invalid answer ({record.error}); no motion")
    print(
        f"  progress {previous_progress:.2f} -> {record.progress:.2f} after {record.control_steps} "
        "control steps"
        f" ({record.latency_s * 1000:.0f} ms to decide)"
    )


def demo_main(argv: list[str]) -> int:
    from r3.episode import run_episode
    from r3.sim.language_table.env import LanguageTableEnv
    from r3.tasks.language_table.tasks import TASKS

    parser = argparse.ArgumentParser(
        prog="r3 sim demo",
        description="Run one Language Table episode in-process and show the reasoner's every step.",
    )
    parser.add_argument("--task", default="V", choices=list(TASKS), help="task name (default: V)")
    parser.add_argument(
        "--seed", type=int, default=3, help="episode seed: layout, task instance, policy noise (default: 3)"
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="output folder for episode.gif|mp4 and summary.json"
    )
    parser.add_argument(
        "--backend",
        default="expert",
        help='reasoner backend spec: "expert", "transformers:DIR" or "openai:URL,model=NAME" '
        "(default: expert)",
    )
    parser.add_argument(
        "--budget",
        type=int,
        default=None,
        help="cap the reasoning at N words/tokens (0 = instruction only; default: no cap)",
    )
    parser.add_argument(
        "--history",
        default="response",
        choices=("response", "instruction", "none"),
        help="what the reasoner sees of its previous step (default: response)",
    )
    parser.add_argument("--max-steps", type=int, default=20, help="decision steps at most (default: 20)")
    parser.add_argument(
        "--video", default="gif", choices=("gif", "mp4", "none"), help="episode video format (default: gif)"
    )
    parser.add_argument(
        "--frame-every",
        type=int,
        default=5,
        help="also film every N control steps between decisions, 0 = decision frames only (default: 5)",
    )
    parser.add_argument("--fps", type=float, default=5.0, help="video frames per second (default: 5)")
    parser.add_argument(
        "--width", type=int, default=320, help="rendered image width in pixels (default: 320)"
    )
    parser.add_argument(
        "--height", type=int, default=240, help="rendered image height in pixels (default: 240)"
    )
    args = parser.parse_args(argv)

    env = LanguageTableEnv(width=args.width, height=args.height)
    env.reset(seed=args.seed, options={"task": args.task})
    print(f"task {args.task}, seed {args.seed}: {env.task_instance.goal}")
    print(f"note: {env.task_instance.note}")
    progress = [float(env.task_instance.progress(env.state()))]

    def show(record):
        _print_step(record, progress[-1])
        progress.append(record.progress)

    film = args.video != "none"
    trajectory = run_episode(
        args.task,
        args.seed,
        _backend(args.backend),
        env=env,
        max_steps=args.max_steps,
        budget=_budget(args.budget),
        history=args.history,
        render=film,
        on_step=show,
        frame_every=args.frame_every if film else 0,
    )
    outcome = "success" if trajectory.success else "not solved"
    print(
        f"\n{outcome} after {len(trajectory.steps)} instructions and {trajectory.control_steps} "
        "control steps;"
        f" final progress {trajectory.progress:.2f}"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    if film:
        from r3.data.video import write_episode_video

        frames, captions = [], []
        for s in trajectory.steps:
            caption = f"step {s.step}: {s.instruction or 'invalid answer, no motion'}"
            frames += [s.image, *s.frames]
            captions += [caption] * (1 + len(s.frames))
        frames.append(trajectory.final_image)
        captions.append(f"end: {outcome}, progress {trajectory.progress:.2f}")
        video = write_episode_video(frames, captions, args.out / f"episode.{args.video}", fps=args.fps)
        print(f"video: {video}")
    summary = args.out / "summary.json"
    summary.write_text(json.dumps(trajectory.to_summary(), indent=2))
    print(f"summary: {summary}")
    return 0


# ------------------------------------------------------------------------------------ table
def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval for a success rate (sound at 0 % and 100 %, unlike the normal one).

    >>> [round(v, 3) for v in wilson_interval(0, 10)]
    [0.0, 0.278]
    """
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


_WORKER: dict = {}


def _init_worker(spec: str, budget: int | None, history: str, max_steps: int) -> None:
    from r3.sim.language_table.env import LanguageTableEnv

    _WORKER.update(
        env=LanguageTableEnv(),
        backend=_backend(spec),
        budget=_budget(budget),
        history=history,
        max_steps=max_steps,
    )


def _run_one(job: tuple[str, int]) -> dict:
    from r3.episode import run_episode

    task, seed = job
    w = _WORKER
    t = run_episode(
        task,
        seed,
        w["backend"],
        env=w["env"],
        max_steps=w["max_steps"],
        budget=w["budget"],
        history=w["history"],
        render=False,
    )
    return {
        "task": task,
        "seed": seed,
        "success": t.success,
        "progress": t.progress,
        "instructions": len(t.steps),
        "invalid": sum(not s.valid for s in t.steps),
    }


def success_table(results: list[dict], tasks: list[str]) -> str:
    """Markdown table: per task success %, Wilson 95% CI, mean progress, mean instructions; then the mean."""
    from r3.tasks.language_table.tasks import SPLITS

    split_of = {t: s for s, names in SPLITS.items() for t in names}
    lines = [
        "| task | split | scenes | success % | 95% CI | mean progress | mean instructions |",
        "| --- | --- | ---: | ---: | --- | ---: | ---: |",
    ]
    rates = []
    for task in tasks:
        rows = [r for r in results if r["task"] == task]
        k, n = sum(r["success"] for r in rows), len(rows)
        lo, hi = wilson_interval(k, n)
        rates.append(k / n if n else 0.0)
        progress, instructions = (
            np.mean([r["progress"] for r in rows]),
            np.mean([r["instructions"] for r in rows]),
        )
        lines.append(
            f"| {task} | {split_of.get(task, '-')} | {n} | {100 * rates[-1]:.1f} "
            f"| {100 * lo:.1f}-{100 * hi:.1f} | {progress:.2f} | {instructions:.1f} |"
        )
    progress, instructions = (
        np.mean([r["progress"] for r in results]),
        np.mean([r["instructions"] for r in results]),
    )
    lines.append(
        f"| **mean** | | {len(results)} | **{100 * np.mean(rates):.1f}** | | {progress:.2f} "
        f"| {instructions:.1f} |"
    )
    return "\n".join(lines)


def table_main(argv: list[str]) -> int:
    from tqdm import tqdm

    from r3.tasks.language_table.tasks import TASKS

    parser = argparse.ArgumentParser(
        prog="r3 sim table",
        description="Success rate of a reasoner (default: the expert) per Language Table task, as a "
        "Markdown table.",
    )
    parser.add_argument("--scenes", type=int, default=64, help="episodes per task (default: 64)")
    parser.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="seeds are FIRST..FIRST+SCENES-1; keep evaluation seeds disjoint from data seeds (default: 0)",
    )
    parser.add_argument("--tasks", default="all", help='comma-separated task names, or "all" (default: all)')
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default: 1)")
    parser.add_argument("--backend", default="expert", help="reasoner backend spec (default: expert)")
    parser.add_argument(
        "--budget", type=int, default=None, help="cap the reasoning at N words/tokens (default: no cap)"
    )
    parser.add_argument(
        "--history",
        default="response",
        choices=("response", "instruction", "none"),
        help="what the reasoner sees of its previous step (default: response)",
    )
    parser.add_argument("--max-steps", type=int, default=20, help="decision steps per episode (default: 20)")
    parser.add_argument("--out", type=Path, required=True, help="Markdown file to write the table to")
    args = parser.parse_args(argv)
    tasks = list(TASKS) if args.tasks == "all" else [t.strip() for t in args.tasks.split(",")]
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        parser.error(f"unknown task(s) {', '.join(unknown)}; known: {', '.join(TASKS)}")
    if args.scenes < 1 or args.workers < 1:
        parser.error("--scenes and --workers must be >= 1")

    jobs = [(t, s) for t in tasks for s in range(args.first_seed, args.first_seed + args.scenes)]
    init = (args.backend, args.budget, args.history, args.max_steps)
    bar = tqdm(total=len(jobs), unit="episode", file=sys.stderr)
    results = []
    if args.workers == 1:
        _init_worker(*init)
        for job in jobs:
            results.append(_run_one(job))
            bar.update()
    else:
        import multiprocessing as mp

        with mp.get_context("spawn").Pool(args.workers, _init_worker, init) as pool:
            for r in pool.imap_unordered(_run_one, jobs):
                results.append(r)
                bar.update()
    bar.close()
    results.sort(key=lambda r: (tasks.index(r["task"]), r["seed"]))
    table = success_table(results, tasks)
    header = (
        f"Success of `{args.backend}` on Language Table: {args.scenes} scenes per task "
        f"(seeds {args.first_seed}-{args.first_seed + args.scenes - 1}), at most {args.max_steps} "
        f"instructions of 20 control steps; budget {'none' if args.budget is None else args.budget}, "
        f"history {args.history}."
    )
    print(header + "\n\n" + table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(header + "\n\n" + table + "\n")
    return 0


COMMANDS = {"demo": demo_main, "table": table_main}


def main(argv: list[str]) -> int:
    """Dispatch ``r3 sim demo|table``."""
    if not argv or argv[0] not in COMMANDS:
        print(
            "usage: r3 sim {demo,table} [options]   (r3 sim demo --help, r3 sim table --help)",
            file=sys.stderr,
        )
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    return COMMANDS[argv[0]](argv[1:])
