"""The evaluation runner: held-out seeds, trials, resumption, and parallel runs equal to serial ones."""

from __future__ import annotations

import json

import pytest

from r3.eval import runner
from r3.eval.runner import EvalConfig, EvalError, Job, evaluate, read_records
from r3.seeds import EVAL_SEED_BASE, scene_seed

TINY = EvalConfig(tasks=("V", "mid"), scenes=2, trials=1)


def without_timing(records):
    return [{k: v for k, v in r.items() if k != "wall_s"} for r in records]


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    out = tmp_path_factory.mktemp("serial")
    return out, evaluate(TINY, out, workers=1)


def test_eval_seeds_are_disjoint_from_collection_seeds():
    from r3.seeds import MAX_SCENES, MAX_TRIALS, TASK_ORDER, collection_seed, is_evaluation_seed

    seeds = {job.seed for job in EvalConfig(scenes=64, trials=16).jobs()}
    assert seeds == set(range(EVAL_SEED_BASE, EVAL_SEED_BASE + 64)) and all(map(is_evaluation_seed, seeds))
    highest_collection = max(collection_seed(t, MAX_SCENES - 1, MAX_TRIALS - 1) for t in TASK_ORDER)
    assert highest_collection < min(seeds)
    with pytest.raises(ValueError):
        scene_seed(-1)


def test_jobs_cover_tasks_scenes_and_trials():
    jobs = EvalConfig(tasks=("V", "T"), scenes=3, trials=2).jobs()
    assert len(jobs) == len({j.key for j in jobs}) == 12
    assert jobs[0] == Job("V", 0, 0) and jobs[1] == Job("V", 0, 1)


@pytest.mark.parametrize(
    "bad",
    [
        {"scenes": 0},
        {"trials": 0},
        {"tasks": ("nope",)},
        {"budget": -2},
        {"history": "all"},
        {"suite": "cooking"},
        {"grounding": "perception"},
        {"suite": "packing", "tasks": ("V",)},
    ],
)
def test_config_names_the_bad_value(bad):
    with pytest.raises(EvalError, match="unknown" if "tasks" in bad else next(iter(bad))):
        EvalConfig(**bad)


def test_packing_suite_runs_the_held_out_goals_with_rollouts(tmp_path):
    config = EvalConfig(suite="packing", tasks=("7",), scenes=1, trials=2)
    assert config.max_steps == 15 and config.history == "instruction"
    records = evaluate(config, tmp_path)
    assert [(r["task"], r["split"], r["seed"], r["trial"]) for r in records] == [
        ("7", "held-out", EVAL_SEED_BASE, 0),
        ("7", "held-out", EVAL_SEED_BASE, 1),
    ]
    assert len({r["goal"] for r in records}) == 1  # rollouts keep the layout and goal
    for r in records:
        assert r["decision_steps"] == len(r["instructions"]) == len(r["errors"]) >= 1
        assert 0 <= r["progress"] <= 1 and r["repeated_refusals"] == 0
    with pytest.raises(EvalError, match="grounding: cached 'sim', now 'perception'"):
        evaluate(
            EvalConfig(suite="packing", tasks=("7",), scenes=1, trials=2, grounding="perception"), tmp_path
        )


@pytest.mark.slow
def test_no_packing_goal_repeats_an_instruction_refused_in_an_unchanged_scene(tmp_path):
    # Scene 0, rollout 0 of every held-out goal; the full 12 x 5 x 10 count is in the README.
    records = evaluate(EvalConfig(suite="packing", scenes=1, trials=1), tmp_path)
    assert len(records) == 12
    assert [r["task"] for r in records if r["repeated_refusals"]] == []


def test_trials_keep_the_scene_and_redraw_the_noise(tmp_path):
    config = EvalConfig(tasks=("rect",), scenes=1, trials=3)
    records = evaluate(config, tmp_path)
    assert len({r["goal"] for r in records}) == 1 and len({r["seed"] for r in records}) == 1
    assert len({tuple(r["instructions"]) for r in records}) > 1


def test_records_are_complete(serial):
    _, records = serial
    assert [(r["task"], r["scene"]) for r in records] == [("V", 0), ("V", 1), ("mid", 0), ("mid", 1)]
    for r in records:
        assert r["split"] in ("T_M", "T_O") and r["seed"] >= EVAL_SEED_BASE and r["penalty"] is None
        assert r["decision_steps"] == len(r["instructions"]) >= 1 and r["reasoning_words"] > 0


def test_two_workers_give_the_same_episodes_as_one(serial, tmp_path):
    _, records = serial
    assert without_timing(evaluate(TINY, tmp_path, workers=2)) == without_timing(records)


def test_resume_runs_only_missing_episodes(serial, tmp_path, monkeypatch):
    _, records = serial
    ran = []
    real_run = runner.EpisodeWorker.run
    monkeypatch.setattr(
        runner.EpisodeWorker, "run", lambda self, job: ran.append(job.key) or real_run(self, job)
    )

    evaluate(EvalConfig(tasks=("V", "mid"), scenes=1, trials=1), tmp_path)
    assert ran == [("V", 0, 0), ("mid", 0, 0)]
    # A crash in the middle of writing the last record: that episode runs again, nothing else does.
    path = tmp_path / runner.EPISODES_FILE
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n" + lines[1][:20])
    ran.clear()
    resumed = evaluate(TINY, tmp_path)
    assert ran == [("V", 1, 0), ("mid", 0, 0), ("mid", 1, 0)]
    assert without_timing(resumed) == without_timing(records)
    ran.clear()
    assert without_timing(evaluate(TINY, tmp_path)) == without_timing(records) and ran == []
    assert len(read_records(tmp_path)) == 4


def test_a_run_stopped_while_it_mends_a_torn_last_line_keeps_every_whole_record(
    serial, tmp_path, monkeypatch
):
    """Found by the interruption sweep: a resume mended a last line cut short by a crash by writing the
    whole episodes.jsonl again, so a run stopped in that write (Ctrl-C, a kill, a full disk) lost every
    episode already recorded. Now the torn line is cut off in place."""
    import contextlib
    import shutil
    from pathlib import Path

    out, _ = serial
    for name in (runner.CONFIG_FILE, runner.EPISODES_FILE):
        shutil.copy(out / name, tmp_path / name)
    path = tmp_path / runner.EPISODES_FILE
    path.write_bytes(path.read_bytes() + b'{"task": "V", "sce')  # a crash mid-record
    real_write = Path.write_bytes

    def killed_as_it_starts(self, data):
        real_write(self, b"")
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_bytes", killed_as_it_starts)
    with contextlib.suppress(KeyboardInterrupt):
        runner.cached_records(tmp_path, TINY)
    monkeypatch.undo()
    assert len(read_records(tmp_path)) == 4 and path.read_bytes().endswith(b"}\n")


def test_a_run_killed_as_it_wrote_its_first_config_leaves_a_folder_the_next_run_takes(tmp_path):
    """Found by the interruption sweep: `r3 eval` killed (SIGKILL) while it wrote a new folder's first
    config.json left only config.json.tmp there, and every later run refused the folder as "no
    evaluation (no config.json)"."""
    (tmp_path / "config.json.tmp").write_text('{"reasoner": "exp')
    records = evaluate(EvalConfig(tasks=("V",), scenes=1, trials=1), tmp_path)
    assert len(records) == 1 and sorted(p.name for p in tmp_path.iterdir()) == [
        runner.CONFIG_FILE,
        runner.EPISODES_FILE,
    ]


def test_resume_refuses_another_configuration(serial):
    out, _ = serial
    with pytest.raises(EvalError, match="budget: cached None, now 0"):
        evaluate(EvalConfig(tasks=("V",), scenes=1, trials=1, budget=0), out)
    assert json.loads((out / runner.CONFIG_FILE).read_text())["budget"] is None


def test_ray_gives_the_same_episodes_as_local_workers(serial, tmp_path):
    pytest.importorskip("ray", reason="needs Ray (pip install ray) for the --ray path")
    _, records = serial
    assert without_timing(evaluate(TINY, tmp_path, workers=2, ray_address="local")) == without_timing(records)


def test_a_run_killed_while_it_writes_its_config_is_resumed(serial, tmp_path, monkeypatch):
    """Each run writes config.json again; stopped halfway through that write, it had left a config cut
    short, and every later run refused the folder ("does not read as an evaluation's config")."""
    from pathlib import Path

    _, records = serial
    evaluate(EvalConfig(tasks=("V", "mid"), scenes=1, trials=1), tmp_path)
    real_write = Path.write_text

    def killed_halfway(path, text, *args, **kwargs):
        real_write(path, text[: len(text) // 2], *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", killed_halfway)
    with pytest.raises(KeyboardInterrupt):
        evaluate(TINY, tmp_path)
    monkeypatch.undo()
    assert without_timing(evaluate(TINY, tmp_path)) == without_timing(records)
