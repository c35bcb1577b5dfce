"""Expert episode collection: many in-process episodes, one rosbag2 bag each, resumable.

Packing (``suite="packing"``, a call interface such as ``semantic``) is collected from its training
task ("train", goals drawn from the seed) as multi-turn episode folders instead of bags (a snapshot
per turn, :mod:`r3.data.turns`), which turn-level RL and mining read.

``collect(config)`` plans every (task, scene, trial) of the split, skips the episodes whose bag is
already complete in the output folder, and runs the rest on a :class:`r3.workers.WorkerPool`
(worker processes, or Ray actors), each writing its bag in the recorder node's format
(:mod:`r3.data.episode_bag`).
Successful and failed episodes are both kept. A bag is written under ``OUT/.partial`` and moved
into ``OUT`` once closed, so an interrupted run leaves no half-written bag where a finished one
is expected; the next run clears ``.partial`` and carries on, recording again an episode whose bag
is torn (and refusing to, before any episode, where its place holds anything r3 did not write:
:func:`not_replaceable`). ``OUT`` is a new or empty folder or an earlier collection
(:func:`check_folder`), never one holding anything else. Seeds: :mod:`r3.data.seeds`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from r3.data.bags import COMPLETE, bag_damage, read_episode_info
from r3.files import OUTPUT_MARK, FileRefused, json_value, mark_output, read_small_text, resumable_output
from r3.safety.goals import UINT32_MAX
from r3.seeds import MAX_SCENES, MAX_TRIALS, collection_seed, packing_collection_seed
from r3.sim import IMAGE_SIDES
from r3.suites import DEFAULT_SUITE, get_suite, suite_names
from r3.workers import WorkerPool, check_workers

PARTIAL = ".partial"
#: The settings a folder's episodes were collected with (``SAME_SETTINGS``), written by its first run.
SETTINGS_FILE = "r3_collection.json"
#: What a collection folder holds, in its :data:`r3.files.OUTPUT_MARK`: ``--out`` is a new or empty
#: folder or one an earlier collection marked (or, from before there were marks, its ``SETTINGS_FILE``).
COLLECTION = "episode collection"
#: What makes an episode the one it is: a resumed or extended collection must match them (the scenes,
#: trials, split and workers may differ). A run with another backend or image size once counted the
#: folder's episodes as done, or added 64x48 bags beside 320x240 ones that no video could then hold.
SAME_SETTINGS = (
    "suite",
    "interface",
    "backend",
    "history",
    "max_steps",
    "steps_per_instruction",
    "width",
    "height",
    "frame_every",
)


def collected_suites() -> tuple[str, ...]:
    """The suites ``r3 collect`` runs (those with a collection split)."""
    return tuple(name for name in suite_names() if get_suite(name).collect_split is not None)


def default_max_steps(suite: str, interface: str) -> int:
    """Decision steps of a collected episode when none are given: 20 for Language Table; a packing turn
    interface's own budget (``r3.packing_episode``: the semantic interface needs three actions for an
    instruction's work, the tools interface about ten calls)."""
    if not get_suite(suite).workcell:
        return 20
    from r3.packing_episode import SUITE_ADAPTERS

    return SUITE_ADAPTERS[interface].default_steps


@dataclass(frozen=True)
class CollectConfig:
    """What to collect and how; every value is checked on construction."""

    out: str
    suite: str = DEFAULT_SUITE
    split: str = "T_M"
    scenes: int = 64
    trials: int = 4
    workers: int = 1
    ray_address: str | None = None
    backend: str = "expert"
    history: str = "response"
    #: None: 20 decisions on Language Table; on packing, the interface's own budget (45 semantic actions,
    #: 150 tool calls, 15 plans), as `r3 eval` and `r3 packing demo` take
    max_steps: int | None = None
    steps_per_instruction: int = 20
    width: int = 320
    height: int = 240
    frame_every: int = 0
    interface: str = "instruction"

    def __post_init__(self):
        from r3.data.turns import TURN_INTERFACES
        from r3.tasks.language_table.tasks import SPLITS

        suite, known = get_suite(self.suite), collected_suites()
        if suite.name not in known:
            raise ValueError(f"CollectConfig: r3 collect runs {', '.join(known)}, not {self.suite!r}")
        if suite.workcell:  # its training task (the held-out goals are evaluation's), as turn folders
            if self.split != suite.collect_split:
                raise ValueError(
                    f"CollectConfig: {suite.name} collects split {suite.collect_split!r} (its held-out "
                    f"goals are evaluation's), got split {self.split!r}"
                )
            if self.interface not in TURN_INTERFACES:
                raise ValueError(
                    f"CollectConfig: {suite.name} collects with a turn interface "
                    f"({', '.join(TURN_INTERFACES)}), got interface {self.interface!r}"
                )
        elif self.interface != "instruction":
            raise ValueError(
                f"CollectConfig: suite {self.suite!r} collects the instruction interface as bags, "
                f"got interface {self.interface!r}"
            )
        elif self.split not in SPLITS:
            raise ValueError(f"CollectConfig.split must be one of {sorted(SPLITS)}, got {self.split!r}")
        if Path(self.out).exists() and not Path(self.out).is_dir():
            raise ValueError(f"CollectConfig.out: {self.out} is a file, not a folder for bags")
        if not 1 <= self.scenes <= MAX_SCENES:
            raise ValueError(f"CollectConfig.scenes must be in [1, {MAX_SCENES}], got {self.scenes}")
        if not 1 <= self.trials <= MAX_TRIALS:
            raise ValueError(f"CollectConfig.trials must be in [1, {MAX_TRIALS}], got {self.trials}")
        if self.workers < 1:
            raise ValueError(f"CollectConfig.workers must be >= 1, got {self.workers}")
        check_workers(self.workers, self.ray_address)
        if self.history not in ("response", "instruction", "none"):
            raise ValueError(
                f"CollectConfig.history must be response, instruction or none, got {self.history!r}"
            )
        if self.max_steps is None:
            object.__setattr__(self, "max_steps", default_max_steps(self.suite, self.interface))
        for name in ("max_steps", "steps_per_instruction"):  # RunTask's and FollowInstruction's max_steps
            if not 1 <= getattr(self, name) <= UINT32_MAX:
                raise ValueError(
                    f"CollectConfig.{name} must be in [1, {UINT32_MAX}], got {getattr(self, name)}"
                )
        for name in ("width", "height"):
            if not IMAGE_SIDES[0] <= (side := getattr(self, name)) <= IMAGE_SIDES[1]:
                raise ValueError(f"CollectConfig.{name} must be in {list(IMAGE_SIDES)}, got {side}")
        if not 0 <= self.frame_every <= UINT32_MAX:  # as r3 sim demo's --frame-every
            raise ValueError(
                f"CollectConfig.frame_every must be in [0, {UINT32_MAX}], got {self.frame_every}"
            )
        from r3.reasoning.backends import check_backend

        check_backend(self.backend)  # a bad spec, a missing model or GPU fails here, before any worker


@dataclass(frozen=True)
class EpisodeSpec:
    task: str
    scene: int
    trial: int
    seed: int

    @property
    def episode_id(self) -> str:
        return f"{self.task}-sc{self.scene:04d}-t{self.trial}-s{self.seed}"


@dataclass
class CollectReport:
    planned: int
    skipped: int  # already complete before this run
    succeeded: int = 0
    failed: int = 0


def plan(config: CollectConfig) -> list[EpisodeSpec]:
    """Every episode of the collection, task by task, scene by scene, trial by trial."""
    from r3.tasks.language_table.tasks import SPLITS

    if get_suite(config.suite).workcell:
        return [
            EpisodeSpec(config.split, scene, trial, packing_collection_seed(scene, trial))
            for scene in range(config.scenes)
            for trial in range(config.trials)
        ]
    return [
        EpisodeSpec(task, scene, trial, collection_seed(task, scene, trial))
        for task in SPLITS[config.split]
        for scene in range(config.scenes)
        for trial in range(config.trials)
    ]


def episode_files(episode_id: str) -> re.Pattern:
    """The names of what an episode's folder holds as r3 writes it, whole or torn: a bag's files
    (:mod:`r3.data.bags`: its sidecar and metadata and their temporary copies, the recording stream,
    a repair's torn stream, the MCAP file and its staging name, the folder an earlier version staged
    the bag in) or a turn episode's (:mod:`r3.data.turns`)."""
    from r3.data.bags import EPISODE_FILE, METADATA_FILE, STREAM_FILE, TORN_SUFFIX
    from r3.data.turns import EPISODE_FILE as TURN_FILE
    from r3.data.turns import FINAL_SNAPSHOT

    sidecars = "|".join(re.escape(Path(name).stem) for name in (EPISODE_FILE, METADATA_FILE))
    return re.compile(
        rf"(?:{sidecars})\.(?:yaml|tmp)|{re.escape(STREAM_FILE)}(?:\.new|{re.escape(TORN_SUFFIX)}(?:\.\d+)?)?"
        rf"|{re.escape(episode_id)}(?:\.mcap(?:\.new)?)?|{re.escape(TURN_FILE)}|{re.escape(FINAL_SNAPSHOT)}"
        r"|step_\d+\.npz"
    )


def not_replaceable(path: Path, episode_id: str) -> str | None:
    """Why what is at ``path``, an episode's place, may not be replaced by a new recording of it: a
    file, a link, or a folder holding anything but the episode's files as r3 writes them
    (:func:`episode_files`); None when it is the episode, whole or torn, or nothing."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        return "is a link" if path.is_symlink() else "is a file"
    names = episode_files(episode_id)
    foreign = (
        sorted(entry.name for entry in path.iterdir() if not names.fullmatch(entry.name))
        if path.is_dir()
        else []
    )
    if not foreign:
        return None
    shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
    return f"holds {shown}, which r3 collect does not write"


def is_complete(out: str | Path, spec: EpisodeSpec) -> bool:
    """Whether ``spec``'s episode in ``out`` is whole: a turn episode that loads (its record read, its
    snapshots there) or a complete, undamaged bag. Anything else is recorded again, where it may be
    (:func:`not_replaceable`)."""
    from r3.data.turns import EPISODE_FILE, EpisodeFolderError, load_episode

    bag = Path(out) / spec.episode_id
    if (bag / EPISODE_FILE).is_file():  # a turn episode (its record written last)
        try:
            return load_episode(bag).episode_id == spec.episode_id
        except EpisodeFolderError:
            return False
    try:
        return read_episode_info(bag).status == COMPLETE and bag_damage(bag) is None
    except (OSError, TypeError, ValueError):
        return False


_WORKER: dict = {}


def _release_worker() -> None:
    """Close and forget what this worker cached for another config. A dropped simulator's renderer
    is otherwise closed whenever the garbage collector gets to it, possibly with the next
    simulator's OpenGL context current, which crashed the process under OSMesa."""
    cell = _WORKER.get("cell")
    for part in (_WORKER.get("env"), cell and cell.env, _WORKER.get("backend")):
        if part is not None:
            part.close()
    _WORKER.clear()


def run_one(spec: EpisodeSpec, config: CollectConfig) -> tuple[str, bool]:
    """Run one episode and move its bag into ``config.out``; (episode id, success). Runs in a worker."""
    from r3.data.episode_bag import record_episode

    if get_suite(config.suite).workcell:
        return _run_packing(spec, config)
    key = (config.backend, config.width, config.height)
    if _WORKER.get("key") != key:
        from r3.reasoning import make_backend
        from r3.sim.language_table.env import LanguageTableEnv

        _release_worker()
        backend = make_backend(config.backend)
        backend.load()
        _WORKER.update(
            key=key, env=LanguageTableEnv(width=config.width, height=config.height), backend=backend
        )
    partial = Path(config.out) / PARTIAL
    shutil.rmtree(partial / spec.episode_id, ignore_errors=True)
    bag = record_episode(
        spec.task,
        spec.seed,
        _WORKER["backend"],
        _WORKER["env"],
        spec.episode_id,
        partial,
        max_steps=config.max_steps,
        steps_per_instruction=config.steps_per_instruction,
        history=config.history,
        frame_every=config.frame_every,
    )
    final = Path(config.out) / spec.episode_id
    shutil.rmtree(final, ignore_errors=True)  # an incomplete bag from an older run
    os.replace(bag, final)
    return spec.episode_id, read_episode_info(final).success


def _run_packing(spec: EpisodeSpec, config: CollectConfig) -> tuple[str, bool]:
    """One packing episode stored as turns (:func:`r3.data.turns.record_packing_episode`)."""
    from r3.data.turns import load_episode, record_packing_episode

    key = ("packing", config.backend)
    if _WORKER.get("key") != key:
        from r3.packing_episode import PackingCell
        from r3.reasoning import make_backend

        _release_worker()
        backend = make_backend(config.backend)
        backend.load()
        _WORKER.update(key=key, cell=PackingCell.build(), backend=backend)
    partial = Path(config.out) / PARTIAL
    shutil.rmtree(partial / spec.episode_id, ignore_errors=True)
    folder = record_packing_episode(
        spec.task,
        spec.seed,
        _WORKER["backend"],
        partial,
        episode_id=spec.episode_id,
        cell=_WORKER["cell"],
        interface=config.interface,
        history=config.history,
        max_steps=config.max_steps,
    )
    final = Path(config.out) / spec.episode_id
    shutil.rmtree(final, ignore_errors=True)
    os.replace(folder, final)
    return spec.episode_id, load_episode(final).success


class FolderRefused(ValueError):
    """A folder that is no collection's, or one whose episodes were collected with other settings."""


def check_folder(out: Path) -> None:
    """A FolderRefused unless ``out`` is new, empty or an earlier collection (:data:`COLLECTION`):
    never the current folder, the filesystem root, or a folder holding a user's files or another
    command's output, which the bags would be mixed into. Writes nothing."""
    try:
        resumable_output(out, COLLECTION, made_before_marks=lambda out: (out / SETTINGS_FILE).is_file())
    except FileRefused as exc:
        raise FolderRefused(str(exc)) from None


def claim_folder(out: Path, config: CollectConfig) -> None:
    """Mark ``out`` as a collection and record ``config``'s settings there, or a FolderRefused (and
    nothing written) when its episodes have other ones or its settings file is no settings file (a
    folder that holds no episodes yet, as a run whose reasoner failed to start leaves it, takes
    these settings)."""
    wanted = {key: getattr(config, key) for key in SAME_SETTINGS}
    file = out / SETTINGS_FILE
    if (file.exists() or file.is_symlink()) and not file.is_file():
        kind = (
            "a folder" if file.is_dir() else "a link to nothing" if file.is_symlink() else "no regular file"
        )
        raise FolderRefused(
            f"{file} is {kind}, not a collection's settings (the JSON file r3 collect writes there); "
            "move it away or use another --out"
        )
    episodes = out.is_dir() and any(
        p.name not in (SETTINGS_FILE, PARTIAL, OUTPUT_MARK) for p in out.iterdir()
    )
    if file.is_file() and episodes:
        try:
            held = json_value(read_small_text(file))
        except (OSError, ValueError) as exc:
            raise FolderRefused(f"{file} does not read as a collection's settings: {exc}") from None
        if not isinstance(held, dict):
            raise FolderRefused(
                f"{file} is not a collection's settings: expected a JSON object of "
                f"{', '.join(SAME_SETTINGS)}, got {type(held).__name__}; use another --out"
            )
        if differ := {key: (held.get(key), value) for key, value in wanted.items() if held.get(key) != value}:
            what = ", ".join(f"{key}: {a!r} there, {b!r} now" for key, (a, b) in differ.items())
            raise FolderRefused(
                f"{out} holds episodes collected with other settings ({what}); use another --out"
            )
    try:  # before anything else goes in; held while this run lasts
        mark_output(out, COLLECTION)
    except FileRefused as exc:  # another r3 collect is writing there
        raise FolderRefused(str(exc)) from None
    if not (file.is_file() and episodes):
        file.write_text(json.dumps(wanted, indent=2) + "\n")


def collect(config: CollectConfig, progress: bool = True) -> CollectReport:
    """Collect every planned episode not yet complete in ``config.out``."""
    from tqdm import tqdm

    out = Path(config.out)
    check_folder(out)
    claim_folder(out, config)
    shutil.rmtree(out / PARTIAL, ignore_errors=True)
    specs = plan(config)
    todo = [s for s in specs if not is_complete(out, s)]
    for spec in todo:  # each is recorded again in its place, replacing a torn one: nothing else
        if why := not_replaceable(out / spec.episode_id, spec.episode_id):
            raise FolderRefused(
                f"{out / spec.episode_id}, where episode {spec.episode_id} goes, {why}: not replacing "
                "it; move it away or use another --out"
            )
    report = CollectReport(planned=len(specs), skipped=len(specs) - len(todo))
    bar = tqdm(
        total=len(specs),
        initial=report.skipped,
        unit="ep",
        desc=f"collect {config.split}",
        disable=not progress,
    )
    # On Ray, every node must see config.out at the same path (a shared file system) and have r3.
    try:
        with WorkerPool(config.workers, _worker_config, (config,), config.ray_address) as pool:
            for _, (_, success) in pool.imap_unordered(_run_spec, todo):
                report.succeeded += success
                report.failed += not success
                bar.update(1)
                bar.set_postfix(success=f"{report.succeeded}/{report.succeeded + report.failed}")
    finally:  # torn episodes too: a run stopped by a full disk leaves the room they took
        bar.close()
        shutil.rmtree(out / PARTIAL, ignore_errors=True)
    return report


def _worker_config(config: CollectConfig) -> CollectConfig:
    """A collect worker's state: its config (:func:`run_one` keeps the env and backend per process)."""
    return config


def _run_spec(config: CollectConfig, spec: EpisodeSpec) -> tuple[str, bool]:
    return run_one(spec, config)
