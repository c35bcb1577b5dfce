"""``r3 eval``: evaluate a reasoner on held-out scenes (``run``, the default) and compare two runs.

    r3 eval --reasoner expert --split T_O --scenes 64 --trials 16 --workers 2 --out runs/eval/expert
    r3 eval --suite packing --grounding perception --workers 2 --out runs/eval/packing_perception
    r3 eval compare runs/eval/base runs/eval/r3 --out runs/eval/delta

``run`` writes into ``--out``: episodes.jsonl (the resumable cache), table.md, table.csv and
success.png; with ``--via-ros`` also via_ros.jsonl and via_ros.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from r3.cli_args import checked_path, folder, integer, positive, word
from r3.eval.runner import (
    EvalConfig,
    EvalError,
    config_of,
    eval_defaults,
    evaluate,
    evaluated_suites,
    evaluation_records,
    read_records,
    unread_note,
)
from r3.files import (
    FileRefused,
    bounded_repr,
    printable,
    replaceable_output,
    replaced_output,
    write_text_atomically,
)
from r3.lowlevel import GROUNDINGS
from r3.safety.goals import INTERFACE_ANSWERS, interfaces_help
from r3.seeds import scene_seed
from r3.suites import DEFAULT_SUITE, get_suite

SPLIT_CHOICES = ("all", "T_M", "T_R", "T_O")


def _budget(text: str) -> int | None:
    if text == "full":
        return None
    try:
        return integer(0)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected 'full' or a token count >= 0, got {text!r}") from None


def _defaults(name: str) -> str:
    return ", ".join(f"{suite}: {eval_defaults(suite)[name]}" for suite in evaluated_suites())


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="r3 eval [run]",
        description="Evaluate a reasoner in-process on held-out scenes (seeds from "
        f"{scene_seed(0)} up, disjoint from data collection) of one suite: the 14 Language Table tasks or "
        "the 12 held-out packing goals of R^3 Table 6. Writes per-episode JSONL (resumable), a per-task "
        "table with 95% confidence intervals (Markdown, CSV) and a bar chart.",
    )
    p.add_argument(
        "--reasoner",
        type=word,
        default="expert",
        metavar="SPEC",
        help="reasoner backend: expert, transformers:DIR, openai:URL,model=NAME, or R^3's baselines "
        "random_valid and random_goal_block (default: expert)",
    )
    p.add_argument(
        "--suite",
        default=DEFAULT_SUITE,
        choices=evaluated_suites(),
        help="task suite (default: language_table)",
    )
    p.add_argument(
        "--split",
        default="all",
        choices=SPLIT_CHOICES,
        help="Language Table split: T_M (mid-training), T_R (RL), T_O (held-out) or all 14 tasks "
        "(default: all; packing has one split, its 12 held-out goals)",
    )
    p.add_argument(
        "--tasks",
        default=None,
        metavar="A,B,...",
        help="comma-separated task names, packing goals 1..12 (overrides --split)",
    )
    p.add_argument(
        "--scenes",
        type=integer(),
        default=None,
        help=f"held-out scenes (environment seeds) per task (default: {_defaults('scenes')})",
    )
    p.add_argument(
        "--trials",
        type=integer(),
        default=None,
        help="trials (packing: rollouts) per scene: same scene, fresh policy noise "
        f"(default: {_defaults('trials')})",
    )
    p.add_argument(
        "--grounding",
        default="sim",
        choices=GROUNDINGS.names(),
        help="packing only: how the packing policy sees the scene, sim (simulator poses) or "
        "perception (the base camera through r3.perception) (default: sim)",
    )
    p.add_argument(
        "--interface",
        default="instruction",
        choices=tuple(INTERFACE_ANSWERS),
        help=f"how the reasoner acts; {interfaces_help()}; all but instruction act on packing only "
        "and bring their own step budget (default: %(default)s)",
    )
    p.add_argument(
        "--workers",
        type=integer(),
        default=1,
        help="parallel workers, each with its own simulator and reasoner (default: 1)",
    )
    p.add_argument(
        "--reasoning-budget",
        type=_budget,
        default=None,
        metavar="full|N",
        help="reasoning per step: full, or at most N tokens (0 = instruction only) (default: full)",
    )
    p.add_argument(
        "--max-steps",
        type=integer(),
        default=None,
        help=f"decision steps per episode (default: {_defaults('max_steps')})",
    )
    p.add_argument(
        "--history",
        default=None,
        choices=("response", "instruction", "none"),
        help=f"what the reasoner sees of its previous step (default: {_defaults('history')})",
    )
    p.add_argument(
        "--out", type=folder, required=True, help="output folder; episodes already in it are reused (resume)"
    )
    p.add_argument(
        "--ray",
        default=None,
        metavar="ADDRESS",
        help="run episodes on Ray instead of local processes: 'local' (a private instance), "
        "'auto' or HOST:PORT (a running cluster); --workers actors of one CPU each",
    )
    p.add_argument(
        "--via-ros",
        action="store_true",
        help="afterwards, run a subset through the ROS graph (sim in the loop) and report any "
        "disagreement with the in-process episodes of the same seeds (trial 0 only; Language Table)",
    )
    p.add_argument(
        "--via-ros-scenes",
        type=integer(1),
        default=2,
        help="scenes per task for --via-ros, the first ones (at most --scenes) (default: 2)",
    )
    p.add_argument(
        "--via-ros-timeout",
        type=positive,
        default=120.0,
        help="seconds to wait for the graph to come up and for each episode (default: 120)",
    )
    return p


def _two_names(text: str) -> tuple[str, str]:
    """``--names``: two non-empty names separated by a comma; none may hold a "|" or a control
    character, which would break the Markdown table they head."""
    names = [name.strip() for name in text.split(",")]
    if len(names) != 2 or not all(names):
        raise argparse.ArgumentTypeError(f"expected two names A,B, got {text!r}")
    if any("|" in name or not name.isprintable() for name in names):
        raise argparse.ArgumentTypeError(f"a name holds a '|' or a control character: {text!r}")
    return names[0], names[1]


def _evaluation_folder(text: str) -> Path:
    """``r3 eval compare``'s A or B: a :func:`~r3.cli_args.checked_path`, as the Path its readers take."""
    return Path(checked_path(text))


def _compare_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="r3 eval compare",
        description="Per-task difference B - A of two evaluation folders: success and progress deltas in "
        "percentage points with 95% intervals (Newcombe score interval for success, Welch t for progress), "
        "as 'delta ± half-width' or, where the interval is lopsided, 'delta [low, high]'; bold with a "
        "triangle where the interval excludes 0 (as R^3's delta column); progress without spread on either "
        "side has no interval ('no spread') and is never marked.",
    )
    p.add_argument("a", type=_evaluation_folder, help="evaluation folder A (the baseline)")
    p.add_argument("b", type=_evaluation_folder, help="evaluation folder B")
    p.add_argument(
        "--names",
        type=_two_names,
        default=None,
        metavar="A,B",
        help="column names for A and B (default: their reasoner specs)",
    )
    p.add_argument(
        "--out",
        type=folder,
        default=None,
        help="folder for compare.md and compare.csv: a new or empty one, or an earlier comparison's, which "
        "they replace (default: print only)",
    )
    return p


def _budget_words(budget: int | None) -> str:
    """A reasoning budget in the words of --reasoning-budget: "full" or "N tokens"."""
    return "full" if budget is None else f"{budget} tokens"


def _describe(config: EvalConfig) -> str:
    budget = _budget_words(config.budget)
    record = get_suite(config.suite)
    suite = f"{record.title}, `{config.grounding}` grounding" if record.grounding_choice else record.title
    return (
        f"`{config.reasoner}` ({config.interface} interface) on {suite} ({len(config.tasks)} tasks): "
        f"{config.scenes} held-out scenes "
        f"x {config.trials} trial(s) per task (scene seeds {scene_seed(0)}-{scene_seed(config.scenes - 1)}); "
        f"reasoning budget {budget}, at most {config.max_steps} decision steps, history {config.history}."
    )


@dataclass(frozen=True)
class ViaRos:
    """``--via-ros``, handed in by the ROS side (:mod:`r3_ros.eval_cli`; the core library never imports
    rclpy): ``refusal()`` says why the graph cannot run here (None when it can), asked before the
    in-process run; ``check(config, in-process records, parsed args)`` runs it and gives the exit status."""

    refusal: Callable[[], str | None]
    check: Callable[[EvalConfig, list[dict], argparse.Namespace], int]


def run_main(argv: list[str], via_ros: ViaRos | None = None) -> int:
    from tqdm import tqdm

    from r3.eval import tables
    from r3.eval.plots import success_chart

    parser = _run_parser()
    args = parser.parse_args(argv)
    suite = get_suite(args.suite)
    splits = getattr(suite.tasks(), "SPLITS", None)  # Language Table's T_M, T_R and T_O
    if args.tasks is not None:  # an empty list is refused below, not read as "every task"
        tasks = tuple(t.strip() for t in args.tasks.split(",") if t.strip())
    elif splits is None:
        if args.split != "all":
            parser.error(f"--split {args.split} is a Language Table split; suite {args.suite} has one")
        tasks = None
    else:
        tasks = tuple(suite.tasks().TASKS) if args.split == "all" else splits[args.split]
    if args.via_ros and suite.workcell:  # r3_ros.eval_via_ros drives the board's graph
        parser.error("--via-ros compares Language Table episodes only")
    if args.via_ros and via_ros is None:
        parser.error("--via-ros needs the ROS side: run it as `r3 eval`")
    try:
        config = EvalConfig(
            args.reasoner,
            args.suite,
            tasks,
            args.scenes,
            args.trials,
            args.reasoning_budget,
            args.max_steps,
            args.history,
            args.grounding,
            args.interface,
        )
    except EvalError as exc:
        parser.error(str(exc))

    if args.via_ros and (why := via_ros.refusal()):  # before the in-process run, not after it
        print(f"error: --via-ros: {why}", file=sys.stderr)
        return 2

    bar = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:  # once the workers and the reasoner are checked: a refusal shows no empty bar
            bar = tqdm(total=total, unit="episode", file=sys.stderr, dynamic_ncols=True)
        bar.n = done
        bar.refresh()

    records, error = None, None
    try:
        records = evaluate(config, args.out, args.workers, args.ray, progress)
    except EvalError as exc:
        error = exc
    finally:
        if bar is not None:
            bar.close()  # the bar's line ends before anything else is printed
    if records is None:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if beside := len(read_records(args.out)) - len(records):  # kept, and counted by a run of their grid
        print(
            f"note: {printable(str(args.out))} also holds {beside} episode(s) outside this run's tasks, "
            "scenes and trials (an earlier run's, e.g. of another split): kept, not in this table",
            file=sys.stderr,
        )
    rows = tables.task_rows(records, config.tasks)
    header = _describe(config)
    table = tables.markdown(rows)
    write_text_atomically(args.out / "table.md", f"{header}\n\n{table}\n")  # a rerun's: never torn
    write_text_atomically(args.out / "table.csv", tables.to_csv(rows))
    chart = success_chart(rows, args.out / "success.png", f"{config.reasoner}: success per task")
    print(f"{header}\n\n{table}\n\nwritten: {args.out / 'table.md'}, {args.out / 'table.csv'}, {chart}")
    if args.via_ros:
        return via_ros.check(config, records, args)
    return 0


#: What ``compare --out`` writes. Like the demos' output, it replaces only an earlier comparison
#: (a folder r3 marked as one): never a user's own compare.md, an evaluation or any other folder.
COMPARE_FILES, COMPARISON = ("compare.md", "compare.csv"), "a comparison"


def _shown(name: str) -> str:
    return printable(name).replace("|", "\\|")


def compare_main(argv: list[str]) -> int:
    from r3.eval import tables

    args = _compare_parser().parse_args(argv)
    try:
        if args.out is not None:  # refused before anything is printed
            replaceable_output(args.out, COMPARE_FILES, overwrite=True, what=COMPARISON)
        config_a, config_b = config_of(args.a), config_of(args.b)
    except (EvalError, FileRefused) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if config_a.suite != config_b.suite:
        print(f"error: A evaluates {config_a.suite}, B {config_b.suite}: no task in common", file=sys.stderr)
        return 2
    # every setting but the reasoner, which the comparison is of, that changes what the two counted
    for key in ("scenes", "trials", "budget", "max_steps", "history", "interface", "grounding"):
        if (value_a := getattr(config_a, key)) != (value_b := getattr(config_b, key)):
            if key == "budget":  # None is no budget: the header's and the option's "full"
                name, shown_a, shown_b = "reasoning budget", _budget_words(value_a), _budget_words(value_b)
            else:
                name, shown_a, shown_b = key, bounded_repr(value_a), bounded_repr(value_b)
            print(f"note: {name} differs: A {shown_a}, B {shown_b}", file=sys.stderr)
    # the episodes each evaluation's own table counts: its grid's, nothing appended beside them
    unread_a, unread_b = [], []
    records_a = evaluation_records(args.a, config_a, unread_a)
    records_b = evaluation_records(args.b, config_b, unread_b)
    for side, evaluation, unread in (("A", args.a, unread_a), ("B", args.b, unread_b)):
        if unread:  # torn, edited or foreign: the table counts that episode only if another line has it
            print(f"note: {side}: {unread_note(evaluation, unread)}", file=sys.stderr)
    have = {"A": {r["task"] for r in records_a}, "B": {r["task"] for r in records_b}}
    tasks = [t for t in config_a.tasks if t in have["A"] and t in have["B"]]
    if not tasks:
        empty = [
            f"{side} ({printable(str(evaluation))}) has no finished episode"
            for side, evaluation in (("A", args.a), ("B", args.b))
            if not have[side]
        ]
        why = (
            "; ".join(empty)
            or f"A has tasks {bounded_repr(sorted(have['A']))}, B {bounded_repr(sorted(have['B']))}"
        )
        print(f"error: the two evaluations share no task with finished episodes: {why}", file=sys.stderr)
        return 2
    if left_out := [t for t in dict.fromkeys((*config_a.tasks, *config_b.tasks)) if t not in tasks]:
        why = [
            f"{t} (none in {' or '.join(k for k, held in have.items() if t not in held)})" for t in left_out
        ]
        print(f"note: left out, no finished episode in both: {', '.join(why)}", file=sys.stderr)
    # a config's reasoner is a file's text: its control characters shown escaped, its "|" not a column
    name_a, name_b = args.names or (_shown(config_a.reasoner), _shown(config_b.reasoner))
    rows = tables.compare_rows(records_a, records_b, tasks)
    header = (
        f"B = {name_b} minus A = {name_a}, in percentage points with 95% intervals (Δ ± half-width, or "
        "Δ [low, high] where lopsided); bold with ▲/▼: the interval excludes 0."
    )
    if any(r.progress_delta is None for r in rows):  # Welch's interval needs two values a side
        header += " Δ progress -: fewer than two episodes on a side."
    text = f"{header}\n\n{tables.compare_markdown(rows, name_a, name_b)}\n"
    print(text)
    if args.out is not None:
        with replaced_output(args.out, COMPARE_FILES, overwrite=True, what=COMPARISON) as staging:
            (staging / "compare.md").write_text(text)
            (staging / "compare.csv").write_text(tables.compare_csv(rows))
    return 0


def eval_main(argv: list[str], via_ros: ViaRos | None = None) -> int:
    """Dispatch ``r3 eval [run] ...`` and ``r3 eval compare A B``."""
    if argv[:1] == ["compare"]:
        return compare_main(argv[1:])
    if argv[:1] in (["-h"], ["--help"]):
        print(
            "usage: r3 eval [run] [options]  |  r3 eval compare A B [options]\n"
            "  r3 eval run --help       evaluate a reasoner on held-out scenes (the default)\n"
            "  r3 eval compare --help   per-task difference of two evaluations"
        )
        return 0
    return run_main(argv[1:] if argv[:1] == ["run"] else argv, via_ros)
