"""`r3 eval` writes its table and chart at the edges: 0 %, 100 %, one episode, a task with none.

Each case is an evaluation folder whose episodes.jsonl already holds every episode of the run, so
`r3 eval` resumes with nothing left to run and goes straight to the table and the chart.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from r3.cli import main as r3_main
from r3.eval.metrics import rate, wilson_interval
from r3.eval.runner import CONFIG_FILE, EPISODES_FILE, EvalConfig
from r3.seeds import scene_seed

PNG = b"\x89PNG\r\n\x1a\n"


def finished_run(folder, outcomes: dict[str, list[bool | None]]) -> list[str]:
    """A folder holding every episode of a run over ``outcomes``' tasks, one trial per scene;
    None is a scene skipped because its layout left nothing to do. Returns the `r3 eval` arguments."""
    folder.mkdir()
    scenes = max(len(v) for v in outcomes.values())
    config = EvalConfig(reasoner="expert", tasks=tuple(outcomes), scenes=scenes, trials=1)
    (folder / CONFIG_FILE).write_text(json.dumps(config.__dict__))
    with open(folder / EPISODES_FILE, "w") as f:
        for task, results in outcomes.items():
            for scene, ok in enumerate(results):
                record = {"task": task, "split": "T_O", "scene": scene, "trial": 0, "seed": scene_seed(scene)}
                if ok is None:
                    record["skipped"] = "the layout already solves the task"
                else:
                    record |= {
                        "success": ok,
                        "progress": 1.0 if ok else 0.2,
                        "decision_steps": 2,
                        "reasoning_words": 30.0,
                    }
                f.write(json.dumps(record) + "\n")
    return [
        "eval",
        "--tasks",
        ",".join(outcomes),
        "--scenes",
        str(scenes),
        "--trials",
        "1",
        "--out",
        str(folder),
    ]


CASES = {
    # Issue 17's crash: `r3 eval --split T_O --scenes 2 --trials 1` (its pooled row: 10 of 10).
    "all_succeed_few_episodes": {
        task: [True, True] for task in ("diag_line", "rect", "mid", "iL", "clear_half")
    },
    "all_fail": {"iL": [False, False, False], "iV": [False, False, False]},
    "one_episode": {"iL": [True]},
    "one_episode_each_way": {"iL": [True], "iV": [False]},
    "a_task_with_no_episode": {"iL": [True, False], "iV": [None, None]},
    "no_episode_at_all": {"iL": [None]},
}


@pytest.mark.parametrize("case", CASES)
def test_table_and_chart_are_written(case, tmp_path, capsys):
    outcomes = CASES[case]
    out = tmp_path / case
    assert r3_main(finished_run(out, outcomes)) == 0
    assert (out / "success.png").read_bytes()[:8] == PNG
    rows = {r["task"]: r for r in csv.DictReader((out / "table.csv").open())}
    for task, results in outcomes.items():
        ran = [ok for ok in results if ok is not None]
        assert int(rows[task]["episodes"]) == len(ran)
        if ran:
            low, rate_, high = (float(rows[task][k]) for k in ("success_low", "success", "success_high"))
            assert low <= rate_ == sum(ran) / len(ran) <= high
    table = (out / "table.md").read_text()
    assert all(f"| {task} |" in table for task in outcomes)


@pytest.mark.parametrize("n", [1, 2, 3, 10, 64, 1024])
def test_the_wilson_interval_holds_the_rate_at_0_and_100_percent(n):
    for k in (0, n):
        low, high = wilson_interval(k, n)
        assert 0.0 <= low <= k / n <= high <= 1.0
        estimate = rate([True] * k + [False] * (n - k))
        assert estimate.value - estimate.low >= 0 and estimate.high - estimate.value >= 0


@pytest.mark.parametrize("penalty", [None, 0.0], ids=["language_table", "packing"])
def test_a_task_with_no_episode_has_a_full_row_of_dashes_and_empty_csv_cells(penalty):
    """Found by a hostile sweep: a task whose every scene was skipped printed "nan" for its mean steps
    and words in table.md, and with packing's penalties a row two cells short of the header; its CSV
    row held "nan" and a Wilson interval of [0, 1] over no episode."""
    from r3.eval import tables

    tasks = ["4", "5"] if penalty is not None else ["iL", "iV"]
    done = {"scene": 0, "trial": 0, "success": True, "progress": 1.0, "decision_steps": 2}
    records = [
        {"task": tasks[0], **done, "reasoning_words": 3.0, "penalty": penalty},
        {"task": tasks[1], "scene": 0, "trial": 0, "skipped": "the layout already solves the task"},
    ]
    rows = tables.task_rows(records, tasks)
    lines = tables.markdown(rows).splitlines()
    empty = next(line for line in lines if line.startswith(f"| {tasks[1]} |"))
    assert "nan" not in empty and empty.count("|") == lines[0].count("|")
    assert empty.endswith("| 0 | - | - | - | - |" + (" - | - |" if penalty is not None else ""))
    csv_rows = {r["task"]: r for r in csv.DictReader(tables.to_csv(rows).splitlines())}
    assert all(
        value == ""
        for key, value in csv_rows[tasks[1]].items()
        if key not in ("task", "split", "episodes", "skipped")
    )


def test_the_chart_marks_a_task_with_no_episode_instead_of_leaving_it_out(tmp_path, monkeypatch):
    """Found by a hostile sweep: the chart dropped every task with no episode (each scene skipped)
    without a mark, while the table lists it; all skipped, it showed only "no episodes"."""
    from matplotlib.figure import Figure

    from r3.eval import tables
    from r3.eval.plots import NO_EPISODES, success_chart

    drawn = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, path, **kw: drawn.append(fig) or Path(path).touch())
    done = {"scene": 0, "trial": 0, "success": False, "progress": 0.2, "decision_steps": 2}
    records = [
        {"task": "iL", **done, "reasoning_words": 3.0},
        {"task": "iV", "scene": 0, "trial": 0, "skipped": "the layout already solves the task"},
    ]
    success_chart(tables.task_rows(records, ["iL", "iV"]), tmp_path / "success.png", "t")
    ax = drawn[0].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["iL", "iV", "mean"]
    marks = [t for t in ax.texts if t.get_text() == NO_EPISODES]
    assert [round(t.get_position()[0]) for t in marks] == [1]  # over iV's place, not iL's 0 % bar


@pytest.mark.parametrize("tasks", [["1"], ["1", "2"]])
def test_the_chart_of_packing_goals_has_their_split_in_its_legend(tasks, tmp_path, monkeypatch):
    """`r3 eval --suite packing --tasks 1` ended in a matplotlib traceback after its table: the
    legend knew only Language Table's splits, so one held-out goal left it no entry (ncol=0)."""
    from matplotlib.figure import Figure

    from r3.eval import tables
    from r3.eval.plots import success_chart

    drawn = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, path, **kw: drawn.append(fig) or Path(path).touch())
    done = {"scene": 0, "trial": 0, "success": True, "progress": 1.0, "decision_steps": 2}
    records = [{"task": t, **done, "reasoning_words": 3.0, "penalty": 0.0} for t in tasks]
    success_chart(tables.task_rows(records, tasks), tmp_path / "success.png", "t")
    labels = [t.get_text() for t in drawn[0].axes[0].get_legend().get_texts()]
    assert labels == (["held-out"] if len(tasks) == 1 else ["held-out", "mean"])


def test_one_episodes_progress_has_no_interval_rather_than_one_of_zero_width(tmp_path, capsys):
    """Found by a hostile sweep: a task with one episode printed its progress as "20.0 ± 0.0", an
    interval of zero width read as certainty from one sample. Found by a first-contact walk: its
    success beside it printed "0.0 ± 39.7", a rate below 0 % and half the interval's reach; a
    Wilson interval not centred on its rate is printed by its ends."""
    out = tmp_path / "one"
    assert r3_main(finished_run(out, {"iL": [False]})) == 0
    table = (out / "table.md").read_text()
    assert "| iL | T_O | 1 | 0.0 [0.0, 79.3] | 20.0 (n=1) |" in table, table
    row = next(csv.DictReader((out / "table.csv").open()))
    assert (row["progress"], row["progress_low"], row["progress_high"]) == ("0.200000", "", "")
