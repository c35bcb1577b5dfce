"""Real VLM backends through the ROS graph (`r3 run --reasoner ...`), and their failures.

Tiny random models answer nonsense, so these tests check the plumbing: the graph runs, every step
is published and recorded, refused answers command no motion, and a backend that cannot start
gives one clear error line before anything moves. One case gives the OpenAI backend a known valid
answer (a stand-in server streams it over HTTP, as vLLM would), so the motion path behind a real
backend is reached and asserted.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

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


#: The expert's first instruction on task V, seed 3: its blocks are on that board, so the policy moves.
KNOWN_VALID = (
    "Reasoning: the red pentagon belongs at the bottom of the V.\n"
    "Instruction: move the red pentagon to the bottom center"
)
#: The chat requests the stand-in server received.
REQUESTS: list[dict] = []


class _Answering(BaseHTTPRequestHandler):
    """An OpenAI-compatible server that streams one fixed answer to every chat request."""

    answer = KNOWN_VALID

    def log_message(self, *args) -> None:
        pass

    def _send(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # /v1/models: the backend's check at load time
        self._send(
            json.dumps(
                {
                    "object": "list",
                    "data": [{"id": "stand-in", "object": "model", "created": 0, "owned_by": "test"}],
                }
            ).encode(),
            "application/json",
        )

    def do_POST(self) -> None:
        REQUESTS.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "stand-in"}
        events = [
            dict(
                chunk,
                choices=[
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": self.answer},
                        "finish_reason": None,
                    }
                ],
            ),
            dict(chunk, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]),
            dict(
                chunk, choices=[], usage={"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
            ),
        ]
        self._send(
            b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n",
            "text/event-stream",
        )


def test_a_valid_answer_from_the_openai_backend_moves_the_pusher(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answering)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = run(
            [
                "--reasoner",
                f"openai:http://127.0.0.1:{server.server_port}/v1,model=stand-in",
                "--max-steps",
                "1",
            ],
            tmp_path,
        )
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stdout + result.stderr
    assert REQUESTS and any(
        part.get("type") == "image_url"
        for m in REQUESTS[0]["messages"]
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
    assert not (tmp_path / "out" / "bags").exists()  # no episode started, nothing moved


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


class _AnsweringNaN(_Answering):
    """The stand-in server with a tool call whose number is NaN."""

    answer = "Reasoning: go above the can.\nTool call: move_to(x=nan, y=0.1, z=0.2, slot_yaw=0)"


def test_a_tool_call_from_the_openai_backend_reaches_the_tool_grammar(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _AnsweringNaN)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = _packing_tools_run(
            f"openai:http://127.0.0.1:{server.server_port}/v1,model=stand-in", tmp_path
        )
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stdout + result.stderr
    (bag,) = [p for p in (tmp_path / "bags").iterdir() if p.is_dir()]
    errors = _assert_refused_and_still(bag, {"instruction_outside_grammar"})
    assert all(e.startswith("instruction_outside_grammar: not_a_number: x='nan'") for e in errors), errors
