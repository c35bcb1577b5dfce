"""`r3 collect` (expert episodes -> bags), `r3 dataset` (bags -> datasets, stats, LeRobot export),
`r3 bag`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from r3.cli_args import checked_path, folder, integer, word
from r3.files import write_text_atomically
from r3.safety.goals import INTERFACE_ANSWERS, UINT32_MAX, interfaces_help
from r3.suites import DEFAULT_SUITE, get_suite


def collect_main(argv: list[str]) -> int:
    from r3.data.collect import CollectConfig, FolderRefused, collect, collected_suites

    p = argparse.ArgumentParser(
        prog="r3 collect",
        description=(
            "Run expert episodes in-process and write one rosbag2 bag per episode (successful and failed "
            "alike) in the recorder node's format. Resumable: episodes whose bag is already complete in "
            "--out are skipped. Seeds: r3/seeds.py (collection seeds stay below the evaluation seeds)."
        ),
    )
    p.add_argument(
        "--suite",
        default=DEFAULT_SUITE,
        choices=collected_suites(),
        help="task suite; packing collects its training task as multi-turn episode folders, a "
        "snapshot per turn (default: %(default)s)",
    )
    p.add_argument(
        "--split",
        type=word,
        default=None,
        help="task split: T_M, T_R or T_O; packing: train (default: T_M; packing: train)",
    )
    p.add_argument(
        "--interface",
        default=None,
        choices=tuple(INTERFACE_ANSWERS),
        help=f"how the reasoner acts; {interfaces_help()}. Language Table collects instruction "
        "episodes as bags, packing semantic, tools or plan episodes as turn folders "
        "(default: instruction; packing: semantic)",
    )
    p.add_argument("--scenes", type=integer(), default=64, help="scenes per task (default: %(default)s)")
    p.add_argument(
        "--trials",
        type=integer(),
        default=4,
        help="trials per scene, each its own seed (default: %(default)s)",
    )
    p.add_argument(
        "--out",
        type=folder,
        required=True,
        help="folder for the bags (one sub-folder per episode): a new or empty one, or an earlier "
        "collection to go on with",
    )
    p.add_argument(
        "--workers",
        type=integer(),
        default=1,
        help="worker processes, or Ray actors of one CPU each with --ray (default: %(default)s)",
    )
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        default=None,
        help="run the episodes on a Ray cluster at ADDRESS ('auto', 'ray://host:10001', or 'local' "
        "for a new local instance) instead of local processes; --out must be shared by all nodes",
    )
    p.add_argument(
        "--backend", type=word, default="expert", help="reasoner backend spec (default: %(default)s)"
    )
    p.add_argument(
        "--history",
        default=None,
        choices=["response", "instruction", "none"],
        help="what the reasoner is given of its previous step (default: response; packing: instruction)",
    )
    p.add_argument(
        "--max-steps",
        type=integer(),
        default=None,
        help="decision steps per episode (default: 20; packing: the interface's own budget, 45 semantic "
        "actions, 150 tool calls, 15 plans, as r3 eval and r3 packing demo take)",
    )
    p.add_argument(
        "--steps-per-instruction",
        type=integer(),
        default=20,
        help="control steps per instruction (default: %(default)s)",
    )
    p.add_argument("--width", type=integer(), default=320, help="camera image width (default: %(default)s)")
    p.add_argument("--height", type=integer(), default=240, help="camera image height (default: %(default)s)")
    p.add_argument(
        "--frame-every",
        type=integer(),
        default=0,
        help=f"also record a camera image every N control steps, 0..{UINT32_MAX} (0: only at decision "
        "points; 1 for per-step video, e.g. for the LeRobot export) (default: %(default)s)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    suite = get_suite(args.suite)
    try:
        config = CollectConfig(
            out=args.out,
            suite=args.suite,
            split=suite.collect_split if args.split is None else args.split,
            interface=args.interface or suite.collect_interface,
            scenes=args.scenes,
            trials=args.trials,
            workers=args.workers,
            ray_address=args.ray,
            backend=args.backend,
            history=args.history or suite.default_history,
            max_steps=args.max_steps,
            steps_per_instruction=args.steps_per_instruction,
            width=args.width,
            height=args.height,
            frame_every=args.frame_every,
        )
    except ValueError as exc:  # a bad size, split, backend or worker count
        p.error(str(exc))
    try:
        report = collect(config, progress=not args.quiet)
    except FolderRefused as exc:
        p.error(str(exc))
    print(
        f"r3 collect: {report.planned} planned, {report.skipped} already done, {report.succeeded} succeeded, "
        f"{report.failed} failed -> {args.out}"
    )
    return 0


def dataset_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="r3 dataset", description="Build datasets from episode bags and inspect them."
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    b = sub.add_parser(
        "build",
        help="bags -> an sft or rl dataset (Parquet + PNG + snapshots); packing episode folders -> "
        "a turns dataset",
        description="Read episode bags (or, for --kind turns, the multi-turn episode folders of "
        "`r3 collect --suite packing`) and write a Hugging Face dataset (layout: r3/data/schema.py). "
        "Unreadable, truncated or incomplete sources are named and skipped.",
    )
    b.add_argument(
        "bags",
        nargs="+",
        type=checked_path,
        help="bag folders, or folders holding bag folders (--kind turns: episode folders, or folders "
        "holding them)",
    )
    b.add_argument("--out", type=folder, required=True, help="dataset folder to write")
    b.add_argument(
        "--kind",
        required=True,
        choices=["sft", "rl", "turns"],
        help="sft: with reasoning and the 'Reasoning: ... Instruction: ...' target; rl: reasoning "
        "withheld, repeated-instruction steps removed; turns: every turn of multi-turn packing "
        "episodes with its snapshot (turn-level RL: `r3 train rl` with an interface)",
    )
    b.add_argument(
        "--history",
        choices=["response", "instruction", "none"],
        default=None,
        help="history column: previous response, previous instruction or none "
        "(default: response for sft, instruction for rl; turns keep their episode's own)",
    )
    b.add_argument("--overwrite", action="store_true", help="replace --out if it is not empty")
    s = sub.add_parser(
        "stats",
        help="counts, instruction types (R^3 Figure 6) and reasoning lengths, with a plot",
        description="Print a dataset's statistics, write them to DIR/stats.json and plot them.",
    )
    s.add_argument("dir", type=checked_path, help="dataset folder")
    s.add_argument(
        "--plot",
        type=checked_path,
        default=None,
        help="PNG to write, a new file (default: DIR/stats.png, replaced on each run)",
    )
    e = sub.add_parser(
        "export-lerobot",
        help="bags -> a LeRobot v3.0 dataset (low-level policy data)",
        description="Write episode bags as a LeRobot dataset (format v3.0): one frame per control "
        "step, the instruction in force as the frame's task.",
    )
    e.add_argument("bags", nargs="+", type=checked_path, help="bag folders, or folders holding bag folders")
    e.add_argument("--out", type=folder, required=True, help="LeRobot dataset folder to write")
    e.add_argument("--overwrite", action="store_true", help="replace --out if it is not empty")
    args = p.parse_args(argv)
    try:
        return {"build": _build, "stats": _stats, "export-lerobot": _export}[args.command](args)
    except (ValueError, OSError) as exc:  # a bad source, an occupied --out: one line, no traceback
        print(f"r3 dataset {args.command}: error: {exc}", file=sys.stderr)
        return 2


def bag_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="r3 bag", description="Look after episode bags.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    r = sub.add_parser(
        "repair",
        help="make bags whose recorder was killed readable (marked incomplete)",
        description="Rewrite each bag whose writer died from its recording stream: every complete "
        "message is kept, and the episode marked incomplete; a stream with a torn or unreadable tail is "
        "kept beside the bag as recording.mcap.torn, and a file that is no r3 recording stream is "
        "refused, its folder left as it was. Closed bags are left alone, so running it twice is "
        "harmless; a recording.mcap found beside a closed bag is set aside as recording.mcap.stray, "
        "never rebuilt from. The data readers do this on first read too.",
    )
    r.add_argument("bags", nargs="+", type=checked_path, help="bag folders, or folders holding bag folders")
    args = p.parse_args(argv)
    from r3.data.bags import STOPPED_RECORDING, BagBusyError, repair_bag
    from r3.data.build import find_bags

    try:
        bags = find_bags(args.bags)
    except OSError as exc:
        print(f"r3 bag repair: error: {exc}", file=sys.stderr)
        return 2
    if not bags:
        print(f"r3 bag repair: error: no bag folders in {', '.join(args.bags)}", file=sys.stderr)
        return 2
    failed = 0
    for bag in bags:
        try:
            report = repair_bag(bag)
        except (BagBusyError, ValueError, OSError) as exc:  # busy, damaged, not a bag: one line each
            print(f"r3 bag repair: {bag}: {exc}", file=sys.stderr)
            failed += 1
            continue
        if report.repaired:  # the reason: what was not converted, where the stream went, any id replaced
            print(
                f"repaired {bag}: {report.messages} complete messages kept; marked incomplete "
                f"({STOPPED_RECORDING})" + (f"; {report.reason}" if report.reason else "")
            )
        else:
            print(f"{bag}: {report.reason}")
    return 1 if failed else 0


def _build(args) -> int:
    from tqdm import tqdm

    from r3.data.build import build_dataset, build_history, find_bags
    from r3.data.turns import find_episodes

    build_history(args.kind, args.history)  # a bad combination fails before any source is read
    turns = args.kind == "turns"
    bags = find_episodes(args.bags) if turns else find_bags(args.bags)
    unit = "episode" if turns else "bag"
    if not bags:
        raise ValueError(f"no {unit} folders in {', '.join(args.bags)}")
    with tqdm(total=len(bags), unit=unit, desc=f"build {args.kind}", file=sys.stderr) as bar:
        report = build_dataset(
            bags,
            args.out,
            args.kind,
            history=args.history,
            overwrite=args.overwrite,
            on_bag=lambda _: bar.update(1),
        )
    for name, reason in report.skipped:
        print(f"skipped {unit} {name}: {reason}", file=sys.stderr)
    for name, episode_id, own in report.renamed:
        print(
            f"{unit} {name}: episode id {episode_id} is an earlier source's too; its rows are {own}",
            file=sys.stderr,
        )
    mb = report.bytes_read / 1e6
    dropped = "" if turns else f"; steps dropped: {report.dropped}"
    print(
        f"r3 dataset build: {report.rows} {args.kind} rows from {report.episodes} episodes "
        f"({len(report.skipped)} {unit}s skipped{dropped}) in {report.seconds:.1f} s, "
        f"{mb / max(report.seconds, 1e-9):.1f} MB/s -> {args.out}"
    )
    return 0


def _stats(args) -> int:
    from r3.data.stats import dataset_stats, plot_stats

    own = Path(args.dir) / "stats.png"
    plot = Path(args.plot) if args.plot else own
    if plot.suffix.lower() != ".png":
        raise ValueError(f"--plot {plot}: expected a file name ending in .png")
    if (plot.exists() or plot.is_symlink()) and plot.resolve() != own.resolve():
        raise ValueError(f"--plot {plot} exists; the plot goes to a new file (or leave --plot out)")
    stats = dataset_stats(args.dir)
    plot = plot_stats(stats, plot)
    summary = {k: v for k, v in stats.items() if k != "reasoning_words_all"}
    write_text_atomically(Path(args.dir) / "stats.json", json.dumps(summary, indent=2) + "\n")
    splits = ", ".join(f"{split or 'no split'} {rows}" for split, rows in stats["rows_per_split"].items())
    print(f"{stats['kind']} dataset, {stats['rows']} rows; per split: {splits}")
    for task, rows in stats["rows_per_task"].items():
        types = ", ".join(f"{k} {v}" for k, v in stats["instruction_types"][task].items())
        print(f"  {task:<11} {rows:>6} rows {stats['episodes_per_task'][task]:>5} episodes   {types}")
    if stats["reasoning_words"]:
        print("reasoning words: " + ", ".join(f"{k} {v:g}" for k, v in stats["reasoning_words"].items()))
    if stats["trace_claims"]:
        c = stats["trace_claims"]
        print(
            f"trace claims verified against the recorded state: {c['verified']} of {c['claims']} "
            f"({100 * c['fraction']:.1f} %)"
            + (
                f"; {c['unchecked_steps']} steps unchecked: no simulator snapshot"
                if c["unchecked_steps"]
                else ""
            )
        )
    print(f"plot: {plot}")
    return 0


def _export(args) -> int:
    from tqdm import tqdm

    from r3.data.build import find_bags
    from r3.data.lerobot import export_lerobot

    bags = find_bags(args.bags)
    with tqdm(total=len(bags), unit="bag", desc="export-lerobot", file=sys.stderr) as bar:
        report = export_lerobot(bags, args.out, overwrite=args.overwrite, on_bag=lambda _: bar.update(1))
    for name, reason in report.skipped:
        print(f"skipped bag {name}: {reason}", file=sys.stderr)
    print(f"r3 dataset export-lerobot: {report.episodes} episodes, {report.frames} frames -> {args.out}")
    return 0
