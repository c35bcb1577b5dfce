"""The live views print what a model wrote, and a model (a remote server, a fine-tune gone wrong)
may write a terminal escape or a bidirectional override: the views show such characters escaped
and do not pass them to the terminal."""

from __future__ import annotations

from types import SimpleNamespace

from r3.files import printable
from r3.sim.cli import _print_step as print_sim_step
from r3.sim.packing.cli import _print_step as print_packing_step
from r3_ros.run_cli import LiveView

CLEARS_THE_SCREEN = "\x1b[2J\x1b[H"
HIDDEN = "push the red moon left\u202e thgir"


def test_printable_escapes_controls_and_keeps_text_tabs_and_newlines():
    assert printable(f"a{CLEARS_THE_SCREEN}b") == "a\\x1b[2J\\x1b[Hb"
    assert printable(HIDDEN) == "push the red moon left\\u202e thgir"
    assert printable("把红色方块推到左边 🚀\n\tça") == "把红色方块推到左边 🚀\n\tça"


def test_no_live_view_passes_a_control_character_to_the_terminal(capsys):
    step = SimpleNamespace(
        step=0,
        reasoning=f"I will clear your screen {CLEARS_THE_SCREEN}",
        instruction=HIDDEN,
        error=f"refused {CLEARS_THE_SCREEN}",
        valid=True,
        model_id="openai:evil\x07",
        latency_model_s=0.01,
        latency_s=0.01,
        progress=0.5,
        control_steps=3,
        outcome=f"pick: done {CLEARS_THE_SCREEN}",
    )
    LiveView(quiet=False).step(step)
    print_sim_step(step, previous_progress=0.25)
    print_packing_step(step, "semantic")
    step.valid = False
    LiveView(quiet=False).step(step)
    print_sim_step(step, previous_progress=0.25)
    shown = capsys.readouterr().out
    assert "\x1b" not in shown and "\u202e" not in shown and "\x07" not in shown
    assert shown.count("\\x1b[2J") == 9 and shown.count("\\u202e") == 3  # each field, escaped


def test_r3_run_says_when_its_bag_is_incomplete_and_warns_of_a_disk_short_of_min_free_mb(
    tmp_path, capsys, monkeypatch
):
    """Found by a hostile user: on a disk below the recorder's min_free_mb, `r3 run` said "success"
    and printed the bag's path, while the bag held two messages and said why only in its sidecar."""
    import shutil

    from r3.data.bags import EpisodeBagWriter, EpisodeInfo
    from r3.graph.description import load_profile
    from r3_ros import run_cli

    writer = EpisodeBagWriter(
        tmp_path / "bags", EpisodeInfo(episode_id="V-s3", suite="language_table", task="V")
    )
    bag = writer.close(
        success=True, progress=1.0, steps=1, reason="success; dropped 52 frames", complete=False
    )
    result = SimpleNamespace(
        bag=str(bag),
        episode_id="V-s3",
        success=True,
        reason="success",
        progress=1.0,
        steps=1,
        instructions=[],
    )
    assert run_cli._summarise(result, tmp_path, "none") == 0
    assert f"bag:      {bag}\n          incomplete: success; dropped 52 frames\n" in capsys.readouterr().out

    monkeypatch.setattr(shutil, "disk_usage", lambda path: SimpleNamespace(free=50 * 2**20))
    run_cli._warn_if_short_of_disk(load_profile("sim_language_table"), tmp_path / "runs")
    err = capsys.readouterr().err
    assert "has 50 MB free, less than the recorder's min_free_mb (1024 MB)" in err, err


def test_a_live_view_shows_a_bounded_length_of_one_answer(capsys):
    """Found by a hostile user: a replayed 20 MB answer line was printed to stdout whole. `r3 run`'s
    live view printed it whole too, after the demos' views had been cut (``shown_text``): each of
    the three views shows at most ``SHOWN_CHARACTERS`` of each field of one answer."""
    from r3.files import SHOWN_CHARACTERS

    huge = "x" * (20 * 2**20)
    step = SimpleNamespace(
        step=0,
        reasoning=huge,
        instruction=huge,
        error="",
        valid=True,
        outcome="",
        progress=0.0,
        control_steps=0,
        latency_s=0.0,
        model_id="replay:answers.jsonl",
        latency_model_s=0.0,
    )
    refused = SimpleNamespace(**{**vars(step), "valid": False, "instruction": "", "error": huge})
    for show in (
        lambda: print_sim_step(step, 0.0),
        lambda: print_packing_step(step, "semantic"),
        lambda: LiveView(quiet=False).step(step),
        lambda: LiveView(quiet=False).step(refused),
    ):
        show()
        out = capsys.readouterr().out
        assert len(out) < 4 * SHOWN_CHARACTERS and f"... ({len(huge)} characters)" in out, len(out)
