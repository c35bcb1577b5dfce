"""`r3 launch PROFILE`: start a profile's nodes as processes and supervise them until Ctrl-C."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from r3.cli_args import checked_path, folder
from r3.files import bounded_repr
from r3.graph.description import (
    DEFAULT_GRAPH,
    load_profile,
    outside_requirements,
    profile_names,
    unmatched_subscriptions,
)
from r3.graph.supervisor import Supervisor, resolve_executable
from r3.numerals import DECIMAL, INTEGER
from r3.urls import shown_url


def parse_overrides(items: list[str]) -> dict[str, dict]:
    """['r3_reasoner_node.backend=openai:...'] -> {'r3_reasoner_node': {'backend': 'openai:...'}}."""
    overrides: dict[str, dict] = {}
    for item in items:
        target, sep, value = item.partition("=")
        member, dot, key = target.partition(".")
        if not sep or not dot or not member or not key:
            raise ValueError(f"--set {bounded_repr(item, 120)}: expected MEMBER.PARAMETER=VALUE")
        try:
            overrides.setdefault(member, {})[key] = _typed(value)
        except ValueError as exc:
            raise ValueError(f"--set {bounded_repr(item, 120)}: {exc}") from None
    return overrides


def start_problem(profile) -> str | None:
    """Why a member r3 starts cannot be started, before any node starts: its executable is not
    installed (a ROS 2 package this machine lacks), or its reasoner backend spec cannot be built (a bad
    spec, a model folder that is not there, a GPU this machine lacks); None when each can. Building
    loads no weights."""
    from r3.reasoning.backends import check_backend

    for member in profile.started:
        try:
            resolve_executable(member)
        except FileNotFoundError as exc:
            return str(exc)
        if member.executable == "r3_reasoner_node":
            spec = member.parameters.get("backend", "expert")
            try:
                check_backend(spec)
            except ValueError as exc:
                return f"{member.name} backend {shown_url(spec)}: {exc}"
    return None


def already_running(profile) -> list[str]:
    """The node names of ``profile``'s members that already run on this ROS domain ([] where that
    cannot be told), asked of ``r3_ros.graph_probe`` in a process of its own (the core imports no
    rclpy)."""
    names = [m.name for m in profile.started]
    try:
        command = [sys.executable, "-m", "r3_ros.graph_probe", *names]
        probe = subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return probe.stdout.split() if probe.returncode == 0 else []


def another_graph(found: list[str]) -> str:
    """Why a graph is not started beside the nodes ``found`` (names) on its domain."""
    domain = os.environ.get("ROS_DOMAIN_ID") or "0"
    return (
        f"{', '.join('/' + n for n in found)} {'is' if len(found) == 1 else 'are'} already running on ROS "
        f"domain {domain}: a second r3 graph (on this machine or this network) would answer every goal "
        "beside that one and refuse its resets; stop it, use it (r3 run --use-running-graph), or give "
        "this graph a ROS_DOMAIN_ID of its own"
    )


def _typed(value: str):
    """A command line's value as a parameter's: a list written as YAML's ``[a, b]`` (as ``ros2 run
    ... -p`` takes one) for an array parameter; else an int, a float (in digits 0-9, :mod:`r3.numerals`),
    true or false, or the text."""
    if value.lstrip().startswith("["):
        try:
            items = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise ValueError(f"a list is written [a, b]: {str(exc).splitlines()[0]}") from None
        if not isinstance(items, list):
            raise ValueError("a list is written [a, b], with nothing after the closing bracket")
        return items
    if INTEGER.fullmatch(value.strip()):
        try:
            return int(value)
        except ValueError:  # more digits than sys.get_int_max_str_digits()
            digits = len(value.strip())
            raise ValueError(f"a whole number of {digits} digits: too long for any parameter") from None
    if DECIMAL.fullmatch(value.strip()):
        return float(value)
    return {"true": True, "false": False}.get(value.lower(), value)


def launch_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="r3 launch",
        description="Start the nodes of one graph profile as processes, supervise them, and stop them all "
        "on Ctrl-C or as soon as one of them exits (saying which and why). The same profiles are what "
        "launch/r3.launch.py starts with launch_ros on a full ROS 2 install.",
    )
    parser.add_argument(
        "profile",
        nargs="?",
        default="sim_language_table",
        help="profile of the graph description (default: sim_language_table)",
    )
    parser.add_argument(
        "--graph",
        type=checked_path,
        default=str(DEFAULT_GRAPH),
        help="graph description YAML (default: %(default)s)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="MEMBER.PARAM=VALUE",
        help="override a member's parameter, e.g. r3_reasoner_node.backend=openai:URL,model=NAME, or an "
        "array one as a list, r3_recorder_node.topics='[/joint_states, /pusher/command]'; repeatable",
    )
    parser.add_argument(
        "--logs",
        type=folder,
        default="runs/logs",
        help="folder for one log file per member (default: %(default)s)",
    )
    parser.add_argument("--list", action="store_true", help="list the profiles and exit")
    parser.add_argument(
        "--check",
        action="store_true",
        help="start nothing: check that every topic a member subscribes to is published by a "
        "member of the profile (and every service/action called is served), print what members "
        "r3 does not start must provide, exit 1 if the profile is not wired",
    )
    args = parser.parse_args(argv)
    try:
        if args.list:
            for name in profile_names(args.graph):
                print(f"{name:24s} {load_profile(name, args.graph).description}")
            return 0
        profile = load_profile(args.profile, args.graph, parse_overrides(args.set))
    except (OSError, KeyError, ValueError) as exc:  # a wrong file, name or value: nothing starts
        parser.error(exc.args[0] if exc.args else str(exc))
    problems = unmatched_subscriptions(profile)
    # --check starts nothing, so it checks a vendor profile's wiring on a machine without the vendor's
    # executables too (README: `r3 launch gazebo --check` here, where ros_gz is not installed)
    if not args.check and (problem := start_problem(profile)):
        parser.error(problem)
    if args.check:
        for line in outside_requirements(profile):
            print(f"[r3 launch] expects: {line}")
        for problem in problems:
            print(f"[r3 launch] not wired: {problem}")
        print(
            f"[r3 launch] profile {profile.name}: "
            + ("wired" if not problems else f"{len(problems)} problem(s)")
        )
        return 1 if problems else 0
    if found := already_running(profile):
        parser.error(another_graph(found))
    for problem in problems:
        print(f"[r3 launch] warning: {problem}")
    for line in outside_requirements(profile):
        print(f"[r3 launch] start it yourself: {line}")
    stop = {"requested": False}
    signal.signal(signal.SIGINT, lambda *_: stop.update(requested=True))
    signal.signal(signal.SIGTERM, lambda *_: stop.update(requested=True))
    log_dir = Path(args.logs) / time.strftime("%Y%m%d-%H%M%S")
    with Supervisor(profile, log_dir) as supervisor:
        exit_ = supervisor.wait(lambda: stop["requested"])
    if exit_ is not None:
        print(f"[r3 launch] stopped the graph because {exit_}")
        return 1
    print("[r3 launch] stopped on request")
    return 0
