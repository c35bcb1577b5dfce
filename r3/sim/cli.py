"""``r3 sim``: run simulated Language Table episodes in-process (no ROS).

``r3 sim demo`` runs one episode, prints every decision step and writes a video and a summary.
Success rates over many scenes are ``r3 eval``'s job.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap

from r3.cli_args import folder, frame_rate, integer, loaded_backend, seed, word
from r3.data.video import DEMO_FILES, VIDEO_FPS, default_format, write_cut_short_demo, write_episode_video
from r3.files import FileRefused, replaceable_output, replaced_output, shown_text
from r3.reasoning.backends.base import BackendError
from r3.safety.goals import INT32_MAX, UINT32_MAX
from r3.sim import IMAGE_SIDES

WRAP = 100


def _budget(n: int | None):
    from r3.reasoning.backends.base import ReasoningBudget

    return ReasoningBudget(max_reasoning_tokens=n)


# ------------------------------------------------------------------------------------ demo
def _print_step(record, previous_progress: float) -> None:
    print(f"\n== step {record.step} " + "=" * 60)
    if record.reasoning:
        print(textwrap.fill(shown_text(record.reasoning), WRAP, initial_indent="  ", subsequent_indent="  "))
    if record.valid:
        print(f"  Instruction: {shown_text(record.instruction)}")
    else:
        print(f"  invalid answer ({shown_text(record.error)}); no motion")
    print(
        f"  progress {previous_progress:.2f} -> {record.progress:.2f} after {record.control_steps} "
        "control steps"
        f" ({record.latency_s * 1000:.0f} ms to decide)"
    )


def episode_frames(trajectory, frame_every: int) -> tuple[list, list[str]]:
    """The episode's frames in order, each captioned with the instruction being executed, the
    last one the final state (the caller captions it with the outcome).

    Filmed at every control step (``frame_every`` 1), a step's last frame is the next decision's
    image, so that image is added only where no frame shows it yet: the first decision and the
    ones after a step without motion (an invalid answer).
    """
    every_step = frame_every == 1
    frames, captions = [], []
    for i, s in enumerate(trajectory.steps):
        shown = [*([] if every_step and i and trajectory.steps[i - 1].frames else [s.image]), *s.frames]
        frames += shown
        captions += [f"step {s.step}: {s.instruction or 'invalid answer, no motion'}"] * len(shown)
    if not (every_step and trajectory.steps and trajectory.steps[-1].frames):
        frames.append(trajectory.final_image)
        captions.append("")
    return frames, captions


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
        "--seed", type=seed, default=3, help="episode seed: layout, task instance, policy noise (default: 3)"
    )
    parser.add_argument(
        "--out", type=folder, required=True, help="output folder for episode.gif|mp4 and summary.json"
    )
    parser.add_argument(
        "--backend",
        type=word,
        default="expert",
        help='reasoner backend spec: "expert", "transformers:DIR" or "openai:URL,model=NAME" '
        "(default: expert)",
    )
    parser.add_argument(
        "--budget",
        type=integer(0, INT32_MAX),
        default=None,
        help=f"cap the reasoning at N words/tokens, 0..{INT32_MAX} as for r3 run and r3 eval "
        "(0 = instruction only; default: no cap)",
    )
    parser.add_argument(
        "--history",
        default="response",
        choices=("response", "instruction", "none"),
        help="what the reasoner sees of its previous step (default: response)",
    )
    parser.add_argument(
        "--max-steps",
        type=integer(1, UINT32_MAX),
        default=20,
        help=f"decision steps at most, 1..{UINT32_MAX} as for r3 eval (default: 20)",
    )
    parser.add_argument(
        "--video",
        default="auto",
        choices=("auto", "gif", "mp4", "none"),
        help="episode video format; auto: mp4 when an H.264 encoder (imageio-ffmpeg) is installed, else gif "
        "(default: auto)",
    )
    parser.add_argument(
        "--frame-every",
        type=integer(0, UINT32_MAX),
        default=1,
        help=f"film every N control steps, 0..{UINT32_MAX}; 0 = decision frames only "
        "(default: 1, every step)",
    )
    parser.add_argument(
        "--fps",
        type=frame_rate,
        default=VIDEO_FPS,
        help="video frames per second (default: %(default)s, real time)",
    )
    parser.add_argument(
        "--width", type=integer(*IMAGE_SIDES), default=320, help="rendered image width, pixels (default: 320)"
    )
    parser.add_argument(
        "--height", type=integer(*IMAGE_SIDES), default=240, help="image height, pixels (default: 240)"
    )
    args = parser.parse_args(argv)
    try:  # an earlier demo's files are replaced; anything else there is refused before the episode
        replaceable_output(args.out, DEMO_FILES, overwrite=True, what="demo")
    except (FileRefused, FileExistsError) as exc:
        parser.error(f"argument --out: {exc}")

    env = LanguageTableEnv(width=args.width, height=args.height)
    env.reset(seed=args.seed, options={"task": args.task})
    print(f"task {args.task}, seed {args.seed}: {env.task_instance.goal}")
    print(f"note: {env.task_instance.note}")
    progress = [float(env.task_instance.progress(env.state()))]

    taken: list = []

    def show(record):
        taken.append(record)
        _print_step(record, progress[-1])
        progress.append(record.progress)

    film = args.video != "none"
    video_format = default_format() if args.video == "auto" else args.video
    backend = loaded_backend(parser, "--backend", args.backend)
    try:
        trajectory = run_episode(
            args.task,
            args.seed,
            backend,
            env=env,
            max_steps=args.max_steps,
            budget=_budget(args.budget),
            history=args.history,
            render=film,
            on_step=show,
            frame_every=args.frame_every if film else 0,
        )
    except BackendError as exc:  # the steps taken are kept; r3's main says the error in one line
        write_cut_short_demo(args.out, args.task, args.seed, taken, exc)
        raise
    outcome = "success" if trajectory.success else "not solved"
    print(
        f"\n{outcome} after {len(trajectory.steps)} instructions and {trajectory.control_steps} "
        "control steps;"
        f" final progress {trajectory.progress:.2f}"
    )
    with replaced_output(args.out, DEMO_FILES, overwrite=True, what="demo") as staging:
        if film:
            frames, captions = episode_frames(trajectory, args.frame_every)
            captions[-1] = f"end: {outcome}, progress {trajectory.progress:.2f}"
            video = write_episode_video(frames, captions, staging / f"episode.{video_format}", fps=args.fps)
        (staging / "summary.json").write_text(json.dumps(trajectory.to_summary(), indent=2))
    if film:
        print(f"video: {args.out / video.name}")
    print(f"summary: {args.out / 'summary.json'}")
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
