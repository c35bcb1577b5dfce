"""The canonical episode loop: determinism, exact resume from a snapshot, invalid answers, CLI."""

from __future__ import annotations

import json

import pytest

from r3.data.video import default_format
from r3.episode import resume_episode, run_episode
from r3.reasoning.backends.base import BackendOutput, ReasonerBackend
from r3.reasoning.expert import LanguageTableExpert
from r3.safety import refusal_note
from r3.seeds import policy_seed
from r3.sim.cli import demo_main, main
from r3.sim.language_table.env import LanguageTableEnv


@pytest.fixture(scope="module")
def env():
    return LanguageTableEnv(width=160, height=120)


@pytest.fixture(scope="module")
def episode(env):
    return run_episode("V", 3, LanguageTableExpert(), env=env, render=False)


class Fixed(ReasonerBackend):
    """Answers the same text every step and records the history it was shown."""

    model_id = "fixed"

    def __init__(self, text):
        self.text, self.seen = text, []

    def _generate(self, *args):
        raise AssertionError("not used")

    def decide(self, inp, budget=None, on_text=None):
        self.seen.append(inp.history_text)
        return BackendOutput(self.text, "stop", None, None, None, 0.0, 0.0, self.model_id, 1, False)


def test_policy_seed_is_deterministic():
    assert policy_seed(3, 4) == policy_seed(3, 4) != policy_seed(4, 3)
    assert isinstance(policy_seed(0, 0), int)


def test_same_seed_same_trajectory(env, episode):
    again = run_episode("V", 3, LanguageTableExpert(), env=env, render=False)
    assert episode.steps and again.instructions == episode.instructions
    assert [s.snapshot for s in again.steps] == [s.snapshot for s in episode.steps]
    assert [s.raw_response for s in again.steps] == [s.raw_response for s in episode.steps]
    assert again.success == episode.success and again.progress == episode.progress
    json.dumps(episode.to_summary())


def test_resume_from_a_snapshot_continues_identically(env, episode):
    k = len(episode.steps) // 2
    resumed = resume_episode(episode, k, LanguageTableExpert(), env=env, render=False)
    assert resumed.instructions == episode.instructions
    assert [s.snapshot for s in resumed.steps] == [s.snapshot for s in episode.steps]
    assert resumed.control_steps == episode.control_steps and resumed.success == episode.success


def test_invalid_answers_command_no_motion_and_three_in_a_row_end_the_episode(env):
    backend = Fixed("Reasoning: hmm.\nInstruction: fly to the moon")
    t = run_episode("mid", 1, backend, env=env, max_steps=10, render=False)
    assert len(t.steps) == 3 and not any(s.valid for s in t.steps)
    assert all(s.control_steps == 0 and s.instruction == "" and s.error for s in t.steps)
    assert len({s.snapshot for s in t.steps}) == 1
    assert t.aborted.startswith("3 consecutive invalid reasoner outputs (last: instruction_outside_grammar")
    # The model is told why it was refused.
    note = refusal_note(t.steps[0].error)
    assert backend.seen == ["", backend.text + "\n" + note, backend.text + "\n" + note]


def test_instruction_history_passes_the_canonical_instruction(env):
    backend = Fixed("Reasoning: go.\nInstruction: Move the red moon UP.")
    run_episode("mid", 1, backend, env=env, max_steps=2, history="instruction", render=False)
    assert backend.seen == ["", "move the red moon up"]


def test_demo_cli_writes_video_and_summary(tmp_path, capsys):
    assert (
        demo_main(
            ["--task", "iip", "--seed", "0", "--out", str(tmp_path), "--width", "160", "--height", "120"]
        )
        == 0
    )
    assert (tmp_path / f"episode.{default_format()}").stat().st_size > 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["task"] == "iip" and summary["steps"][0]["instruction"]
    assert "Instruction:" in capsys.readouterr().out


@pytest.mark.parametrize("holds", [{"notes.txt": "mine"}, {"summary.json": "my own summary"}])
def test_a_demo_replaces_an_earlier_demo_and_nothing_else(tmp_path, capsys, holds):
    """Found by a hostile user: ``r3 sim demo --out`` wrote its summary.json over any file of that
    name, in any folder. An earlier demo's files are replaced; a folder holding anything else, or a
    summary.json no demo wrote, is refused before the episode runs."""
    argv = ["--task", "iip", "--seed", "0", "--width", "64", "--height", "48", "--max-steps", "1", "--video"]
    demo = tmp_path / "demo"
    assert demo_main([*argv, "gif", "--out", str(demo)]) == 0
    assert demo_main([*argv, "none", "--out", str(demo)]) == 0  # the earlier video goes with its demo
    assert sorted(p.name for p in demo.iterdir()) == [".r3_output", "summary.json"]
    mine = tmp_path / "mine"
    mine.mkdir()
    for name, text in holds.items():
        (mine / name).write_text(text)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        demo_main([*argv, "none", "--out", str(mine)])
    err = capsys.readouterr()
    assert "argument --out:" in err.err and "Instruction:" not in err.out  # refused before the episode
    assert {p.name: p.read_text() for p in mine.iterdir()} == holds


def test_sim_command_without_a_subcommand_prints_usage():
    assert main([]) == 2


def test_iip_is_posed_on_seeds_whose_first_layout_is_already_isolated():
    """Seed 13's first layout isolates every block; reset draws another one instead of failing."""
    from r3.sim.language_table.env import LanguageTableEnv

    env = LanguageTableEnv()
    env.reset(seed=13, options={"task": "iip"})
    assert not env.task_instance.success(env.state())
