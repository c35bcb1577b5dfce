"""Collect -> bags -> sft / rl datasets and stats, on a few expert episodes (LeRobot export:
test_data_lerobot.py)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml
from PIL import Image

from r3.data import schema as S
from r3.data.bags import EpisodeBagWriter, bag_damage, read_episode_info, read_messages
from r3.data.build import build_dataset, find_bags
from r3.data.cli import bag_main, collect_main, dataset_main
from r3.data.collect import CollectConfig, collect, plan
from r3.graph import names
from r3.seeds import collection_seed
from r3.tasks.language_table.tasks import SPLITS

CONFIG = {"split": "T_R", "scenes": 1, "trials": 1, "max_steps": 6}  # 3 episodes, a few steps each


@pytest.fixture(scope="module")
def bags(expert_bags) -> Path:
    """The session's expert bags: CONFIG's episodes."""
    return expert_bags


@pytest.fixture(scope="module")
def datasets_dir(bags, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("datasets")
    for kind in S.KINDS:
        assert dataset_main(["build", str(bags), "--out", str(root / kind), "--kind", kind]) == 0
    return {kind: root / kind for kind in S.KINDS}


def bag_steps(bag: Path) -> list:
    return sorted((m for _, _, _, m in read_messages(bag, {names.REASONER_STEPS})), key=lambda m: m.step)


def test_collect_writes_one_complete_bag_per_planned_episode(bags):
    specs = plan(CollectConfig(out=str(bags), **CONFIG))
    assert sorted(p.name for p in find_bags([bags])) == sorted(s.episode_id for s in specs)
    for spec in specs:
        info = read_episode_info(bags / spec.episode_id)
        assert (info.status, info.task, info.seed) == (
            "complete",
            spec.task,
            collection_seed(spec.task, 0, 0),
        )
    assert not (bags / ".partial").exists()


@pytest.mark.parametrize("kind", S.KINDS)
def test_schema_of_every_field(datasets_dir, bags, kind):
    root = datasets_dir[kind]
    table = pq.read_table(next((root / S.DATA_DIR).glob("*.parquet")))
    assert tuple(table.column_names) == S.COLUMNS[kind]
    assert table.schema.equals(S.features(kind).arrow_schema, check_metadata=False)
    ds = S.load_r3_dataset(root)
    assert ds.num_rows == table.num_rows > 0
    manifest = json.loads((root / S.MANIFEST).read_text())
    assert (manifest["kind"], manifest["rows"], manifest["episodes"], manifest["skipped"]) == (
        kind,
        ds.num_rows,
        3,
        [],
    )
    from r3.sim.language_table.env import LanguageTableEnv

    env = LanguageTableEnv(width=32, height=24)
    for row in ds:
        bag = bags / row[S.EPISODE_ID]
        info, steps = read_episode_info(bag), bag_steps(bag)
        step = steps[row[S.STEP]]
        assert len(row[S.IMAGES]) == 1 and Image.open(row[S.IMAGES][0]).size == (320, 240)
        assert row[S.GOAL] == info.goal and row[S.NOTE] and row[S.TASK] == info.task
        assert row[S.SPLIT] == "T_R" and row[S.TASK] in SPLITS["T_R"] and row[S.SUITE] == "language_table"
        assert row[S.INSTRUCTION] == step.instruction and step.valid
        assert (row[S.EPISODE_SUCCESS], row[S.EPISODE_PROGRESS], row[S.SEED]) == (
            info.success,
            info.progress,
            info.seed,
        )
        env.restore(Path(row[S.SNAPSHOT]).read_bytes())
        assert env.task_instance.task == info.task
        if row[S.STEP] == 0:
            assert (row[S.HISTORY], row[S.HISTORY_KIND]) == ("", "none")
        elif kind == "sft":
            assert (row[S.HISTORY], row[S.HISTORY_KIND]) == (steps[row[S.STEP] - 1].raw_response, "response")
        else:
            assert (row[S.HISTORY], row[S.HISTORY_KIND]) == (
                steps[row[S.STEP] - 1].instruction,
                "instruction",
            )
        if kind == "sft":
            assert row[S.REASONING] == step.reasoning and row[S.REASONING]
            assert row[S.RESPONSE] == f"Reasoning: {step.reasoning}\nInstruction: {step.instruction}"
        else:
            assert row[S.EXPERT_INSTRUCTION] == row[S.INSTRUCTION]
            assert S.REASONING not in row and S.RESPONSE not in row


def _with_repeats(bag: Path, root: Path, repeats: set[int]) -> Path:
    """A copy of ``bag`` in which each step of ``repeats`` repeats the previous step's instruction."""
    info = read_episode_info(bag)
    writer = EpisodeBagWriter(root, dataclasses.replace(info, status="incomplete", message_count=0))
    instructions = {s.step: s.instruction for s in bag_steps(bag)}
    for topic, msgtype, timestamp, msg in read_messages(bag):
        if topic == names.REASONER_STEPS and msg.step in repeats:
            msg = dataclasses.replace(msg, instruction=instructions[msg.step - 1])
            instructions[msg.step] = msg.instruction
        writer.write_message(topic, msgtype, timestamp, msg)
    return writer.close(success=info.success, progress=info.progress, steps=info.steps, reason=info.reason)


def test_rl_drops_exactly_the_repeated_steps_and_sft_keeps_every_step(bags, tmp_path):
    def no_repeats(bag: Path) -> bool:
        originals = [s.instruction for s in bag_steps(bag)]
        return len(originals) >= 4 and all(a != b for a, b in itertools.pairwise(originals))

    # A bag of at least 4 steps in which the expert never repeated itself, so the only repeats are ours.
    longest = next(
        (b for b in sorted(find_bags([bags]), key=lambda b: -len(bag_steps(b))) if no_repeats(b)), None
    )
    assert longest is not None, "no collected bag has 4 steps without a repeat: collect other scenes"
    steps = len(bag_steps(longest))
    repeats = {2, 3}  # step 3 repeats step 2, which repeats step 1
    copy = _with_repeats(longest, tmp_path / "bags", repeats)
    for kind in S.KINDS:
        assert (
            dataset_main(["build", str(tmp_path / "bags"), "--out", str(tmp_path / kind), "--kind", kind])
            == 0
        )
    sft, rl = (S.load_r3_dataset(tmp_path / kind) for kind in S.KINDS)
    assert sorted(sft[S.STEP]) == list(range(steps))
    assert sorted(rl[S.STEP]) == [s for s in range(steps) if s not in repeats]
    assert set(rl[S.EPISODE_ID]) == {copy.name}
    manifest = json.loads((tmp_path / "rl" / S.MANIFEST).read_text())
    assert manifest["dropped_steps"]["repeated"] == len(repeats)


def test_rebuild_is_byte_identical(datasets_dir, bags, tmp_path):
    for kind, first in datasets_dir.items():
        report = build_dataset(find_bags([bags]), tmp_path / kind, kind)
        assert report.rows > 0
        # Every file the rebuild wrote, against the first build's (which later tests of this module
        # may add to: `r3 dataset stats` writes stats.json and stats.png into the dataset).
        rebuilt = sorted(p for p in (tmp_path / kind).rglob("*") if p.is_file())
        assert any(p.suffix == ".parquet" for p in rebuilt)
        for path in rebuilt:
            assert (first / path.relative_to(tmp_path / kind)).read_bytes() == path.read_bytes(), path


def test_a_bag_named_twice_is_built_once(bags, tmp_path, monkeypatch):
    """Found by a hostile user: a bag named by two paths (a relative and an absolute one, or a
    folder and a symlink to it) went into the dataset twice."""
    link = tmp_path / "link"
    link.symlink_to(bags, target_is_directory=True)
    one = min(p for p in bags.iterdir() if p.is_dir())
    monkeypatch.chdir(bags.parent)
    named = [bags.name, str(bags.resolve()), str(link), str(link / one.name), f"{bags.name}/{one.name}"]
    found = find_bags(named)
    assert [p.name for p in found] == sorted(p.name for p in bags.iterdir() if p.is_dir())
    assert found[0] == Path(bags.name) / one.name  # under the first name it was given
    assert dataset_main(["build", *named, "--out", str(tmp_path / "ds"), "--kind", "sft"]) == 0
    manifest = json.loads((tmp_path / "ds" / S.MANIFEST).read_text())
    assert (manifest["episodes"], manifest["bags"]) == (3, [p.name for p in found])


def test_broken_bags_are_named_and_skipped(bags, tmp_path, capsys):
    copy = tmp_path / "bags"
    shutil.copytree(bags, copy)
    truncated, corrupted, good = sorted(p for p in copy.iterdir() if p.is_dir())
    mcap = next(truncated.glob("*.mcap"))
    mcap.write_bytes(mcap.read_bytes()[: mcap.stat().st_size // 2])
    mcap = next(corrupted.glob("*.mcap"))
    data = bytearray(mcap.read_bytes())
    data[8:4104] = b"\xff" * 4096  # the records after the magic: header, schemas, first chunk
    mcap.write_bytes(bytes(data))
    assert dataset_main(["build", str(copy), "--out", str(tmp_path / "ds"), "--kind", "sft"]) == 0
    err = capsys.readouterr().err
    assert f"skipped bag {truncated.name}" in err and f"skipped bag {corrupted.name}" in err
    manifest = json.loads((tmp_path / "ds" / S.MANIFEST).read_text())
    assert sorted(s["bag"] for s in manifest["skipped"]) == sorted([corrupted.name, truncated.name])
    assert manifest["bags"] == [good.name]
    assert set(S.load_r3_dataset(tmp_path / "ds")[S.EPISODE_ID]) == {good.name}


def _drop_step_topic(bag: Path) -> None:
    meta = bag / "metadata.yaml"
    data = yaml.safe_load(meta.read_text())
    topics = data["rosbag2_bagfile_information"]["topics_with_message_count"]
    topics[:] = [t for t in topics if t["topic_metadata"]["name"] != names.REASONER_STEPS]
    meta.write_text(yaml.safe_dump(data))


def _one_step_more(bag: Path) -> None:
    sidecar = bag / "r3_episode.yaml"
    fields = yaml.safe_load(sidecar.read_text())
    sidecar.write_text(yaml.safe_dump({**fields, "steps": fields["steps"] + 1}))


@pytest.mark.parametrize("damage", [_drop_step_topic, _one_step_more])
def test_a_complete_bag_missing_its_step_records_is_skipped_and_named(bags, tmp_path, capsys, damage):
    """Found by a hostile tester: a complete bag whose metadata.yaml lists no /r3/reasoner/steps (or
    whose steps fall short of its sidecar's) counted as an episode built, "0 bags skipped", while
    none of its steps became rows."""
    copy = shutil.copytree(bags, tmp_path / "bags")
    broken, *good = sorted(p for p in copy.iterdir() if p.is_dir())
    damage(broken)
    assert dataset_main(["build", str(copy), "--out", str(tmp_path / "ds"), "--kind", "sft"]) == 0
    assert f"skipped bag {broken.name}" in capsys.readouterr().err
    manifest = json.loads((tmp_path / "ds" / S.MANIFEST).read_text())
    assert [s["bag"] for s in manifest["skipped"]] == [broken.name]
    assert "decision steps" in manifest["skipped"][0]["reason"]
    assert manifest["bags"] == [p.name for p in good]


def test_a_bag_whose_episode_id_is_a_path_is_skipped_and_nothing_is_written_outside(bags, tmp_path, capsys):
    """A dataset's images and snapshots are filed under each bag's episode id: a hostile bag whose
    r3_episode.yaml says ``../../escaped`` wrote them outside the dataset. It is skipped, named."""
    import yaml

    copy = tmp_path / "in" / "bags"
    shutil.copytree(bags, copy)
    hostile, *good = sorted(p for p in copy.iterdir() if p.is_dir())
    sidecar = hostile / "r3_episode.yaml"
    fields = yaml.safe_load(sidecar.read_text())
    sidecar.write_text(yaml.safe_dump({**fields, "episode_id": "../../escaped"}))
    out = tmp_path / "in" / "ds"
    assert dataset_main(["build", str(copy), "--out", str(out), "--kind", "sft"]) == 0
    assert f"skipped bag {hostile.name}" in capsys.readouterr().err
    manifest = json.loads((out / S.MANIFEST).read_text())
    assert [s["bag"] for s in manifest["skipped"]] == [hostile.name]
    assert "not a plain folder name" in manifest["skipped"][0]["reason"]
    assert manifest["bags"] == [p.name for p in good]
    assert not list(tmp_path.rglob("escaped"))


@pytest.mark.parametrize("kind", S.KINDS)
def test_two_bags_with_one_episode_id_keep_their_own_images_and_rows(bags, tmp_path, kind, capsys):
    """Found by an outside tester: two collections whose bags name one episode id wrote both
    episodes' images to images/<id>/ (the second over the first), so the first episode's rows showed
    the other's frames. Each source now files its images and snapshots apart (the turns build's rule).
    Found by a hostile pass: the rows still shared the id, so whatever keys rows by episode and step
    (history imputation, ``with_history``, stats) merged the two episodes and dropped one's steps;
    the second source's rows now have the id its files have, and the build says so."""
    import yaml

    first, second = sorted(p for p in bags.iterdir() if p.is_dir())[:2]
    copy = shutil.copytree(second, tmp_path / "other" / second.name)
    sidecar = copy / "r3_episode.yaml"
    sidecar.write_text(yaml.safe_dump({**yaml.safe_load(sidecar.read_text()), "episode_id": first.name}))
    singles = []
    for bag in (first, second):
        assert dataset_main(["build", str(bag), "--out", str(tmp_path / bag.name), "--kind", kind]) == 0
        singles += S.load_r3_dataset(tmp_path / bag.name)
    out = tmp_path / "ds"
    assert dataset_main(["build", str(first), str(copy), "--out", str(out), "--kind", kind]) == 0
    both = S.load_r3_dataset(out)
    assert both.num_rows == len(singles)
    keys = list(zip(both[S.EPISODE_ID], both[S.STEP]))
    assert len(set(keys)) == len(keys), "two rows share an episode id and step"
    assert set(both[S.EPISODE_ID]) == {first.name, f"{first.name}-2"}
    assert (
        f"episode id {first.name} is an earlier source's too; its rows are {first.name}-2"
        in capsys.readouterr().err
    )
    renamed = json.loads((out / S.MANIFEST).read_text())["renamed"]
    assert renamed == [{"bag": second.name, "episode_id": first.name, "rows_episode_id": f"{first.name}-2"}]

    def stored(rows) -> list[tuple]:
        """Each row's step and the digests of its images and snapshot."""
        files = ([*r[S.IMAGES], r[S.SNAPSHOT]] for r in rows)
        digests = ([hashlib.sha256(Path(f).read_bytes()).hexdigest()[:12] for f in fs] for fs in files)
        return sorted((r[S.STEP], *d) for r, d in zip(rows, digests))

    assert stored(both) == stored(singles)


@pytest.mark.parametrize(
    "field, value, says",
    [
        ("seed", "abc", "seed='abc' is no int"),
        ("success", "yes", "success='yes' is no bool"),
        ("suite", "nope", "unknown suite"),
    ],
)
def test_a_bag_whose_sidecar_holds_a_wrong_type_is_skipped_and_named(
    bags, tmp_path, capsys, field, value, says
):
    """Found by a hostile user: ``seed: abc`` in one bag's r3_episode.yaml stopped the whole build
    with "invalid literal for int()", naming no bag; an unknown suite was built into the dataset and
    refused only by later readers."""
    import yaml

    copy = tmp_path / "bags"
    shutil.copytree(bags, copy)
    hostile, *good = sorted(p for p in copy.iterdir() if p.is_dir())
    sidecar = hostile / "r3_episode.yaml"
    sidecar.write_text(yaml.safe_dump({**yaml.safe_load(sidecar.read_text()), field: value}))
    out = tmp_path / "ds"
    assert dataset_main(["build", str(copy), "--out", str(out), "--kind", "sft"]) == 0
    assert f"skipped bag {hostile.name}" in capsys.readouterr().err
    manifest = json.loads((out / S.MANIFEST).read_text())
    assert [s["bag"] for s in manifest["skipped"]] == [hostile.name] and says in manifest["skipped"][0][
        "reason"
    ]
    assert manifest["bags"] == [p.name for p in good]


@pytest.mark.parametrize(
    "edit, says",
    [
        (lambda fields: [1, 2], "it holds list [1, 2], not a mapping of fields"),
        (lambda fields: None, "it holds NoneType None, not a mapping of fields"),
        (
            lambda fields: {**fields, "colour": "red"},
            "unknown field 'colour' (an episode record has episode_id, suite,",
        ),
        (lambda fields: {k: v for k, v in fields.items() if k != "episode_id"}, "no episode_id"),
    ],
)
def test_a_sidecar_that_is_no_episode_record_is_named_in_words(bags, tmp_path, edit, says):
    """Found by a hostile pass: an extra field or a list in r3_episode.yaml was refused in Python's
    words ("got an unexpected keyword argument", "argument after ** must be a mapping")."""
    bag = shutil.copytree(min(p for p in bags.iterdir() if p.is_dir()), tmp_path / "bag")
    sidecar = bag / "r3_episode.yaml"
    sidecar.write_text(yaml.safe_dump(edit(yaml.safe_load(sidecar.read_text()))))
    with pytest.raises(ValueError, match="r3_episode.yaml is not an episode record: ") as refusal:
        read_episode_info(bag)
    assert says in str(refusal.value)


def test_collection_resumes_where_it_stopped(bags, tmp_path):
    out = tmp_path / "bags"
    shutil.copytree(bags, out)
    gone, broken, kept = sorted(p for p in out.iterdir() if p.is_dir())
    shutil.rmtree(gone)
    info = (broken / "r3_episode.yaml").read_text().replace("status: complete", "status: incomplete")
    (broken / "r3_episode.yaml").write_text(info)
    (out / ".partial" / "half-written").mkdir(parents=True)
    kept_mtime = next(kept.glob("*.mcap")).stat().st_mtime_ns
    report = collect(CollectConfig(out=str(out), **CONFIG), progress=False)
    assert (report.planned, report.skipped, report.succeeded + report.failed) == (3, 1, 2)
    assert next(kept.glob("*.mcap")).stat().st_mtime_ns == kept_mtime
    assert read_episode_info(gone).status == read_episode_info(broken).status == "complete"
    assert not (out / ".partial").exists()


def test_a_collection_stopped_by_a_full_disk_leaves_no_torn_episode_taking_room(bags, tmp_path, monkeypatch):
    """Found by collecting onto a small full tmpfs: `r3 collect` ended in one line but left its torn
    episode in .partial (3 MB of a 3 MB disk), so the disk it had filled stayed full until a later run
    into the same folder. A run that fails or is stopped now removes it; the finished episodes stay."""
    import errno

    import r3.data.episode_bag

    out = tmp_path / "bags"
    shutil.copytree(bags, out)
    gone = min(p for p in out.iterdir() if p.is_dir())
    shutil.rmtree(gone)

    def disk_full(task, seed, backend, env, episode_id, partial, **kwargs):
        (partial / episode_id).mkdir(parents=True)
        (partial / episode_id / "recording.mcap").write_bytes(b"\0" * 1000)
        raise OSError(errno.ENOSPC, "No space left on device", str(partial / episode_id / "recording.mcap"))

    monkeypatch.setattr(r3.data.episode_bag, "record_episode", disk_full)
    with pytest.raises(OSError, match="No space left"):
        collect(CollectConfig(out=str(out), **CONFIG), progress=False)
    assert not (out / ".partial").exists()
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(
        p.name for p in bags.iterdir() if p.is_dir() and p.name != gone.name
    )


@pytest.mark.parametrize(
    "holds, says",
    [
        ({"notes.txt": "a user's"}, "holds notes.txt, which r3 collect does not write"),
        ({"r3_episode.yaml": "status: incomplete", "notes.txt": "a user's"}, "holds notes.txt, which"),
        ({"data/rows.csv": "a user's"}, "holds data, which r3 collect does not write"),
        (None, "is a file"),
    ],
    ids=["notes only", "notes in a torn bag", "a user's folder", "a file"],
)
def test_a_resumed_collection_replaces_only_an_episode_r3_recorded(bags, tmp_path, holds, says, capsys):
    """Found by a hostile user: a folder with a planned episode's name holding only the user's
    notes.txt (no r3_episode.yaml, no MCAP) was removed without a word when the collection resumed.
    Now it is refused and kept; a torn bag of r3's own is still recorded again
    (test_collection_resumes_where_it_stopped)."""
    out = tmp_path / "bags"
    shutil.copytree(bags, out)
    place = min(p for p in out.iterdir() if p.is_dir())
    shutil.rmtree(place)
    if holds is None:
        place.write_text("a user's")
    for name, text in (holds or {}).items():
        (place / name).parent.mkdir(parents=True, exist_ok=True)
        (place / name).write_text(text)
    before = {p: p.read_bytes() if p.is_file() else None for p in out.rglob("*")}
    argv = ["--split", CONFIG["split"], "--scenes", "1", "--trials", "1", "--max-steps", "6", "--quiet"]
    with pytest.raises(SystemExit) as exited:
        collect_main([*argv, "--out", str(out)])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and f"r3 collect: error: {place}, where episode {place.name} goes, " in err
    assert says in err and "not replacing it" in err, err
    assert {p: p.read_bytes() if p.is_file() else None for p in out.rglob("*")} == before


@pytest.mark.parametrize(
    "other", [{"backend": "random_valid"}, {"width": 64, "height": 48}, {"max_steps": 1}], ids=str
)
def test_a_collection_goes_on_only_with_the_settings_its_episodes_have(bags, tmp_path, other, capsys):
    """Found by a hostile user: `r3 collect` into a folder of episodes collected with another backend
    counted them as done; with another image size it added 64x48 bags beside 320x240 ones, and the
    LeRobot export of the folder then failed. More scenes with the same settings still go on."""
    out = tmp_path / "bags"
    shutil.copytree(bags, out)
    before = sorted(p.name for p in out.iterdir())
    argv = ["--split", CONFIG["split"], "--scenes", "2", "--trials", "1", "--max-steps", "6", "--quiet"]
    options = {"backend": "--backend", "width": "--width", "height": "--height", "max_steps": "--max-steps"}
    changed = [a for key, value in other.items() for a in (options[key], str(value))]
    with pytest.raises(SystemExit) as exited:
        collect_main([*argv, *changed, "--out", str(out)])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "holds episodes collected with other settings" in err, err
    assert all(f"{key}: " in err for key in other)
    assert sorted(p.name for p in out.iterdir()) == before
    report = collect(CollectConfig(out=str(out), **{**CONFIG, "scenes": 2}), progress=False)
    assert (report.planned, report.skipped) == (6, 3)


@pytest.mark.parametrize(
    "settings, says",
    [
        (None, "r3_collection.json is a folder, not a collection's settings"),
        ("[1, 2]", "r3_collection.json is not a collection's settings: expected a JSON object of suite,"),
        ("{not json", "r3_collection.json does not read as a collection's settings: Expecting"),
        ("[" * 100_000, "r3_collection.json does not read as a collection's settings: JSON nested too"),
    ],
    ids=["a folder", "a list", "not JSON", "nested too deeply"],
)
@pytest.mark.parametrize("marked", [True, False], ids=["marked", "from before the marks"])
def test_a_collection_whose_settings_file_is_no_settings_is_refused_in_one_line(
    bags, tmp_path, settings, says, marked, capsys
):
    """Found by a hostile user: OUT/r3_collection.json as a folder ended `r3 collect` in an
    IsADirectoryError traceback; holding [1, 2] it was refused as "collected with other settings
    (suite: None there, ...)". The refused run writes nothing there."""
    from r3.files import OUTPUT_MARK

    out = tmp_path / "bags"
    shutil.copytree(bags, out)
    (out / "r3_collection.json").unlink()
    if settings is None:
        (out / "r3_collection.json").mkdir()
    else:
        (out / "r3_collection.json").write_text(settings)
    (out / OUTPUT_MARK).unlink(missing_ok=True)
    if marked:
        (out / OUTPUT_MARK).write_text('{"what": "episode collection"}')
    elif settings is None:  # a folder neither marked nor with its settings file is no collection
        says = "(no episode collection that r3 wrote, no .r3_output mark)"
    before = {p: p.read_bytes() if p.is_file() else None for p in out.rglob("*")}
    argv = ["--split", CONFIG["split"], "--scenes", "1", "--trials", "1", "--max-steps", "6", "--quiet"]
    with pytest.raises(SystemExit) as exited:
        collect_main([*argv, "--out", str(out)])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "Traceback" not in err and f"r3 collect: error: {out}" in err, err
    assert says in err, err
    assert {p: p.read_bytes() if p.is_file() else None for p in out.rglob("*")} == before


def _cut(bag: Path) -> None:
    mcap = next(bag.glob("*.mcap"))
    mcap.write_bytes(mcap.read_bytes()[: mcap.stat().st_size // 2])


def test_collection_records_again_a_bag_whose_files_are_damaged(bags, tmp_path):
    """Its sidecar still says complete; before, the resume counted it done and the dataset build
    skipped it for good."""
    out = tmp_path / "bags"
    shutil.copytree(bags, out)
    cut, unlisted, kept = sorted(p for p in out.iterdir() if p.is_dir())
    _cut(cut)
    (unlisted / "metadata.yaml").unlink()
    assert "cut short" in bag_damage(cut) and bag_damage(unlisted) == "no metadata.yaml"
    assert bag_damage(kept) is None
    report = collect(CollectConfig(out=str(out), **CONFIG), progress=False)
    assert (report.planned, report.skipped, report.succeeded + report.failed) == (3, 1, 2)
    assert bag_damage(cut) is None and bag_damage(unlisted) is None


def test_bag_repair_names_what_it_cannot_repair(bags, tmp_path, capsys):
    copy = tmp_path / "bags"
    shutil.copytree(bags, copy)
    cut = min(p for p in copy.iterdir() if p.is_dir())
    _cut(cut)
    assert bag_main(["repair", str(copy)]) == 1
    err = capsys.readouterr().err
    assert f"{cut}: {cut} is a closed bag whose files are damaged" in err and "Traceback" not in err
    (tmp_path / "empty").mkdir()
    for path in (tmp_path / "empty", tmp_path / "missing"):
        assert bag_main(["repair", str(path)]) == 2
        assert "r3 bag repair: error:" in capsys.readouterr().err
    (cut / "r3_episode.yaml").write_text("[1, 2")
    (cut / "recording.mcap").write_bytes(b"")  # a killed writer's stream, and a torn sidecar
    assert bag_main(["repair", str(cut)]) == 1
    assert "r3_episode.yaml is not an episode record" in capsys.readouterr().err


@pytest.mark.parametrize("manifest", ["[1, 2]", '{"kind": {"a": 1}}', '{"kind": ["sft"]}'])
def test_stats_refuse_what_is_no_dataset(tmp_path, capsys, manifest):
    """A kind that is an object or a list ended in a TypeError traceback (found by a hostile user)."""
    (tmp_path / S.MANIFEST).write_text(manifest)
    assert dataset_main(["stats", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "expected an object with a kind of" in err and "Traceback" not in err


def test_stats_refuse_a_manifest_nested_too_deeply_in_one_line(tmp_path, capsys):
    """Found by a hostile user: r3_dataset.json of 100000 "[" ended in a RecursionError traceback."""
    (tmp_path / S.MANIFEST).write_text("[" * 100_000)
    assert dataset_main(["stats", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is not readable JSON: JSON nested too deeply" in err and len(err.splitlines()) == 1, err


def test_the_stats_plot_goes_to_a_new_file_never_over_one(datasets_dir, tmp_path, capsys):
    """Found by a hostile user: ``--plot`` wrote over any file, a training image of the dataset
    itself included. The dataset's own stats.png is replaced on each run; any other file is not."""
    root = datasets_dir["sft"]
    image = next((root / "images").rglob("*.png"))
    before = image.read_bytes()
    for plot in (image, root / S.MANIFEST, tmp_path / "notes.txt"):
        if not plot.exists():
            plot.write_text("a user's notes")
        kept = plot.read_bytes()
        assert dataset_main(["stats", str(root), "--plot", str(plot)]) == 2
        err = capsys.readouterr().err
        assert "--plot" in err and "Traceback" not in err
        assert plot.read_bytes() == kept
    assert image.read_bytes() == before
    assert dataset_main(["stats", str(root), "--plot", str(tmp_path / "new.png")]) == 0
    assert Image.open(tmp_path / "new.png").format == "PNG"
    assert dataset_main(["stats", str(root), "--plot", str(root / "stats.png")]) == 0


def test_stats_and_plot(datasets_dir, capsys):
    root = datasets_dir["sft"]
    assert dataset_main(["stats", str(root)]) == 0
    stats = json.loads((root / "stats.json").read_text())
    assert sum(stats["rows_per_task"].values()) == stats["rows"] == stats["rows_per_split"]["T_R"]
    assert sum(sum(c.values()) for c in stats["instruction_types"].values()) == stats["rows"]
    assert stats["reasoning_words"]["count"] == stats["rows"]
    assert Image.open(root / "stats.png").format == "PNG"
    assert "reasoning words" in capsys.readouterr().out


def test_every_cli_option_has_help(capsys):
    for main, argv in (
        (collect_main, []),
        (dataset_main, []),
        (dataset_main, ["build"]),
        (dataset_main, ["stats"]),
        (dataset_main, ["export-lerobot"]),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(argv + ["--help"])
        assert exit_.value.code == 0
    text = capsys.readouterr().out
    for option in (
        "--ray",
        "--workers",
        "--trials",
        "--scenes",
        "--kind",
        "--history",
        "--plot",
        "--frame-every",
    ):
        assert option in text


def test_config_names_the_bad_value():
    with pytest.raises(ValueError, match="CollectConfig.split"):
        CollectConfig(out="x", split="T_X")
    with pytest.raises(ValueError, match="CollectConfig.workers"):
        CollectConfig(out="x", workers=0)


@pytest.mark.slow
def test_collect_on_a_local_ray_instance(tmp_path):
    pytest.importorskip("ray", reason="needs the ray package (pip install ray)")
    report = collect(
        CollectConfig(out=str(tmp_path), split="T_R", scenes=1, trials=1, max_steps=2, ray_address="local"),
        progress=False,
    )
    assert report.succeeded + report.failed == 3
    assert all(read_episode_info(p).status == "complete" for p in find_bags([tmp_path]))


def test_png_images_are_the_recorded_frames(datasets_dir, bags):
    """Every row's PNG is its step's frame: the latest camera image stamped after the previous
    decision and no later than this one (the frames of consecutive steps differ, so an off-by-one
    between step and frame fails)."""
    ds = S.load_r3_dataset(datasets_dir["sft"])
    assert ds.num_rows >= 5
    for episode in sorted(set(ds[S.EPISODE_ID])):
        stamped = {names.REASONER_STEPS: [], names.CAMERA_IMAGE: []}
        for topic, _, _, msg in read_messages(bags / episode, set(stamped)):
            stamped[topic].append((msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec, msg))
        steps = sorted(stamped[names.REASONER_STEPS], key=lambda s: s[1].step)
        frames = []
        for (before, _), (at, _) in zip([(-1, None)] + steps, steps):
            image = [
                m for t, m in sorted(stamped[names.CAMERA_IMAGE], key=lambda x: x[0]) if before < t <= at
            ][-1]
            frames.append(np.frombuffer(image.data.tobytes(), np.uint8).reshape(image.height, image.width, 3))
        assert all(not np.array_equal(a, b) for a, b in itertools.pairwise(frames)), episode
        for row in (r for r in ds if r[S.EPISODE_ID] == episode):
            png = np.asarray(Image.open(io.BytesIO(Path(row[S.IMAGES][0]).read_bytes())))
            assert np.array_equal(png, frames[row[S.STEP]]), (episode, row[S.STEP])


def test_a_collect_worker_closes_its_simulator_before_building_one_for_other_sizes(tmp_path, monkeypatch):
    """One process collecting at two image sizes (tests do; so may a user's script) rebuilds its
    simulator. The old one's renderer must be closed first: dropped, it was closed whenever the
    garbage collector got to it, with the new simulator's OpenGL context current, and under OSMesa
    that crashed the process (seen in the suite: a segfault in the next collect)."""
    from r3.data import collect as collect_module
    from r3.sim.language_table import env as env_module

    small = CollectConfig(out=str(tmp_path / "a"), scenes=1, trials=1, width=64, height=48, max_steps=1)
    collect_module.run_one(plan(small)[0], small)
    first = collect_module._WORKER["env"]
    assert first._renderer is not None
    seen = []

    class Watched(env_module.LanguageTableEnv):
        def __init__(self, *args, **kwargs):
            seen.append(first._renderer is None)  # was the old renderer closed before this one?
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(env_module, "LanguageTableEnv", Watched)
    other = dataclasses.replace(small, out=str(tmp_path / "b"), width=80, height=60)
    collect_module.run_one(plan(other)[0], other)
    assert seen == [True]
    assert collect_module._WORKER["env"] is not first and collect_module._WORKER["env"].width == 80


def test_a_dataset_of_bags_without_simulator_snapshots_trains_judges_and_counts(bags, tmp_path, capsys):
    """Found by a hostile pass: a bag recorded without /sim/snapshot (a real arm has no simulator)
    built rows with an empty snapshot, which the loader made the dataset's own folder: training
    refused the dataset ("snapshot files are not there"), `r3 dataset stats` failed reading a folder,
    and the judge's reward would have read it as a snapshot. Such rows now load with no snapshot,
    the judge scores them on its text tiers and stats says how many steps it could not check."""
    from r3.data.stats import dataset_stats
    from r3.rewards.functions import JudgeReward
    from r3.train.rows import open_dataset

    bag = shutil.copytree(min(p for p in bags.iterdir() if p.is_dir()), tmp_path / "bags" / "real_arm")
    meta = bag / "metadata.yaml"
    data = yaml.safe_load(meta.read_text())
    topics = data["rosbag2_bagfile_information"]["topics_with_message_count"]
    topics[:] = [t for t in topics if t["topic_metadata"]["name"] != names.SCENE_SNAPSHOT]
    meta.write_text(yaml.safe_dump(data))
    for kind in S.KINDS:
        assert dataset_main(["build", str(bag), "--out", str(tmp_path / kind), "--kind", kind]) == 0
    rl = open_dataset(tmp_path / "rl", None, (S.EXPERT_INSTRUCTION, S.SNAPSHOT))
    assert set(rl[S.SNAPSHOT]) == {""}
    open_dataset(tmp_path / "sft", None, (S.RESPONSE,))
    row = rl[0]
    reward = JudgeReward()(
        [f"Instruction: {row[S.EXPERT_INSTRUCTION]}"],
        expert_instruction=[row[S.EXPERT_INSTRUCTION]],
        suite=[row[S.SUITE]],
        snapshot=[row[S.SNAPSHOT]],
    )
    assert reward == [1.0]
    stats = dataset_stats(tmp_path / "sft")
    assert stats["trace_claims"]["unchecked_steps"] == stats["rows"]
    assert stats["trace_claims"]["claims"] == 0
    assert dataset_main(["stats", str(tmp_path / "sft")]) == 0
    assert f"{stats['rows']} steps unchecked: no simulator snapshot" in capsys.readouterr().out


def test_stats_name_the_rows_outside_every_split(tmp_path, monkeypatch, capsys):
    """Found by a first-time user: the stats of a turns dataset (packing's training task is in no
    split) began "turns dataset, 45 rows; per split: {'': 45}", a Python dict with an empty key."""
    stats = {
        "kind": "turns",
        "rows": 45,
        "rows_per_split": {"": 45},
        "rows_per_task": {"train": 45},
        "episodes_per_task": {"train": 1},
        "instruction_types": {"train": {"pick": 5, "place": 37, "home": 3}},
        "reasoning_words": {},
        "trace_claims": {},
    }
    monkeypatch.setattr("r3.data.stats.dataset_stats", lambda path: stats)
    monkeypatch.setattr("r3.data.stats.plot_stats", lambda stats, plot: plot)
    assert dataset_main(["stats", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "turns dataset, 45 rows; per split: no split 45"
