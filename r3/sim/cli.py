"""``r3 sim``: run simulated Language Table episodes in-process (no ROS).

``r3 sim demo`` runs one episode, prints every decision step and writes a video and a summary.
Success rates over many scenes are ``r3 eval``'s job.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path


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


COMMANDS = {"demo": demo_main}


def main(argv: list[str]) -> int:
    """Dispatch ``r3 sim demo``."""
    if not argv or argv[0] not in COMMANDS:
        print(
            "usage: r3 sim demo [options]   (r3 sim demo --help; success tables: r3 eval)",
            file=sys.stderr,
        )
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    return COMMANDS[argv[0]](argv[1:])
