"""One episode loop (issue 16): the same recorded answers, valid and invalid (a model's refusal among
them), through the in-process loop of each suite, through ``resume_episode`` and through the ROS graph
(`r3 run --reasoner replay:...`) give identical decisions, histories and bag contents.

The answers: valid, invalid, valid, invalid, invalid, invalid; the third refusal in a row ends the
episode at step 5, the robot holding still.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from r3.data.bags import read_episode_info, read_messages
from r3.episode import resume_episode, run_episode
from r3.episode_loop import next_history
from r3.graph import names
from r3.reasoning import make_backend
from r3.reasoning.parsing import ParsedResponse, parse_response
from r3.safety import refusal_note

R3 = [sys.executable, "-m", "r3.cli"]
VALID = [True, False, True, False, False, False]
ANSWERS = {
    "language_table": [
        ("Reasoning: the red moon is below its place.\nInstruction: move the red moon up slightly", "stop"),
        ("I'm sorry, but I can't help with that.", "stop"),  # the model refuses: no instruction
        ("Reasoning: the blue cube is in the way.\nInstruction: push the blue cube to the left", "stop"),
        ("Reasoning: up and away.\nInstruction: fly to the moon", "stop"),
        ("Reasoning: the red moon should go", "length"),  # cut off before the instruction
        ("Reasoning: again.\nInstruction: move the red moon", "stop"),
    ],
    "packing": [
        (
            (
                "Reasoning: the sugar box is on the table.\n"
                "Instruction: Pack the sugar box into the medium tray."
            ),
            "stop",
        ),
        ("I can't do that.", "stop"),
        ("Reasoning: the gelatin box next.\nInstruction: Pack the gelatin box into the small tray.", "stop"),
        ("Reasoning: x.\nInstruction: Pack the moon into the sky.", "stop"),
        ("Reasoning: the foam brick goes", "length"),
        ("Reasoning: clear the way.\nInstruction: Throw the foam brick.", "stop"),
    ],
}
#: What a step records, by the names ReasonerStep and TrajectoryStep share.
DECISION = ("step", "valid", "error", "instruction", "raw_response", "reasoning", "history")
#: Fields of a recorded message that are not part of the episode's content: ids, stamps, timings.
NOT_CONTENT = {"header", "episode_id", "latency_prompt_s", "latency_model_s", "latency_parse_s"}


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    """The recorded answers of each suite as a replay file; checks they are valid and invalid as planned."""
    files = {}
    for suite, recorded in ANSWERS.items():
        assert [
            isinstance(parse_response(t, suite, "reason", f), ParsedResponse) for t, f in recorded
        ] == VALID
        files[suite] = tmp_path_factory.mktemp(suite) / "answers.jsonl"
        files[suite].write_text(
            "".join(json.dumps({"text": t, "finish_reason": f}) + "\n" for t, f in recorded)
        )
    return files


def replay(path: Path):
    backend = make_backend(f"replay:{path}")
    backend.load()
    return backend


def decisions(steps) -> list[dict]:
    """The decision fields of TrajectorySteps or recorded ReasonerSteps, error of a refusal only (an
    in-process packing step also notes how a valid instruction's execution fell short)."""
    return [{f: getattr(s, f) for f in DECISION} | {"error": "" if s.valid else s.error} for s in steps]


def content(msg) -> dict:
    return {f.name: getattr(msg, f.name) for f in dataclasses.fields(msg) if f.name not in NOT_CONTENT}


def by_topic(bag: Path) -> dict[str, list]:
    topics: dict[str, list] = {}
    for topic, _, _, msg in read_messages(bag):
        topics.setdefault(topic, []).append(msg)
    return topics


def run_through_graph(
    args: list[str], out: Path, env: dict[str, str]
) -> tuple[subprocess.CompletedProcess, Path]:
    """``r3 run`` in ``env`` (a ROS domain of its own, so that it starts and supervises its own graph)."""
    run = subprocess.run(
        R3 + ["run", "--quiet", "--video", "none", "--out", str(out)] + args,
        capture_output=True,
        text=True,
        timeout=420,
        env=env,
        check=False,
    )
    match = re.search(r"^bag:\s+(\S+)$", run.stdout, re.MULTILINE)
    assert match, run.stdout + run.stderr
    return run, Path(match.group(1))


def check_the_refusals(trajectory, history: str) -> None:
    """Three refusals in a row end the episode; each step's history is the previous step's, refusal noted."""
    assert [s.valid for s in trajectory.steps] == VALID
    assert trajectory.aborted.startswith("3 consecutive invalid reasoner outputs")
    assert all(s.control_steps == 0 for s in trajectory.steps if not s.valid)
    told = [next_history(history, s.valid, s.raw_response, s.instruction, s.error) for s in trajectory.steps]
    assert [s.history for s in trajectory.steps] == [""] + told[:-1]
    for previous, step in zip(trajectory.steps, trajectory.steps[1:]):
        assert (refusal_note(previous.error) in step.history) is (not previous.valid)


@pytest.fixture(scope="module")
def table_episode(answers):
    from r3.sim.language_table.env import LanguageTableEnv

    env = LanguageTableEnv(width=160, height=120)
    return env, run_episode("V", 3, replay(answers["language_table"]), env=env, render=False)


def test_language_table_in_process_refuses_feeds_back_and_stops(table_episode):
    _, trajectory = table_episode
    check_the_refusals(trajectory, "response")
    assert trajectory.steps[0].control_steps > 0 and trajectory.steps[2].control_steps > 0


@pytest.mark.parametrize("step", range(1, len(VALID)))
def test_resume_after_any_step_repeats_the_original_run(answers, table_episode, step):
    """Resuming at ``step`` (after a refusal, or two in a row at step 5) gives the model the history it
    had and keeps the refusals already counted: the same decisions, states and end."""
    env, original = table_episode
    resumed = resume_episode(original, step, replay(answers["language_table"]), env=env, render=False)
    assert decisions(resumed.steps) == decisions(original.steps)
    assert [s.snapshot for s in resumed.steps] == [s.snapshot for s in original.steps]
    assert [s.control_steps for s in resumed.steps] == [s.control_steps for s in original.steps]
    assert (resumed.aborted, resumed.success, resumed.progress) == (
        original.aborted,
        original.success,
        original.progress,
    )


def test_the_in_process_bag_records_what_the_model_was_told(answers, table_episode, tmp_path):
    """``r3 collect``'s bags carry ReasonerStep.history as the graph records it: the history given, refusal
    notes included, and an episode the guard ended closes as the reasoner node ends it."""
    from r3.data.episode_bag import record_episode
    from r3.sim.language_table.env import LanguageTableEnv

    _, trajectory = table_episode
    bag = record_episode(
        "V", 3, replay(answers["language_table"]), LanguageTableEnv(width=160, height=120), "V-fast", tmp_path
    )
    steps = by_topic(bag)[names.REASONER_STEPS]
    assert decisions(steps) == decisions(trajectory.steps)
    assert read_episode_info(bag).reason == f"error: {trajectory.aborted}"


def test_packing_in_process_refuses_feeds_back_and_stops(answers):
    from r3.packing_episode import run_packing_episode

    trajectory = run_packing_episode("4", 0, replay(answers["packing"]), render=False)
    check_the_refusals(trajectory, "instruction")


@pytest.mark.ros
def test_language_table_graph_decides_and_records_as_in_process(
    answers, table_episode, tmp_path, private_ros_env
):
    from r3.data.episode_bag import record_episode
    from r3.sim.language_table.env import LanguageTableEnv

    _, trajectory = table_episode
    run, graph_bag = run_through_graph(
        ["--task", "V", "--seed", "3", "--reasoner", f"replay:{answers['language_table']}"],
        tmp_path / "graph",
        private_ros_env(),
    )
    assert run.returncode == 1 and f"error: {trajectory.aborted}" in run.stderr, run.stdout + run.stderr
    fast_bag = record_episode(
        "V",
        3,
        replay(answers["language_table"]),
        LanguageTableEnv(width=320, height=240),
        "V-fast",
        tmp_path / "fast",
    )
    graph, fast = by_topic(graph_bag), by_topic(fast_bag)
    assert decisions(graph[names.REASONER_STEPS]) == decisions(trajectory.steps)
    for topic in (names.REASONER_STEPS, names.INSTRUCTION_OUTCOMES):
        assert [content(m) for m in graph[topic]] == [content(m) for m in fast[topic]], topic
    assert content(graph[names.EPISODE_EVENTS][-1]) == content(fast[names.EPISODE_EVENTS][-1])
    graph_info, fast_info = read_episode_info(graph_bag), read_episode_info(fast_bag)
    assert (graph_info.status, graph_info.steps, graph_info.reason) == (
        fast_info.status,
        fast_info.steps,
        fast_info.reason,
    )
    assert fast_info.reason == f"error: {trajectory.aborted}"


@pytest.mark.ros
@pytest.mark.slow
def test_packing_graph_decides_as_in_process(answers, tmp_path, private_ros_env):
    from r3.packing_episode import PackingCell, run_packing_episode

    run, bag = run_through_graph(
        ["--suite", "packing", "--task", "4", "--seed", "0", "--reasoner", f"replay:{answers['packing']}"],
        tmp_path,
        private_ros_env(),
    )
    # The profile's policy sees through the perception node: in process, the same perception code.
    trajectory = run_packing_episode(
        "4", 0, replay(answers["packing"]), cell=PackingCell.build(grounding="perception"), render=False
    )
    assert run.returncode == 1 and f"error: {trajectory.aborted}" in run.stderr, run.stdout + run.stderr
    graph = by_topic(bag)
    assert decisions(graph[names.REASONER_STEPS]) == decisions(trajectory.steps)
    outcomes = [(o.step, o.instruction, o.reason, o.control_steps) for o in graph[names.INSTRUCTION_OUTCOMES]]
    assert outcomes == [
        (s.step, s.instruction, s.error or "done", s.control_steps) for s in trajectory.steps if s.valid
    ]
    info = read_episode_info(bag)
    assert (info.steps, info.reason) == (len(trajectory.steps), f"error: {trajectory.aborted}")


TOY_ANSWERS = [
    ("Reasoning: the goal cell is to the right.\nInstruction: step right", "stop"),
    ("I'm sorry, but I can't help with that.", "stop"),
    ("Reasoning: one more to the right.\nInstruction: STEP  right", "stop"),
    ("Reasoning: up and away.\nInstruction: fly up", "stop"),
    ("Reasoning: the marker should", "length"),
    ("Reasoning: again.\nInstruction: step forward", "stop"),
]


@pytest.mark.ros
@pytest.mark.slow
def test_a_third_suite_from_one_folder_runs_through_the_graph_as_in_process(tmp_path, private_ros_env):
    """Issue 16, acceptance 3 (graph half): the toy suite of test/suites/toy, registered through an
    entry point only, runs through r3_suite_sim_node, the reasoner and the recorder as in process."""
    from suites.toy import GRAPH, SUITE, entry_point_env

    from r3.episode_loop import Decider, SimulatedSuite, run_loop
    from r3.graph.description import load_profile, unmatched_subscriptions
    from r3.suites import register_suite, reload_suites

    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps({"text": t, "finish_reason": f}) + "\n" for t, f in TOY_ANSWERS))
    register_suite(SUITE)
    try:
        sim = SUITE.make_sim()
        sim.reset("reach", 1)
        decider = Decider(replay(path), history=SUITE.default_history)
        trajectory = run_loop(SimulatedSuite(SUITE.name, sim, 1), decider, "reach", 1, 10)
    finally:
        reload_suites()
    check_the_refusals(trajectory, SUITE.default_history)
    assert sim.state() == 2 and [s.control_steps for s in trajectory.steps if s.valid] == [1, 1]
    assert unmatched_subscriptions(load_profile("sim_toy_line", GRAPH)) == []
    run, bag = run_through_graph(
        ["--graph", str(GRAPH), "--suite", SUITE.name, "--task", "reach", "--seed", "1"]
        + ["--max-steps", "10", "--reasoner", f"replay:{path}"],
        tmp_path / "graph",
        private_ros_env() | entry_point_env(tmp_path / "site"),
    )
    assert run.returncode == 1 and f"error: {trajectory.aborted}" in run.stderr, run.stdout + run.stderr
    graph = by_topic(bag)
    assert decisions(graph[names.REASONER_STEPS]) == decisions(trajectory.steps)
    outcomes = [(o.step, o.instruction, o.reason, o.control_steps) for o in graph[names.INSTRUCTION_OUTCOMES]]
    assert outcomes == [(s.step, s.instruction, "done", s.control_steps) for s in trajectory.steps if s.valid]
    states = graph[names.PRIVILEGED_STATE]
    assert states[-1].suite == SUITE.name
    assert states[-1].progress == trajectory.progress == pytest.approx(2 / 3)
    info = read_episode_info(bag)
    assert (info.suite, info.steps, info.reason) == (SUITE.name, 6, f"error: {trajectory.aborted}")
