"""``r3 eval --via-ros``: rerun evaluated episodes through the ROS graph and report disagreements.

Starts the ``sim_language_table`` profile with the evaluation's reasoner and history (so the graph
must not already run in this ROS domain), sends one RunTask goal per in-process record and compares
instructions, decision steps, success and progress. RunTask carries only a seed, so this checks
trial 0 of each scene (the trial whose noise seed is the scene seed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import rclpy

from r3.eval.runner import EvalConfig, completed
from r3.graph.description import load_profile
from r3.graph.supervisor import Supervisor
from r3_msgs.action import RunTask
from r3_ros.commander import R3Commander, TaskStatus
from r3_ros.node import R3Node

#: Progress values closer than this agree (they pass through a float64 message field).
PROGRESS_TOLERANCE = 1e-9
#: How long to look for a graph that is already running before starting ours: a new process on two
#: busy cores took over 2 s to discover one, and then sent its episodes to that graph's reasoner. A
#: via-ros check runs for minutes; a few seconds more to be sure cost nothing.
DISCOVERY_S = 5.0


def differences(in_process: dict, via_ros: dict) -> list[str]:
    """What differs between an in-process record and the graph's result for the same seed.

    >>> differences({"success": True, "progress": 1.0, "decision_steps": 2, "instructions": ["a", "b"]},
    ...             {"success": True, "progress": 1.0, "decision_steps": 3, "instructions": ["a", "c", "d"]})
    ['decision steps 2 in-process, 3 via ROS', 'instruction 1 differs: in-process "b", via ROS "c"']
    """
    out = []
    if via_ros.get("reason", "").startswith("error"):
        out.append(f"the graph ended the episode with {via_ros['reason']}")
    if in_process["success"] != via_ros["success"]:
        out.append(f"success {in_process['success']} in-process, {via_ros['success']} via ROS")
    if in_process["decision_steps"] != via_ros["decision_steps"]:
        out.append(
            f"decision steps {in_process['decision_steps']} in-process, {via_ros['decision_steps']} via ROS"
        )
    if abs(in_process["progress"] - via_ros["progress"]) > PROGRESS_TOLERANCE:
        out.append(f"progress {in_process['progress']:.6f} in-process, {via_ros['progress']:.6f} via ROS")
    for i, (a, b) in enumerate(zip(in_process["instructions"], via_ros["instructions"])):
        if a != b:
            out.append(f'instruction {i} differs: in-process "{a}", via ROS "{b}"')
            break
    return out


class ViaRosError(RuntimeError):
    """The graph cannot run or answer here (one already runs in this ROS domain, it did not come up,
    an episode got no result); the message says why, in one line."""


#: Why the graph is not started next to a running one.
GRAPH_RUNS = (
    "an r3 graph already runs in this ROS domain; its reasoner may not be the one evaluated: stop it "
    "or set another ROS_DOMAIN_ID"
)


def running_graph_refusal(timeout_s: float = DISCOVERY_S) -> str | None:
    """Why ``--via-ros`` cannot start its graph here (one runs in this ROS domain already, found
    within ``timeout_s``); None when it can. Asked before the in-process run, which it would follow."""
    rclpy.init()
    node = R3Node("r3_eval_via_ros_check")
    try:
        return GRAPH_RUNS if R3Commander(node).wait_until_ready(timeout_s) else None
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def run_via_ros(config: EvalConfig, records: list[dict], out: Path, timeout_s: float = 120.0) -> list[dict]:
    """Run the episodes of ``records`` (trial 0) through a graph started here; one report per record.

    A report holds task, scene, seed, the graph's success, progress, decision_steps, instructions and
    reason, and ``differences`` (empty when the two runs agree).
    """
    if any(r["trial"] != 0 for r in records):
        raise ValueError("RunTask has no trial: only trial-0 episodes can be checked through the graph")
    rclpy.init()
    node = R3Node("r3_eval_via_ros")
    commander = R3Commander(node)
    supervisor = None
    try:
        if commander.wait_until_ready(DISCOVERY_S):
            raise ViaRosError(GRAPH_RUNS)  # one started during the in-process run
        overrides = {
            "r3_reasoner_node": {"backend": config.reasoner, "history": config.history},
            "r3_recorder_node": {"output_dir": str((out / "bags").resolve())},
        }
        supervisor = Supervisor(
            load_profile("sim_language_table", overrides=overrides), out / "logs", echo=lambda _: None
        )
        supervisor.start()
        if not commander.wait_until_ready(timeout_s, lambda: supervisor.poll() is None):
            raise ViaRosError(f"the graph did not come up within {timeout_s:.0f} s (logs in {out / 'logs'})")
        return [_check(commander, supervisor, config, r, timeout_s) for r in records]
    finally:
        if supervisor is not None:
            supervisor.stop()
        node.destroy_node()
        rclpy.try_shutdown()


def _check(
    commander: R3Commander, supervisor: Supervisor, config: EvalConfig, record: dict, timeout_s: float
) -> dict:
    goal = RunTask.Goal(
        suite=config.suite,
        task=record["task"],
        seed=record["seed"],
        max_steps=config.max_steps,
        reasoning_budget=-1 if config.budget is None else config.budget,
        reset_scene=True,
    )
    handle = commander.start_task(goal)
    deadline = time.monotonic() + timeout_s
    while handle.spin_once() not in (TaskStatus.DONE, TaskStatus.REJECTED):
        if supervisor.poll() is not None or time.monotonic() > deadline:
            handle.cancel()
            raise ViaRosError(
                f"{record['task']} seed {record['seed']}: no result "
                f"({supervisor.first_exit or f'timeout after {timeout_s:.0f} s'})"
            )
    if handle.status is TaskStatus.REJECTED:
        raise ViaRosError("the reasoner rejected the RunTask goal")
    res = handle.result
    via = {
        "success": bool(res.success),
        "progress": float(res.progress),
        "decision_steps": int(res.steps),
        "instructions": list(res.instructions),
        "reason": res.reason,
    }
    return {
        "task": record["task"],
        "scene": record["scene"],
        "seed": record["seed"],
        **via,
        "differences": differences(record, via),
    }


def check_via_ros(config: EvalConfig, records: list[dict], args: argparse.Namespace) -> int:
    """``r3 eval --via-ros``: rerun trial 0 of the first scenes through the graph, write via_ros.jsonl
    and via_ros.md next to the evaluation, and exit 1 when any episode disagrees (2 when the graph
    cannot run or answer, with one line saying why)."""
    scenes = min(args.via_ros_scenes, config.scenes)  # the evaluation's scenes are all there are
    subset = [r for r in completed(records) if r["trial"] == 0 and r["scene"] < scenes]
    try:
        report = run_via_ros(config, subset, args.out / "via_ros", args.via_ros_timeout)
    except ViaRosError as exc:
        print(f"error: --via-ros: {exc}", file=sys.stderr)
        return 2
    with open(args.out / "via_ros.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in report)
    disagree = [r for r in report if r["differences"]]
    lines = [
        (
            f"Through the ROS graph: {len(report)} episode(s) (trial 0 of the first {scenes} "
            f"scene(s) per task), {len(disagree)} disagreeing with the in-process run."
        ),
        "",
    ]
    lines += [f"- {r['task']} seed {r['seed']}: " + "; ".join(r["differences"]) for r in disagree]
    (args.out / "via_ros.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if disagree else 0
