"""`r3 mini` refuses a bad config with one line, before it collects a single episode; its sizes
files are complete; a folder made with other sizes is not mixed into."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from r3.mini import CONFIG_KEYS, CONFIGS, mini_main


def _write(tmp_path: Path, change) -> Path:
    cfg = yaml.safe_load((CONFIGS / "quick.yaml").read_text())
    change(cfg)
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_every_sizes_file_has_every_section():
    for path in CONFIGS.glob("*.yaml"):
        assert set(yaml.safe_load(path.read_text())) == set(CONFIG_KEYS), path


def test_an_unknown_training_key_is_refused_before_any_episode(tmp_path, capsys):
    path = _write(tmp_path, lambda c: c["sft"].update(learning_rat=0.1))
    assert mini_main(["--config", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "learning_rat" in capsys.readouterr().err
    assert not (tmp_path / "out" / "episodes").exists()


def test_a_missing_section_is_refused(tmp_path, capsys):
    path = _write(tmp_path, lambda c: c.pop("states"))
    assert mini_main(["--config", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "missing section(s) ['states']" in capsys.readouterr().err


def test_a_folder_of_other_sizes_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mini.json").write_text('{"collect": {"scenes": 99}}')
    path = _write(tmp_path, lambda c: None)
    assert mini_main(["--config", str(path), "--out", str(out)]) == 2
    assert "holds a run of another config" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda m: m.update(vision_width=96), "vision_width"),
        (lambda m: m.pop("hidden"), None),  # a default is fine
        (lambda m: m.update(vision_hidden=96, vision_heads=5), "must split evenly"),
        (lambda m: m.update(vocab_size=1), "vocab_size=1: expected 298..65536 for idefics3"),
    ],
)
def test_the_model_section_is_build_tiny_models_arguments_checked_before_any_episode(
    tmp_path, capsys, change, why
):
    path = _write(tmp_path, lambda c: change(c["model"]))
    out = tmp_path / "out"
    if why is None:  # a valid section: checked, then the run would start; only the check is run here
        from r3.mini import MiniRun, load_mini_config

        assert MiniRun(out, load_mini_config(path)).model_config() is not None
        return
    assert mini_main(["--config", str(path), "--out", str(out)]) == 2
    assert why in capsys.readouterr().err
    assert not (out / "episodes").exists()


@pytest.mark.parametrize("stage", ["vision", "grounding"])
def test_a_bad_pretraining_section_is_refused_before_any_episode(tmp_path, capsys, stage):
    for n, change in enumerate(
        (
            lambda c: c.update({stage: {**(c[stage] or {}), "steps": -1}}),
            lambda c: c.update({stage: {**(c[stage] or {}), "pixels": 64}}),
            lambda c: c.update({stage: "yes"}),
        )
    ):
        path = _write(tmp_path, change)
        out = tmp_path / f"out{n}"
        assert mini_main(["--config", str(path), "--out", str(out)]) == 2
        assert f"{stage}:" in capsys.readouterr().err
        assert not (out / "episodes").exists()


def test_stage_one_starts_from_the_last_pretraining_stage_that_runs(tmp_path):
    from r3.mini import MiniRun

    cfg = yaml.safe_load((CONFIGS / "quick.yaml").read_text())
    cfg["grounding"] = {}  # the defaults (quick.yaml has none)
    run = MiniRun(tmp_path / "a", cfg)
    assert run.stage_config("sft").model == str(tmp_path / "a" / "grounding")
    assert run.model_before("grounding") == tmp_path / "a" / "vision"
    cfg["grounding"] = None
    run = MiniRun(tmp_path / "b", cfg)
    assert run.pretraining_config("grounding") is None
    assert run.stage_config("sft").model == str(tmp_path / "b" / "vision")
    cfg["vision"] = None
    run = MiniRun(tmp_path / "c", cfg)
    assert run.stage_config("il").model == str(tmp_path / "c" / "model")
    cfg["grounding"] = {}
    assert MiniRun(tmp_path / "d", cfg).model_before("grounding") == tmp_path / "d" / "model"


def test_a_bad_collect_or_states_count_is_refused_before_any_episode(tmp_path, capsys):
    changes = (
        (lambda c: c["collect"].pop("rl_scenes"), "collect: expected the keys"),
        (lambda c: c["collect"].update(rl_scenes=-1), "collect.rl_scenes"),
        (lambda c: c["collect"].update(held_out_scenes=0), "collect.held_out_scenes"),
        (lambda c: c["collect"].update(scenes=True), "collect.scenes"),
        (lambda c: c["collect"].update(sceens=3), "collect: expected the keys"),
        (lambda c: c["states"].update(rows=0), "states.rows"),
        (lambda c: c["states"].update(rows="all"), "states.rows"),
    )
    for n, (change, reason) in enumerate(changes):
        path = _write(tmp_path, change)
        out = tmp_path / f"out{n}"
        assert mini_main(["--config", str(path), "--out", str(out)]) == 2
        assert reason in capsys.readouterr().err
        assert not (out / "episodes").exists()


def test_stage_two_scenes_are_disjoint_from_stage_one_and_held_out_scenes(tmp_path):
    """R^3's Stage II trains on all nine tasks of T_M and T_R: T_M's Stage II scenes follow its Stage I
    scenes, and every split's held-out scenes follow all of its training scenes."""
    from r3.mini import MiniRun

    cfg = yaml.safe_load((CONFIGS / "quick.yaml").read_text())
    cfg["collect"].update(scenes=3, rl_scenes=2, held_out_scenes=2)
    run = MiniRun(tmp_path, cfg)
    assert [run.scene_part("T_M", s) for s in range(7)] == ["sft"] * 3 + ["rl"] * 2 + ["held_out"] * 2
    assert [run.scene_part("T_R", s) for s in range(5)] == ["rl"] * 3 + ["held_out"] * 2
    assert run.training_scenes("T_M") == 5 and run.training_scenes("T_R") == 3


class _Started(Exception):
    """The run got past its checks to its first stage."""


def _stop_at_first_stage(monkeypatch) -> None:
    from r3.mini import MiniRun

    def collect(self):
        raise _Started

    monkeypatch.setattr(MiniRun, "collect", collect)


@pytest.mark.parametrize(
    "out, holds, says",
    [
        (".", {}, "refusing to write r3 mini run into the current folder"),
        ("/", None, "refusing to write r3 mini run into /"),
        ("mine", {"notes.txt": "a user's"}, "holds notes.txt (no r3 mini run that r3 wrote"),
        (
            "bags",
            {"r3_collection.json": "{}", ".r3_output": '{"what": "episode collection"}'},
            "r3_collection",
        ),
    ],
    ids=["current folder", "root", "a user's folder", "a collection"],
)
def test_mini_writes_only_into_a_new_or_empty_folder_or_its_own_earlier_run(
    out, holds, says, tmp_path, monkeypatch, capsys
):
    """Found by a hostile user: `r3 mini --out /` made /episodes, /datasets, /model..., `--out .` the
    same in the current folder, and any other --out mixed the run into what it held."""
    monkeypatch.chdir(tmp_path)
    _stop_at_first_stage(monkeypatch)
    if holds is None:  # nothing may be made in /, even by a run of this test without the check
        made = Path.mkdir
        monkeypatch.setattr(
            Path,
            "mkdir",
            lambda p, *a, **k: pytest.fail("wrote into /") if p.resolve() == Path("/") else made(p, *a, **k),
        )
    for name, text in (holds or {}).items():
        (tmp_path / out / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / out / name).write_text(text)
    before = sorted(tmp_path.rglob("*"))
    assert mini_main(["--quick", "--out", out]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err, err
    assert sorted(tmp_path.rglob("*")) == before


def test_mini_goes_on_in_its_own_earlier_run(tmp_path, monkeypatch):
    """An empty folder, the folder a run made, and one from before runs were marked (its mini.json)
    are written into."""
    from r3.files import OUTPUT_MARK

    _stop_at_first_stage(monkeypatch)
    out = tmp_path / "run"
    out.mkdir()
    for _ in range(2):
        with pytest.raises(_Started):
            mini_main(["--quick", "--out", str(out)])
    (out / OUTPUT_MARK).unlink()
    with pytest.raises(_Started):
        mini_main(["--quick", "--out", str(out)])
    assert (out / "mini.json").is_file() and (out / OUTPUT_MARK).is_file()


@pytest.mark.parametrize("stage", ["sft", "il", "rl"])
def test_a_refused_training_section_writes_nothing_and_names_the_users_file(
    tmp_path, monkeypatch, capsys, stage
):
    """Found by a hostile user: `sft.learning_rate: fast` was refused as OUT/configs/sft.yaml's, after
    mini.json and configs/*.yaml were written, so the run with the value corrected was refused as
    "holds a run of another config"."""
    _stop_at_first_stage(monkeypatch)
    out = tmp_path / "out"
    path = _write(tmp_path, lambda c: c.update({stage: {**(c[stage] or {}), "learning_rate": "fast"}}))
    assert mini_main(["--config", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"r3 mini: {path}: {stage}.learning_rate='fast': expected int or float" in err, err
    assert not out.exists()
    path = _write(tmp_path, lambda c: None)
    with pytest.raises(_Started):
        mini_main(["--config", str(path), "--out", str(out)])


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda c: c["eval"].update(scenes=-1), "eval.scenes: expected a whole number >= 1, got -1"),
        (lambda c: c["eval"].update(scenes=10**9), "eval: scenes must be in 1..100000"),
        (lambda c: c["eval"].update(max_steps=10**12), "eval: max_steps must be in 1..4294967295"),
        (
            lambda c: c["eval"].update(tasks={"T_M": ["nope"]}),
            "eval.tasks.T_M: expected null (every task) or",
        ),
        (lambda c: c["eval"].update(tasks={"T_M": ["T"]}), "eval.tasks.T_M: expected null (every task) or"),
        (
            lambda c: c["eval"].update(tasks={"T_X": None}),
            "eval.tasks: expected null or a mapping of the splits",
        ),
        (
            lambda c: c.update(eval=[1]),
            "eval: expected the keys ('tasks', 'scenes', 'trials', 'max_steps'), got [1]",
        ),
        (
            lambda c: c["eval"].update(bogus=1),
            "eval: expected the keys ('tasks', 'scenes', 'trials', 'max_steps'): ",
        ),
        (
            lambda c: c["states"].update(bogus=1),
            "states: expected the keys ('rows', 'max_new_tokens'): unknown",
        ),
        (
            lambda c: c["states"].update(max_new_tokens="many"),
            "states.max_new_tokens: expected a whole number",
        ),
        (
            lambda c: c["states"].update(max_new_tokens=10**7),
            "states.max_new_tokens: expected a whole number",
        ),
        (
            lambda c: c["collect"].update(max_steps=10**12),
            "collect: CollectConfig.max_steps must be in [1, 4294967295]",
        ),
        (lambda c: c["collect"].update(scenes=10**6), "collect: CollectConfig.scenes must be in [1, "),
    ],
    ids=[
        "eval.scenes -1",
        "eval.scenes huge",
        "eval.max_steps huge",
        "eval.tasks unknown",
        "eval.tasks of another split",
        "eval.tasks unknown split",
        "eval a list",
        "eval unknown key",
        "states unknown key",
        "states.max_new_tokens text",
        "states.max_new_tokens huge",
        "collect.max_steps huge",
        "collect.scenes huge",
    ],
)
def test_the_eval_states_and_collect_sections_are_checked_before_the_first_stage(
    tmp_path, monkeypatch, capsys, change, why
):
    """Found by a hostile user: r3 mini checked the eval and states sections only when it reached
    them, at the end of the chain (`eval: [1]` ended there in a TypeError traceback), ignored their
    unknown keys, put `states.max_new_tokens: many` into a backend spec, and collected with
    `collect.max_steps: 1000000000000`."""
    _stop_at_first_stage(monkeypatch)
    path, out = _write(tmp_path, change), tmp_path / "out"
    assert mini_main(["--config", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"r3 mini: {path}: {why}" in err and "Traceback" not in err, err
    assert not out.exists()


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda c: c.update(rl="yes"), "rl: expected a mapping of r3 train rl's config keys, got 'yes'"),
        (lambda c: c.update(sft=None), "sft: expected a mapping of r3 train sft's config keys, got None"),
        (lambda c: c.update(il=[1]), "il: expected a mapping of r3 train sft's config keys, over the sft"),
        (lambda c: c.update(model=[1, 2]), "model: expected a mapping of build_tiny_model's sizes"),
    ],
    ids=["rl", "sft", "il", "model"],
)
def test_a_section_that_is_no_mapping_is_named_with_what_it_should_hold(tmp_path, capsys, change, why):
    """Found by a hostile user: `rl: yes` was refused as "dictionary update sequence element #0 has
    length 1; 2 is required", `model: [1,2]` as "inspect.Signature.bind() argument after ** must be a
    mapping, not list"; `il: [1]` ended in a TypeError traceback."""
    path = _write(tmp_path, change)
    assert mini_main(["--config", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"r3 mini: {path}: {why}" in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("record", ["{not json", "\xff", None], ids=["not JSON", "not UTF-8", "a folder"])
def test_a_record_of_the_run_that_does_not_read_is_named(tmp_path, monkeypatch, capsys, record):
    """Found by a hostile user: a corrupted OUT/mini.json was refused as "Expecting property name
    enclosed in double quotes...", naming no file."""
    from r3.files import OUTPUT_MARK

    _stop_at_first_stage(monkeypatch)
    out = tmp_path / "out"
    with pytest.raises(_Started):
        mini_main(["--quick", "--out", str(out)])
    (out / "mini.json").unlink()
    if record is None:
        (out / "mini.json").mkdir()
    else:
        (out / "mini.json").write_bytes(record.encode("latin-1"))
    assert (out / OUTPUT_MARK).is_file()
    before = sorted(out.rglob("*"))
    assert mini_main(["--quick", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"r3 mini: {out / 'mini.json'} does not read as the config of the run in {out} (" in err, err
    assert "Traceback" not in err and sorted(out.rglob("*")) == before


def test_a_run_killed_while_it_writes_its_record_is_resumed(tmp_path, monkeypatch):
    """Each run writes mini.json again when it starts; stopped halfway through that write, it had left
    the record cut short, and every later run refused the folder ("does not read as the config")."""
    from r3.mini import RECORD, MiniRun, load_mini_config

    path, out = _write(tmp_path, lambda c: None), tmp_path / "out"
    MiniRun(out, load_mini_config(path)).claim()
    real_write = Path.write_text

    def killed_halfway(file, text, *args, **kwargs):
        real_write(file, text[: len(text) // 2], *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", killed_halfway)
    with pytest.raises(KeyboardInterrupt):
        MiniRun(out, load_mini_config(path)).claim()
    monkeypatch.undo()
    MiniRun(out, load_mini_config(path)).claim()  # not refused: the record is the earlier one, whole
    assert (out / RECORD).is_file()


def test_a_reporter_that_is_not_installed_is_refused_before_any_episode(tmp_path, capsys):
    """Found by a hostile user: `sft.report_to: [foo]` was refused only when the sft stage began,
    after the whole collection."""
    path = _write(tmp_path, lambda c: c["sft"].update(report_to=["foo"]))
    assert mini_main(["--config", str(path), "--out", str(tmp_path / "out")]) == 2
    assert f"{path}: sft: report_to: 'foo' is no integration transformers knows" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
