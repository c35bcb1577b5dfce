"""The trace checker: expert traces of both suites are true of their states, false claims are caught,
and a move of a block or item outside the goal carries its reason."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from r3.episode import run_episode
from r3.packing_episode import PackingCell, run_packing_episode
from r3.reasoning import make_backend
from r3.reasoning.claims import (
    Claim,
    Previous,
    board_unchanged,
    check_episode,
    check_step,
    repeated_refusals,
    sentences,
    verified_fraction,
)
from r3.sim.language_table.env import LanguageTableEnv


@pytest.fixture(scope="module")
def board():
    return LanguageTableEnv()


@pytest.fixture(scope="module")
def cell():
    return PackingCell.build()


def _steps(trajectory):
    return [(s.reasoning, s.instruction, s.error, s.snapshot) for s in trajectory.steps]


def _failures(claims: list[Claim]) -> list[str]:
    return [f"{c.kind}: {c.text}" for c in claims if not c.verified]


@pytest.mark.slow
def test_language_table_traces_are_true_of_their_states(board):
    claims, steps = [], 0
    for task in ("V", "L", "clear_qtr", "iip", "gris", "rect"):
        t = run_episode(task, 1_000_002, make_backend("expert"), env=board, render=False, max_steps=8)
        steps += len(t.steps)
        claims += check_episode("language_table", _steps(t), board)
    kinds = {c.kind for c in claims}
    assert {"position", "relation", "distance", "spot", "previous", "done", "reason"} <= kinds
    assert verified_fraction(claims) >= 0.99, _failures(claims)
    assert all(c.verified for c in claims if c.kind == "reason"), _failures(claims)


@pytest.mark.slow
def test_packing_traces_are_true_of_their_states(cell):
    claims = []
    backend = make_backend("expert")
    for task, seed in (("4", 0), ("3", 1_000_001), ("8", 1_000_000), ("1", 0)):
        t = run_packing_episode(task, seed, backend, cell=cell, render=False)
        claims += check_episode("packing", _steps(t), cell.env)
    kinds = {c.kind for c in claims}
    assert {"tray", "table", "previous", "done", "todo", "role", "reason"} <= kinds
    assert verified_fraction(claims) >= 0.99, _failures(claims)
    assert all(c.verified for c in claims if c.kind == "reason"), _failures(claims)


def test_false_claims_are_caught(board, cell):
    t = run_episode("V", 3, make_backend("expert"), env=board, render=False, max_steps=1)
    board.restore(t.steps[0].snapshot)
    state, task = board.state(), board.task_instance
    text = t.steps[0].reasoning
    assert all(c.verified for c in check_step("language_table", text, state, task))
    moved = type(state)({**state.blocks, "red pentagon": (0.25, 0.15, 0.0)}, state.pusher)
    assert not all(c.verified for c in check_step("language_table", text, moved, task))

    cell.reset(0, "4")
    packing = cell.env.state()
    said = (
        "In the base view, the small tray holds the foam brick; the medium tray is empty. "
        "Already packed where the goal wants them: the gelatin box."
    )
    claims = check_step("packing", said, packing, cell.env.task_instance)
    assert [c.kind for c in claims] == ["tray", "tray", "done"] and not any(c.verified for c in claims)


def test_a_non_goal_block_moved_without_its_reason_is_flagged(board):
    # V, seed 3: the green star (not a V block) must make room for the blue cube.
    t = run_episode("V", 3, make_backend("expert"), env=board, render=False, max_steps=1)
    board.restore(t.steps[0].snapshot)
    state, task = board.state(), board.task_instance
    text = t.steps[0].reasoning
    assert "The green star is not part of the goal, but it stands too close to the spot the blue cube" in text
    reasons = [c for c in check_step("language_table", text, state, task) if c.kind == "reason"]
    assert reasons and all(c.verified for c in reasons)
    without = " ".join(s for s in sentences(text) if "is not part of the goal" not in s)
    reasons = [c for c in check_step("language_table", without, state, task) if c.kind == "reason"]
    assert reasons and not any(c.verified for c in reasons)


def test_refusal_claims_need_an_unchanged_scene(cell):
    cell.reset(0, "4")
    before = Previous(
        "Pack the sugar box into the medium tray.", "motion_failed: refused: collision", cell.env.state()
    )
    said = (
        'The previous instruction, "Pack the sugar box into the medium tray.", '
        "was refused before anything moved."
    )
    cell.env.step(cell.env.joint_targets)  # one control step: the arm holds still, nothing moves
    now, task = cell.env.state(), cell.env.task_instance
    assert [c.verified for c in check_step("packing", said, now, task, before)] == [True]
    sugar = now.items["sugar box"]
    bumped = {**now.items, "sugar box": replace(sugar, pos=(sugar.pos[0] + 0.03, *sugar.pos[1:]))}
    assert [c.verified for c in check_step("packing", said, replace(now, items=bumped), task, before)] == [
        False
    ]
    w, x, y, z = sugar.quat
    dropped = {
        **now.items,
        "sugar box": replace(sugar, pos=(sugar.pos[0] + 0.002, *sugar.pos[1:]), quat=(w, x + 0.015, y, z)),
    }  # fell back onto its spot
    assert [c.verified for c in check_step("packing", said, replace(now, items=dropped), task, before)] == [
        False
    ]


def test_repeated_refusals_counts_repeats_in_an_unchanged_scene_only(board):
    board.reset(seed=0, options={"task": "V"})
    a = board.state()
    b = type(a)(
        {**a.blocks, "red moon": (a.blocks["red moon"][0] + 0.02, *a.blocks["red moon"][1:])}, a.pusher
    )
    assert board_unchanged(a, a) and not board_unchanged(a, b)
    ins = ["move the red moon up"] * 3
    assert repeated_refusals(ins, ["x", "x", ""], [a, a, a, a], board_unchanged) == 1
    assert repeated_refusals(ins, ["x", "x", ""], [a, b, b, b], board_unchanged) == 0  # it moved in between
    assert repeated_refusals(ins, ["x", "y", ""], [a, a, a, a], board_unchanged) == 0  # another reason
    assert repeated_refusals(["a", "b", "a"], ["x", "x", "x"], [a] * 4, board_unchanged) == 0
    assert np.isclose(verified_fraction([]), 1.0)


def _small_sft_dataset(tmp_path):
    """An SFT dataset of one T_M scene per task, 4 decision steps each."""
    from r3.data.cli import collect_main, dataset_main

    bags, root = tmp_path / "bags", tmp_path / "sft"
    assert (
        collect_main(
            [
                "--split",
                "T_M",
                "--scenes",
                "1",
                "--trials",
                "1",
                "--max-steps",
                "4",
                "--out",
                str(bags),
                "--quiet",
            ]
        )
        == 0
    )
    assert dataset_main(["build", str(bags), "--out", str(root), "--kind", "sft"]) == 0
    return root


@pytest.mark.slow
def test_dataset_stats_report_the_verified_fraction(tmp_path, capsys):
    import json

    from r3.data.cli import dataset_main

    root = _small_sft_dataset(tmp_path)
    assert dataset_main(["stats", str(root)]) == 0
    claims = json.loads((root / "stats.json").read_text())["trace_claims"]
    assert claims["claims"] > 20 and claims["fraction"] >= 0.99
    assert "trace claims verified against the recorded state" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["stats.json", "stats.png"])
def test_dataset_stats_stopped_by_a_full_disk_keeps_the_earlier_files_whole(
    name, tmp_path, monkeypatch, capsys
):
    """Found by a sweep of stopped commands: `r3 dataset stats` wrote stats.json and stats.png in place,
    so a full disk (or a kill) during a rerun left them cut short where the earlier whole ones were."""
    import errno
    from pathlib import Path

    from matplotlib.figure import Figure

    from r3.cli import main as r3_main

    root = _small_sft_dataset(tmp_path)
    assert r3_main(["dataset", "stats", str(root)]) == 0
    earlier = {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()}
    capsys.readouterr()

    def half_then_full(write):
        def writes(self, target, *args, **kwargs):
            path = Path(target if isinstance(self, Figure) else self)
            if not path.name.startswith(name):
                return write(self, target, *args, **kwargs)
            path.write_bytes(b"half")
            raise OSError(errno.ENOSPC, "No space left on device", str(path))

        return writes

    if name == "stats.png":
        monkeypatch.setattr(Figure, "savefig", half_then_full(Figure.savefig))
    else:
        monkeypatch.setattr(Path, "write_text", half_then_full(Path.write_text))
    assert r3_main(["dataset", "stats", str(root)]) == 2  # r3 dataset's status for an OSError
    err = capsys.readouterr().err
    assert "No space left on device" in err and "Traceback" not in err, err
    assert {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()} == earlier
