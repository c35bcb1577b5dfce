"""The plan interface (RoboGPT-R1) on the packing cell, in process: a plan's steps are carried out one by
one as semantic answers until one fails, what came of each is the next step's history, done() ends the
episode only once reached, invalid plans move nothing, and the packing expert plans and replans."""

from __future__ import annotations

import pytest
from scripted import Script

from r3.episode_loop import Decider, run_loop
from r3.instructions import plan as plans
from r3.packing_episode import MAX_PLANS, PackingCell, PlanPackingSuite, run_packing_episode
from r3.reasoning.backends import make_backend
from r3.reasoning.packing_expert import item_point
from r3.rewards import plan_rewards
from r3.rewards.plan import packing_action_dictionary, packing_plan_actions
from r3.safety import MAX_CONSECUTIVE_INVALID
from r3.safety.fuzz import hostile_outputs


@pytest.fixture(scope="module")
def cell():
    return PackingCell.build()


def _episode(cell, answers, max_steps, seed=0):
    cell.reset(seed, "4")
    suite, backend = PlanPackingSuite(cell, False, seed, 0), Script(answers)
    return run_loop(suite, Decider(backend, history="instruction"), "4", seed, max_steps), backend


@pytest.fixture
def carried_out(cell, monkeypatch):
    """Every semantic step (interface, text) the cell carries out (a plan's steps are each one)."""
    calls, original = [], cell.carry_out

    def spy(interface, text, rng, steps_left=0):
        if interface != "plan":
            calls.append((interface, text))
        return original(interface, text, rng, steps_left)

    monkeypatch.setattr(cell, "carry_out", spy)
    return calls


def test_steps_run_in_order_as_semantic_answers_until_one_fails(cell, carried_out):
    cell.reset(0, "4")
    item = next(iter(cell.env.task_instance.targets))
    x, y = item_point(item, cell.env.state(), cell.env.camera_model("base"))
    steps = [f"pick({item}, [{x}, {y}])", "home()", "pick(soup can, [0, 0])", "home()", "done()"]
    answer = "Reasoning: r.\nPlan:\n" + "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
    t, backend = _episode(cell, [answer, "Reasoning: r.\nPlan:\n1. home()"], 2)
    assert carried_out[:3] == [("semantic", s) for s in steps[:3]]  # then the second plan's home()
    first = t.steps[0]
    assert first.valid and plans.step_texts(first.instruction) == steps
    assert first.error.startswith("step 3: ") and first.control_steps > 0
    lines = first.outcome.split("\n")
    assert lines[0] == "Plan result: stopped at step 3 of 5; the steps after it did not run."
    assert lines[1] == f"Step 1 {steps[0]}: Result: ok. The {item} is now in the gripper."
    assert lines[3].startswith(f"Step 3 {steps[2]}: Result: failed (") and len(lines) == 4
    # the plan's done() was never reached: the episode goes on, and the model reads where it stopped
    assert len(t.steps) == 2 and backend.inputs[1].history_text == f"{first.instruction}\n{first.outcome}"
    assert cell.env.state().held == item


def test_a_plan_that_reaches_done_ends_the_episode(cell, carried_out):
    t, backend = _episode(cell, ["Reasoning: r.\nPlan:\n1. home()\n2. done()", "unused"], 5)
    assert len(t.steps) == 1 and len(backend.inputs) == 1
    assert t.steps[0].outcome.startswith("Plan result: carried out to the end (2 steps).")
    assert carried_out == [("semantic", "home()"), ("semantic", "done()")]


def test_invalid_plans_move_nothing(cell, carried_out):
    outputs = [(t, finish) for _, t, finish in hostile_outputs(30, seed=5, huge_every=10, interface="plan")]
    for episode in range(len(outputs) // MAX_CONSECUTIVE_INVALID):
        answers = outputs[episode * MAX_CONSECUTIVE_INVALID : (episode + 1) * MAX_CONSECUTIVE_INVALID]
        cell.reset(episode, "4")
        before = cell.env.state()
        t, _ = _episode(cell, answers, 10, seed=episode)
        assert t.aborted and not any(s.valid for s in t.steps)
        assert sum(s.control_steps for s in t.steps) == 0 and cell.env.state() == before
    assert carried_out == []


def test_the_expert_plans_replans_after_a_failure_and_packs_task_3(cell):
    t = run_packing_episode("3", 0, make_backend("expert"), cell=cell, render=False, interface="plan")
    assert t.success and not t.aborted and 2 <= len(t.steps) < MAX_PLANS
    first, second = t.steps[0], t.steps[1]
    assert first.error.startswith("step ") and "stopped at step" in first.outcome
    assert first.instruction in second.history and first.outcome in second.history
    assert "My previous plan stopped at step" in second.reasoning
    # the replanned plan starts where the first stopped: the item still held goes down first
    assert plans.step_texts(second.instruction)[0].startswith("place(")


def test_the_experts_plan_scores_full_reward_against_itself(cell):
    cell.reset(1, "4")
    expert = make_backend("expert")
    t = run_packing_episode("4", 1, expert, cell=cell, render=False, interface="plan", max_steps=1)
    (step,) = t.steps
    kwargs = {
        "action_dictionary": [packing_action_dictionary(list(cell.env.state().items))],
        "reference_plan": [packing_plan_actions(step.instruction)],
    }
    (result,) = plan_rewards(answers="packing").evaluate([step.raw_response], **kwargs)
    assert result.terms == {"plan_format": pytest.approx(1.0), "plan_lcs": 1.0}
    assert result.total == pytest.approx(1.0)


def test_the_plan_budget_is_plans_per_episode(cell):
    cell.reset(0, "4")
    assert PlanPackingSuite(cell, False, 0, 0).max_steps == MAX_PLANS
    t, _ = _episode(cell, ["Reasoning: r.\nPlan:\n1. home()"] * 3, 3)
    assert len(t.steps) == 3 and all(s.valid and not s.error for s in t.steps)
