"""The LeRobot v3.0 export checked field by field against LeRobot's layout (LeRobot itself needs
Python >= 3.12, so test/integration/test_lerobot_recipe.py runs it where it can be installed).

What LeRobot reads, from its 0.6.1 sources: ``meta/episodes`` has one row per episode with the
data and video offsets and ``stats/<feature>/<stat>`` for every feature (its edit tools rebuild
``stats.json`` from these columns alone); each stat is min, max, mean, std, count, q01, q10, q50, q90,
q99; vectors are lists of their length, counters lists of one, image stats (3, 1, 1) in [0, 1].
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from r3.data.cli import dataset_main
from r3.data.lerobot import aggregate_stats, episode_stats, sampled_frames

STATS = ("min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99")
QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
FEATURES = (
    "observation.state",
    "action",
    "observation.images.top",
    "timestamp",
    "frame_index",
    "episode_index",
    "index",
    "task_index",
)
VIDEO = "observation.images.top"
EPISODE_COLUMNS = {
    "episode_index",
    "tasks",
    "length",
    "data/chunk_index",
    "data/file_index",
    "dataset_from_index",
    "dataset_to_index",
    f"videos/{VIDEO}/chunk_index",
    f"videos/{VIDEO}/file_index",
    f"videos/{VIDEO}/from_timestamp",
    f"videos/{VIDEO}/to_timestamp",
    "meta/episodes/chunk_index",
    "meta/episodes/file_index",
    "r3/episode_id",
}


@pytest.fixture(scope="module")
def export(expert_bags, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("lerobot") / "out"
    assert dataset_main(["export-lerobot", str(expert_bags), "--out", str(out)]) == 0
    return out


def _frames(n: int, rng) -> list[dict]:
    return [
        {
            "observation.state": rng.normal(size=2).tolist(),
            "action": rng.normal(size=2).tolist(),
            "timestamp": i / 10,
            "frame_index": i,
            "episode_index": 0,
            "index": i,
            "task_index": i % 3,
        }
        for i in range(n)
    ]


def _bag_frames(bag: Path) -> list[tuple[list[float], list[float], str]]:
    """(observation.state, action, task) of each /pusher/command of ``bag``, read from the bag: the
    command's (vector.x, vector.y), the first two joint positions of the latest joint state and the
    instruction of the latest reasoner step, latest by header stamp at or before the command's."""
    from r3.data.bags import read_messages
    from r3.graph import names

    def stamp(msg) -> int:
        return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec

    topics = (names.JOINT_STATES, names.PUSHER_COMMAND, names.REASONER_STEPS)
    by_topic: dict[str, list] = {topic: [] for topic in topics}
    for topic, _, _, msg in read_messages(bag, set(topics)):
        by_topic[topic].append(msg)
    frames = []
    for command in sorted(by_topic[names.PUSHER_COMMAND], key=stamp):
        joints, step = (
            [m for m in sorted(by_topic[t], key=stamp) if stamp(m) <= stamp(command)][-1]
            for t in (names.JOINT_STATES, names.REASONER_STEPS)
        )
        frames.append((list(joints.position[:2]), [command.vector.x, command.vector.y], step.instruction))
    return frames


def test_lerobot_v3_export(export, expert_bags):
    """The layout LeRobot reads, and every frame is one /pusher/command of its episode's bag: that
    command as ``action``, the joint state at it as ``observation.state``, the instruction then in
    force as its task."""
    import imageio.v3 as iio
    import pandas as pd

    info = json.loads((export / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["total_episodes"] == 3
    frames = pq.read_table(export / info["data_path"].format(chunk_index=0, file_index=0)).to_pydict()
    assert len(frames["index"]) == info["total_frames"] and frames["index"] == list(
        range(info["total_frames"])
    )
    episodes = pq.read_table(export / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert sum(e["length"] for e in episodes) == info["total_frames"]
    tasks = pd.read_parquet(export / "meta" / "tasks.parquet")
    assert len(tasks) == info["total_tasks"] and set(frames["task_index"]) <= set(tasks["task_index"])
    video = export / info["video_path"].format(video_key=VIDEO, chunk_index=0, file_index=0)
    assert iio.imread(video).shape == (info["total_frames"], 240, 320, 3)
    assert episodes[-1][f"videos/{VIDEO}/to_timestamp"] == pytest.approx(info["total_frames"] / 10)
    task_of, instructions_of = dict(zip(tasks["task_index"], tasks.index)), {}
    for episode in episodes:
        bag_frames = _bag_frames(expert_bags / episode["r3/episode_id"])
        span = slice(episode["dataset_from_index"], episode["dataset_to_index"])
        assert episode["length"] == len(bag_frames)  # no command of these bags is left out
        states, actions, instructions = zip(*bag_frames)
        instructions_of[episode["r3/episode_id"]] = instructions
        np.testing.assert_array_equal(frames["observation.state"][span], np.asarray(states, np.float32))
        np.testing.assert_array_equal(frames["action"][span], np.asarray(actions, np.float32))
        assert [task_of[i] for i in frames["task_index"][span]] == list(instructions)
    assert any(len(set(i)) > 1 for i in instructions_of.values()), instructions_of  # one changes mid-way


def test_episodes_file_has_every_stats_column_with_lerobots_types(export):
    info = json.loads((export / "meta" / "info.json").read_text())
    assert set(info["features"]) == set(FEATURES)
    table = pq.read_table(export / "meta/episodes/chunk-000/file-000.parquet")
    stats_columns = {f"stats/{f}/{s}" for f in FEATURES for s in STATS}
    assert set(table.column_names) == EPISODE_COLUMNS | stats_columns
    for feature in FEATURES:
        for stat in STATS:
            kind = table.schema.field(f"stats/{feature}/{stat}").type
            leaf = pa.int64() if stat == "count" else pa.float64()
            nested = feature == VIDEO and stat != "count"
            assert kind == (pa.list_(pa.list_(pa.list_(leaf))) if nested else pa.list_(leaf)), (
                feature,
                stat,
                kind,
            )
    for row in table.to_pylist():
        for feature in FEATURES:
            shape = (3, 1, 1) if feature == VIDEO else tuple(info["features"][feature]["shape"])
            for stat in STATS:
                value = np.asarray(row[f"stats/{feature}/{stat}"])
                assert value.shape == ((1,) if stat == "count" else shape), (feature, stat, value.shape)


def test_episode_stats_are_those_of_the_episodes_frames(export):
    info = json.loads((export / "meta" / "info.json").read_text())
    data = pq.read_table(export / info["data_path"].format(chunk_index=0, file_index=0)).to_pydict()
    for row in pq.read_table(export / "meta/episodes/chunk-000/file-000.parquet").to_pylist():
        span = slice(row["dataset_from_index"], row["dataset_to_index"])
        for feature in ("observation.state", "action", "timestamp", "frame_index", "index", "task_index"):
            values = np.asarray(data[feature][span], np.float64).reshape(row["length"], -1)
            expect = {
                "min": values.min(0),
                "max": values.max(0),
                "mean": values.mean(0),
                "std": values.std(0),
                **{k: np.quantile(values, q, axis=0, method="inverted_cdf") for k, q in QUANTILES.items()},
            }
            for stat, value in expect.items():
                np.testing.assert_allclose(row[f"stats/{feature}/{stat}"], value, rtol=1e-12, atol=1e-12)
            assert row[f"stats/{feature}/count"] == [row["length"]]
        assert row[f"stats/{VIDEO}/count"] == [len(sampled_frames(row["length"]))]
        lo, hi = (np.asarray(row[f"stats/{VIDEO}/{s}"]) for s in ("min", "max"))
        assert ((0 <= lo) & (lo <= hi) & (hi <= 1)).all()
        ordered = [np.asarray(row[f"stats/{VIDEO}/{q}"]).ravel() for q in ("min", *QUANTILES, "max")]
        assert all((a <= b).all() for a, b in itertools.pairwise(ordered))


def test_image_stats_read_the_decoded_video_s_colours(export):
    """The video is lossy, so its frames' channel means agree with the stats to about 1/255."""
    import imageio.v3 as iio

    info = json.loads((export / "meta" / "info.json").read_text())
    video = iio.imread(export / info["video_path"].format(video_key=VIDEO, chunk_index=0, file_index=0))
    for row in pq.read_table(export / "meta/episodes/chunk-000/file-000.parquet").to_pylist():
        frames = video[row["dataset_from_index"] : row["dataset_to_index"]]
        means = frames.reshape(-1, 3).mean(0) / 255
        np.testing.assert_allclose(np.asarray(row[f"stats/{VIDEO}/mean"]).ravel(), means, atol=0.01)


def test_stats_json_aggregates_the_episodes(export):
    info = json.loads((export / "meta" / "info.json").read_text())
    stats = json.loads((export / "meta" / "stats.json").read_text())
    data = pq.read_table(export / info["data_path"].format(chunk_index=0, file_index=0)).to_pydict()
    episodes = pq.read_table(export / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert set(stats) == set(FEATURES) and all(set(stats[f]) == set(STATS) for f in FEATURES)
    for feature in ("observation.state", "action"):
        values = np.asarray(data[feature], np.float64)
        np.testing.assert_allclose(stats[feature]["mean"], values.mean(0), rtol=1e-9)
        np.testing.assert_allclose(stats[feature]["std"], values.std(0), rtol=1e-9)
        np.testing.assert_allclose(stats[feature]["min"], values.min(0))
        assert stats[feature]["count"] == [info["total_frames"]]
        lengths = np.asarray([e["length"] for e in episodes], np.float64)
        for q in QUANTILES:
            per = np.asarray([e[f"stats/{feature}/{q}"] for e in episodes])
            np.testing.assert_allclose(stats[feature][q], (per * lengths[:, None]).sum(0) / lengths.sum())
    assert np.asarray(stats[VIDEO]["q50"]).shape == (3, 1, 1)
    assert stats[VIDEO]["count"] == [sum(e[f"stats/{VIDEO}/count"][0] for e in episodes)]


def test_image_stats_sample_frames_across_the_episode_not_one():
    """150 frames, frame i filled with i: the stats read LeRobot's 100 evenly spaced frames."""
    images = [np.full((24, 32, 3), i, np.uint8) for i in range(150)]
    stats = episode_stats(_frames(150, np.random.default_rng(0)), images)[VIDEO]
    picked = np.asarray(sampled_frames(150))
    assert len(picked) == 100 and picked[0] == 0 and picked[-1] == 149
    assert stats["count"].tolist() == [100]
    assert stats["min"].ravel().tolist() == [0.0] * 3 and stats["max"].ravel().tolist() == [149 / 255] * 3
    np.testing.assert_allclose(stats["mean"].ravel(), [picked.mean() / 255] * 3)
    np.testing.assert_allclose(
        stats["q50"].ravel(), [np.quantile(picked, 0.5, method="inverted_cdf") / 255] * 3
    )


def test_large_frames_are_subsampled_with_a_whole_stride():
    """A 320-wide frame is read every second row and column (LeRobot: stride int(320 / 150))."""
    frame = np.zeros((240, 320, 3), np.uint8)
    frame[:, 1::2] = 255  # odd columns, never read at stride 2
    stats = episode_stats(_frames(2, np.random.default_rng(0)), [frame, frame])[VIDEO]
    assert stats["max"].ravel().tolist() == [0.0] * 3
    small = np.zeros((24, 32, 3), np.uint8)
    small[:, 1::2] = 255
    assert (
        episode_stats(_frames(2, np.random.default_rng(0)), [small, small])[VIDEO]["max"].ravel().tolist()
        == [1.0] * 3
    )


def test_aggregate_of_two_episodes_is_the_pooled_statistics():
    rng = np.random.default_rng(1)
    a, b = _frames(7, rng), _frames(30, rng)
    images = [np.zeros((8, 8, 3), np.uint8)]
    both = aggregate_stats([episode_stats(a, images * 7), episode_stats(b, images * 30)])["action"]
    values = np.asarray([f["action"] for f in a + b], np.float32).astype(np.float64)
    np.testing.assert_allclose(both["mean"], values.mean(0), rtol=1e-12)
    np.testing.assert_allclose(both["std"], values.std(0), rtol=1e-12)
    np.testing.assert_allclose(both["max"], values.max(0))
    assert both["count"].tolist() == [37]
    qa, qb = (
        np.quantile(np.asarray([f["action"] for f in e], np.float32), 0.9, axis=0, method="inverted_cdf")
        for e in (a, b)
    )
    np.testing.assert_allclose(both["q90"], (7 * qa + 30 * qb) / 37, rtol=1e-6)


def test_a_bag_whose_frames_cannot_join_the_video_is_skipped_by_name(expert_bags, tmp_path, capsys):
    """Found by a hostile user: bags collected with an odd size (``--width 65 --height 49``) ended the
    export in 15 lines of ffmpeg's output and "[Errno 32] Broken pipe"; bags of two sizes in "All
    images in a movie should have same size", naming no bag. Such a bag is now skipped and named
    (before ffmpeg sees a frame), and the others are exported."""
    from r3.data.cli import collect_main

    sizes = {"odd": ("33", "25"), "smaller": ("48", "36")}
    for name, (width, height) in sizes.items():
        args = ["--split", "T_R", "--scenes", "1", "--trials", "1", "--max-steps", "2", "--quiet"]
        assert collect_main([*args, "--width", width, "--height", height, "--out", str(tmp_path / name)]) == 0
    capsys.readouterr()
    assert dataset_main(["export-lerobot", str(tmp_path / "odd"), "--out", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if line and not line.startswith("export-lerobot")]
    assert "no readable episodes to export: " in err and len(said) == 1
    assert err.count("its images are 33x25: H.264 video (yuv420p) needs an even width and height") == 3
    assert not (tmp_path / "none").exists()
    # For each episode id, the expert bag comes first (its folder's name sorts first): 320x240.
    out = tmp_path / "out"
    sources = [str(expert_bags), str(tmp_path / "odd"), str(tmp_path / "smaller")]
    assert dataset_main(["export-lerobot", *sources, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    skipped = [line for line in err.splitlines() if line.startswith("skipped bag ")]
    for width, height in sizes.values():
        said = f"its images are {width}x{height}, the export's 320x240 (its first bag's); a video holds one"
        assert sum(said in line for line in skipped) == 3
    assert len(skipped) == 6 and "FFMPEG" not in err and "Broken pipe" not in err
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["total_episodes"] == 3 and info["features"][VIDEO]["shape"] == [240, 320, 3]


def test_the_export_shows_its_progress_bag_by_bag(expert_bags, tmp_path, capsys):
    """Found by a first-time user: the export said nothing until it had read every bag (about half a
    second a bag, minutes for the collection docs/datasets.md exports), where `r3 dataset build`
    shows a bar. A skipped bag counts as done too."""
    import shutil

    sources = tmp_path / "bags"
    shutil.copytree(expert_bags, sources)
    (sources / "empty-bag").mkdir()  # no metadata, no stream: named and skipped
    (sources / "empty-bag" / "metadata.yaml").write_text("not: a bag\n")
    assert dataset_main(["export-lerobot", str(sources), "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    bags = len([p for p in sources.iterdir() if p.is_dir()])
    assert "export-lerobot: 100%" in err and f"{bags}/{bags}" in err, err
    assert "skipped bag empty-bag" in err
