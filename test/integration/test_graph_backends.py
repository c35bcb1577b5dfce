"""Real VLM backends through the ROS graph (`r3 run --reasoner ...`), and their failures.

Tiny random models answer nonsense, so these tests check the plumbing: the graph runs, every step
is published and recorded, refused answers command no motion, and a backend that cannot start
gives one clear error line before anything moves. One case gives the OpenAI backend a known valid
answer (a stand-in server streams it over HTTP, as vLLM would), so the motion path behind a real
backend is reached and asserted.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from serving import KNOWN_VALID, stand_in_server

from r3.data.bags import read_episode_info, read_messages
from r3.graph import names
from r3.reasoning.tiny import build_tiny_model

pytestmark = [pytest.mark.ros, pytest.mark.slow]
R3 = [sys.executable, "-m", "r3.cli", "run", "--quiet", "--task", "V", "--seed", "3", "--video", "none"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return build_tiny_model("idefics3", tmp_path_factory.mktemp("tiny") / "idefics3")


def run(args: list[str], out: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        R3 + ["--out", str(out)] + args, capture_output=True, text=True, timeout=timeout, check=False
    )


def assert_refusals_commanded_no_motion(bag: Path) -> None:
    steps, outcomes, commands = [], [], 0
    for topic, _, _, msg in read_messages(bag):
        if topic == names.REASONER_STEPS:
            steps.append(msg)
        elif topic == names.INSTRUCTION_OUTCOMES:
            outcomes.append(msg)
        elif topic == names.PUSHER_COMMAND:
            commands += 1
    assert steps, "no ReasonerStep recorded"
    for s in steps:
        assert s.raw_response and s.latency_model_s > 0 and s.completion_tokens > 0
        assert s.valid or (s.error and s.instruction == "")
    assert len(outcomes) == sum(s.valid for s in steps)
    assert commands == sum(o.control_steps for o in outcomes)


def test_transformers_backend_runs_an_episode_through_the_graph(tiny_model, tmp_path):
    result = run(
        ["--reasoner", f"transformers:{tiny_model}", "--max-steps", "2", "--reasoning-budget", "8"], tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (bag,) = [p for p in (tmp_path / "bags").iterdir() if p.is_dir()]
    info = read_episode_info(bag)
    assert info.steps == 2 and info.backend == str(tiny_model)
    assert_refusals_commanded_no_motion(bag)


def test_openai_backend_runs_an_episode_through_the_graph(server, tmp_path):
    url, model = server
    result = run(
        ["--reasoner", f"openai:{url},model={model}", "--max-steps", "1", "--reasoning-budget", "8"], tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (bag,) = [p for p in (tmp_path / "bags").iterdir() if p.is_dir()]
    assert read_episode_info(bag).steps == 1
    assert_refusals_commanded_no_motion(bag)


def test_a_valid_answer_from_the_openai_backend_moves_the_pusher(tmp_path):
    with stand_in_server(KNOWN_VALID) as (url, requests):
        result = run(["--reasoner", f"openai:{url},model=stand-in", "--max-steps", "1"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert requests and any(
        part.get("type") == "image_url"
        for m in requests[0]["messages"]
        if isinstance(m["content"], list)
        for part in m["content"]
    )
    (bag,) = [p for p in (tmp_path / "bags").iterdir() if p.is_dir()]
    steps = [m for _, _, _, m in read_messages(bag, {names.REASONER_STEPS})]
    assert [(s.valid, s.instruction) for s in steps] == [(True, "move the red pentagon to the bottom center")]
    assert_refusals_commanded_no_motion(bag)  # and every command belongs to an instruction outcome
    commands = [m for _, _, _, m in read_messages(bag, {names.PUSHER_COMMAND})]
    assert commands, "the valid answer commanded no motion"


def _no_image_processor(tiny_model: Path, tmp_path: Path) -> Path:
    broken = tmp_path / "text_only"
    shutil.copytree(tiny_model, broken)
    (broken / "processor_config.json").unlink()
    return broken


@pytest.mark.parametrize(
    "make_spec, expected",
    [
        (lambda model, tmp: f"transformers:{tmp / 'missing'}", "model directory not found: {tmp}/missing"),
        (lambda model, tmp: "openai:http://127.0.0.1:9/v1,model=m", "cannot reach http://127.0.0.1:9/v1"),
        (
            lambda model, tmp: f"transformers:{_no_image_processor(model, tmp)}",
            "cannot load the processor of {tmp}/text_only",
        ),
    ],
)
def test_a_backend_that_cannot_start_gives_one_error_line_and_no_motion(
    tiny_model, tmp_path, make_spec, expected
):
    result = run(["--reasoner", make_spec(tiny_model, tmp_path)], tmp_path / "out", timeout=120)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "r3_reasoner_node" in errors[0], result.stderr
    assert expected.format(tmp=tmp_path) in errors[0]
    bags = tmp_path / "out" / "bags"  # made by the recorder at its start: no episode started, nothing moved
    assert not bags.exists() or not any(bags.iterdir())


def _packing_tools_run(reasoner: str, out: Path, budget: int = -1) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "r3.cli", "run", "--quiet", "--suite", "packing", "--task", "4"]
        + ["--seed", "0", "--interface", "tools", "--max-steps", "2", "--reasoning-budget", str(budget)]
        + ["--video", "none", "--out", str(out), "--reasoner", reasoner],
        capture_output=True,
        text=True,
        timeout=420,
        check=False,
    )


def _assert_refused_and_still(bag: Path, kinds: set[str]) -> list[str]:
    """Every step refused with one of ``kinds``, and the arm's joint states never changed."""
    steps = [m for topic, _, _, m in read_messages(bag) if topic == names.REASONER_STEPS]
    errors = [s.error for s in steps]
    assert len(steps) == 2 and not any(s.valid for s in steps), errors
    assert all(e.split(":")[0] in kinds for e in errors), errors
    joints = {tuple(m.position) for topic, _, _, m in read_messages(bag) if topic == names.JOINT_STATES}
    assert len(joints) == 1, "a refused tool call moved the arm"
    return errors


def test_openai_backend_on_the_tools_interface_refuses_random_calls(server, tmp_path):
    """A real OpenAI-compatible server (`transformers serve`, a tiny random model) on the packing cell
    with ZAP's tools: its random answers are refused with typed reasons and nothing moves (a random
    model never stops, so its answer is refused as truncated before any grammar reads it)."""
    from r3.instructions.tools import ToolErrorKind
    from r3.reasoning.parsing import ErrorKind

    url, model = server
    result = _packing_tools_run(f"openai:{url},model={model}", tmp_path, budget=8)
    assert result.returncode == 0, result.stdout + result.stderr
    (bag,) = [p for p in (tmp_path / "bags").iterdir() if p.is_dir()]
    assert read_episode_info(bag).backend.startswith(model)
    _assert_refused_and_still(bag, {k.value for k in ToolErrorKind} | {k.value for k in ErrorKind})


#: A tool call whose number is NaN.
NAN_CALL = "Reasoning: go above the can.\nTool call: move_to(x=nan, y=0.1, z=0.2, slot_yaw=0)"


def test_a_tool_call_from_the_openai_backend_reaches_the_tool_grammar(tmp_path):
    with stand_in_server(NAN_CALL) as (url, _):
        result = _packing_tools_run(f"openai:{url},model=stand-in", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    (bag,) = [p for p in (tmp_path / "bags").iterdir() if p.is_dir()]
    errors = _assert_refused_and_still(bag, {"instruction_outside_grammar"})
    assert all(e.startswith("instruction_outside_grammar: not_a_number: x='nan'") for e in errors), errors


def test_a_function_call_from_the_server_is_carried_out_through_the_graph(tmp_path):
    """``function_calls=true``: the server's structured tool call (as vLLM's tool parser returns it)
    reaches the tool grammar through the graph and is carried out: perception looks for the names."""
    call = ("change_query", '{"queries": ["soup can"]}')
    with stand_in_server("Reasoning: find the can.", (call,)) as (url, requests):
        result = _packing_tools_run(f"openai:{url},model=stand-in,function_calls=true", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert requests and all(r["tools"] and r["tool_choice"] == "auto" for r in requests)
    (bag,) = [p for p in (tmp_path / "bags").iterdir() if p.is_dir()]
    steps = [m for topic, _, _, m in read_messages(bag) if topic == names.REASONER_STEPS]
    assert [(s.valid, s.instruction) for s in steps] == [(True, 'change_query(queries=["soup can"])')] * 2
    outcomes = [m.outcome for topic, _, _, m in read_messages(bag) if topic == names.INSTRUCTION_OUTCOMES]
    assert len(outcomes) == 2 and all("perception looks for soup can" in o for o in outcomes), outcomes
