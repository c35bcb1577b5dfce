"""Episode bags -> a LeRobot dataset (format v3.0), written without the ``lerobot`` package.

One frame per control step (10 Hz): ``observation.state`` is the pusher position (joint_states),
``action`` the pusher command (metres per step), ``observation.images.top`` the latest camera
image at that step (bags collected with ``--frame-every 1`` have one per step; otherwise the image
is held between decision points), and the frame's task is the instruction in force, so the export
trains language-conditioned low-level policies. Layout (as LeRobot v3.0 documents it)::

    meta/info.json  meta/stats.json  meta/tasks.parquet
    meta/episodes/chunk-000/file-000.parquet     one row per episode: length, tasks, data and video offsets
    data/chunk-000/file-000.parquet              one row per frame
    videos/observation.images.top/chunk-000/file-000.mp4   H.264, episodes back to back

Each data / video file holds up to ``EPISODES_PER_FILE`` episodes; ``chunks_size`` files per chunk.

Statistics follow LeRobot's ``compute_episode_stats`` / ``aggregate_stats`` (read in LeRobot 0.6.1),
so LeRobot's edit tools (delete, split, merge), which rebuild ``stats.json`` from the episodes
file, get what they need: every feature, the frame counters included, has per-episode
``stats/<feature>/<stat>`` columns in ``meta/episodes`` with min, max, mean, std, count and the
quantiles q01, q10, q50, q90, q99 (for quantile-normalising policies). Image statistics are per
channel, in [0, 1], shaped (3, 1, 1), over evenly spaced frames of each episode (all frames of an
episode shorter than 100, then 100, and ``length ** 0.75`` past 464 frames: :func:`sampled_frames`),
each subsampled by a whole stride to about 150 pixels a side when a side reaches 300, with ``count``
the number of frames sampled. ``stats.json`` aggregates the episodes: min of minima, max
of maxima, the count-weighted mean, the pooled standard deviation, and the count-weighted mean of
each quantile (as LeRobot 0.6.1 aggregates quantiles, which cannot be pooled exactly).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from r3.data.bags import complete_episode_info, read_messages
from r3.files import replaced_output
from r3.graph import names

CODEBASE_VERSION = "v3.0"
FPS = 10
CHUNKS_SIZE = 1000
EPISODES_PER_FILE = 100
VIDEO_KEY = "observation.images.top"
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VECTOR_KEYS = ("observation.state", "action")
COUNTER_KEYS = ("timestamp", "frame_index", "episode_index", "index", "task_index")
QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
STATS_FRAMES = (100, 10_000, 0.75)  # image statistics: at least, at most, length ** power frames
STATS_IMAGE_SIDE, STATS_IMAGE_LIMIT = 150, 300  # subsampled to about SIDE pixels when a side reaches LIMIT


@dataclass
class ExportReport:
    episodes: int = 0
    frames: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)


def _ns(header) -> int:
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


def _latest(stamped: list, at: int):
    hits = [m for t, m in stamped if t <= at]
    return hits[-1] if hits else None


def episode_frames(bag: str | Path) -> tuple[list[dict], list[np.ndarray]]:
    """(frame rows without indices, images) of one complete bag: one frame per pusher command."""
    from r3.data.build import _rgb

    complete_episode_info(bag)  # an incomplete one is refused, saying why
    by_topic: dict[str, list] = {}
    topics = {names.JOINT_STATES, names.PUSHER_COMMAND, names.CAMERA_IMAGE, names.REASONER_STEPS}
    for topic, _, _, msg in read_messages(bag, topics):
        by_topic.setdefault(topic, []).append((_ns(msg.header), msg))
    for stamped in by_topic.values():
        stamped.sort(key=lambda x: x[0])
    rows, images = [], []
    for at, command in by_topic.get(names.PUSHER_COMMAND, []):
        joints = _latest(by_topic.get(names.JOINT_STATES, []), at)
        image = _latest(by_topic.get(names.CAMERA_IMAGE, []), at)
        step = _latest(by_topic.get(names.REASONER_STEPS, []), at)
        if joints is None or image is None or step is None:
            continue
        rows.append(
            {
                "observation.state": [float(v) for v in joints.position[:2]],
                "action": [float(command.vector.x), float(command.vector.y)],
                "task": step.instruction,
            }
        )
        images.append(_rgb(image))
    if not rows:
        raise ValueError("no control steps with state, image and instruction")
    return rows, images


def _is_export(folder: Path) -> bool:
    """Whether ``folder`` holds a LeRobot dataset's info (one exported before outputs were marked)."""
    try:
        info = json.loads((folder / "meta" / "info.json").read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(info, dict) and "codebase_version" in info


def export_lerobot(
    bags: list[str | Path],
    out: str | Path,
    *,
    overwrite: bool = False,
    robot_type: str = "language_table_pusher",
    on_bag=None,
) -> ExportReport:
    """Write the complete episodes among ``bags`` as a LeRobot v3.0 dataset in ``out``;
    ``on_bag(path)`` after each bag, exported or skipped (the command's progress)."""
    import imageio.v2 as imageio
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    with replaced_output(
        out,
        ("meta", "data", "videos"),
        overwrite=overwrite,
        what="LeRobot dataset",
        made_before_marks=_is_export,
    ) as folder:
        report, tasks, episodes, all_stats = ExportReport(), {}, [], []
        frames_buf: list[dict] = []
        writer, file_key, shape = None, None, None
        for bag in _each_then(map(Path, bags), on_bag):
            try:
                rows, images = episode_frames(bag)
            except Exception as exc:  # noqa: BLE001 - an unreadable bag is reported and skipped
                report.skipped.append((bag.name, f"{type(exc).__name__}: {exc}"))
                continue
            if why := _frame_size_problem(images, shape):  # before the video writer sees a frame
                report.skipped.append((bag.name, why))
                continue
            ep = report.episodes
            file_index = ep // EPISODES_PER_FILE
            key = (file_index // CHUNKS_SIZE, file_index % CHUNKS_SIZE)
            if key != file_key:
                if writer is not None:
                    writer.close()
                    _write_frames(frames_buf, folder, file_key, pa, pq)
                    frames_buf = []
                file_key, video_frames = key, 0
                path = folder / VIDEO_PATH.format(video_key=VIDEO_KEY, chunk_index=key[0], file_index=key[1])
                path.parent.mkdir(parents=True, exist_ok=True)
                writer = imageio.get_writer(
                    path, fps=FPS, codec="libx264", pixelformat="yuv420p", macro_block_size=1
                )
            shape = images[0].shape
            start = report.frames
            episode_buf = []
            for i, (row, rgb) in enumerate(zip(rows, images)):
                task_index = tasks.setdefault(row["task"], len(tasks))
                episode_buf.append(
                    {
                        **{k: row[k] for k in VECTOR_KEYS},
                        "timestamp": i / FPS,
                        "frame_index": i,
                        "episode_index": ep,
                        "index": start + i,
                        "task_index": task_index,
                    }
                )
                writer.append_data(rgb)
            frames_buf += episode_buf
            stats = episode_stats(episode_buf, images)
            all_stats.append(stats)
            episodes.append(
                {
                    "episode_index": ep,
                    "tasks": list(dict.fromkeys(r["task"] for r in rows)),
                    "length": len(rows),
                    "data/chunk_index": key[0],
                    "data/file_index": key[1],
                    "dataset_from_index": start,
                    "dataset_to_index": start + len(rows),
                    f"videos/{VIDEO_KEY}/chunk_index": key[0],
                    f"videos/{VIDEO_KEY}/file_index": key[1],
                    f"videos/{VIDEO_KEY}/from_timestamp": video_frames / FPS,
                    f"videos/{VIDEO_KEY}/to_timestamp": (video_frames + len(rows)) / FPS,
                    **{
                        f"stats/{feature}/{name}": value.tolist()
                        for feature, by_name in stats.items()
                        for name, value in by_name.items()
                    },
                    "meta/episodes/chunk_index": 0,
                    "meta/episodes/file_index": 0,
                    "r3/episode_id": bag.name,
                }
            )
            video_frames += len(rows)
            report.episodes += 1
            report.frames += len(rows)
        if writer is None:
            why = "; ".join(f"{b}: {r}" for b, r in report.skipped) or "no episode bags in the sources"
            raise ValueError(f"no readable episodes to export: {why}")
        writer.close()
        _write_frames(frames_buf, folder, file_key, pa, pq)
        episodes_path = folder / EPISODES_PATH.format(chunk_index=0, file_index=0)
        episodes_path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(episodes), episodes_path)
        pd.DataFrame(
            {"task_index": list(tasks.values())}, index=pd.Index(list(tasks), name="task")
        ).to_parquet(folder / "meta" / "tasks.parquet")
        (folder / "meta" / "info.json").write_text(
            json.dumps(_info(report, len(tasks), shape, robot_type), indent=2)
        )
        dataset_stats = {
            feature: {name: value.tolist() for name, value in by_name.items()}
            for feature, by_name in aggregate_stats(all_stats).items()
        }
        (folder / "meta" / "stats.json").write_text(json.dumps(dataset_stats, indent=2))
    return report


def _each_then(items, after):
    """``items`` one by one, calling ``after(item)`` once the loop is done with each (a ``continue``
    included); ``after`` None calls nothing."""
    for item in items:
        yield item
        if after is not None:
            after(item)


def _frame_size_problem(images: list[np.ndarray], shape: tuple | None) -> str:
    """Why one bag's ``images`` cannot go into the export's video, whose frames are ``shape`` (None
    before the first bag): "" when they can. A video holds frames of one size, and H.264 in yuv420p
    (the pixel format LeRobot's info names and every decoder takes) keeps colour at half resolution,
    so libx264 refuses an odd width or height; the frames are not padded or cut, since LeRobot's
    policies would then train on images the camera never took."""
    sizes = sorted({image.shape[:2] for image in images})
    if len(sizes) > 1:
        shown = ", ".join(f"{w}x{h}" for h, w in sizes[:3])
        return f"its images are of {len(sizes)} sizes ({shown}); a video holds one"
    h, w = sizes[0]
    if shape is not None and (h, w) != shape[:2]:
        export = f"{shape[1]}x{shape[0]}"
        return f"its images are {w}x{h}, the export's {export} (its first bag's); a video holds one size"
    if h % 2 or w % 2:
        return f"its images are {w}x{h}: H.264 video (yuv420p) needs an even width and height"
    return ""


def _write_frames(rows: list[dict], out: Path, key: tuple[int, int], pa, pq) -> None:
    path = out / DATA_PATH.format(chunk_index=key[0], file_index=key[1])
    path.parent.mkdir(parents=True, exist_ok=True)
    schema = pa.schema(
        [
            ("observation.state", pa.list_(pa.float32(), 2)),
            ("action", pa.list_(pa.float32(), 2)),
            ("timestamp", pa.float32()),
            ("frame_index", pa.int64()),
            ("episode_index", pa.int64()),
            ("index", pa.int64()),
            ("task_index", pa.int64()),
        ]
    )
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def _info(report: ExportReport, total_tasks: int, shape, robot_type: str) -> dict:
    scalar = {"shape": [1], "names": None}
    h, w, c = shape
    return {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": robot_type,
        "total_episodes": report.episodes,
        "total_frames": report.frames,
        "total_tasks": total_tasks,
        "chunks_size": CHUNKS_SIZE,
        "data_files_size_in_mb": 100,
        "video_files_size_in_mb": 500,
        "fps": FPS,
        "splits": {"train": f"0:{report.episodes}"},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH,
        "features": {
            "observation.state": {"dtype": "float32", "shape": [2], "names": ["pusher_x", "pusher_y"]},
            "action": {"dtype": "float32", "shape": [2], "names": ["dx", "dy"]},
            VIDEO_KEY: {
                "dtype": "video",
                "shape": [h, w, c],
                "names": ["height", "width", "channels"],
                "info": {
                    "video.fps": FPS,
                    "video.height": h,
                    "video.width": w,
                    "video.channels": c,
                    "video.codec": "h264",
                    "video.pix_fmt": "yuv420p",
                    "video.is_depth_map": False,
                    "has_audio": False,
                },
            },
            "timestamp": {"dtype": "float32", **scalar},
            "frame_index": {"dtype": "int64", **scalar},
            "episode_index": {"dtype": "int64", **scalar},
            "index": {"dtype": "int64", **scalar},
            "task_index": {"dtype": "int64", **scalar},
        },
    }


def _feature_stats(values: np.ndarray) -> dict[str, np.ndarray]:
    """min, max, mean, std, count and quantiles over axis 0 of ``values`` (samples x dims).

    Quantiles are the inverse of the empirical distribution (numpy's "inverted_cdf"), which is what
    LeRobot's 5000-bin histogram estimate approaches, to within one bin (a 5000th of the range).
    """
    stats = {
        "min": values.min(0),
        "max": values.max(0),
        "mean": values.mean(0),
        "std": values.std(0),
        "count": np.array([len(values)]),
    }
    for name, q in QUANTILES.items():
        stats[name] = np.quantile(values, q, axis=0, method="inverted_cdf")
    return stats


def sampled_frames(length: int) -> list[int]:
    """Indices of the frames of a ``length``-frame episode that its image statistics read: evenly
    spaced, rounded to the nearest frame, all of them below 100 frames (LeRobot's sampling rule).

    >>> sampled_frames(5), len(sampled_frames(36)), len(sampled_frames(400)), len(sampled_frames(1000))
    ([0, 1, 2, 3, 4], 36, 100, 177)
    """
    least, most, power = STATS_FRAMES
    n = length if length < least else max(least, min(int(length**power), most))
    return np.round(np.linspace(0, length - 1, n)).astype(int).tolist()


def _stats_pixels(image: np.ndarray) -> np.ndarray:
    """An HxWx3 frame as statistics see it: every k-th row and column once a side reaches the limit."""
    h, w = image.shape[:2]
    if max(h, w) < STATS_IMAGE_LIMIT:
        return image
    stride = int(max(h, w) / STATS_IMAGE_SIDE)
    return image[::stride, ::stride]


def episode_stats(frames: list[dict], images: list[np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    """LeRobot's per-episode statistics of one episode's frame rows and camera images.

    Vectors and counters keep their stored dtype's values (float32 vectors are rounded as the data
    file holds them); counters are shape (1,); images are per channel in [0, 1], shaped (3, 1, 1).
    """
    stats = {
        key: _feature_stats(np.asarray([f[key] for f in frames], np.float32).astype(np.float64))
        for key in VECTOR_KEYS
    }
    for key in COUNTER_KEYS:
        dtype = np.float32 if key == "timestamp" else np.int64
        stats[key] = _feature_stats(np.asarray([[f[key]] for f in frames], dtype).astype(np.float64))
    picked = [_stats_pixels(images[i]) for i in sampled_frames(len(images))]
    pixels = np.stack(picked).reshape(-1, 3).astype(np.float64) / 255.0
    image = {
        name: value.reshape(3, 1, 1) for name, value in _feature_stats(pixels).items() if name != "count"
    }
    stats[VIDEO_KEY] = {**image, "count": np.array([len(picked)])}
    return stats


def aggregate_stats(episodes: list[dict[str, dict[str, np.ndarray]]]) -> dict[str, dict[str, np.ndarray]]:
    """Dataset statistics from per-episode ones, aggregated as LeRobot 0.6.1's ``aggregate_stats``:
    exact min, max, mean and (population) std; quantiles as the count-weighted mean of the episodes'.
    """
    out = {}
    for key in episodes[0]:
        per = [e[key] for e in episodes]
        counts = np.array([s["count"][0] for s in per], np.float64)
        weights = (counts / counts.sum()).reshape(-1, *([1] * per[0]["mean"].ndim))
        mean = (np.stack([s["mean"] for s in per]) * weights).sum(0)
        spread = np.stack([s["std"] ** 2 + (s["mean"] - mean) ** 2 for s in per])
        out[key] = {
            "min": np.min([s["min"] for s in per], 0),
            "max": np.max([s["max"] for s in per], 0),
            "mean": mean,
            "std": np.sqrt((spread * weights).sum(0)),
            "count": np.array([int(counts.sum())]),
        }
        for name in QUANTILES:
            out[key][name] = (np.stack([s[name] for s in per]) * weights).sum(0)
    return out
