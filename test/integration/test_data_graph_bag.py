"""The in-process collection bag has the topics and message types of a bag recorded from the ROS graph."""

from __future__ import annotations

import subprocess
import sys

import pytest

from r3.data.bags import read_messages
from r3.data.build import find_bags, read_episode
from r3.data.episode_bag import record_episode

pytestmark = pytest.mark.ros


def topics(bag) -> set[tuple[str, str]]:
    return {(topic, msgtype) for topic, msgtype, _, _ in read_messages(bag)}


def test_fast_path_bag_matches_the_recorded_graph_bag(tmp_path):
    from r3.reasoning import make_backend
    from r3.sim.language_table.env import LanguageTableEnv

    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "r3.cli",
            "run",
            "--task",
            "V",
            "--seed",
            "3",
            "--out",
            str(tmp_path / "graph"),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (graph_bag,) = find_bags([tmp_path / "graph" / "bags"])
    backend = make_backend("expert")
    backend.load()
    fast_bag = record_episode(
        "V", 3, backend, LanguageTableEnv(width=320, height=240), "V-fast", tmp_path / "fast"
    )
    assert topics(fast_bag) == topics(graph_bag)
    for bag in (graph_bag, fast_bag):  # both read back through the dataset builder
        episode = read_episode(bag)
        assert episode.info.task == "V" and episode.note and episode.steps
