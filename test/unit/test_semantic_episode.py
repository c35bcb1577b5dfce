"""The semantic interface (ERR) on the packing cell, in process: each action is carried out by the
cell's semantic actions, its result line is the next step's history (through the Decider's one
history rule), invalid answers move nothing, and the packing expert speaking it solves task 4."""

from __future__ import annotations

import pytest
from scripted import Script

from r3.episode_loop import DONE_ANSWER, Decider, next_history, run_loop
from r3.instructions.semantic import SemanticAction, format_instruction, parse
from r3.packing_episode import PackingCell, PackingSuite, SemanticPackingSuite, run_packing_episode
from r3.reasoning.backends import make_backend
from r3.reasoning.packing_expert import item_point
from r3.safety import MAX_CONSECUTIVE_INVALID
from r3.safety.fuzz import hostile_outputs


@pytest.fixture(scope="module")
def cell():
    return PackingCell.build()


def _episode(cell, answers, max_steps):
    cell.reset(0, "4")
    suite, backend = SemanticPackingSuite(cell, False, 0, 0), Script(answers)
    return run_loop(suite, Decider(backend, history="instruction"), "4", 0, max_steps), backend


def test_a_pick_is_carried_out_and_its_result_is_the_next_history(cell):
    cell.reset(0, "4")
    item = next(iter(cell.env.task_instance.targets))
    point = item_point(item, cell.env.state(), cell.env.camera_model("base"))
    call = f"pick({item}, [{point[0]}, {point[1]}])"
    t, backend = _episode(cell, [f"Reasoning: r.\nAction: {call}", "Reasoning: r.\nAction: home()"], 2)
    first = t.steps[0]
    assert first.valid and first.instruction == call and first.error == ""
    assert first.outcome == f"Result: ok. The {item} is now in the gripper."
    assert cell.env.state().held == item and first.control_steps > 0
    assert (
        backend.inputs[0].interface == "semantic"
        and backend.inputs[1].history_text == f"{call}\n{first.outcome}"
    )
    assert t.steps[1].history == f"{call}\n{first.outcome}"


def test_a_failed_action_reports_its_reason_and_moves_nothing(cell):
    t, backend = _episode(
        cell, ["Reasoning: r.\nAction: place(soup can, [500, 500])", "Reasoning: r.\nAction: done()"], 2
    )
    first = t.steps[0]
    assert first.valid and first.error == "nothing_held" and first.control_steps == 0
    assert first.outcome == "Result: failed (nothing_held). No item changed place."
    assert backend.inputs[1].history_text == f"place(soup can, [500, 500])\n{first.outcome}"
    assert t.steps[1].outcome == "Result: ok. No item changed place."


def test_refused_answers_move_nothing_and_tell_the_model_why(cell):
    outputs = [text for _, text, _ in hostile_outputs(30, seed=5, huge_every=10, interface="semantic")]
    cell.reset(0, "4")
    calls = []
    actions = cell.actions
    for name in ("pick", "place", "home", "done"):
        method = getattr(actions, name)
        setattr(actions, name, lambda *a, _m=method, _n=name, **k: calls.append(_n) or _m(*a, **k))
    try:
        for episode in range(len(outputs) // MAX_CONSECUTIVE_INVALID):
            cell.reset(episode, "4")
            before = cell.env.state()
            answers = outputs[episode * MAX_CONSECUTIVE_INVALID : (episode + 1) * MAX_CONSECUTIVE_INVALID]
            suite = SemanticPackingSuite(cell, False, episode, 0)
            t = run_loop(suite, Decider(Script(answers), history="instruction"), "4", episode, 10)
            assert t.aborted and not any(s.valid for s in t.steps) and not any(s.outcome for s in t.steps)
            assert all("refused and the robot did not move" in s.history for s in t.steps[1:])
            after = cell.env.state()
            assert after.held == before.held and after.tcp == before.tcp
            assert {n: i.pos for n, i in after.items.items()} == {n: i.pos for n, i in before.items.items()}
    finally:
        for name in ("pick", "place", "home", "done"):
            delattr(actions, name)
    assert calls == []


def test_the_decider_reports_an_outcome_through_the_one_history_rule():
    decider = Decider(Script([]), history="response")
    decider.observe(True, "Reasoning: r.\nAction: home()", "home()", "")
    decider.report("Result: ok. No item changed place.")
    assert decider.history_text == next_history(
        "response", True, "Reasoning: r.\nAction: home()", "home()", "", "Result: ok. No item changed place."
    )
    assert decider.history_text == "Reasoning: r.\nAction: home()\nResult: ok. No item changed place."


def test_the_packing_expert_solves_task_4_with_semantic_actions(cell):
    backend = make_backend("expert:packing")
    t = run_packing_episode("4", 0, backend, cell=cell, render=False, interface="semantic")
    assert t.success and t.progress == 1.0 and not t.aborted
    assert all(s.valid and isinstance(parse(s.instruction), SemanticAction) for s in t.steps)
    assert {s.instruction.split("(")[0] for s in t.steps} >= {"pick", "place", "home"}
    for before, after in zip(t.steps, t.steps[1:]):
        assert after.history == f"{before.instruction}\n{before.outcome}"
    assert all(s.raw_response.startswith("Reasoning: ") and "\nAction: " in s.raw_response for s in t.steps)


def test_the_instruction_interface_keeps_its_suite(cell):
    backend = make_backend("expert:packing")
    t = run_packing_episode("4", 0, backend, cell=cell, render=False, max_steps=2)
    assert all(s.outcome == "" for s in t.steps) and t.steps[0].instruction.startswith(
        ("Pack", "Remove", "Transfer")
    )
    assert PackingSuite.interface == "instruction" and SemanticPackingSuite.interface == "semantic"
    with pytest.raises(ValueError, match="unknown interface"):
        run_packing_episode("4", 0, backend, cell=cell, render=False, interface="telepathy")


def test_the_demo_cli_chooses_the_interface(tmp_path, capsys):
    import json

    from r3.sim.packing.cli import demo_main

    with pytest.raises(SystemExit):
        demo_main(["--help"])
    assert "--interface {instruction,semantic,tools,plan}" in capsys.readouterr().out
    assert demo_main(["--interface", "semantic", "--video", "none", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "task 4 seed 0: success after" in printed and "  Action: pick(" in printed
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["success"] and all(s["outcome"].startswith("Result: ") for s in summary["steps"])


def test_the_expert_sets_an_item_down_at_the_next_free_spot_after_a_refused_place(cell):
    """Task 3, seed 0: the foam brick's first spot in the medium tray would bring the hand onto the sugar
    box; the expert places it at the next spot (as the packing policy does) and the goal is reached."""
    t = run_packing_episode(
        "3", 0, make_backend("expert:packing"), cell=cell, render=False, interface="semantic"
    )
    refused = [k for k, s in enumerate(t.steps) if s.instruction.startswith("place(") and s.error]
    assert refused, "the case lost its refused place"
    k = refused[0]
    again = t.steps[k + 1]
    assert (
        again.instruction.startswith(t.steps[k].instruction.split("[")[0])
        and again.instruction != t.steps[k].instruction
    )
    assert t.success


def test_a_resumed_semantic_episode_tells_the_model_the_same_results(cell):
    """Resuming from a step's snapshot with the steps before it: the history (result line included) and
    the rest of the episode are those of the original run."""
    first = run_packing_episode(
        "4", 0, make_backend("expert:packing"), cell=cell, render=False, interface="semantic"
    )
    k = 4
    cell.reset(0, "4")
    cell.env.restore(first.steps[k].snapshot)
    suite = SemanticPackingSuite(cell, False, 0, 0)
    decider = Decider(make_backend("expert:packing"), history="instruction")
    again = run_loop(suite, decider, "4", 0, 45, earlier=first.steps[:k])
    assert first.steps[k - 1].outcome and again.steps[k].history == first.steps[k].history
    assert [s.instruction for s in again.steps] == [s.instruction for s in first.steps] and again.success


def test_done_ends_the_episode_and_the_checker_says_how_it_went(cell):
    """ERR's done(): the agent ends its episode; the task's checker, not the agent, gives the verdict."""
    t, backend = _episode(cell, ["Reasoning: r.\nAction: done()", "Reasoning: r.\nAction: home()"], 5)
    assert [s.instruction for s in t.steps] == [DONE_ANSWER] and len(backend.inputs) == 1
    assert not t.success and t.steps[0].control_steps == 0
    assert format_instruction(SemanticAction("done")) == DONE_ANSWER


def test_the_cell_carries_out_a_hostile_text_as_a_refusal_that_moves_nothing(cell):
    """The packing sim node hands the cell whatever text a FollowInstruction goal carries."""
    import numpy as np

    cell.reset(0, "4")
    before = cell.env.snapshot()
    done = cell.carry_out("semantic", "pick(soup can, [1, 2]); home()", np.random.default_rng(0))
    assert done.error.startswith("rejected: ") and done.control_steps == 0
    assert done.outcome.startswith("Result: refused (") and cell.env.snapshot() == before
    with pytest.raises(ValueError, match="no 'telepathy' answers"):
        cell.carry_out("telepathy", "home()", np.random.default_rng(0))


@pytest.mark.parametrize("interface", ["semantic", "plan", "tools"])
def test_a_stuck_expert_ends_the_episode_with_done_not_three_invalid_answers(cell, monkeypatch, interface):
    """Found by a review: with an item no hand can grasp the expert answered nothing three times and
    the episode ended "error: 3 consecutive invalid reasoner outputs" (its bag incomplete, and dataset
    builds skipped it, valid steps included). It now answers done(): a clean end, not successful, its
    reasoning saying why."""
    from r3.reasoning import packing_expert

    monkeypatch.setattr(packing_expert, "graspable", lambda item, state: False)
    t = run_packing_episode(
        "4", 0, make_backend("expert:packing"), cell=cell, render=False, interface=interface
    )
    assert not t.aborted and t.agent_ended and not t.success, (t.aborted, [s.instruction for s in t.steps])
    assert all(s.valid for s in t.steps)
    last = t.steps[-1]
    assert last.instruction.rsplit("\n", 1)[-1].endswith(DONE_ANSWER), last.instruction
    assert "I am stuck because the " in last.raw_response and "cannot be grasped" in last.raw_response
    assert "goal not reached" in last.raw_response


@pytest.mark.parametrize("interface", ["semantic", "plan", "tools"])
def test_a_stuck_expert_says_why_in_sentences_a_person_would_write(cell, monkeypatch, interface):
    """Found by a review: the plan interface's stuck reasoning read "Step by step: I am stuck: ...",
    a one-step list of a reason. Each interface's now says it in whole sentences."""
    import re

    from r3.reasoning import packing_expert

    monkeypatch.setattr(packing_expert, "graspable", lambda item, state: False)
    t = run_packing_episode(
        "4", 0, make_backend("expert:packing"), cell=cell, render=False, interface=interface
    )
    reasoning = t.steps[-1].raw_response.split("Reasoning:", 1)[1].strip().splitlines()[0]
    assert re.search(
        r"\. I am stuck because the [a-z ]+ lies with every face wider than the open hand, so it cannot be "
        r"grasped\. No action I could take changes that, so I end the episode here with the goal not "
        r"reached\.$",
        reasoning,
    ), reasoning
    assert all(s[0].isupper() for s in re.split(r"(?<=\.) ", reasoning)), reasoning
    assert "Step by step" not in reasoning and ": I am" not in reasoning, reasoning


@pytest.mark.parametrize("interface", ["semantic", "plan"])
def test_an_item_outside_the_base_view_is_left_and_named_not_answered_with_nothing(
    cell, monkeypatch, interface
):
    """Found by a review: when no base-view point named the item of the expert's next move (an item
    off the image), the expert answered nothing, and three such answers ended the episode in error.
    Its plan now leaves such an item (and makes no room for it), and it ends with done() saying why."""
    from r3.reasoning import packing_expert

    cell.reset(0, "4")
    hidden = next(iter(cell.env.task_instance.targets))  # the goal's first item: no point names it
    seen = packing_expert.item_point
    monkeypatch.setattr(
        packing_expert,
        "item_point",
        lambda item, state, camera: None if item == hidden else seen(item, state, camera),
    )
    t = run_packing_episode(
        "4", 0, make_backend("expert:packing"), cell=cell, render=False, interface=interface
    )
    assert not t.aborted and all(s.valid for s in t.steps), [(s.instruction, s.error) for s in t.steps]
    assert t.agent_ended and not t.success and 0 < t.progress < 1
    assert not any(f"pick({hidden}," in s.instruction for s in t.steps)
    assert f"the {hidden} is outside the base camera's view" in t.steps[-1].raw_response


def _hide_tray_floor(monkeypatch, tray: str, share: float) -> None:
    """A base camera whose image leaves out the ``share`` of ``tray``'s floor nearest its low x side:
    no point names a spot there (the base views of the held-out tasks show every floor whole)."""
    from r3.perception.camera import CameraModel
    from r3.tasks.packing.tasks import tray_rect
    from r3.tasks.packing.workcell import TRAY_SPECS

    (x0, x1), (y0, y1) = tray_rect(tray)
    shown = CameraModel.normalised_point

    def normalised_point(camera, xyz):
        x, y, z = xyz
        on_floor = abs(z - TRAY_SPECS[tray].floor) < 1e-6 and x0 <= x <= x1 and y0 <= y <= y1
        return None if on_floor and x < x0 + share * (x1 - x0) else shown(camera, xyz)

    monkeypatch.setattr(CameraModel, "normalised_point", normalised_point)


@pytest.mark.parametrize("interface", ["semantic", "plan"])
def test_a_free_spot_outside_the_base_view_is_passed_over_for_one_the_view_shows(
    cell, monkeypatch, interface
):
    """Found by a review: when the free spot the expert chose for a place lay outside the base image,
    no point could name it and the expert answered nothing, three times, and the episode ended in
    error. It now sets the item down at a free spot the image shows."""
    _hide_tray_floor(monkeypatch, "small", 0.4)  # task 4 seed 0 packs two items into the small tray
    t = run_packing_episode(
        "4", 0, make_backend("expert:packing"), cell=cell, render=False, interface=interface
    )
    assert not t.aborted and all(s.valid for s in t.steps), [(s.instruction, s.error) for s in t.steps]
    assert [i for i, tray in cell.env.task_instance.targets.items() if tray == "small"] == [
        "gelatin box",
        "foam brick",
    ]
    assert cell.env.state().tray_of("gelatin box") == cell.env.state().tray_of("foam brick") == "small"


@pytest.mark.parametrize("interface", ["semantic", "plan"])
def test_an_item_with_no_free_spot_in_the_base_view_ends_the_episode_with_done_naming_it(
    cell, monkeypatch, interface
):
    """Found by a review, as above: where the image shows no free spot of the tray at all, the expert
    ends with done(), its reasoning naming the item it could not set down and why, without picking it
    up first (it did, and ended holding it)."""
    _hide_tray_floor(monkeypatch, "small", 1.0)
    t = run_packing_episode(
        "4", 0, make_backend("expert:packing"), cell=cell, render=False, interface=interface
    )
    assert not t.aborted and all(s.valid for s in t.steps), [(s.instruction, s.error) for s in t.steps]
    assert t.agent_ended and not t.success
    assert t.steps[-1].instruction.rsplit("\n", 1)[-1].endswith(DONE_ANSWER), t.steps[-1].instruction
    last = t.steps[-1].raw_response
    assert "cannot be set down in the small tray: none of the free spots there is in the base" in last
    assert cell.env.state().held is None


@pytest.mark.parametrize(
    ("point", "refused"),
    [
        ("beyond the box", "outside the workspace: x="),
        ([500, 342], "unreachable: "),
        ([844, 631], "unreachable: "),
    ],
    ids=["beyond_the_workspace", "next_to_the_base", "far_corner"],
)
def test_a_place_the_executor_would_refuse_is_refused_before_the_hand_lifts(cell, point, refused):
    """Found by a hostile test: a place point on the table beyond the workspace box (its far edge), or
    inside it but out of the arm's reach with the held item (next to the base; the far corner), lifted
    the held item 7.5 cm, then the carry was refused: the answer moved the arm and failed."""
    import numpy as np

    cell.reset(0, "4")
    item = "soup can"
    grasp = item_point(item, cell.env.state(), cell.env.camera_model("base"))
    rng = np.random.default_rng(0)
    assert cell.carry_out("semantic", f"pick({item}, [{grasp[0]}, {grasp[1]}])", rng).error == ""
    if point == "beyond the box":  # the table, beyond x = 0.85
        point = [round(c) for c in cell.grounder.project((0.89, 0.0, 0.0))]
    assert cell.grounder.at_point(point, containers_only=True).label == "table"
    before = cell.env.snapshot()
    done = cell.carry_out("semantic", f"place({item}, [{point[0]}, {point[1]}])", rng)
    assert done.error.startswith(f"motion_failed: refused: {refused}"), done.error
    assert done.control_steps == 0 and cell.env.snapshot() == before
    assert done.outcome.endswith("No item changed place.") and cell.env.state().held == item
