"""The judge figures of `r3 mini`'s report: per split, and paired differences on the same states."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from r3.eval.runner import EPISODES_FILE
from r3.mini import (
    CONFIGS,
    MiniError,
    MiniRun,
    differences_line,
    judge_by_split,
    load_mini_config,
    paired_difference,
    read_states,
    table_row,
)


def _states(scores, splits=None):
    splits = splits or ["T_M"] * len(scores)
    return [
        {"episode_id": f"e{i}", "step": i, "split": split, "judge": score}
        for i, (score, split) in enumerate(zip(scores, splits))
    ]


def test_a_paired_difference_is_the_mean_of_per_state_differences_with_a_narrower_interval():
    a = _states([1.0, 0.25, 1.0, 0.0, 1.0, 0.25])
    b = _states([0.75, 0.0, 0.75, 0.0, 0.75, 0.0])  # a is b plus 0.25 or 0 on every state
    d = paired_difference(a, b)
    assert d.value == pytest.approx(0.25 * 5 / 6)
    assert d.low > 0, "a constant gain on every state is significant when paired"
    assert d.n == 6


def test_states_files_of_other_states_are_refused():
    a, b = _states([1.0, 0.0]), _states([1.0, 0.0])
    b[1]["step"] = 7
    with pytest.raises(MiniError, match="different states"):
        paired_difference(a, b)


def test_unscored_states_are_left_out_per_split():
    states = _states([1.0, None, 0.0, 0.5], ["T_M", "T_M", "T_R", "T_R"])
    by_split = judge_by_split(states)
    assert {s: (e["value"], e["n"]) for s, e in by_split.items()} == {"T_M": (1.0, 1), "T_R": (0.25, 2)}


def test_the_differences_line_names_each_pair():
    line = differences_line({"sft - random_valid": {"value": 0.02, "low": 0.01, "high": 0.03, "n": 500}})
    assert "sft - random_valid: 0.020 ± 0.010" in line


def _episode(task, scene=0, **fields):
    return {
        "task": task,
        "split": "T_O",
        "scene": scene,
        "trial": 0,
        "success": True,
        "progress": 1.0,
        "decision_steps": 3,
        "invalid_steps": 1,
        "reasoning_words": 5.0,
        **fields,
    }


def test_a_row_takes_each_episodes_split_from_its_task():
    """Found by a hostile sweep: table_row read the record's own "split", which no reader checks: a
    record without one ended the report in a KeyError traceback, one with another split's name
    counted its task under that split."""
    no_split = {k: v for k, v in _episode("group").items() if k != "split"}
    row = table_row("r", [no_split, _episode("T", split="T_M")], None)
    assert (row["T_M success"]["n"], row["T_R success"]["n"], row["T_O success"]["n"]) == (1, 1, 0)


@pytest.mark.parametrize("invalid", [None, 4, -1, 1.5, True])
def test_a_row_refuses_invalid_steps_that_are_no_count_of_the_episodes_steps(invalid):
    """Found by a hostile sweep: invalid_steps missing or a float ended the report in a KeyError or
    TypeError traceback, and more than the decision steps gave a valid rate of 0 over a wrong count."""
    with pytest.raises(MiniError, match=r"scene 0, trial 0 has invalid_steps .*, not a count of its 3"):
        table_row("r", [_episode("group", invalid_steps=invalid)], None)


def test_the_report_counts_the_grid_of_each_evaluation_and_names_lines_that_are_no_record(tmp_path, capsys):
    """Found by a hostile sweep: the report read every record of an evaluation folder, also those
    outside the run's grid of scenes, which `r3 eval`'s own table leaves out, and read past a line
    that is no record without a word."""
    run = MiniRun(tmp_path / "run", load_mini_config(CONFIGS / "quick.yaml"))
    folder = run.path("eval", "expert")
    folder.mkdir(parents=True)
    lines = [
        _episode("group"),
        _episode("group", scene=7),
        {**_episode("T"), "success": "yes"},
        _episode("T"),
    ]
    (folder / EPISODES_FILE).write_text("".join(json.dumps(line) + "\n" for line in lines))
    records = run.eval_records("expert")
    assert [(r["task"], r["scene"]) for r in records] == [("group", 0), ("T", 0)]
    err = capsys.readouterr().err
    assert "report: expert: 1 line(s) of" in err and "no episode record, not counted: line(s) 3\n" in err, err


GOOD_STATE = {"episode_id": "e0", "split": "T_M", "step": 0, "answer": "a", "valid": True, "judge": 0.5}


@pytest.mark.parametrize(
    "line",
    [
        json.dumps({**GOOD_STATE, "judge": float("nan")}),
        json.dumps({**GOOD_STATE, "judge": float("inf")}),
        json.dumps({**GOOD_STATE, "judge": "0.5"}),
        json.dumps({**GOOD_STATE, "valid": "yes"}),
        json.dumps({k: v for k, v in GOOD_STATE.items() if k != "step"}),
        '{"episode_id": "e0", "spl',
        "[1, 2]",
    ],
    ids=["judge_nan", "judge_inf", "judge_string", "valid_string", "no_step", "torn", "a_list"],
)
def test_a_states_line_that_is_no_states_answer_is_refused_with_its_line(tmp_path, line):
    """Found by a hostile sweep: a judge score of NaN printed "nan ± nan" in Table 2, a string one
    counted as a number, a line without its fields ended the report in a KeyError traceback."""
    path = tmp_path / "sft.jsonl"
    path.write_text(json.dumps(GOOD_STATE) + "\n" + line + "\n")
    with pytest.raises(MiniError, match=r"sft.jsonl, line 2: no held-out state's answer"):
        read_states(path)


def test_a_states_file_with_no_state_is_refused(tmp_path):
    """Found by a hostile sweep: an empty states file ended the report in a ZeroDivisionError."""
    path = tmp_path / "untrained.jsonl"
    path.write_text("\n")
    with pytest.raises(MiniError, match="holds no held-out state"):
        read_states(path)
    path.write_text(json.dumps(GOOD_STATE) + "\n\n" + json.dumps({**GOOD_STATE, "judge": None}) + "\n")
    assert [s["judge"] for s in read_states(path)] == [0.5, None]


def test_a_split_with_no_episode_has_empty_csv_cells():
    """Found by a hostile sweep: a split with no finished episode wrote "nan" and a Wilson interval of
    [0, 1] over nothing into table.csv (table.md shows "—")."""
    import csv

    from r3.mini import to_csv

    row = table_row("r", [_episode("group", invalid_steps=0)], None)
    written = next(csv.DictReader(to_csv([row]).splitlines()))
    assert [written[f"T_R success {k}"] for k in ("value", "low", "high", "n")] == ["", "", "", "0"]
    assert [written[f"T_M success {k}"] for k in ("value", "n")] == ["1.0", "1"]


def test_success_per_task_marks_a_reasoner_with_no_episode_of_a_task(tmp_path, monkeypatch):
    """Found by a hostile sweep: a reasoner with no finished episode of a task got a NaN bar, which
    matplotlib draws as nothing, the same as 0 %, without a word."""
    from matplotlib.figure import Figure

    from r3.eval.plots import NO_EPISODES
    from r3.mini import success_per_task

    drawn = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, path, **kw: drawn.append(fig) or Path(path).touch())
    records = {"a": [_episode("group"), _episode("T")], "b": [_episode("group", success=False)]}
    success_per_task(records, tmp_path / "success_per_task.png")
    marks = [t for t in drawn[0].axes[0].texts if t.get_text() == NO_EPISODES]
    assert [round(t.get_position()[0], 1) for t in marks] == [1.4]  # b's place at T, not b's 0 % at group


def _checkpoint(folder, log):
    folder.mkdir()
    (folder / "r3_train.json").write_text(json.dumps({"log_history": log}))
    return folder


def test_learning_curves_leave_out_and_name_values_that_are_no_finite_number(tmp_path, monkeypatch, capsys):
    """Found by a hostile sweep: a NaN loss went into summary.json's held-out losses (NaN, no JSON)
    and drew nothing on the plot without a word; a stage with nothing logged gave an empty panel
    and matplotlib's "No artists with labels" warning."""
    from matplotlib.figure import Figure

    from r3.mini import learning_curves

    drawn = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, path, **kw: drawn.append(fig) or Path(path).touch())
    good = [{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.0, "eval_loss": 1.5}]
    sft = [{"step": 1, "loss": 2.0}, {"step": 2, "eval_loss": float("nan")}, {"step": 3, "eval_loss": 0.5}]
    checkpoints = {
        "sft": _checkpoint(tmp_path / "sft", sft),
        "il": _checkpoint(tmp_path / "il", good),
        "rl": _checkpoint(tmp_path / "rl", []),
    }
    held_out = learning_curves(checkpoints, tmp_path / "curves.png")
    assert held_out == {"sft": [[3, 0.5]], "il": [[2, 1.5]]}
    err = capsys.readouterr().err
    assert "left out, no finite number: 1 sft eval_loss" in err and "No artists" not in err, err
    texts = [t.get_text() for ax in drawn[0].axes for t in ax.texts] + [t.get_text() for t in drawn[0].texts]
    assert "no reward logged" in texts and any("1 sft eval_loss" in t for t in texts)


@pytest.mark.parametrize(
    "log", [None, {"log_history": "x"}, [1, 2]], ids=["no_log", "log_a_string", "a_list"]
)
def test_a_training_record_without_its_log_is_refused_naming_the_file(tmp_path, log):
    """Found by a hostile sweep: an r3_train.json without log_history ended the report in a KeyError."""
    from r3.mini import training_log

    folder = tmp_path / "sft"
    folder.mkdir()
    (folder / "r3_train.json").write_text(json.dumps(log))
    with pytest.raises(MiniError, match=r"sft/r3_train.json (has no log_history|does not read)"):
        training_log(folder)


def test_a_split_with_no_episode_is_null_in_summary_json():
    """Found by a hostile sweep: summary.json held NaN (no JSON: strict readers refuse the file) for a
    split with no finished episode, and a Wilson interval of [0, 1] over nothing."""
    row = table_row("r", [_episode("group", invalid_steps=0)], None)
    written = json.loads(json.dumps(row, allow_nan=False))
    assert written["T_R success"] == {"value": None, "low": None, "high": None, "n": 0}
    assert written["T_M success"]["value"] == 1.0 and written["T_M success"]["n"] == 1


def test_a_judge_mean_of_one_state_shows_no_interval():
    """Found by a hostile sweep: the judge reward of one held-out state printed as "0.500 ± 0.000"."""
    from r3.mini import markdown

    row = table_row("r", [_episode("group", invalid_steps=0)], _states([0.5]))
    assert "| 0.500 (n=1) |" in markdown([row])


def test_pairs_without_a_judge_score_are_counted_and_named_as_left_out():
    """Found by a review: a pair with a null judge score on either side was silently left out of the
    paired difference, seen only as a smaller n in summary.json and not at all in the note."""
    from r3.mini import JUDGE_COMPARISONS, judge_differences, unscored_pairs

    names = {name for pair in JUDGE_COMPARISONS for name in pair}
    states = {name: _states([1.0, 0.5, 0.0, 0.25]) for name in names}
    states["rl"] = _states([1.0, None, 0.0, None])
    states["sft"] = _states([None, 0.5, 0.0, 0.25])
    differences = json.loads(json.dumps(judge_differences(states), allow_nan=False))
    assert differences["rl - sft"]["n"] == 1 and differences["rl - sft"]["left_out"] == 3
    assert "the judge gave no score" in differences["rl - sft"]["left_out_why"]
    assert differences["sft - il"]["left_out"] == 1 and differences["sft - il"]["n"] == 3
    assert differences["rl - il"]["left_out"] == 2
    assert differences["sft - random_valid"]["left_out"] == 1
    assert unscored_pairs(states["il"], states["il"]) == {"left_out": 0}  # none: no reason given
    line = differences_line(differences)
    assert "rl - sft: 0.000 (n=1) (3 pair(s) left out: the judge gave no score" in line, line
    assert "sft - il: " in line and "(1 pair(s) left out" in line
