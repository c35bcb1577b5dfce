"""`r3 run`: run one episode through the ROS graph, with a live view of the reasoning.

Uses a graph that is already running (``r3 launch`` or ``ros2 launch``), or starts the profile's
nodes itself and stops them afterwards. Exit status: 0 when the episode ran to an end (success or
not), 1 on errors (a node died, a backend could not load, the graph never came up).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import textwrap
import time
from pathlib import Path

from r3.cli_args import checked_path, folder, integer, positive, seed, word
from r3.data.bags import COMPLETE, METADATA_FILE, read_episode_info, status_reason
from r3.data.video import default_format, episode_video_from_bag
from r3.files import printable, shown_text
from r3.graph.cli import another_graph, parse_overrides, start_problem
from r3.graph.description import DEFAULT_GRAPH, load_profile
from r3.graph.node_params import NODE_PARAMETERS
from r3.graph.supervisor import Supervisor
from r3.reasoning.backends.spec import same_spec
from r3.safety.goals import (
    INT32_MAX,
    INTERFACE_ANSWERS,
    UINT32_MAX,
    GoalRefused,
    check_interface,
    check_run_task,
    interfaces_help,
)
from r3.suites import DEFAULT_SUITE, get_suite, suite_names
from r3.urls import shown_url

#: How long `r3 run` looks for an already running graph before starting one (DDS discovery time).
RUNNING_GRAPH_DISCOVERY_S = 2.0
#: The reasoner r3 run talks to (silent for ``RUN_CLIENT_TIMEOUT_S``, it counts as dead).
REASONER_NODE = "/r3_reasoner_node"
#: How long to wait for the reasoner's own error result after another member of the graph died
#: (it comes at once when the low-level node reports the failure, else after the heartbeat timeout).
MEMBER_EXIT_GRACE_S = 1.0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="r3 run",
        description="Run one episode through the r3 ROS graph: reset the simulated scene, let the reasoner "
        "observe, reason and instruct the low-level policy until the task succeeds or the step budget is "
        "spent, and record the episode as a rosbag2 bag. Prints the reasoning live and ends with the "
        "outcome, the bag path and a video.",
    )
    p.add_argument("--suite", type=word, default=DEFAULT_SUITE, help="task suite (default: %(default)s)")
    p.add_argument(
        "--task",
        default=None,
        help="task id, e.g. V, line, clear_qtr; packing: 1..12 or train (default: the suite's own, "
        f"{', '.join(f'{name} {task}' for name in suite_names() if (task := get_suite(name).run_task))})",
    )
    p.add_argument(
        "--seed", type=seed, default=3, help="scene seed; same seed, same episode (default: %(default)s)"
    )
    p.add_argument(
        "--reasoner",
        type=word,
        default=None,
        metavar="SPEC",
        help="reasoner backend: expert (default), transformers:DIR or openai:URL,model=NAME; only "
        "used when r3 run starts the graph itself",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="MEMBER.PARAM=VALUE",
        help="override a member's parameter when r3 run starts the graph, e.g. "
        "r3_reasoner_node.max_consecutive_invalid=5; repeatable",
    )
    p.add_argument(
        "--interface",
        default="instruction",
        choices=tuple(INTERFACE_ANSWERS),
        help="how the reasoner acts (sets r3_reasoner_node.interface when r3 run starts the graph); "
        f"{interfaces_help()}; all but instruction act on packing only (default: %(default)s)",
    )
    p.add_argument(
        "--max-steps",
        type=integer(0, UINT32_MAX),
        default=0,
        help="decision steps; 0 = the profile's default (20; packing 15), or the interface's own budget "
        "for the other interfaces (packing: 45 semantic actions, 150 tool calls)",
    )
    p.add_argument(
        "--reasoning-budget",
        type=integer(-1, INT32_MAX),
        default=-1,
        help="reasoning tokens per step: -1 unlimited (default), 0 instruction only, N truncate at N",
    )
    p.add_argument("--profile", default=None, help="graph profile to start (default: sim_SUITE)")
    p.add_argument(
        "--graph",
        type=checked_path,
        default=str(DEFAULT_GRAPH),
        help="graph description YAML (default: %(default)s)",
    )
    p.add_argument(
        "--out", type=folder, default="runs", help="folder for bags, logs and videos (default: %(default)s)"
    )
    p.add_argument(
        "--video",
        choices=("auto", "gif", "mp4", "none"),
        default="auto",
        help="episode video from the bag's camera frames; auto: mp4 when an H.264 encoder "
        "(imageio-ffmpeg) is installed, else gif (default: auto)",
    )
    p.add_argument(
        "--use-running-graph", action="store_true", help="do not start nodes; fail if no graph is running"
    )
    p.add_argument(
        "--startup-timeout",
        type=positive,
        default=60.0,
        help="seconds to wait for the graph to come up, and then for the RunTask goal to be accepted "
        "(default: %(default)s)",
    )
    p.add_argument("--quiet", action="store_true", help="no live view, only the final summary")
    return p


class LiveView:
    """Prints each decision step readably: header, wrapped reasoning, instruction, progress. What the
    model wrote is shown as every live view shows it (``shown_text``: escaped, one answer cut at
    ``SHOWN_CHARACTERS``)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.width = min(100, shutil.get_terminal_size((100, 20)).columns)
        self.bold = "\033[1m" if sys.stdout.isatty() else ""
        self.reset = "\033[0m" if sys.stdout.isatty() else ""

    def step(self, msg) -> None:
        if self.quiet:
            return
        title = f" step {msg.step} "
        print(f"{self.bold}{title.center(self.width, '-')}{self.reset}")
        if msg.reasoning:
            for line in textwrap.wrap(shown_text(msg.reasoning), self.width - 2):
                print(f"  {line}")
        if msg.valid:
            print(f"{self.bold}Instruction:{self.reset} {shown_text(msg.instruction)}")
        else:
            print(f"{self.bold}Refused:{self.reset} {shown_text(msg.error)} (no motion commanded)")
        print(f"  [{printable(msg.model_id)}, {msg.latency_model_s * 1000:.0f} ms]", flush=True)

    def feedback(self, fb) -> None:
        if not self.quiet:
            print(f"  progress after step {fb.step}: {fb.progress:.0%}", flush=True)


def _interface_steps(interface: str) -> int:
    """The step budget of an interface other than instruction (0: the profile's default)."""
    if interface == "instruction":
        return 0
    from r3.packing_episode import SUITE_ADAPTERS

    return SUITE_ADAPTERS[interface].default_steps


def graph_overrides(args) -> dict:
    """The parameters of the graph r3 run starts: ``--set``, with what r3 run's own options set; a
    ValueError for a bad --set, for the recorder's output_dir (r3 run's bags go under --out), and for a
    reasoner parameter whose option says otherwise (one of the two would be overruled unseen)."""
    overrides = parse_overrides(args.set)
    if "output_dir" in overrides.get("r3_recorder_node", {}):
        raise ValueError("--set r3_recorder_node.output_dir: r3 run's bags go under --out; set --out instead")
    options = {"backend": ("--reasoner", args.reasoner), "interface": ("--interface", args.interface)}
    for name, (option, value) in options.items():
        given = overrides.get("r3_reasoner_node", {}).get(name)
        if value is None or (name == "interface" and value == "instruction" and given is not None):
            continue  # the option left at its default: the --set value stands
        same = given == value or (name == "backend" and isinstance(given, str) and same_spec(given, value))
        if given is not None and not same:
            raise ValueError(
                f"--set r3_reasoner_node.{name}={shown_url(given)} contradicts {option} {shown_url(value)}"
            )
        if name == "backend" or value != "instruction":
            overrides.setdefault("r3_reasoner_node", {})[name] = value
    overrides.setdefault("r3_recorder_node", {})["output_dir"] = str((args.out / "bags").resolve())
    return overrides


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.task is None:  # the suite's own; an unknown suite is refused with the goal's checks below
        args.task = get_suite(args.suite).run_task if args.suite in suite_names() else ""
    try:  # before anything starts: a --set is refused at once, not after the graph came up
        overrides = graph_overrides(args)
    except ValueError as exc:
        _parser().error(exc.args[0] if exc.args else str(exc))
    interface = str(overrides.get("r3_reasoner_node", {}).get("interface", "instruction"))
    import rclpy

    from r3_msgs.action import RunTask
    from r3_ros.commander import R3Commander, TaskStatus
    from r3_ros.heartbeat import RUN_CLIENT_TIMEOUT_S, HeartbeatMonitor, HeartbeatPublisher
    from r3_ros.node import R3Node

    goal = RunTask.Goal(
        suite=args.suite,
        task=args.task,
        seed=args.seed,
        max_steps=args.max_steps,
        reasoning_budget=args.reasoning_budget,
        reset_scene=True,
    )
    try:  # the reasoner's own checks, here before a graph is started only to refuse the goal
        suite, _ = check_run_task(goal)
        interface = check_interface(interface, suite)
    except GoalRefused as exc:
        _parser().error(str(exc))
    goal.max_steps = args.max_steps or _interface_steps(interface)
    out = args.out
    if out.exists() and not out.is_dir():
        _parser().error(f"--out {out} is a file, not a folder")
    rclpy.init()
    node = R3Node("r3_run")
    view = LiveView(args.quiet)
    commander = R3Commander(node, on_step=view.step)
    # On a graph it did not start, r3 run learns that the reasoner died from its heartbeats.
    HeartbeatPublisher(node, warn_late=False)  # not spun while it starts a graph: no stall then
    monitor = HeartbeatMonitor(node)
    supervisor = None
    interrupted = {"count": 0}
    signal.signal(signal.SIGINT, lambda *_: interrupted.update(count=interrupted["count"] + 1))
    try:
        if args.use_running_graph:
            if not commander.wait_until_ready(args.startup_timeout):
                return _fail(f"no running r3 graph offered /r3/run_task within {args.startup_timeout:.0f} s")
        elif not commander.wait_until_ready(RUNNING_GRAPH_DISCOVERY_S):
            try:
                profile = load_profile(args.profile or f"sim_{args.suite}", args.graph, overrides)
            except (ValueError, OSError, KeyError) as exc:  # a bad graph, profile or --set: nothing started
                return _fail(exc.args[0] if exc.args else str(exc))
            if found := [m.name for m in profile.started if monitor.silent_for(f"/{m.name}") < 1.0]:
                return _fail(another_graph(found))  # its nodes beat, its reasoner serves no RunTask (yet)
            problem = start_problem(profile)
            if problem:
                return _fail(problem)
            _warn_if_short_of_disk(profile, out)
            log_dir = out / "logs" / time.strftime("%Y%m%d-%H%M%S")
            supervisor = Supervisor(profile, log_dir, echo=(lambda _: None) if args.quiet else None)
            supervisor.start()
            ready = commander.wait_until_ready(
                args.startup_timeout, lambda: supervisor.poll() is None and not interrupted["count"]
            )
            if not ready:
                return _fail(_startup_failure(supervisor, args.startup_timeout))
        print(f"r3 run: {args.suite} task {args.task}, seed {args.seed}", flush=True)
        handle = commander.start_task(goal, on_feedback=view.feedback)
        canceled, sent_at = False, time.monotonic()
        while handle.spin_once() not in (TaskStatus.DONE, TaskStatus.REJECTED):
            if handle.status is TaskStatus.PENDING and time.monotonic() - sent_at > args.startup_timeout:
                return _fail(f"the RunTask goal was not answered within {args.startup_timeout:g} s")
            if interrupted["count"] and not canceled:
                print("r3 run: canceling the episode (Ctrl-C again to stop at once)", flush=True)
                handle.cancel()
                canceled = True
            if interrupted["count"] > 1:
                return _fail("interrupted")
            dead = monitor.dead([REASONER_NODE], RUN_CLIENT_TIMEOUT_S)
            if supervisor is None and dead:
                # It may only be frozen: stop the task, so that it does not go on when it wakes (the
                # stop reaches the running instruction's server at once, the cancel the reasoner).
                handle.cancel()
                print(f"outcome:  error: {dead[0]} stopped responding; the episode was stopped", flush=True)
                return _fail(f"{dead[0]} stopped responding (no heartbeat for {RUN_CLIENT_TIMEOUT_S:.0f} s)")
            if supervisor is not None and supervisor.poll() is not None:
                # A member of the graph died. Prefer the reasoner's own error result if it comes
                # within MEMBER_EXIT_GRACE_S; if the reasoner itself died, or its answer does not
                # come in time, say which member died. Either way the graph
                # is stopped on the way out and the recorder closes the bag as incomplete.
                grace = 0.0 if supervisor.first_exit.member == "r3_reasoner_node" else MEMBER_EXIT_GRACE_S
                deadline = time.monotonic() + grace
                while time.monotonic() < deadline and handle.spin_once() is not TaskStatus.DONE:
                    pass
                if handle.status is not TaskStatus.DONE:
                    print(f"outcome:  error: {supervisor.first_exit}", flush=True)
                    return _fail(f"{supervisor.first_exit}; the episode was stopped")
                break
        if handle.status is TaskStatus.REJECTED:
            return _fail("the reasoner rejected the RunTask goal")
        return _summarise(handle.result, out, args.video)
    finally:
        if supervisor is not None:
            supervisor.stop()
        node.destroy_node()
        rclpy.try_shutdown()


def _summarise(result, out: Path, video: str) -> int:
    # The reasoner reports where the recorder put the bag, wherever the graph was started.
    bag = Path(result.bag) if result.bag else (out / "bags" / result.episode_id).resolve()
    print("-" * 60)
    print(f"outcome:  {'success' if result.success else 'no success'} ({result.reason})", flush=True)
    print(f"progress: {result.progress:.0%} after {result.steps} decision steps")
    print(f"instructions: {list(result.instructions)}")
    if bag.is_dir():
        _wait_for_bag(bag)
        print(f"bag:      {bag}")
        if not (bag / METADATA_FILE).is_file():  # r3 run leaves a torn bag to `r3 bag repair`
            print("          not closed: its recorder stopped before the end (r3 bag repair keeps the rest)")
        elif (info := read_episode_info(bag)).status != COMPLETE:
            print(f"          {info.status}: {printable(status_reason(bag, info))}")
        if video != "none":
            try:
                suffix = default_format() if video == "auto" else video
                path = episode_video_from_bag(bag, bag.with_suffix(f".{suffix}"))
                print(f"video:    {path}")
            except (ValueError, OSError) as exc:
                print(f"video:    not written ({exc})")
    if result.reason.startswith("error"):
        print(f"error: {result.reason[len('error: ') :]}", file=sys.stderr)
        return 1
    return 0


def _warn_if_short_of_disk(profile, out: Path) -> None:
    """Say so before the episode when --out's disk is short of the recorder's ``min_free_mb``: the
    recorder then keeps the episode's frames out of its bag (it closes incomplete, saying why)."""
    recorder = next((m for m in profile.started if m.executable == "r3_recorder_node"), None)
    if recorder is None:
        return
    floor = recorder.parameters.get("min_free_mb", NODE_PARAMETERS["r3_recorder_node"]["min_free_mb"].default)
    existing = next(p for p in (out.absolute(), *out.absolute().parents) if p.exists())
    free_mb = shutil.disk_usage(existing).free / 2**20
    if free_mb < floor:
        print(
            f"r3 run: warning: {existing} has {free_mb:.0f} MB free, less than the recorder's min_free_mb "
            f"({floor} MB): the bag will drop messages",
            file=sys.stderr,
        )


def _wait_for_bag(bag: Path, timeout_s: float = 3.0) -> None:
    """The recorder closes the bag shortly after the episode ends; wait for it (bounded)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (bag / "metadata.yaml").is_file() and read_episode_info(bag).reason:
            return
        time.sleep(0.05)


def _startup_failure(supervisor: Supervisor, timeout_s: float) -> str:
    exit_ = supervisor.poll()
    if exit_ is None:
        return f"the graph did not offer /r3/run_task within {timeout_s:.0f} s (logs in {supervisor.log_dir})"
    return f"{exit_}: {supervisor.said_last(exit_.member)}"


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr, flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
