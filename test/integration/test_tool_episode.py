"""The tools interface (ZAP) on the packing cell, in process, through the one episode loop: the packing
expert speaking tool calls solves task 4 and the trace names every call and what came back; a refused
move_to leaves the arm where it was and says why; done() ends the episode; invalid answers move nothing."""

from __future__ import annotations

import numpy as np
import pytest
from scripted import Script

from r3.episode_loop import Decider, run_loop
from r3.instructions.tools import ToolCallError, parse
from r3.packing_episode import MAX_TOOL_CALLS, PackingCell, ToolsPackingSuite, run_packing_episode
from r3.reasoning.backends import make_backend
from r3.safety.fuzz import hostile_outputs


@pytest.fixture(scope="module")
def cell():
    return PackingCell.build()


def _episode(cell, calls):
    cell.reset(0, "4")
    backend = Script(f"Reasoning: r.\nTool call: {c}" for c in calls)
    suite = ToolsPackingSuite(cell, False, 0, 0, len(calls))
    return run_loop(suite, Decider(backend, history="instruction"), "4", 0, suite.max_steps), backend


def test_the_packing_expert_solves_task_4_with_tool_calls_and_the_trace_names_each(cell):
    t = run_packing_episode(
        "4", 0, make_backend("expert:packing"), cell=cell, render=False, interface="tools"
    )
    assert t.success and t.progress == 1.0 and not t.aborted
    assert all(s.valid and not isinstance(parse(s.instruction), ToolCallError) for s in t.steps)
    names = [s.instruction.split("(")[0] for s in t.steps]
    assert set(names) == {"update_todo", "change_query", "move_to", "set_gripper"}
    for k, s in enumerate(t.steps):
        assert s.outcome.startswith(f"Result: {names[k]} ")  # each result names its call
        assert s.outcome.endswith(f"Steps left: {MAX_TOOL_CALLS - k - 1}")
        assert "\nTool: x=" in s.outcome and "\nTodo: 1. " in s.outcome
    for before, after in zip(t.steps, t.steps[1:]):
        assert after.history == f"{before.instruction}\n{before.outcome}"
    assert all(
        s.raw_response.startswith("Reasoning: ") and "\nTool call: " in s.raw_response for s in t.steps
    )
    grasps = [k for k, s in enumerate(t.steps) if s.instruction == "set_gripper(opening=0)"]
    assert len(grasps) == 3 and all(t.steps[k - 1].instruction.startswith("move_to(") for k in grasps)


def test_a_refused_move_to_leaves_the_arm_where_it_was_and_says_why(cell):
    cell.reset(0, "4")
    joints, tcp = cell.env.state().joints, cell.env.state().tcp
    t, backend = _episode(
        cell,
        [
            "move_to(x=0.45, y=0.0, z=0.001, slot_yaw=0)",
            "move_to(x=0.45, y=0, z=0.3, slot_yaw=0, tilt=95, tilt_direction=0)",
            "done()",
        ],
    )
    first, second = t.steps[0], t.steps[1]
    assert first.valid and first.control_steps == 0 and first.error.startswith("not attempted: validation:")
    assert first.outcome.startswith(
        "Result: move_to not attempted (validation: outside the workspace: z=0.001 m is below the workspace"
    )
    assert second.error.startswith("not attempted: validation: tilt 95 deg is above this cell's limit")
    after = cell.env.state()
    assert after.joints == joints and after.tcp == tcp
    assert backend.inputs[1].history_text == f"{first.instruction}\n{first.outcome}"


def test_done_ends_the_episode(cell):
    t, _ = _episode(cell, ["done()", "set_gripper(opening=0)"])
    assert len(t.steps) == 1 and t.steps[0].outcome.startswith("Result: done ok; the episode ends.")
    assert not t.success and not t.aborted


def test_a_whole_grasp_by_hand_written_calls(cell):
    cell.reset(0, "4")
    item = "gelatin box"
    x, y, z = cell.env.state().items[item].pos
    calls = [
        f'change_query(queries=["{item}"])',
        f"move_to(x={x:.3f}, y={y:.3f}, z=0.2, slot_yaw=0)",
        "set_gripper(opening=0.6)",
        f"move_to(x={x:.3f}, y={y:.3f}, z={z:.3f}, slot_yaw=0)",
        "set_gripper(opening=0)",
        f"move_to(x={x:.3f}, y={y:.3f}, z=0.25, slot_yaw=0)",
    ]
    t, _ = _episode(cell, calls)
    assert [s.outcome.split(";")[0] for s in t.steps] == [
        "Result: change_query ok",
        "Result: move_to reached",
        "Result: set_gripper reached",
        "Result: move_to reached",
        "Result: set_gripper short (execution: the jaws stopped on something between them)",
        "Result: move_to reached",
    ]
    state = cell.env.state()
    assert state.held == item and state.items[item].pos[2] > z + 0.1
    assert f"\n- #1 {item}: top centre (" in t.steps[-1].outcome


def test_invalid_answers_move_nothing_and_tell_the_model_why(cell):
    outputs = [text for _, text, _ in hostile_outputs(30, seed=3, huge_every=10, interface="tools")]
    cell.reset(0, "4")
    before = cell.env.snapshot()
    backend = Script(outputs)
    suite = ToolsPackingSuite(cell, False, 0, 0)
    decider = Decider(backend, history="instruction", max_consecutive_invalid=len(outputs) + 1)
    t = run_loop(suite, decider, "4", 0, len(outputs))
    assert len(t.steps) == len(outputs) and not any(s.valid for s in t.steps)
    assert all(s.control_steps == 0 and s.outcome == "" for s in t.steps)
    assert cell.env.snapshot() == before
    assert all(inp.history_text.startswith("[Your previous answer was refused") for inp in backend.inputs[1:])
    assert np.all(np.array([s.error for s in t.steps]) != "")


def test_the_demo_cli_runs_the_tools_interface(tmp_path, capsys):
    import json

    from r3.sim.packing.cli import demo_main

    assert demo_main(["--interface", "tools", "--video", "none", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "task 4 seed 0: success after" in printed and "tool calls; progress 100%" in printed
    assert "  Tool call: change_query(" in printed and "\n  Result: move_to reached;" in printed
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["success"] and all(s["outcome"].startswith("Result: ") for s in summary["steps"])
