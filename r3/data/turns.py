"""Multi-turn packing episodes on disk, and the turn records that training and mining read from them.

An episode folder holds one in-process packing episode of a call interface (semantic, tools or plan)::

    ROOT/<episode_id>/episode.json   the trajectory's summary, the interface and history kind, per
                                     step what the model was told of the previous step
    ROOT/<episode_id>/step_000.npz   the cell snapshot at each decision (``PackingCell.snapshot()``:
                                     the simulator and what the tools remember)
    ROOT/<episode_id>/final.npz      the snapshot after the last step, for re-checking the outcome

A *turn record* is one decision step of such an episode: the snapshot to restore, the goal and note,
the history the model saw at that turn, the action it gave (the expert's, for expert episodes) and
its answer. Training builds prompts from it (:mod:`r3.train.multiturn`), mining keeps the turns of
successful episodes (:mod:`r3.train.mining`), prefix-tree search branches from its snapshots
(:mod:`r3.data.tree_search`). The ROS graph's bags hold Language Table episodes only, so packing
turns come from in-process episodes (:func:`record_packing_episode`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from r3.data.bags import check_bag_name
from r3.data.schema import HISTORY_KINDS
from r3.files import bounded_repr, find_folders, is_kind, json_value, read_small_text
from r3.safety.goals import INT32_MAX, MAX_SEED  # a dataset's int64 seed and int32 step columns

EPISODE_FILE = "episode.json"
FINAL_SNAPSHOT = "final.npz"
FORMAT = "r3-turn-episode/1"
#: Interfaces whose episodes are stored as turns (one call per answer, its result in the next history).
TURN_INTERFACES = ("semantic", "tools", "plan")


class EpisodeFolderError(ValueError):
    """A folder that does not hold stored episodes; the message names the folder and what is wrong."""


@dataclass(frozen=True)
class Turn:
    """One decision step of a stored episode (see the module docstring)."""

    episode_id: str
    task: str
    seed: int
    goal: str
    note: str
    interface: str
    history_kind: str
    step: int
    history: str  # what the model was told of the previous step ("" at the first)
    snapshot: str  # path of the decision-time snapshot
    raw_response: str
    action: str  # the canonical call when the answer was valid, else ""
    valid: bool
    outcome: str  # the result line the next turn's history carries
    progress: float  # the episode's progress after this turn

    def snapshot_bytes(self) -> bytes:
        return Path(self.snapshot).read_bytes()


@dataclass(frozen=True)
class StoredEpisode:
    episode_id: str
    task: str
    seed: int
    goal: str
    interface: str
    success: bool
    progress: float
    aborted: str
    folder: Path
    instance: dict  # the task instance: goal, starting places and layout
    turns: list[Turn] = field(default_factory=list)

    @property
    def final_snapshot(self) -> Path:
        return self.folder / FINAL_SNAPSHOT

    @property
    def actions(self) -> tuple[str, ...]:
        return tuple(t.action for t in self.turns)


def save_episode(
    trajectory, final_snapshot: bytes, root: str | Path, episode_id: str, interface: str, history: str
) -> Path:
    """Write ``trajectory`` (an :class:`r3.episode_loop.Trajectory`) as ``root/episode_id``."""
    if interface not in TURN_INTERFACES:
        raise ValueError(f"interface {interface!r}: turns are stored for {TURN_INTERFACES}")
    folder = Path(root) / episode_id
    folder.mkdir(parents=True, exist_ok=True)
    steps = []
    for s in trajectory.steps:
        name = f"step_{s.step:03d}.npz"
        (folder / name).write_bytes(s.snapshot)
        steps.append({**s.to_summary(), "history": s.history, "snapshot": name})
    (folder / FINAL_SNAPSHOT).write_bytes(final_snapshot)
    summary = {k: v for k, v in trajectory.to_summary().items() if k != "steps"}
    record = {"format": FORMAT, "episode_id": episode_id, "interface": interface, "history": history}
    record.update(summary, note=_note(trajectory.instance), steps=steps)
    (folder / EPISODE_FILE).write_text(json.dumps(record, indent=1) + "\n")
    return folder


def _note(instance: dict) -> str:
    from r3.tasks.packing.tasks import PackingTaskInstance

    return PackingTaskInstance.from_dict(instance).note


def record_packing_episode(
    task: str,
    seed: int,
    backend,
    root: str | Path,
    *,
    episode_id: str | None = None,
    cell=None,
    interface: str = "semantic",
    history: str = "instruction",
    max_steps: int | None = None,
    rollout: int = 0,
) -> Path:
    """Run one in-process packing episode (:func:`r3.packing_episode.run_packing_episode`, rendering
    off) and store it; returns its folder."""
    from r3.packing_episode import PackingCell, run_packing_episode

    cell = cell or PackingCell.build()
    trajectory = run_packing_episode(
        task,
        seed,
        backend,
        cell=cell,
        max_steps=max_steps,
        history=history,
        render=False,
        rollout=rollout,
        interface=interface,
    )
    name = episode_id or f"{interface}_task{task}_seed{seed}_r{rollout}"
    return save_episode(trajectory, cell.snapshot(), root, name, interface, history)


def _field(record: dict, key: str, kind: type, where: str = "") -> object:
    """``record[key]`` when it is a ``kind`` (text: with no lone surrogate, which no file can hold; a
    number: finite, never a bool); a ValueError naming the field otherwise."""
    name = f"{where}{key}"
    if key not in record:
        raise ValueError(f"missing field {name!r}")
    value = record[key]
    if not is_kind(value, kind):
        raise ValueError(f"{name}={bounded_repr(value)}: expected {_KIND_NAMES[kind]}")
    if kind is str:
        try:
            value.encode()
        except UnicodeEncodeError:
            raise ValueError(f"{name}: text with a lone surrogate (no UTF-8 text)") from None
    return value


_KIND_NAMES = {
    str: "text",
    int: "a whole number",
    float: "a finite number",
    bool: "true or false",
    dict: "an object",
    list: "a list",
}


def _in_range(value: float, low: float, high: float, name: str) -> float:
    """``value`` when it lies in [``low``, ``high``]; a ValueError naming the field otherwise."""
    if not low <= value <= high:
        raise ValueError(f"{name}={bounded_repr(value)}: expected {low} to {high}")
    return value


def _checked_steps(folder: Path, record: dict) -> list[dict]:
    """The steps of ``record`` with their fields checked: distinct whole step numbers, progress in
    [0, 1], each step's snapshot a file in ``folder``."""
    steps, seen = [], set()
    for i, s in enumerate(_field(record, "steps", list)):
        where = f"steps[{i}]."
        if not isinstance(s, dict):
            raise TypeError(f"steps[{i}]={bounded_repr(s)}: expected an object")
        step = _in_range(_field(s, "step", int, where), 0, INT32_MAX, f"{where}step")
        if step in seen:
            raise ValueError(f"{where}step={step}: a second step {step} (step numbers must be distinct)")
        seen.add(step)
        name = _field(s, "snapshot", str, where)
        snapshot = folder / name
        if snapshot.resolve().parent != folder.resolve() or not snapshot.is_file():
            raise ValueError(f"step {step}: no snapshot file {name!r} in the folder")
        for key in ("history", "raw_response", "instruction", "outcome"):
            _field(s, key, str, where)
        _field(s, "valid", bool, where)
        _in_range(_field(s, "progress", float, where), 0, 1, f"{where}progress")
        steps.append(s)
    return steps


def load_episode(folder: str | Path) -> StoredEpisode:
    """The stored episode in ``folder``; an :class:`EpisodeFolderError` naming the file and the field
    when its record is no such episode (a field missing or of the wrong type or range)."""
    folder = Path(folder)
    path = folder / EPISODE_FILE
    try:
        record = json_value(read_small_text(path))
    except (OSError, ValueError) as err:
        raise EpisodeFolderError(f"{folder}: no readable {EPISODE_FILE} ({err})") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        found = record.get("format") if isinstance(record, dict) else type(record).__name__
        raise EpisodeFolderError(f"{path}: format {bounded_repr(found)}, expected {FORMAT!r}")
    try:  # readers make paths of the id (a dataset's snapshots) and read each step's snapshot
        episode_id = _field(record, "episode_id", str)
        check_bag_name(episode_id)
        interface = _field(record, "interface", str)
        if interface not in TURN_INTERFACES:
            raise ValueError(f"interface={bounded_repr(interface)}: expected one of {TURN_INTERFACES}")
        history = _field(record, "history", str)
        if history not in HISTORY_KINDS:
            raise ValueError(f"history={bounded_repr(history)}: expected one of {HISTORY_KINDS}")
        task, goal, note, aborted = (_field(record, k, str) for k in ("task", "goal", "note", "aborted"))
        seed = _in_range(_field(record, "seed", int), 0, MAX_SEED, "seed")
        success = _field(record, "success", bool)
        progress = _in_range(_field(record, "progress", float), 0, 1, "progress")
        instance = _field(record, "instance", dict)
        steps = _checked_steps(folder, record)
    except (ValueError, TypeError) as err:
        raise EpisodeFolderError(f"{path}: not a stored episode: {err}") from None
    turns = [
        Turn(
            episode_id=episode_id,
            task=task,
            seed=seed,
            goal=goal,
            note=note,
            interface=interface,
            history_kind=history,
            step=s["step"],
            history=s["history"],
            snapshot=str(folder / s["snapshot"]),
            raw_response=s["raw_response"],
            action=s["instruction"],
            valid=s["valid"],
            outcome=s["outcome"],
            progress=float(s["progress"]),
        )
        for s in steps
    ]
    return StoredEpisode(
        episode_id, task, seed, goal, interface, success, float(progress), aborted, folder, instance, turns
    )


def find_episodes(paths: list[str | Path]) -> list[Path]:
    """Episode folders named by ``paths``: each is an episode folder or a folder of them (sorted,
    each once: :func:`r3.files.find_folders`)."""
    return find_folders(
        paths, lambda p: (p / EPISODE_FILE).is_file(), "an episode folder or a folder of them"
    )


def load_turn_dataset(path: str | Path) -> list[Turn]:
    """The turns of a ``turns`` dataset built by ``r3 dataset build --kind turns``, snapshots absolute."""
    from r3.data import schema as S

    kind = S.read_manifest(path)["kind"]
    if kind != S.TURNS:
        raise ValueError(f"a {kind} dataset, expected a {S.TURNS} one (r3 dataset build --kind {S.TURNS})")
    rows = S.load_r3_dataset(path)
    return [
        Turn(
            episode_id=r[S.EPISODE_ID],
            task=r[S.TASK],
            seed=int(r[S.SEED]),
            goal=r[S.GOAL],
            note=r[S.NOTE],
            interface=r[S.INTERFACE],
            history_kind=r[S.HISTORY_KIND],
            step=int(r[S.STEP]),
            history=r[S.HISTORY],
            snapshot=r[S.SNAPSHOT],
            raw_response=r[S.RAW_RESPONSE],
            action=r[S.INSTRUCTION],
            valid=bool(r[S.VALID]),
            outcome=r[S.OUTCOME],
            progress=float(r[S.TURN_PROGRESS]),
        )
        for r in rows
    ]


def load_episodes(root: str | Path) -> list[StoredEpisode]:
    """Every stored episode under ``root`` (one folder each, sorted by name)."""
    root = Path(root)
    if not root.is_dir():
        raise EpisodeFolderError(f"episode folder not found: {root}")
    folders = sorted(p for p in root.iterdir() if (p / EPISODE_FILE).is_file())
    if not folders:
        raise EpisodeFolderError(f"{root}: no stored episodes (no */{EPISODE_FILE})")
    return [load_episode(f) for f in folders]
