"""The call interfaces (ERR's semantic actions, ZAP's pose tools) through the ROS graph: the reasoner's
``interface`` parameter makes it prompt for and parse one call per step, the FollowInstruction goal
says which grammar its text is in (and how many steps the episode has left), the packing sim node
carries the call out on its cell (the same ``PackingCell.carry_out`` as in process) and answers
with what the model reads next (the result line; the tools observation), which the reasoner feeds
to the next step and records. A suite or low-level node that does not serve the interface refuses
the goal with a reason before anything moves."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from r3.data.bags import COMPLETE, read_episode_info, read_messages
from r3.graph import names
from r3.packing_episode import PackingCell, run_packing_episode
from r3.reasoning.backends import make_backend

pytestmark = [pytest.mark.ros, pytest.mark.slow]
R3 = [sys.executable, "-m", "r3.cli"]
#: Interface -> (decision steps, the pattern of its first call from the expert).
FIRST_CALLS = {
    "semantic": (4, r"pick\([a-z ]+, \[\d+, \d+\]\)"),  # pick, place, home, pick
    "tools": (6, r"update_todo\(items=\[.*\]\)|change_query\(queries=\[.*\]\)"),
    "plan": (2, r"1\. pick\([a-z ]+, \[\d+, \d+\]\)(\n\d+\. .+)+"),
}


def _run(args: list[str], out: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        R3 + ["run", "--quiet", "--video", "none", "--out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=420,
        env=env,
        check=False,
    )


@pytest.mark.parametrize("interface", list(FIRST_CALLS))
def test_a_packing_episode_through_the_graph_matches_in_process(interface, tmp_path, private_ros_env):
    steps, first_call = FIRST_CALLS[interface]
    run = _run(
        ["--suite", "packing", "--task", "4", "--seed", "0", "--max-steps", str(steps)]
        + ["--interface", interface],
        tmp_path,
        private_ros_env(),
    )
    assert run.returncode == 0, run.stdout + run.stderr
    instructions = eval(re.search(r"^instructions: (\[.*\])$", run.stdout, re.MULTILINE).group(1))
    expected = run_packing_episode(
        "4",
        0,
        make_backend("expert"),
        cell=PackingCell.build(grounding="perception"),  # the profile's policy sees through perception
        max_steps=steps,
        render=False,
        interface=interface,
    )
    assert instructions == [s.instruction for s in expected.steps]
    assert re.fullmatch(first_call, instructions[0]), instructions[0]

    bag = Path(re.search(r"^bag:\s+(\S+)$", run.stdout, re.MULTILINE).group(1))
    assert read_episode_info(bag).status == COMPLETE
    by_topic: dict[str, list] = {}
    for topic, _, _, msg in read_messages(bag):
        by_topic.setdefault(topic, []).append(msg)
    outcomes = [o.outcome for o in by_topic[names.INSTRUCTION_OUTCOMES]]
    assert outcomes == [s.outcome for s in expected.steps] and all(
        o.split(": ")[0].endswith("esult") for o in outcomes
    )
    steps = by_topic[names.REASONER_STEPS]
    assert steps[1].history == f"{instructions[0]}\n{outcomes[0]}"  # the result line reached the model


def test_an_interface_the_suite_does_not_serve_is_refused_before_anything_moves(tmp_path):
    """The reasoner node's own refusal, of a parameter set by hand on a launched graph (`r3 run` refuses
    the same through --interface or --set before any graph starts: test_cli_numbers.py)."""
    from hostile import Client, Graph, own_domain

    from r3_msgs.action import RunTask

    graph = Graph("sim_language_table", tmp_path, own_domain(), sets=("r3_reasoner_node.interface=semantic",))
    client = Client("r3_interface_client", graph.domain)
    try:
        assert client.wait_until_ready(90), "the graph did not come up:\n" + "".join(graph.lines)
        result, _ = client.run_task(RunTask.Goal(suite="language_table", task="T", seed=5, reset_scene=True))
    finally:
        client.close()
        graph.stop()
    assert result.reason == "error: invalid goal: interface 'semantic' acts on packing, not 'language_table'"
    assert not graph.bags.exists() or not any(graph.bags.iterdir())


@pytest.mark.parametrize("interface, answer", [("semantic", "Action: done()"), ("plan", "Plan:\n1. done()")])
def test_an_episode_the_agent_ends_itself_says_done_not_step_budget(
    interface, answer, tmp_path, private_ros_env
):
    """Found by a hostile client: an episode the model ended with done() at its first of five steps
    was reported (RunTask result, END event, bag) as ending on its step budget."""
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"text": f"Reasoning: nothing left to do.\n{answer}"}) + "\n")
    run = _run(
        ["--suite", "packing", "--task", "4", "--seed", "0", "--max-steps", "5", "--interface", interface]
        + ["--reasoner", f"replay:{answers}"],
        tmp_path / "run",
        private_ros_env(),
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "(done)" in run.stdout and "step_budget" not in run.stdout, run.stdout
    bag = Path(re.search(r"^bag:\s+(\S+)$", run.stdout, re.MULTILINE).group(1))
    info = read_episode_info(bag)
    assert (info.reason, info.steps, info.success) == ("done", 1, False)
    replay = make_backend(f"replay:{answers}")
    replay.load()
    ended = run_packing_episode("4", 0, replay, max_steps=5, render=False, interface=interface)
    assert ended.agent_ended and len(ended.steps) == 1  # the in-process loop ends it alike
