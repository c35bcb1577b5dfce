"""`r3 eval`: the files a run writes, the comparison's delta column, and help on every option."""

from __future__ import annotations

import argparse
import csv
import json

import pytest

from r3.cli import main as r3_main
from r3.eval import cli, tables
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
    assert "| mid | 30.0 ± 8.8 | 60.0 ± 9.4 | **+30.0 ± 12.9** ▲ |" in text
    assert "| rect | 50.0 ± 9.6 | 55.0 ± 9.6 | +5.0 ± 13.6 |" in text
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
    assert rows["4"].startswith("| 4 | 50.0 ± ") and "| 80.0 ± " in rows["4"] and "**+30.0 ± " in rows["4"]
    assert "▲" in rows["4"] and "▲" not in rows["7"] and "+0.0 ± " in rows["7"]


def test_compare_needs_evaluation_folders(tmp_path, capsys):
    assert cli.eval_main(["compare", str(tmp_path), str(tmp_path)]) == 2
    assert "not an evaluation folder" in capsys.readouterr().err


def test_bad_budget_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli.eval_main(["--reasoning-budget", "lots", "--out", str(tmp_path)])
    assert "'full' or a token count" in capsys.readouterr().err


@pytest.mark.parametrize("make", [cli._run_parser, cli._compare_parser])
def test_every_option_has_help(make):
    for action in make()._actions:
        if not isinstance(action, argparse._HelpAction):
            assert action.help, action.dest
