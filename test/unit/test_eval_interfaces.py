"""Evaluation per action interface, with ERR's penalty check and metrics (SR, PG, NPR, SSR)."""

from __future__ import annotations

import json

import pytest

from r3.eval import tables
from r3.eval.runner import CONFIG_FILE, EvalConfig, EvalError, evaluate
from r3.tasks.packing.workcell import TRAY_SPECS


@pytest.fixture(scope="module")
def env():
    from r3.sim.packing.env import PackingEnv

    e = PackingEnv()
    yield e
    e.close()


def _moved(env, layout: dict, item: str, tray: str) -> None:
    """``layout`` with ``item`` set down in the middle of ``tray``, set in ``env``."""
    layout[item] = (*TRAY_SPECS[tray].centre[:2], 0.0)
    env.set_layout(layout)


def test_the_penalty_counts_what_the_goal_did_not_ask_for(env):
    env.reset(seed=0, options={"task": "4"})  # gelatin box, foam brick -> small; sugar box -> medium
    task = env.task_instance
    assert "soup can" not in task.targets and "soup can" not in task.clutter
    assert task.penalty(env.state()) == 0.0
    layout = dict(task.layout)
    _moved(env, layout, "soup can", "large")  # an object the goal does not name, into a tray
    assert task.penalty(env.state()) == 1.0
    _moved(env, layout, "sugar box", "large")  # a goal object (it started on the table), into the wrong tray
    assert task.penalty(env.state()) == 2.0


def test_an_interface_is_checked_against_the_suite_and_brings_its_step_budget():
    with pytest.raises(EvalError, match="acts on packing"):
        EvalConfig(suite="language_table", interface="semantic")
    with pytest.raises(EvalError, match="not served"):
        EvalConfig(suite="packing", interface="telepathy")
    assert EvalConfig(suite="packing", interface="semantic").max_steps == 45
    assert EvalConfig(suite="packing", interface="semantic", max_steps=3).max_steps == 3
    assert EvalConfig(suite="packing").max_steps == 15


def test_a_semantic_packing_evaluation_reports_err_metrics(tmp_path):
    config = EvalConfig(suite="packing", interface="semantic", tasks=("4",), scenes=1, trials=1)
    (record,) = evaluate(config, tmp_path)
    assert isinstance(record["penalty"], float) and record["decision_steps"] > 0
    assert all("(" in call for call in record["instructions"])  # semantic calls, not instructions
    assert json.loads((tmp_path / CONFIG_FILE).read_text())["interface"] == "semantic"
    table = tables.markdown(tables.task_rows([record], config.tasks))
    assert "no-penalty % | strict success %" in table.splitlines()[0]
    with pytest.raises(EvalError, match="interface: cached 'semantic', now 'instruction'"):
        evaluate(EvalConfig(suite="packing", tasks=("4",), scenes=1, trials=1), tmp_path)


def test_a_table_without_penalties_has_no_err_columns():
    recs = [{"task": "V", "success": True, "progress": 1.0, "decision_steps": 2, "reasoning_words": 1.0}]
    assert "no-penalty" not in tables.markdown(tables.task_rows(recs, ["V"]))
    assert tables.to_csv(tables.task_rows(recs, ["V"])).splitlines()[1].endswith(",,,,,")
