"""``r3 eval``: the core's command (:mod:`r3.eval.cli`) with the ``--via-ros`` check handed in.

The core library never imports the ROS side, so this adapter passes it the check that reruns episodes
through the graph; rclpy loads only when ``--via-ros`` is given.
"""

from __future__ import annotations

import argparse

from r3.eval import cli
from r3.eval.runner import EvalConfig


def eval_main(argv: list[str]) -> int:
    return cli.eval_main(argv, via_ros=cli.ViaRos(_refusal, _check_via_ros))


def _refusal() -> str | None:
    from r3_ros.eval_via_ros import running_graph_refusal  # rclpy only on this path

    return running_graph_refusal()


def _check_via_ros(config: EvalConfig, records: list[dict], args: argparse.Namespace) -> int:
    from r3_ros.eval_via_ros import check_via_ros  # rclpy only on this path

    return check_via_ros(config, records, args)
