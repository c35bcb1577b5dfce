"""``r3 packing demo``: one in-process packing episode (no ROS), like ``r3 sim demo`` for Language Table.

It prints every decision step (reasoning, instruction, semantic action, tool call or plan, what executing
it did, the observation a tool call returns) and
writes into ``--out`` a video of the arm's motion (base camera, captioned with the step and the
instruction) and ``summary.json``. ``--interface`` chooses how the reasoner acts, and with it the
suite adapter of the loop (``r3.packing_episode.SUITE_ADAPTERS``). Success tables over the held-out
goals are ``r3 eval --suite packing``'s job.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap

from r3.cli_args import folder, frame_rate, integer, loaded_backend, seed, word
from r3.data.video import DEMO_FILES, write_cut_short_demo
from r3.files import FileRefused, replaceable_output, replaced_output, shown_text
from r3.lowlevel import GROUNDINGS
from r3.packing_episode import (
    MAX_ACTIONS,
    MAX_DECISIONS,
    MAX_PLANS,
    MAX_TOOL_CALLS,
    SUITE_ADAPTERS,
)
from r3.reasoning.backends.base import BackendError
from r3.reasoning.prompts import ANSWER_HEADERS
from r3.safety.goals import UINT32_MAX

WRAP = 100
#: What the episode's steps are called in the last line, per interface.
STEP_WORDS = {"instruction": "instructions", "semantic": "actions", "tools": "tool calls", "plan": "plans"}


def _print_step(step, interface: str) -> None:
    print(f"\n== step {step.step} " + "=" * 60)
    if step.reasoning:
        print(textwrap.fill(shown_text(step.reasoning), WRAP, initial_indent="  ", subsequent_indent="  "))
    answer = textwrap.indent(shown_text(step.instruction), "    ").lstrip()  # a plan's steps under its first
    print(f"  {ANSWER_HEADERS[interface]} {answer or '(invalid answer, no motion)'}")
    if step.outcome:
        print(textwrap.indent(shown_text(step.outcome), "  "))
    print(
        f"  -> {shown_text(step.error) or 'done'}; progress {step.progress:.0%} "
        f"after {step.control_steps} control steps",
        flush=True,
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="r3 packing demo",
        description="Run one packing episode in-process and show the reasoner's every step.",
    )
    p.add_argument("--task", default="4", help='held-out goal "1".."12" or "train" (default: 4)')
    p.add_argument("--seed", type=seed, default=0, help="environment seed: the layout (default: 0)")
    p.add_argument(
        "--out", type=folder, required=True, help="output folder for episode.gif|mp4 and summary.json"
    )
    p.add_argument(
        "--reasoner",
        type=word,
        default="expert",
        help="reasoner backend spec, as for r3 run (default: expert, the privileged planner)",
    )
    p.add_argument(
        "--grounding",
        choices=GROUNDINGS.names(),
        default="sim",
        help="how the packing skills see the scene: sim (simulator poses) or perception "
        "(the base camera through r3.perception, and the arm's joints) (default: sim)",
    )
    p.add_argument(
        "--interface",
        choices=tuple(SUITE_ADAPTERS),
        default="instruction",
        help="how the reasoner acts: instruction (one packing instruction per step, carried out by the "
        "low-level packing policy, as in R^3) or semantic (one call per step: pick(item, [x, y]), "
        "place(item, [x, y]) with a 0-1000 point in the base camera image, home() or done(), as in ERR; "
        "each action's result is shown to the reasoner at the next step) or tools (one pose-tool call per "
        "step: move_to(x=, y=, z=, slot_yaw=[, tilt=, tilt_direction=]) in metres and degrees, "
        "set_gripper(opening=0..1), change_query(queries=[...]), update_todo(items=[...]) or done(), as "
        "in ZAP; each call's observation is shown at the next step) or plan (one numbered plan of "
        "semantic actions per step, carried out until a step fails, as in RoboGPT-R1; what each step did "
        "is shown at the next step, to plan again) (default: instruction)",
    )
    p.add_argument(
        "--max-steps",
        type=integer(1, UINT32_MAX),
        default=None,
        help=f"decision steps at most, 1..{UINT32_MAX} as for r3 eval (default: {MAX_DECISIONS}; "
        f"{MAX_ACTIONS} with --interface semantic, {MAX_TOOL_CALLS} with --interface tools, "
        f"{MAX_PLANS} plans with --interface plan)",
    )
    p.add_argument(
        "--video", default="gif", choices=("gif", "mp4", "none"), help="episode video format (default: gif)"
    )
    p.add_argument(
        "--frame-every",
        type=integer(1, UINT32_MAX),
        default=8,
        help=f"film the base camera every N control steps of the arm's motion, 1..{UINT32_MAX} (default: 8)",
    )
    p.add_argument("--fps", type=frame_rate, default=10.0, help="video frames per second (default: 10)")
    return p


def demo_main(argv: list[str]) -> int:
    from r3.packing_episode import PackingCell, run_packing_episode
    from r3.suites import get_suite

    parser = _parser()
    args = parser.parse_args(argv)
    try:  # an earlier demo's files are replaced; anything else there is refused before the episode
        replaceable_output(args.out, DEMO_FILES, overwrite=True, what="demo")
    except (FileRefused, FileExistsError) as exc:
        parser.error(f"argument --out: {exc}")
    suite = get_suite("packing")
    if args.task not in (tasks := (*suite.hook("eval_tasks")(), suite.collect_split)):
        parser.error(f"argument --task: expected one of {', '.join(tasks)}, got {args.task!r}")
    backend = loaded_backend(parser, "--reasoner", args.reasoner)
    cell = PackingCell.build(grounding=args.grounding)
    film = args.video != "none"
    filmed: list[tuple[int, object]] = []  # (decision step the motion belongs to, base-camera frame)
    done_steps: list = []
    if film:
        moved = [0]

        def film_motion(_remaining: float) -> bool:
            moved[0] += 1
            if moved[0] % args.frame_every == 0:
                filmed.append((len(done_steps), cell.env.render_camera("base")))
            return True

        cell.executor.on_step = film_motion

    def show(step) -> None:
        done_steps.append(step)
        _print_step(step, args.interface)

    try:
        traj = run_packing_episode(
            args.task,
            args.seed,
            backend,
            cell=cell,
            max_steps=args.max_steps,
            render=film,
            on_step=show,
            interface=args.interface,
        )
    except BackendError as exc:  # the steps taken are kept; r3's main says the error in one line
        write_cut_short_demo(args.out, args.task, args.seed, done_steps, exc)
        raise
    outcome = "success" if traj.success else "not solved"
    last = traj.steps[-1].error if traj.steps else ""
    ended = "" if traj.success or not last else f" (last step: {last})"
    print(
        f"\ntask {args.task} seed {args.seed}: {outcome} after {len(traj.steps)} "
        f"{STEP_WORDS[args.interface]}; "
        f"progress {traj.progress:.0%}{ended}"
    )
    with replaced_output(args.out, DEMO_FILES, overwrite=True, what="demo") as staging:
        if film:
            from r3.data.video import write_episode_video

            frames = [frame for _, frame in filmed] + [traj.final_image]
            captions = [
                f"step {k}: {traj.steps[k].instruction or 'invalid answer, no motion'}" for k, _ in filmed
            ]
            captions.append(f"end: {outcome}, progress {traj.progress:.0%}")
            video = write_episode_video(frames, captions, staging / f"episode.{args.video}", fps=args.fps)
        (staging / "summary.json").write_text(json.dumps(traj.to_summary(), indent=2))
    if film:
        print(f"video: {args.out / video.name} ({len(frames)} frames)")
    print(f"summary: {args.out / 'summary.json'}")
    return 0


COMMANDS = {"demo": demo_main}


def main(argv: list[str]) -> int:
    """Dispatch ``r3 packing demo``."""
    if not argv or argv[0] not in COMMANDS:
        print(
            (
                "usage: r3 packing demo [options]   "
                "(r3 packing demo --help; success tables: r3 eval --suite packing)"
            ),
            file=sys.stderr,
        )
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    return COMMANDS[argv[0]](argv[1:])
