"""`r3 eval --via-ros`: held-out episodes through the ROS graph agree with the in-process ones."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros


def test_via_ros_agrees_with_in_process(tmp_path, private_ros_env):
    # A domain of its own: the command starts its own graph and refuses a running one.
    env = private_ros_env()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "r3.cli",
            "eval",
            "--tasks",
            "mid",
            "--scenes",
            "2",
            "--trials",
            "2",
            "--via-ros",
            "--via-ros-scenes",
            "2",
            "--out",
            str(tmp_path),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 episode(s) (trial 0 of the first 2 scene(s) per task), 0 disagreeing" in run.stdout
    reports = [json.loads(line) for line in (tmp_path / "via_ros.jsonl").read_text().splitlines()]
    in_process = {
        (r["task"], r["seed"]): r
        for r in map(json.loads, (tmp_path / "episodes.jsonl").open())
        if r["trial"] == 0
    }
    assert [(r["task"], r["seed"]) for r in reports] == [("mid", 1_000_000), ("mid", 1_000_001)]
    for r in reports:
        assert (
            r["differences"] == [] and r["instructions"] == in_process[(r["task"], r["seed"])]["instructions"]
        )
    assert len(list((tmp_path / "via_ros" / "bags").iterdir())) >= 2


def test_via_ros_refuses_a_running_graph_before_the_in_process_run(tmp_path, private_ros_env):
    """Found by a hostile user: with another r3 graph in the same ROS domain, `r3 eval --via-ros` ran
    the whole in-process evaluation, then ended in a RuntimeError traceback. It now refuses in one
    line, before the in-process run once the graph is discovered (test_eval_cli.py checks that order)."""
    env = private_ros_env()
    peer = Path(__file__).parent / "peers" / "unanswering_run_task_server.py"  # offers RunTask
    server = subprocess.Popen([sys.executable, str(peer)], env=env, stdout=subprocess.PIPE, text=True)
    out = tmp_path / "eval"
    try:
        assert server.stdout.readline().strip() == "ready"
        run = subprocess.run(
            [sys.executable, "-m", "r3.cli", "eval", "--tasks", "mid", "--scenes", "1", "--trials", "1"]
            + ["--via-ros", "--via-ros-scenes", "1", "--out", str(out)],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
    finally:
        server.kill()
        server.wait(timeout=10)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stdout + run.stderr
    refusal = (
        "error: --via-ros: an r3 graph already runs in this ROS domain; its reasoner may not be the one "
        "evaluated: stop it or set another ROS_DOMAIN_ID"
    )
    # Refused before the in-process run when this process discovers the graph within its discovery
    # wait; on a loaded machine that can take longer, and the same one line then comes after it.
    assert [line for line in run.stderr.strip().splitlines() if "episode/s" not in line] == [refusal]


def test_via_ros_says_how_many_scenes_it_runs(tmp_path, monkeypatch, capsys):
    """Found by a hostile user: `--via-ros-scenes 5` with `--scenes 1` printed "first 5 scene(s)" and
    ran 1. It prints the scenes that run: the evaluation's, when it has fewer."""
    from r3.eval.runner import EvalConfig
    from r3_ros import eval_via_ros

    config = EvalConfig(tasks=("mid",), scenes=1, trials=1)
    record = {"task": "mid", "scene": 0, "trial": 0, "seed": 1_000_000, "success": True, "progress": 1.0}
    monkeypatch.setattr(eval_via_ros, "run_via_ros", lambda c, rs, *_: [{**r, "differences": []} for r in rs])
    args = argparse.Namespace(via_ros_scenes=5, out=tmp_path, via_ros_timeout=1.0)
    assert eval_via_ros.check_via_ros(config, [record], args) == 0
    assert "1 episode(s) (trial 0 of the first 1 scene(s) per task), 0 disagreeing" in capsys.readouterr().out
