"""Turn rewards (ERR's checkers) scored in the simulator from stored semantic episodes: each term is
the checker's change over the executed action, an invalid answer scores only its validity and runs
nothing, restores are exact, the cache is keyed by (snapshot, canonical action), and a pool of worker
processes scores as the parent does."""

from __future__ import annotations

import numpy as np
import pytest

from r3.data.turns import load_episodes, record_packing_episode
from r3.packing_episode import PackingCell
from r3.reasoning.backends import make_backend
from r3.rewards.turn import (
    INVALID_TERMS,
    TURN_TERMS,
    TurnSimulator,
    turn_progress,
    turn_rewards,
)


@pytest.fixture(scope="module")
def episode(tmp_path_factory):
    root = tmp_path_factory.mktemp("turns")
    record_packing_episode("1", 0, make_backend("expert"), root)
    (stored,) = load_episodes(root)
    assert stored.success and len(stored.turns) >= 3
    return stored


def answer(action: str) -> str:
    return f"Reasoning: the scene shows what it shows.\nAction: {action}"


def checker_change(snapshot: bytes, action: str) -> dict[str, float]:
    """What ERR's checkers say about ``action`` from ``snapshot``, read here in a cell of our own."""
    cell = PackingCell.build()
    cell.env.restore(snapshot)
    instance, before = cell.env.task_instance, cell.env.state()
    cell.carry_out("semantic", action, np.random.default_rng(0))
    after = cell.env.state()
    return {
        "validity": 0.0,
        "progress": turn_progress(instance, after) - turn_progress(instance, before),
        "penalty": instance.penalty(before) - instance.penalty(after),
        "success": float(instance.success(after)),
    }


def test_every_term_is_the_checkers_change_over_the_executed_action(episode):
    simulator = TurnSimulator()
    turns = episode.turns
    scores = simulator.score([answer(t.action) for t in turns], [t.snapshot for t in turns])
    for turn, score in zip(turns, scores):
        assert set(score) == set(TURN_TERMS)
        assert score == pytest.approx(checker_change(turn.snapshot_bytes(), turn.action)), turn.action
    # The expert's first pick grasps a goal object: half a goal object of progress, no penalty.
    first = episode.turns[0]
    assert first.action.startswith("pick(") and scores[0]["progress"] > 0 and scores[0]["penalty"] == 0
    assert [s["success"] for s in scores] == [0.0] * (len(turns) - 1) + [1.0]


def test_a_pick_of_an_item_the_goal_does_not_name_costs_the_penalty(episode):
    cell = PackingCell.build()
    cell.env.restore(episode.turns[0].snapshot_bytes())
    instance, state = cell.env.task_instance, cell.env.state()
    from r3.reasoning.packing_expert import item_point

    other = next(i for i in state.items if i not in instance.targets and i not in instance.clutter)
    point = item_point(other, state, cell.env.camera_model("base"))
    (score,) = TurnSimulator().score(
        [answer(f"pick({other}, [{point[0]}, {point[1]}])")], [episode.turns[0].snapshot]
    )
    assert score == {"validity": 0.0, "progress": 0.0, "penalty": -0.5, "success": 0.0}


def test_an_invalid_answer_scores_only_its_validity_and_runs_nothing(episode, monkeypatch):
    simulator = TurnSimulator()
    monkeypatch.setattr(simulator, "execute", lambda *a: pytest.fail("an invalid answer was executed"))
    texts = ["Action: pick(soup can, [1, 2])", answer("home() done()"), answer("fly()"), "", "Reasoning: x."]
    scores = simulator.score(texts, [episode.turns[0].snapshot] * len(texts))
    assert scores == [INVALID_TERMS] * len(texts) and INVALID_TERMS["validity"] < 0
    assert simulator.hits == simulator.misses == 0


def test_a_failed_action_is_valid_and_changes_nothing(episode):
    (score,) = TurnSimulator().score([answer("place(soup can, [500, 500])")], [episode.turns[0].snapshot])
    assert score == {"validity": 0.0, "progress": 0.0, "penalty": 0.0, "success": 0.0}


def test_restores_are_exact_whatever_the_cell_did_before(episode):
    simulator = TurnSimulator()
    turn = episode.turns[0]
    first = simulator.execute(turn.snapshot_bytes(), turn.action)
    simulator.execute(episode.turns[-1].snapshot_bytes(), episode.turns[-1].action)  # move the cell elsewhere
    again = simulator.execute(turn.snapshot_bytes(), turn.action)
    assert again == first and "ok" in first.result


def test_the_cache_is_keyed_by_snapshot_and_canonical_action(episode, monkeypatch):
    simulator = TurnSimulator()
    turn = episode.turns[0]
    runs = []
    execute = simulator.execute
    monkeypatch.setattr(simulator, "execute", lambda s, a: runs.append(a) or execute(s, a))
    label, rest = turn.action.removeprefix("pick(").split(",", 1)
    paraphrase = f"PICK( '{label.upper()}' ,{rest}"
    other = episode.turns[1]
    scores = simulator.score(
        [answer(turn.action), answer(paraphrase), answer(turn.action), answer(other.action)],
        [turn.snapshot, turn.snapshot, turn.snapshot, other.snapshot],
    )
    assert runs == [turn.action, other.action]
    assert scores[0] == scores[1] == scores[2]
    assert (simulator.hits, simulator.misses) == (2, 2) and simulator.hit_rate == 0.5
    simulator.score([answer(turn.action)], [turn.snapshot])
    assert runs == [turn.action, other.action] and simulator.hits == 3
    simulator.score([answer(turn.action)], [other.snapshot])  # the same action from another state
    assert runs == [turn.action, other.action, turn.action]


def test_a_pool_of_worker_processes_scores_as_the_parent_does(episode):
    turns = episode.turns[:4]
    texts, snapshots = [answer(t.action) for t in turns], [t.snapshot for t in turns]
    pooled = TurnSimulator(workers=2)
    try:
        assert pooled.score(texts, snapshots) == TurnSimulator().score(texts, snapshots)
        assert pooled._pool is not None and pooled._pool.parallel
    finally:
        pooled.close()


def test_the_trl_terms_share_one_simulator_and_need_the_snapshot(episode):
    composer = turn_rewards()
    funcs = composer.trl_reward_funcs()
    assert [f.__name__ for f in funcs] == list(TURN_TERMS)
    turn = episode.turns[0]
    values = [f([answer(turn.action)], snapshot=[turn.snapshot]) for f in funcs]
    simulator = funcs[0].simulator
    assert all(f.simulator is simulator for f in funcs) and simulator.misses == 1
    assert values[1][0] > 0
    with pytest.raises(ValueError, match="snapshot"):
        funcs[0]([answer(turn.action)])
