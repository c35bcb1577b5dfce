"""scripts/expert_probe.py (docs/mini.md's probe of the expert's choice) runs end to end at toy size
and prints its table; the figure itself is measured by running it at its default size."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "expert_probe.py"


def load_probe():
    spec = importlib.util.spec_from_file_location("expert_probe", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_the_probe_collects_decisions_and_prints_one_row_per_classifier(capsys):
    probe = load_probe()
    assert probe.main(["--scenes", "1", "--held-out-scenes", "1", "--epochs", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [row.split(" | ")[0] for row in rows[2:]] == [f"| {kind}" for kind in probe.KINDS]
    assert probe.KINDS[:4] == ("no positions", "absolute", "relational", "block tokens")
    assert all(0.0 <= float(row.split(" | ")[1].rstrip(" |%")) <= 100.0 for row in rows[2:])
    args = [
        "--scenes",
        "1",
        "--held-out-scenes",
        "1",
        "--epochs",
        "1",
        "--kinds",
        "relational",
        "--seeds",
        "0",
        "1",
    ]
    assert probe.main(args) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| relational")]
    mean, low, high = (float(x) for x in re.findall(r"[\d.]+", row.split(" | ")[1]))
    assert low <= mean <= high  # the mean over the two seeds, with the lowest and highest


def test_without_positions_every_block_looks_the_same_but_for_its_role():
    probe = load_probe()
    row = probe.collect(range(1), "one scene")[0]
    blind, seen = probe.block_features(row, positions=False), probe.block_features(row, positions=True)
    assert blind.shape == seen.shape == (8, blind.shape[1])
    place = slice(6, 11)  # its place, its offset from the goal's centre and how far
    assert not blind[:, place].any() and seen[:, place].any()
    assert np.array_equal(blind[:, :6], seen[:, :6])  # role and previous instruction: the same


def test_block_tokens_carry_each_blocks_own_facts_and_nothing_between_blocks():
    """A token per block: moving one block changes its own token only."""
    probe = load_probe()
    row = probe.collect(range(1), "one scene")[0]
    tokens = probe.block_tokens(row)
    assert tokens.shape[0] == 8 and np.array_equal(tokens[:, :8], np.eye(8, dtype=np.float32))
    moved = dict(row["state"].blocks)
    first = next(iter(moved))
    moved[first] = (moved[first][0] + 0.1, *moved[first][1:])
    changed = probe.block_tokens(
        {**row, "state": type(row["state"])(**{**vars(row["state"]), "blocks": moved})}
    )
    assert (changed != tokens).any(1).tolist() == [True] + [False] * 7


def test_the_sequence_kinds_differ_in_the_order_the_roles_or_where_the_answer_is_read():
    probe = load_probe()
    row = probe.collect(range(1), "one scene")[0]
    kinds = probe.SEQUENCE_KINDS
    image = probe._TYPES.index("image")

    def types(name):
        return [probe._TYPES[t] for t in probe.sequence(row, kinds[name])[:, : len(probe._TYPES)].argmax(1)]

    text = ["task"] + ["goal"] * 8 + ["previous"]
    assert types("LM, image first") == ["image"] * 8 + text + ["query"]
    assert types("LM, goal first") == text + ["image"] * 8 + ["query"]
    assert types("LM, image first, block by block") == ["image"] * 8 + text + ["ask"] * 8
    plain, roles = (
        probe.sequence(row, kinds["LM, goal first"]),
        probe.sequence(row, kinds["LM, goal first, roles in image"]),
    )
    differs = (plain != roles).any(1)
    assert differs.any() and all(plain[t, image] == 1 for t in np.flatnonzero(differs))  # image tokens only
    model = probe.SequenceReader(plain.shape[1], len(plain), kinds["LM, goal first, pointing"], image_at=10)
    assert model(probe.torch.tensor(plain[None])).shape == (1, 8)  # one score per image token
