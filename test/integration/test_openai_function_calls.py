"""The OpenAI backend on the tools interface with ``function_calls=true``: the five pose tools are
declared as OpenAI functions, the server's structured tool calls come back as the text calls the
tool grammar reads, and the grammar's refusals hold for them (a stand-in server streams the calls
as vLLM's tool parser returns them; a real `transformers serve` accepts the declarations)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from serving import stand_in_server

from r3.instructions.tools import TOOL_SCHEMAS, Tool
from r3.reasoning import ReasonerInput, decide, make_backend

pytestmark = pytest.mark.slow

IMAGE = np.zeros((48, 64, 3), np.uint8)


def _tools_input() -> ReasonerInput:
    return ReasonerInput(
        goal="put the soup can in the small tray",
        images=[IMAGE, IMAGE],
        suite="packing",
        interface="tools",
        history="instruction",
    )


def _decide(url: str, function_calls: bool = True):
    backend = make_backend(f"openai:{url},model=stand-in,function_calls={str(function_calls).lower()}")
    backend.load()
    try:
        return decide(backend, _tools_input())
    finally:
        backend.close()


def test_the_tools_are_declared_and_a_call_comes_back_as_the_grammars_text():
    call = ("change_query", json.dumps({"queries": ["soup can", "small tray"]}))
    with stand_in_server("Reasoning: find the can first.", (call,)) as (url, requests):
        decision = _decide(url)
    declared = [t["function"]["name"] for t in requests[0]["tools"]]
    assert declared == [t.value for t in Tool] and requests[0]["tools"] == [dict(t) for t in TOOL_SCHEMAS]
    assert requests[0]["tool_choice"] == "auto"
    assert decision.valid, decision.parsed
    assert decision.parsed.instruction_text == 'change_query(queries=["soup can", "small tray"])'
    assert decision.output.raw_text.endswith('Tool call: change_query(queries=["soup can", "small tray"])')


@pytest.mark.parametrize(
    "calls, kind",
    [
        ((("move_to", '{"x": NaN, "y": 0.1, "z": 0.2, "slot_yaw": 0}'),), "not_a_number"),
        ((("move_to", '{"x": 0.4, "y": 0.1}'),), "missing_argument"),
        ((("set_gripper", '{"opening": 0.5'),), "bad_arguments"),  # arguments cut off: no JSON object
        ((("fly_to", "{}"),), "unknown_tool"),
        ((("set_gripper", '{"opening": 0.5}'), ("done", "{}")), "trailing_text"),  # two calls in one answer
        ((("set_gripper", "opening=1"),), "bad_arguments"),  # not JSON: never pasted as the call's text
        ((("move_to", json.dumps({"x=0.5, y=0.0, z=0.3, slot_yaw": 0})),), "unknown_argument"),
        ((("set_gripper", '{"opening": 1' + "0" * 5000 + "}"),), "too_long"),
    ],
    ids=["nan", "missing", "broken_json", "unknown", "two_calls", "not_json", "key_injection", "huge_int"],
)
def test_bad_function_calls_are_refused_by_the_tool_grammar(calls, kind):
    with stand_in_server("Reasoning: act.", calls) as (url, _):
        decision = _decide(url)
    assert not decision.valid, decision.parsed
    # the response's kind, or the tool grammar's inside instruction_outside_grammar's reason
    assert kind == decision.parsed.kind.value or f"{kind}:" in decision.parsed.reason, decision.parsed


def test_without_the_option_no_tools_are_declared():
    with stand_in_server("Reasoning: act.\nTool call: done()") as (url, requests):
        decision = _decide(url, function_calls=False)
    assert "tools" not in requests[0] and decision.valid and decision.parsed.instruction_text == "done()"


def test_transformers_serve_accepts_the_tool_declarations(server):
    """A real server takes the request (a tiny random model answers text, refused as it would be)."""
    url, model = server
    backend = make_backend(f"openai:{url},model={model},function_calls=true", max_new_tokens=8)
    backend.load()
    try:
        decision = decide(backend, _tools_input())
    finally:
        backend.close()
    assert decision.output.completion_tokens and not decision.valid and decision.parsed.reason
