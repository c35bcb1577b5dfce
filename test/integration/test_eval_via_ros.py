"""`r3 eval --via-ros`: held-out episodes through the ROS graph agree with the in-process ones."""

from __future__ import annotations

import json
import subprocess
import sys

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
