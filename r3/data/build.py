"""Episode bags -> an r3 dataset (layout and columns in :mod:`r3.data.schema`); multi-turn episode
folders -> a ``turns`` dataset.

Each bag is read whole, with ``rosbags``, before anything of it is written, so a corrupted,
truncated or incomplete bag is skipped (and named in the report and the manifest) while the
others still build. A decision step's images are the frames its ReasonerStep names
(``image_stamps``, recorded reliably on ``/r3/reasoner/frames``); in bags from before those fields,
the latest camera image stamped after the previous decision and no later than this one. Its snapshot
is the latest one in that window (on the graph, the reasoner decides on the settled state), or, for
a decision after one that took no world step (their times are equal), the one of that time; a step
without an image is dropped and counted. Output is a function of the bags alone:
rows in episode-id then step order, fixed PNG settings, no times or absolute paths, so rebuilding
from the same bags gives byte-identical Parquet files.
"""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from r3.data import schema as S
from r3.data.bags import EPISODE_FILE, closed_bag_reader, complete_episode_info
from r3.data.bagtypes import bag_typestore
from r3.files import bounded_repr, find_folders, replaced_output
from r3.graph import names
from r3.suites import DEFAULT_SUITE, get_suite, suite_names

ROWS_PER_SHARD = 20_000
PNG_COMPRESS_LEVEL = 3
_TOPICS = {names.REASONER_STEPS, names.CAMERA_IMAGE, names.SCENE_SNAPSHOT, names.REASONER_FRAMES}


@dataclass
class StepRecord:
    """One decision step as read from a bag."""

    step: int
    reasoning: str
    instruction: str
    raw_response: str
    valid: bool
    images: list[np.ndarray]
    snapshot: bytes | None


@dataclass
class EpisodeRecord:
    """One episode as read from a bag: its info (r3_episode.yaml), task note and steps."""

    info: object
    note: str
    steps: list[StepRecord]


@dataclass
class BuildReport:
    rows: int = 0
    episodes: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (bag name, why)
    #: (bag name, its episode id, the id its rows have): a source whose id an earlier one has
    renamed: list[tuple[str, str, str]] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=lambda: {"invalid": 0, "repeated": 0, "no_image": 0})
    bytes_read: int = 0
    seconds: float = 0.0


def find_bags(paths: list[str | Path]) -> list[Path]:
    """Bag directories named by ``paths``: each path is a bag or a folder of bags (sorted by name,
    each bag once: :func:`r3.files.find_folders`)."""
    return find_folders(paths, _is_bag, "a bag or a folder of bags")


def _is_bag(path: Path) -> bool:
    return (path / EPISODE_FILE).is_file() or (path / "metadata.yaml").is_file() or any(path.glob("*.mcap"))


def _ns(header) -> int:
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


def read_episode(bag: str | Path) -> EpisodeRecord:
    """Read one bag; raises (ValueError or the reader's error) when it is incomplete or unreadable."""
    info = complete_episode_info(bag)
    steps, images, snapshots, frames, instance_json = [], [], [], {}, ""
    with closed_bag_reader(bag) as reader:  # opened once: parsing metadata.yaml is most of a small bag's cost
        store = bag_typestore(reader.connections)
        wanted = [c for c in reader.connections if c.topic in _TOPICS]
        for conn, _, raw in reader.messages(connections=wanted):
            msg = store.deserialize_cdr(raw, conn.msgtype)
            if conn.topic == names.REASONER_STEPS:
                steps.append(msg)
            elif conn.topic == names.REASONER_FRAMES:
                frames[_ns(msg.header)] = msg
            else:
                (images if conn.topic == names.CAMERA_IMAGE else snapshots).append((_ns(msg.header), msg))
        # The task instance is the same in every privileged state: the first one is enough.
        states = [c for c in reader.connections if c.topic == names.PRIVILEGED_STATE]
        for conn, _, raw in reader.messages(connections=states):
            instance_json = store.deserialize_cdr(raw, conn.msgtype).task_instance_json
            break
    if why := _steps_problem(info.steps, [m.step for m in steps]):
        raise ValueError(why)
    images.sort(key=lambda x: x[0])
    snapshots.sort(key=lambda x: x[0])
    records, previous = [], -1
    for msg in sorted(steps, key=lambda m: m.step):
        at = _ns(msg.header)
        named = [frames.get(t.sec * 1_000_000_000 + t.nanosec) for t in msg.image_stamps]
        if msg.image_stamps:
            views = [_rgb(f) for f in named] if all(f is not None for f in named) else []
        else:
            image = _latest(images, previous, at)
            views = [] if image is None else [_rgb(image)]
        # After an instruction refused without a step the world's time has not moved: the scene is
        # the one snapshotted at the previous decision. Otherwise only a snapshot taken since counts
        # (a lost one leaves the row without, not with the scene before the motion).
        snap = _latest(snapshots, previous - 1 if previous == at else previous, at)
        records.append(
            StepRecord(
                msg.step,
                msg.reasoning,
                msg.instruction,
                msg.raw_response,
                msg.valid,
                views,
                None if snap is None else bytes(snap.data),
            )
        )
        previous = at
    return EpisodeRecord(info, _note(info.suite, info.task, instance_json), records)


def _steps_problem(steps: int, recorded: list[int]) -> str:
    """Why a complete episode's decision steps as recorded (the step numbers on the step topic) are
    not the ``steps`` its sidecar says it took, 0 to steps - 1, each once; "" when they are. The
    recorder closes a bag complete only once every step record it records came, so a topic left out
    of the bag or its metadata.yaml, or steps edited in, would otherwise count as an episode built,
    its steps lost unnamed, or two rows of one step write one image over the other."""
    if sorted(recorded) == list(range(steps)):
        return ""
    return (
        f"{EPISODE_FILE} says the episode took {steps} decision steps, but {names.REASONER_STEPS} "
        f"holds steps {bounded_repr(sorted(recorded))}: a topic lost or edited"
    )


def _latest(stamped: list, after: int, at: int):
    hits = [m for t, m in stamped if after < t <= at]
    return hits[-1] if hits else None


def _rgb(msg) -> np.ndarray:
    if msg.encoding not in ("rgb8", "bgr8"):
        raise ValueError(f"unsupported image encoding {msg.encoding!r}: expected rgb8 or bgr8")
    rows = np.frombuffer(msg.data.tobytes(), np.uint8).reshape(msg.height, msg.step)
    rgb = rows[:, : msg.width * 3].reshape(msg.height, msg.width, 3)
    return rgb[..., ::-1] if msg.encoding == "bgr8" else rgb


def _note(suite: str, task: str, instance_json: str) -> str:
    """The task instance's note, as its suite's tasks write it; none for a suite this r3 lacks (reading
    a bag needs no suite)."""
    if not instance_json or (suite or DEFAULT_SUITE) not in suite_names():
        return ""
    tasks = get_suite(suite or DEFAULT_SUITE).tasks()
    return tasks.get_task(task).from_dict(json.loads(instance_json)).note


#: What a dataset folder holds: a build replaces a folder of nothing else.
DATASET_ENTRIES = (S.MANIFEST, S.DATA_DIR, S.IMAGES_DIR, S.SNAPSHOTS_DIR, S.STATS_JSON, S.STATS_PLOT)


def _is_dataset(folder: Path) -> bool:
    """Whether ``folder`` holds a readable manifest (a dataset built before outputs were marked)."""
    try:
        S.read_manifest(folder)
    except ValueError:
        return False
    return True


def _split_of(suite: str, task: str) -> str:
    """The split ``task`` belongs to among its suite's; "" for a suite whose tasks come in none."""
    splits = getattr(get_suite(suite or DEFAULT_SUITE).tasks(), "SPLITS", {})
    return next((split for split, tasks in splits.items() if task in tasks), "")


def build_dataset(
    bags: list[str | Path],
    out: str | Path,
    kind: str,
    *,
    history: str | None = None,
    overwrite: bool = False,
    on_bag=None,
) -> BuildReport:
    """Build a ``kind`` dataset in ``out``; ``on_bag(path)`` after each source. sft and rl read
    episode bags, ``turns`` reads multi-turn episode folders (:func:`r3.data.turns.find_episodes`).

    ``history`` is what the HISTORY column holds: the previous step's raw response ("response",
    default for sft), its instruction ("instruction", default for rl) or nothing ("none"). Turns keep
    what their episode told the model, so they take none.
    """
    history = build_history(kind, history)
    started = time.perf_counter()
    report, rows, used, ids = BuildReport(), [], [], set()
    read, rows_of = (_read_turns, _turn_rows) if kind == S.TURNS else (read_episode, _episode_rows)
    with replaced_output(
        out, DATASET_ENTRIES, overwrite=overwrite, what="dataset", made_before_marks=_is_dataset
    ) as folder:
        (folder / S.DATA_DIR).mkdir()
        for bag in map(Path, bags):
            try:
                episode = read(bag)
                if kind != S.TURNS:  # a bag of a suite this r3 lacks: named, skipped
                    get_suite(episode.info.suite or DEFAULT_SUITE)
            except Exception as exc:  # noqa: BLE001 - any unreadable source is reported and skipped
                report.skipped.append((bag.name, f"{type(exc).__name__}: {exc}".strip()))
            else:
                report.bytes_read += sum(f.stat().st_size for f in bag.rglob("*") if f.is_file())
                episode_id = episode.episode_id if kind == S.TURNS else episode.info.episode_id
                if (own := _free_id(episode_id, ids)) != episode_id:
                    report.renamed.append((bag.name, episode_id, own))
                rows.extend(rows_of(episode, kind, history, folder, report, own))
                report.episodes += 1
                used.append(bag.name)
            if on_bag is not None:
                on_bag(bag)
        if not rows:
            why = "; ".join(f"{b}: {r}" for b, r in report.skipped) or "every step dropped: " + ", ".join(
                f"{k} {n}" for k, n in report.dropped.items()
            )
            raise ValueError(f"no {kind} rows in {len(bags)} sources ({why}); no dataset written")
        rows.sort(key=lambda r: (r[S.EPISODE_ID], r[S.STEP]))
        _write_parquet(rows, folder / S.DATA_DIR, kind)
        report.rows = len(rows)
        manifest = {
            "format": "r3-dataset/1",
            "kind": kind,
            "history": history,
            "columns": list(S.COLUMNS[kind]),
            "rows": report.rows,
            "episodes": report.episodes,
            "bags": used,
            "skipped": [{"bag": b, "reason": r} for b, r in report.skipped],
            "renamed": [{"bag": b, "episode_id": i, "rows_episode_id": own} for b, i, own in report.renamed],
            "dropped_steps": report.dropped,
        }
        (folder / S.MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    report.seconds = time.perf_counter() - started
    return report


def build_history(kind: str, history: str | None) -> str | None:
    """The HISTORY column a ``kind`` dataset gets for the ``history`` asked for (None: its default);
    a ValueError for a kind or history that cannot be built."""
    if kind not in (*S.KINDS, S.TURNS):
        raise ValueError(f"kind must be one of {(*S.KINDS, S.TURNS)}, got {kind!r}")
    if kind == S.TURNS:
        if history is not None:
            raise ValueError("turns keep the history their episode was collected with; pass no history")
        return None
    history = history or ("response" if kind == "sft" else "instruction")
    if history not in S.HISTORY_KINDS:
        raise ValueError(f"history must be one of {S.HISTORY_KINDS}, got {history!r}")
    return history


def _episode_rows(
    episode: EpisodeRecord, kind: str, history: str, out: Path, report: BuildReport, place: str
) -> list[dict]:
    """The rows of one bag's steps, their images and snapshots filed under ``place``, which is
    also the rows' episode id."""
    from PIL import Image

    info, rows, previous = episode.info, [], None
    split = _split_of(info.suite, info.task)
    for s in episode.steps:
        prev, previous = previous, s
        if not s.valid or not s.instruction:
            report.dropped["invalid"] += 1
            continue
        if kind == "rl" and prev is not None and prev.instruction == s.instruction:
            report.dropped["repeated"] += 1
            continue
        if not s.images:
            report.dropped["no_image"] += 1
            continue
        paths = []
        for view, rgb in enumerate(s.images):
            rel = f"{S.IMAGES_DIR}/{place}/step_{s.step:03d}_{view}.png"
            buffer = io.BytesIO()
            Image.fromarray(rgb).save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
            _write(out / rel, buffer.getvalue())
            paths.append(rel)
        snapshot = ""
        if s.snapshot is not None:
            snapshot = f"{S.SNAPSHOTS_DIR}/{place}/step_{s.step:03d}.npz"
            _write(out / snapshot, s.snapshot)
        if prev is None or history == "none":
            hist, hist_kind = "", "none"
        else:
            hist, hist_kind = (prev.raw_response if history == "response" else prev.instruction), history
        row = {
            S.IMAGES: paths,
            S.GOAL: info.goal,
            S.NOTE: episode.note,
            S.TASK: info.task,
            S.SPLIT: split,
            S.SUITE: info.suite,
            S.HISTORY: hist,
            S.HISTORY_KIND: hist_kind,
            S.INSTRUCTION: s.instruction,
            S.STEP: s.step,
            S.EPISODE_ID: place,
            S.EPISODE_SUCCESS: bool(info.success),
            S.EPISODE_PROGRESS: float(info.progress),
            S.SNAPSHOT: snapshot,
            S.SEED: int(info.seed),
        }
        if kind == "sft":
            row[S.REASONING] = s.reasoning
            row[S.RESPONSE] = S.format_response(s.reasoning, s.instruction)
        else:
            row[S.EXPERT_INSTRUCTION] = s.instruction
        rows.append(row)
    return rows


def _read_turns(folder: Path):
    from r3.data.turns import load_episode

    return load_episode(folder)


def _turn_rows(episode, kind: str, history: None, out: Path, report: BuildReport, place: str) -> list[dict]:
    """Every turn of a stored episode (refused answers too), its snapshot copied into ``out`` under
    ``place``, which is also the rows' episode id."""
    rows = []
    for t in episode.turns:
        snapshot = f"{S.SNAPSHOTS_DIR}/{place}/step_{t.step:03d}.npz"
        _write(out / snapshot, t.snapshot_bytes())
        rows.append(
            {
                S.GOAL: t.goal,
                S.NOTE: t.note,
                S.TASK: t.task,
                S.SPLIT: "",
                S.SUITE: "packing",
                S.HISTORY: t.history,
                S.HISTORY_KIND: t.history_kind,
                S.INTERFACE: t.interface,
                S.RAW_RESPONSE: t.raw_response,
                S.VALID: t.valid,
                S.INSTRUCTION: t.action,
                S.OUTCOME: t.outcome,
                S.TURN_PROGRESS: t.progress,
                S.STEP: t.step,
                S.EPISODE_ID: place,
                S.EPISODE_SUCCESS: episode.success,
                S.EPISODE_PROGRESS: episode.progress,
                S.SNAPSHOT: snapshot,
                S.SEED: t.seed,
            }
        )
    return rows


def _free_id(episode_id: str, ids: set[str]) -> str:
    """``episode_id``, or ``episode_id-2``, ``-3`` ... when a source built before has it (two
    collections name their episodes alike), added to ``ids``: each episode's rows, images and
    snapshots stay its own (one shared id merged two episodes' rows wherever rows are keyed by
    episode and step: history, stats)."""
    own, n = episode_id, 1
    while own in ids:
        n += 1
        own = f"{episode_id}-{n}"
    ids.add(own)
    return own


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _write_parquet(rows: list[dict], folder: Path, kind: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrow_schema = S.features(kind).arrow_schema
    shards = max(1, -(-len(rows) // ROWS_PER_SHARD))
    for i in range(shards):
        chunk = rows[i * ROWS_PER_SHARD : (i + 1) * ROWS_PER_SHARD]
        table = pa.Table.from_pylist(chunk, schema=arrow_schema)
        pq.write_table(table, folder / f"train-{i:05d}-of-{shards:05d}.parquet", compression="zstd")
