"""ZAP's data engine on the semantic packing cell: mining keeps the verified successes of a folder of
expert and perturbed-expert episodes (deduplicated), and prefix-tree search finds a success, from a
branched snapshot, on a goal that a scripted policy fails from the start."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace

import pytest

from r3.data.tree_search import prefix_tree_search
from r3.data.turns import EPISODE_FILE, load_episode, load_episodes, record_packing_episode
from r3.packing_episode import PackingCell
from r3.reasoning.backends import make_backend
from r3.reasoning.backends.base import ReasonerBackend
from r3.reasoning.parsing import parse_response
from r3.train.mining import MANIFEST, mine, verified_success


class Perturbed(ReasonerBackend):
    """The expert with its answers edited by ``edit(step, text) -> text``."""

    def __init__(self, edit, name: str):
        self.inner, self.edit, self.model_id = make_backend("expert"), edit, name

    def _generate(self, *args):
        raise AssertionError("not used")

    def decide(self, inp, budget, on_text=None):
        out = self.inner.decide(inp, budget, on_text)
        return replace(out, raw_text=self.edit(inp.step, out.raw_text))


def at_step(step: int, action: str):
    return lambda s, text: f"Reasoning: scripted.\nAction: {action}" if s == step else text


def misses(item: str):
    """Every pick of ``item`` aims at the image corner, where nothing can be grasped."""
    return lambda s, text: re.sub(rf"pick\({item}, \[\d+, \d+\]\)", f"pick({item}, [0, 0])", text)


@pytest.fixture(scope="module")
def cell():
    return PackingCell.build()


@pytest.fixture(scope="module")
def folder(tmp_path_factory, cell):
    """Expert episodes (one recorded twice), and perturbed ones: one that still succeeds by another
    path, two that fail."""
    root = tmp_path_factory.mktemp("mining") / "episodes"
    expert = make_backend("expert")
    record_packing_episode("1", 0, expert, root, episode_id="a_expert_1", cell=cell)
    record_packing_episode("1", 0, expert, root, episode_id="b_expert_1_again", cell=cell)
    record_packing_episode("7", 0, expert, root, episode_id="c_expert_7", cell=cell)
    record_packing_episode(
        "1", 0, Perturbed(at_step(0, "home()"), "home_first"), root, episode_id="d_home_first", cell=cell
    )
    record_packing_episode(
        "7", 0, Perturbed(at_step(1, "done()"), "early_done"), root, episode_id="e_early_done", cell=cell
    )
    record_packing_episode(
        "1",
        0,
        Perturbed(misses("foam brick"), "miss"),
        root,
        episode_id="f_misses",
        cell=cell,
        max_steps=12,
    )
    return root


def test_the_folder_holds_what_the_fixture_says(folder):
    episodes = {e.episode_id: e for e in load_episodes(folder)}
    assert [episodes[k].success for k in sorted(episodes)] == [True, True, True, True, False, False]
    assert episodes["a_expert_1"].actions == episodes["b_expert_1_again"].actions
    assert episodes["d_home_first"].actions[0] == "home()"
    assert episodes["d_home_first"].actions != episodes["a_expert_1"].actions


def test_mining_keeps_the_verified_successes_once_each(folder, tmp_path):
    from datasets import load_from_disk

    report = mine(folder, tmp_path / "sft")
    assert report.episodes == 6 and report.successful == 4 and report.duplicates == 1
    assert report.kept == ["a_expert_1", "c_expert_7", "d_home_first"]
    assert report.rejected == {"failed": 2}
    episodes = {e.episode_id: e for e in load_episodes(folder)}
    kept_turns = [t for k in report.kept for t in episodes[k].turns]
    assert kept_turns and all(t.valid and t.action for t in kept_turns)  # the fixture refuses no turn
    rows = load_from_disk(str(tmp_path / "sft"))
    assert report.dropped_turns == 0
    assert len(rows) == report.rows == len(kept_turns)  # one row per turn of a kept episode
    assert sorted(zip(rows["episode_id"], rows["step"])) == sorted((t.episode_id, t.step) for t in kept_turns)
    assert set(rows["episode_id"]) == set(report.kept)
    for row in rows:
        turn = episodes[row["episode_id"]].turns[row["step"]]
        target = row["completion"][0]["content"][0]["text"]
        parsed = parse_response(target, "packing", interface="semantic")
        assert parsed.instruction_text == turn.action and target.startswith("Reasoning: ")
        text = row["prompt"][0]["content"][-1]["text"]
        assert turn.goal in text and "pick(<item>, [x, y])" in text
        assert (turn.history or "None: this is the first step.") in text
    manifest = json.loads((tmp_path / "sft" / MANIFEST).read_text())
    assert manifest["rows"] == report.rows and "success" in manifest["rules"]


def test_sft_reads_a_mined_folder_only_in_the_mode_it_was_mined_in(folder, tmp_path):
    from r3.train.mining import load_mined

    mine(folder, tmp_path / "sft", mode="instruction_only")
    rows, prompt = load_mined(tmp_path / "sft", "instruction_only", False, max_rows=3)
    assert len(rows) == 3 and set(rows.column_names) == {
        "prompt",
        "completion",
        "images",
        "chat_template_kwargs",
    }
    assert rows[0]["completion"][0]["content"][0]["text"].startswith("Action: ")
    assert (prompt.mode, prompt.history) == ("instruction_only", "instruction")
    with pytest.raises(ValueError, match="mined in mode 'instruction_only'"):
        load_mined(tmp_path / "sft", "reason", False)


def test_mining_writes_only_into_a_new_empty_or_earlier_mined_folder(folder, tmp_path, monkeypatch):
    """Found by an outside tester: mine() wrote its dataset and r3_mined.json into any folder, so an
    API caller naming a user's folder (or another command's output) mixed into or overwrote its files.
    It takes the output rule of r3 collect and r3 mini, before any episode is read."""
    from r3.files import FileRefused, mark_output

    users = tmp_path / "users"
    users.mkdir()
    (users / "state.json").write_text("mine, not yours")
    other = mark_output(tmp_path / "collection", "episode collection")
    monkeypatch.setattr("r3.train.mining.load_episodes", lambda root: pytest.fail("read episodes"))
    with pytest.raises(FileRefused, match="holds state.json .*: not writing mined dataset into it"):
        mine(folder, users)
    with pytest.raises(FileRefused, match="r3 marked it as 'episode collection'"):
        mine(folder, other)
    assert [p.name for p in users.iterdir()] == ["state.json"]
    assert (users / "state.json").read_text() == "mine, not yours"
    monkeypatch.undo()
    first = mine(folder, tmp_path / "sft", mode="instruction_only")
    assert mine(folder, tmp_path / "sft", mode="instruction_only").rows == first.rows  # mined again


def test_mining_again_with_no_rows_leaves_no_earlier_rows(folder, tmp_path):
    """Found by an outside tester: mined again into its folder from episodes of which none succeeded,
    the folder's manifest said 0 rows while ``load_from_disk`` still read the earlier mining's rows."""
    from datasets import load_from_disk

    sft = tmp_path / "sft"
    assert mine(folder, sft).rows
    failures = tmp_path / "failures"
    failures.mkdir()
    for episode in folder.iterdir():
        if episode.is_dir() and episode.name.startswith(("e_", "f_")):  # the two that fail
            shutil.copytree(episode, failures / episode.name)
    assert mine(failures, sft).rows == 0
    assert json.loads((sft / MANIFEST).read_text())["rows"] == 0
    with pytest.raises(FileNotFoundError):
        load_from_disk(str(sft))


def _empty_first_completion(sft):
    from datasets import Dataset, load_from_disk

    rows = load_from_disk(str(sft)).to_list()
    rows[0]["completion"] = []
    Dataset.from_list(rows).save_to_disk(str(sft.with_name("edited")))
    for entry in sft.with_name("edited").iterdir():
        entry.replace(sft / entry.name)


def _manifest_edit(edit):
    def apply(sft):
        manifest = json.loads((sft / MANIFEST).read_text())
        (sft / MANIFEST).write_text(json.dumps(edit(manifest)))

    return apply


@pytest.mark.parametrize(
    "edit, says",
    [
        (_manifest_edit(lambda m: [1, 2]), "r3_mined.json: expected a JSON object"),
        (_manifest_edit(lambda m: {k: v for k, v in m.items() if k != "mode"}), "no 'mode' key"),
        (_manifest_edit(lambda m: {**m, "rows": "0"}), "rows='0', expected a count"),
        (_manifest_edit(lambda m: {**m, "interface": "bogus"}), "interface='bogus', expected one of"),
        (lambda sft: next(sft.glob("data-*.arrow")).unlink(), "the mined rows do not load"),
        (_empty_first_completion, "a row's completion is [], expected one assistant message"),
    ],
    ids=["not an object", "no mode", "rows a string", "unknown interface", "no data file", "empty row"],
)
def test_a_hostile_mined_folder_is_refused_naming_what_is_wrong(folder, tmp_path, edit, says):
    """Found by a hostile user: `r3 train sft --check` on a mined folder whose r3_mined.json was a
    list, lacked its mode, or whose data file or a row's completion was gone ended in a TypeError,
    KeyError, FileNotFoundError or IndexError traceback; rows "0" and interface "bogus" passed."""
    from r3.train.mining import load_mined

    mine(folder, tmp_path / "sft")
    edit(tmp_path / "sft")
    with pytest.raises(ValueError, match=re.escape(says)):
        load_mined(tmp_path / "sft", "reason", False)


def test_a_mined_folder_s_reasoning_is_cut_as_the_config_says_for_its_interface(tmp_path, cell):
    """``reasoning_sentences`` holds for mined rows too, whatever the interface's answer header (the
    tools expert's reasoning runs to several sentences; a model trained from scratch needs one)."""
    from r3.train.mining import load_mined

    record_packing_episode("4", 0, make_backend("expert"), tmp_path / "tools", cell=cell, interface="tools")
    mine(tmp_path / "tools", tmp_path / "sft")
    assert json.loads((tmp_path / "sft" / MANIFEST).read_text())["interface"] == "tools"
    whole, _ = load_mined(tmp_path / "sft", "reason", False)
    cut, _ = load_mined(tmp_path / "sft", "reason", False, reasoning_sentences=1)
    texts = [
        (w["completion"][0]["content"][0]["text"], c["completion"][0]["content"][0]["text"])
        for w, c in zip(whole, cut)
    ]
    assert any(len(c) < len(w) for w, c in texts)
    for w, c in texts:
        long, short = (
            parse_response(w, "packing", interface="tools"),
            parse_response(c, "packing", interface="tools"),
        )
        assert short.instruction_text == long.instruction_text and c.startswith("Reasoning: ")
        assert long.reasoning.endswith(short.reasoning) and short.reasoning.count(". ") == 0


def test_a_record_that_claims_a_success_the_state_does_not_show_is_rejected(folder, tmp_path, cell):
    import shutil

    fake = tmp_path / "fake"
    shutil.copytree(folder / "e_early_done", fake / "e_early_done")
    path = fake / "e_early_done" / EPISODE_FILE
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "success": True}))
    assert verified_success(load_episode(fake / "e_early_done"), cell) == "not_successful_when_restored"
    report = mine(fake, tmp_path / "none")
    assert report.rows == 0 and report.rejected == {"not_successful_when_restored": 1}


def test_prefix_tree_search_finds_a_success_from_a_branched_snapshot(cell):
    policy = Perturbed(misses("foam brick"), "miss")
    result = prefix_tree_search(
        "1", 0, policy, [make_backend("expert")], cell=cell, max_steps=12, max_leaves=20
    )
    assert not result.start.success  # the policy fails from the start state
    assert result.found is not None and result.found.success
    branched = result.branches[-1].step
    assert result.branches[-1].success and 0 <= branched < len(result.found.steps)
    # The prefix is the policy's own episode, replayed from its snapshots, not run again.
    for ours, theirs in zip(result.found.steps[:branched], result.start.steps):
        assert ours is theirs
    assert result.found.steps[branched].instruction.startswith("pick(foam brick, [")
    assert result.found.steps[branched].instruction != "pick(foam brick, [0, 0])"
    cell.env.restore(result.start.steps[branched].snapshot)  # the branch point restores as it was
    assert cell.env.task_instance.success(cell.env.state()) is False


def test_prefix_tree_search_stops_at_its_leaf_budget_when_no_proposal_helps(cell):
    policy = Perturbed(misses("foam brick"), "miss")
    result = prefix_tree_search("1", 0, policy, [policy], cell=cell, max_steps=8, max_leaves=3)
    assert result.found is None and result.leaves == 3
    assert not any(b.success for b in result.branches)
