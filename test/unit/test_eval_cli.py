"""`r3 eval`: the files a run writes and the comparison's delta column (help on every option:
test_cli_help.py)."""

from __future__ import annotations

import csv
import errno
import io
import json
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from r3.cli import main as r3_main
from r3.eval import cli, metrics, tables
from r3.eval.runner import CONFIG_FILE, EPISODES_FILE, EvalConfig


def fake_run(folder, reasoner, rates, suite="language_table"):
    """An evaluation folder with 100 episodes per task at the given success rates."""
    folder.mkdir()
    config = EvalConfig(reasoner=reasoner, suite=suite, tasks=tuple(rates), scenes=100, trials=1)
    (folder / CONFIG_FILE).write_text(json.dumps(config.__dict__))
    with open(folder / EPISODES_FILE, "w") as f:
        for task, p in rates.items():
            for scene in range(100):
                ok = scene < round(100 * p)
                f.write(
                    json.dumps(
                        {
                            "task": task,
                            "split": "T_O",
                            "scene": scene,
                            "trial": 0,
                            "seed": 0,
                            "success": ok,
                            "progress": 1.0 if ok else 0.25 + scene / 1000,
                            "decision_steps": 3,
                            "reasoning_words": 50.0,
                        }
                    )
                    + "\n"
                )
    return folder


def test_run_writes_jsonl_tables_and_chart(tmp_path, capsys):
    out = tmp_path / "run"
    assert (
        r3_main(
            [
                "eval",
                "--tasks",
                "V,mid",
                "--scenes",
                "1",
                "--trials",
                "1",
                "--reasoning-budget",
                "0",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "| V | T_M | 1 |" in printed and "reasoning budget 0 tokens" in printed
    records = [json.loads(line) for line in (out / EPISODES_FILE).read_text().splitlines()]
    assert len(records) == 2 and all(r["reasoning_words"] == 0 for r in records)
    rows = list(csv.DictReader((out / "table.csv").open()))
    assert [r["task"] for r in rows] == ["V", "mid", "mean"] and rows[2]["episodes"] == "2"
    assert (out / "table.md").read_text().startswith("`expert` (instruction interface) on Language Table")
    assert (out / "success.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_run_into_a_folder_of_other_tasks_says_their_episodes_are_kept_beside_its_table(tmp_path, capsys):
    """Found by a first-contact walk: evaluating another split into the same --out wrote a table of
    the new tasks only, without a word of the episodes already there (kept, and counted again by a
    run of their own tasks)."""
    out = tmp_path / "run"
    for task in ("V", "mid"):
        argv = ["eval", "--tasks", task, "--scenes", "1", "--trials", "1", "--reasoning-budget", "0"]
        assert r3_main([*argv, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"note: {out} also holds 1 episode(s) outside this run's tasks, scenes and trials" in err
    assert len((out / EPISODES_FILE).read_text().splitlines()) == 2


def _disk_full_while_writing(name: str, write):
    """``write`` (Path.write_text or Figure.savefig) that puts half of a file whose name starts with
    ``name`` on disk and then fails as a full disk does."""

    def writes(self, target, *args, **kwargs):
        path = Path(target if isinstance(self, Figure) else self)
        if not path.name.startswith(name):
            return write(self, target, *args, **kwargs)
        if isinstance(self, Figure):
            whole = io.BytesIO()
            write(self, whole, format="png")
            data = whole.getvalue()
        else:
            data = target.encode()
        path.write_bytes(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    return writes


@pytest.mark.parametrize("name", ["config.", "table.md", "table.csv", "success.png"])  # config.json's .tmp
def test_a_rerun_stopped_by_a_full_disk_keeps_the_earlier_files_whole(tmp_path, capsys, monkeypatch, name):
    """Found by filling the disk under a rerun of a finished `r3 eval`: success.png was left cut short
    where the earlier run's whole chart had been (table.md and table.csv likewise), and a config.json
    that could not be written left a config.tmp behind. Each is now written beside its place and moved
    in once whole; the command ends in one line naming the file, not its removed .tmp."""
    out = fake_run(tmp_path / "run", "expert", {"V": 0.5, "mid": 1.0})
    argv = ["eval", "--tasks", "V,mid", "--scenes", "100", "--trials", "1", "--out", str(out)]
    assert r3_main(argv) == 0
    earlier = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    if name == "success.png":
        monkeypatch.setattr(Figure, "savefig", _disk_full_while_writing(name, Figure.savefig))
    else:
        monkeypatch.setattr(Path, "write_text", _disk_full_while_writing(name, Path.write_text))
    assert r3_main(argv) == 1
    err = capsys.readouterr().err
    last = err.splitlines()[-1]
    assert last.startswith("r3 eval: error: No space left on device") and "Traceback" not in err, err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == earlier
    # It named the .tmp file it had already removed; it names the file the user asked for.
    named = Path(last[last.rindex("(") + 1 : -1])
    assert named.parent == out and named.name.startswith(name) and named.suffix != ".tmp", last


def test_a_full_disk_in_a_write_that_names_no_file_names_the_file_asked_for(tmp_path):
    """A full disk under file.write() raises an OSError naming no file: `r3 eval` said only "No space
    left on device". write_atomically names the file it was writing (and leaves no .tmp)."""
    from r3.files import write_atomically

    def half_then_full(tmp: Path) -> None:
        tmp.write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError) as info:
        write_atomically(tmp_path / "table.md", half_then_full)
    assert info.value.filename == str(tmp_path / "table.md") and not list(tmp_path.iterdir())


def test_packing_suite_writes_its_table_and_chart(tmp_path, capsys):
    out = tmp_path / "packing"
    assert (
        r3_main(
            [
                "eval",
                "--suite",
                "packing",
                "--tasks",
                "7,9",
                "--scenes",
                "1",
                "--trials",
                "1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "`expert` (instruction interface) on packing, `sim` grounding (2 tasks)" in printed
    assert "| 7 | held-out | 1 |" in printed
    rows = list(csv.DictReader((out / "table.csv").open()))
    assert [r["task"] for r in rows] == ["7", "9", "mean"]
    assert (out / "success.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / CONFIG_FILE).read_text())["suite"] == "packing"


def test_split_is_refused_for_packing(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli.eval_main(["--suite", "packing", "--split", "T_O", "--out", str(tmp_path)])
    assert "Language Table split" in capsys.readouterr().err


def test_compare_marks_significant_deltas(tmp_path, capsys):
    a = fake_run(tmp_path / "a", "base", {"mid": 0.30, "rect": 0.50})
    b = fake_run(tmp_path / "b", "r3", {"mid": 0.60, "rect": 0.55, "iL": 0.9})
    assert cli.eval_main(["compare", str(a), str(b), "--out", str(tmp_path / "d")]) == 0
    text = capsys.readouterr().out
    assert "| mid | 30.0 [21.9, 39.6] | 60.0 [50.2, 69.1] | **+30.0 [+16.3, +42.2]** ▲ |" in text
    assert "| rect | 50.0 ± 9.6 | 55.0 [45.2, 64.4] | +5.0 [-8.7, +18.4] |" in text
    assert "iL" not in text  # only tasks both runs have
    rows = {r["task"]: r for r in csv.DictReader((tmp_path / "d" / "compare.csv").open())}
    assert rows["mid"]["success_significant"] == "True" and rows["rect"]["success_significant"] == "False"
    assert float(rows[tables.MEAN]["success_delta"]) == pytest.approx(0.175)


def test_compare_works_on_packing_evaluations(tmp_path, capsys):
    a = fake_run(tmp_path / "a", "expert", {"4": 0.50, "7": 0.90}, suite="packing")
    b = fake_run(tmp_path / "b", "r3", {"4": 0.80, "7": 0.90}, suite="packing")
    assert cli.eval_main(["compare", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert (
        rows["4"].startswith("| 4 | 50.0 ± ")
        and "| 80.0 [71.1, 86.7] " in rows["4"]
        and "**+30.0 [" in rows["4"]
    )
    assert "▲" in rows["4"] and "▲" not in rows["7"] and "+0.0 ± " in rows["7"]


@pytest.mark.parametrize("empty", ["unreadable", "other_tasks"])
def test_compare_with_no_task_in_common_says_which_side_lacks_what(tmp_path, capsys, empty):
    """Found by a hostile pass: "the two evaluations share no task with finished episodes" named
    neither side, whether one held no episode (its episodes.jsonl a folder or a FIFO) or the two
    simply finished different tasks."""
    a = fake_run(tmp_path / "a", "base", {"mid": 0.30})
    b = fake_run(tmp_path / "b", "r3", {"rect": 0.50} if empty == "other_tasks" else {"mid": 0.60})
    if empty == "unreadable":
        (b / EPISODES_FILE).unlink()
        (b / EPISODES_FILE).mkdir()
    assert cli.eval_main(["compare", str(a), str(b)]) == 2
    says = {
        "unreadable": f"B ({b}) has no finished episode",
        "other_tasks": "A has tasks ['mid'], B ['rect']",
    }
    assert f"share no task with finished episodes: {says[empty]}" in capsys.readouterr().err


def test_compare_needs_evaluation_folders(tmp_path, capsys):
    assert cli.eval_main(["compare", str(tmp_path), str(tmp_path)]) == 2
    assert "not an evaluation folder" in capsys.readouterr().err


def test_bad_budget_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli.eval_main(["--reasoning-budget", "lots", "--out", str(tmp_path)])
    assert "'full' or a token count" in capsys.readouterr().err


#: A finished episode's record, each of whose fields the cases below spoil one at a time.
_FINISHED = {
    "task": "mid",
    "scene": 0,
    "trial": 0,
    "success": True,
    "progress": 1.0,
    "decision_steps": 1,
    "reasoning_words": 1.0,
}


@pytest.mark.parametrize(
    "line",
    [
        {"task": "mid", "scene": 0, "trial": 0, "progress": 1.0},  # no success
        {"task": "mid", "scene": 0, "trial": 0, "success": "yes", "progress": "x"},
        {"task": "mid", "scene": 0, "trial": 0, "success": True, "progress": 7.0, "decision_steps": 1},
        {"task": ["mid"], "scene": 0, "trial": 0},
        {"task": "bogus", "scene": 0, "trial": 0, "skipped": "x"},
        ["not", "a", "record"],
        {**_FINISHED, "decision_steps": 10**400},
        {**_FINISHED, "reasoning_words": 10**400},
        *({**_FINISHED, "penalty": penalty} for penalty in ("0", float("nan"), -1.0, True)),
    ],
    ids=[
        "no_success",
        "strings",
        "progress_7",
        "task_list",
        "unknown_task",
        "a_list",
        "huge_steps",
        "huge_words",
        "penalty_string",
        "penalty_nan",
        "penalty_negative",
        "penalty_true",
    ],
)
def test_compare_reads_past_a_line_that_is_no_episode_record(tmp_path, capsys, line):
    """Found by a hostile user: a record without `success`, or with strings for numbers, ended
    `r3 eval compare` in a KeyError or ValueError traceback (and a resumed `r3 eval` likewise), and a
    count of 10**400 in an OverflowError. Such a line is not an episode's record: it is read past, as
    a torn one is (a resume runs it again)."""
    a = fake_run(tmp_path / "a", "base", {"mid": 0.30})
    b = fake_run(tmp_path / "b", "r3", {"mid": 0.60})
    assert cli.eval_main(["compare", str(a), str(b)]) == 0
    clean = capsys.readouterr().out
    with open(b / EPISODES_FILE, "a") as f:
        f.write(json.dumps(line) + "\n")
    assert cli.eval_main(["compare", str(a), str(b)]) == 0
    captured = capsys.readouterr()
    assert captured.out == clean
    assert "note: B: 1 line(s) of" in captured.err and "not counted: line(s) 101\n" in captured.err


def test_compare_reads_past_a_line_nested_too_deeply_and_refuses_such_a_config(tmp_path, capsys):
    """Found by a hostile user: an episodes.jsonl line or a config.json of 100000 "[" ended `r3 eval
    compare` (and `r3 eval`) in a RecursionError traceback. The line is read past as a torn one is;
    the config is refused in one line."""
    a = fake_run(tmp_path / "a", "base", {"mid": 0.30})
    b = fake_run(tmp_path / "b", "r3", {"mid": 0.60})
    assert cli.eval_main(["compare", str(a), str(b)]) == 0
    clean = capsys.readouterr().out
    with open(b / EPISODES_FILE, "a") as f:
        f.write("[" * 100_000 + "\n")
    assert cli.eval_main(["compare", str(a), str(b)]) == 0
    assert capsys.readouterr().out == clean
    (b / CONFIG_FILE).write_text("[" * 100_000)
    assert cli.eval_main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert "does not read as an evaluation's config: JSON nested too deeply" in err, err
    assert len(err.splitlines()) == 1, err


@pytest.mark.parametrize("tasks", [["bogus"], [["V"]], [3]])
def test_compare_refuses_a_config_whose_tasks_are_no_tasks(tmp_path, capsys, tasks):
    a = fake_run(tmp_path / "a", "base", {"mid": 0.30})
    b = fake_run(tmp_path / "b", "r3", {"mid": 0.60})
    for folder in (a, b):
        config = json.loads((folder / CONFIG_FILE).read_text())
        (folder / CONFIG_FILE).write_text(json.dumps({**config, "tasks": tasks}))
    assert cli.eval_main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert "its tasks name no task r3 has" in err and "Traceback" not in err


def test_a_run_refuses_a_folder_that_holds_other_things(tmp_path, capsys):
    """Found by a hostile user: `r3 eval --out` into an `r3 mini` run's folder wrote its table.md and
    table.csv over the run's own."""
    run = tmp_path / "mini_run"
    run.mkdir()
    files = {"table.md": "# Table 2 (hours of work)\n", "table.csv": "a,b\n", "mini.json": "{}"}
    for name, text in files.items():
        (run / name).write_text(text)
    status = r3_main(["eval", "--tasks", "V", "--scenes", "1", "--out", str(run)])
    err = capsys.readouterr().err
    assert status == 2 and "is no evaluation (no config.json)" in err and "Traceback" not in err, err
    assert {p.name: p.read_text() for p in run.iterdir()} == files


@pytest.mark.parametrize(
    "key",
    [("mid", 100, 0), ("mid", 1004, 0), ("mid", 5, 1)],
    ids=["scene_past_the_grid", "scene_1004", "trial_past_the_grid"],
)
def test_compare_counts_only_the_episodes_of_each_evaluations_grid(tmp_path, capsys, key):
    """Found by a hostile user: records appended to episodes.jsonl outside the grid of the folder's
    config.json (scenes 999-1004, trial 1 of a 1-trial run) changed compare's table, while `r3 eval`
    of the same folder counts only its grid's episodes. Compare reads them as `r3 eval` does."""
    a = fake_run(tmp_path / "a", "base", {"mid": 0.30})
    b = fake_run(tmp_path / "b", "r3", {"mid": 0.60})
    assert cli.eval_main(["compare", str(a), str(b)]) == 0
    clean = capsys.readouterr().out
    task, scene, trial = key
    record = {"task": task, "scene": scene, "trial": trial, "seed": 0, "success": False, "progress": 0.0}
    with open(b / EPISODES_FILE, "a") as f:
        for _ in range(50):
            f.write(json.dumps({**record, "decision_steps": 9, "reasoning_words": 1.0}) + "\n")
            record["scene"] += 1
    assert cli.eval_main(["compare", str(a), str(b)]) == 0
    assert capsys.readouterr().out == clean
    from r3.eval.runner import evaluation_records  # the reader a resumed `r3 eval` counts with

    config = EvalConfig(**{**json.loads((b / CONFIG_FILE).read_text()), "tasks": ("mid",)})
    assert len(evaluation_records(b, config)) == 100


@pytest.mark.parametrize("field", ["suite", "reasoner"])
def test_compare_shows_a_configs_control_characters_escaped(tmp_path, capsys, field):
    """Found by a hostile user: a hand-edited config.json with "suite": "nope\\u202e" was echoed raw,
    its bidi control with it, in the refusal; a reasoner's went raw into the table's header."""
    a = fake_run(tmp_path / "a", "base", {"mid": 0.30})
    b = fake_run(tmp_path / "b", "r3", {"mid": 0.60})
    config = json.loads((b / CONFIG_FILE).read_text())
    (b / CONFIG_FILE).write_text(json.dumps({**config, field: "nope\u202e|\x1b[2J"}))
    status = cli.eval_main(["compare", str(a), str(b)])
    out, err = capsys.readouterr()
    assert "\u202e" not in out + err and "\x1b" not in out + err and "Traceback" not in err
    if field == "suite":
        assert status == 2 and len(err.splitlines()) == 1 and "suite 'nope\\u202e|\\x1b[2J' unknown" in err
    else:
        assert status == 0 and "| nope\\u202e\\|\\x1b[2J success % |" in out


def test_compare_writes_only_into_a_new_folder_or_an_earlier_comparison(tmp_path, capsys):
    """Found by a hostile user: `compare --out DIR` wrote compare.md and compare.csv over a user's own
    compare.md, and into any folder (an evaluation's, an episode collection)."""
    a = fake_run(tmp_path / "a", "base", {"mid": 0.30})
    b = fake_run(tmp_path / "b", "r3", {"mid": 0.60})
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "compare.md").write_text("my own notes\n")
    for out in (mine, a):
        held = {p.name: p.read_bytes() for p in out.iterdir()}
        assert cli.eval_main(["compare", str(a), str(b), "--out", str(out)]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and len(captured.err.splitlines()) == 1, captured.err
        assert "not writing a comparison" in captured.err or "not replacing it" in captured.err
        assert {p.name: p.read_bytes() for p in out.iterdir()} == held
    delta = tmp_path / "delta"
    assert cli.eval_main(["compare", str(a), str(b), "--out", str(delta)]) == 0
    assert cli.eval_main(["compare", str(b), str(a), "--out", str(delta)]) == 0  # an earlier one: replaced
    assert "| mid | 60.0 [" in (delta / "compare.md").read_text()


def test_via_ros_asks_whether_the_graph_can_run_before_the_in_process_run(tmp_path, monkeypatch, capsys):
    """Found by a hostile user: with another r3 graph in the ROS domain, `r3 eval --via-ros` ran the
    whole in-process evaluation before it found out (test_eval_via_ros.py: through real DDS)."""
    monkeypatch.setattr(
        cli, "evaluate", lambda *a, **k: pytest.fail("the in-process run started"), raising=False
    )
    via_ros = cli.ViaRos(lambda: "an r3 graph already runs", lambda *a: pytest.fail("the graph was run"))
    out = tmp_path / "eval"
    argv = ["--tasks", "mid", "--scenes", "1", "--trials", "1", "--via-ros", "--out", str(out)]
    assert cli.run_main(argv, via_ros) == 2
    assert capsys.readouterr().err.splitlines() == ["error: --via-ros: an r3 graph already runs"]
    assert not out.exists()


def test_compare_names_the_tasks_it_leaves_out(tmp_path, capsys):
    """Found by a hostile sweep: a task only one evaluation ran (or one with no finished episode on a
    side) was left out of the comparison without a word; a note names each, and the side it lacks."""
    a = fake_run(tmp_path / "a", "base", {"mid": 0.30, "V": 0.5})
    b = fake_run(tmp_path / "b", "r3", {"mid": 0.60, "iL": 0.5})
    assert cli.eval_main(["compare", str(a), str(b)]) == 0
    captured = capsys.readouterr()
    assert "note: left out, no finished episode in both: V (none in B), iL (none in A)" in captured.err
    assert "| mid |" in captured.out and "| V |" not in captured.out


def test_compare_names_a_record_edited_into_no_record(tmp_path, capsys):
    """Found by a hostile sweep: a record edited by hand into no record (success "yes", progress
    NaN) left compare's counts one episode short without a word; the note names its line."""
    a = fake_run(tmp_path / "a", "base", {"mid": 0.30})
    b = fake_run(tmp_path / "b", "r3", {"mid": 0.60})
    lines = (b / EPISODES_FILE).read_text().splitlines()
    lines[3] = lines[3].replace('"success": true', '"success": "yes"')
    lines[7] = lines[7].replace('"progress": 1.0', '"progress": NaN')
    (b / EPISODES_FILE).write_text("\n".join(lines) + "\n\n")  # a blank line is no record, nor named
    assert cli.eval_main(["compare", str(a), str(b)]) == 0
    err = capsys.readouterr().err
    assert "note: B: 2 line(s) of" in err and "are no episode record, not counted: line(s) 4, 8\n" in err, err


@pytest.mark.parametrize(
    "key, value, said",
    [
        ("budget", 0, "reasoning budget differs: A full, B 0 tokens"),
        ("history", "none", "history differs: A 'response', B 'none'"),
    ],
)
def test_compare_notes_a_reasoning_budget_or_history_that_differs(tmp_path, capsys, key, value, said):
    """Found by a hostile sweep: compare noted differing scenes, trials, steps, interface and grounding,
    not a differing reasoning budget or history, which change the outcomes as much; its header names
    only the reasoners, so the delta read as theirs. Found by a first-time user: the budget's note
    said "A None, B 0", Python's words; it now says "full" and "0 tokens", as the tables' header does."""
    a = fake_run(tmp_path / "a", "base", {"mid": 0.30})
    b = fake_run(tmp_path / "b", "r3", {"mid": 0.60})
    config = json.loads((b / CONFIG_FILE).read_text())
    (b / CONFIG_FILE).write_text(json.dumps({**config, key: value}))
    assert cli.eval_main(["compare", str(a), str(b)]) == 0
    err = capsys.readouterr().err
    assert f"note: {said}\n" in err, err


@pytest.mark.parametrize("key, value", [("scenes", 1.5), ("scenes", True), ("trials", 1.0), ("budget", 2.5)])
def test_compare_refuses_a_config_whose_counts_are_no_whole_numbers(tmp_path, capsys, key, value):
    """Found by a hostile sweep: a config.json of 1.5 scenes was taken, and its grid counted scenes 0
    and 1 (scene < 1.5); true read as 1 scene, a budget of 2.5 tokens as one."""
    a = fake_run(tmp_path / "a", "base", {"mid": 0.30})
    b = fake_run(tmp_path / "b", "r3", {"mid": 0.60})
    config = json.loads((b / CONFIG_FILE).read_text())
    (b / CONFIG_FILE).write_text(json.dumps({**config, key: value}))
    assert cli.eval_main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert "is not an evaluation's config" in err and "whole number" in err and len(err.splitlines()) == 1, (
        err
    )


def test_a_run_refuses_a_10000_character_task_name_in_a_short_line(tmp_path, capsys):
    """Found by a hostile sweep: `--tasks` of a 10,000-character name was refused in a line of 10,850
    characters quoting all of it."""
    with pytest.raises(SystemExit):
        r3_main(["eval", "--tasks", "x" * 10_000 + ",a|b", "--scenes", "1", "--out", str(tmp_path / "o")])
    line = capsys.readouterr().err.splitlines()[-1]
    assert "unknown or none given for suite language_table" in line and len(line) < 400, len(line)
    assert not (tmp_path / "o").exists()


def test_compare_says_why_a_progress_delta_is_missing(tmp_path, capsys):
    """Found by a hostile sweep: with one episode on a side the Δ progress cell read "-" without a
    word of why (Welch's interval needs two values on each side)."""
    a = fake_run(tmp_path / "a", "base", {"mid": 0.30})
    b = fake_run(tmp_path / "b", "r3", {"mid": 0.60})
    lines = (b / EPISODES_FILE).read_text().splitlines()
    (b / EPISODES_FILE).write_text(lines[0] + "\n")
    assert cli.eval_main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1].endswith("| - |")
    assert "Δ progress -: fewer than two episodes on a side." in out


def test_compare_prints_lopsided_intervals_by_their_ends_and_no_spread_as_such(tmp_path, capsys):
    """Found by a review: "Δ ± h" printed half the width of a lopsided Newcombe interval (its ends
    are not equally far from Δ near 100 %), and progress without spread on either side (every episode
    a success: all 1.0) printed as "± 0.0", a certainty no sample gives."""
    a = fake_run(tmp_path / "a", "base", {"mid": 0.90, "rect": 1.0})
    b = fake_run(tmp_path / "b", "r3", {"mid": 1.0, "rect": 1.0})
    assert cli.eval_main(["compare", str(a), str(b), "--out", str(tmp_path / "d")]) == 0
    rows = {line.split(" | ")[0].strip("| "): line for line in capsys.readouterr().out.splitlines()}
    d = metrics.rate_difference([True] * 90 + [False] * 10, [True] * 100)
    assert f"**+10.0 [{100 * d.low:+.1f}, {100 * d.high:+.1f}]** ▲" in rows["mid"], rows["mid"]
    assert round(d.value - d.low, 3) != round(d.high - d.value, 3)
    assert rows["rect"].endswith("| +0.0 ± 3.7 | +0.0 (no spread) |"), rows["rect"]
    csv_rows = {r["task"]: r for r in csv.DictReader((tmp_path / "d" / "compare.csv").open())}
    assert csv_rows["rect"]["progress_significant"] == "False"
