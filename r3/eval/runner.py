"""The evaluation runner: held-out jobs, workers (:class:`r3.workers.WorkerPool`), a resumable cache.

Suites. ``language_table`` runs the 14 tasks with ``r3.episode.run_episode``; ``packing`` runs the
12 held-out goals of R^3 Table 6 with ``r3.packing_episode.run_packing_episode``, on the simulator's
or the perceived grounding (``grounding``). Each suite has its defaults (``r3.suites.Suite.eval_protocol``):
64 scenes x 16 trials for Language Table, R^3's 5 environment seeds x 10 rollouts for packing.

Seed scheme. Evaluation scene ``i`` has seed ``EVAL_SEED_BASE + i``: the same scenes for every
task, all at or above the base that collection seeds stay below. Trial ``t`` of a scene keeps the
layout and task instance and redraws the low-level policy noise (and, on Language Table, the
expert's wording): ``run_episode(..., trial=t)``, ``run_packing_episode(..., rollout=t)``; trial 0
is what the ROS graph runs for that seed.

Output folder layout (``--out DIR``)::

    config.json      what the cached episodes were run with; a resumed run must match it
    episodes.jsonl   one finished episode per line (see :meth:`EpisodeWorker.run`), appended as it ends

A run skips every job whose (task, scene, trial) is already in ``episodes.jsonl``, so a stopped run
continues where it was, and more scenes or trials extend an earlier run. The cache does not know
the code's version: after a change to the simulator, tasks or reasoner, use a fresh folder.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from r3.files import (
    FileRefused,
    bounded_repr,
    hold_output,
    is_kind,
    json_value,
    read_small_text,
    unfinished_copy,
    write_text_atomically,
)
from r3.lowlevel import GROUNDINGS
from r3.reasoning.backends.base import BackendError
from r3.safety.goals import INT32_MAX, UINT32_MAX, GoalRefused, check_interface
from r3.seeds import scene_seed
from r3.suites import DEFAULT_SUITE, get_suite, suite_names
from r3.tasks.language_table.tasks import SPLITS
from r3.tasks.packing.tasks import HELD_OUT
from r3.urls import shown_url
from r3.workers import WorkerPool, check_workers

CONFIG_FILE = "config.json"
EPISODES_FILE = "episodes.jsonl"
#: Config fields that change episode outcomes: a resumed run must agree on all of them.
OUTCOME_FIELDS = ("reasoner", "suite", "budget", "max_steps", "history", "grounding", "interface")
#: Held-out scenes and trials per scene at most: R^3 evaluates 64 x 16; these keep a typo (a
#: thousand-fold count) from queueing more episodes than any machine would finish.
MAX_SCENES, MAX_TRIALS = 100_000, 1_000
#: Split of the packing goals: all 12 are R^3's held-out goals (Table 6).
PACKING_SPLIT = "held-out"


def evaluated_suites() -> tuple[str, ...]:
    """The suites ``r3 eval`` runs (those with evaluation tasks)."""
    return tuple(name for name in suite_names() if get_suite(name).eval_tasks is not None)


def eval_defaults(suite: str) -> dict:
    """Scenes, trials, decision steps and history of ``suite`` when a config leaves them out (R^3's
    protocols, ``r3.suites.Suite.eval_protocol``; history: the suite's default)."""
    record = get_suite(suite)
    return {**record.eval_protocol, "history": record.default_history}


class EvalError(RuntimeError):
    """A run that cannot start as asked (bad options, a cache from another configuration), or one
    whose reasoner failed (its backend's error: a server that refuses, breaks off or never answers)."""


class LayoutUnavailable(RuntimeError):
    """The simulator found no layout that leaves the job's task something to do: the job is skipped."""


#: Every task an evaluation can run: Language Table's splits and the packing goals.
TASK_NAMES = frozenset(HELD_OUT).union(*SPLITS.values())


def split_of(task: str) -> str:
    """The split of a task: T_M, T_R or T_O for Language Table, ``held-out`` for a packing goal.

    >>> split_of("rect"), split_of("4")
    ('T_O', 'held-out')
    """
    if task in HELD_OUT:
        return PACKING_SPLIT
    return next(name for name, tasks in SPLITS.items() if task in tasks)


@dataclass(frozen=True)
class Job:
    """One episode to run: a task on one held-out scene, one trial."""

    task: str
    scene: int
    trial: int

    @property
    def seed(self) -> int:
        return scene_seed(self.scene)

    @property
    def key(self) -> tuple[str, int, int]:
        return self.task, self.scene, self.trial


@dataclass(frozen=True)
class EvalConfig:
    """What to evaluate; validates itself. ``budget`` None is full reasoning, N caps it at N tokens.

    ``tasks``, ``scenes``, ``trials``, ``max_steps`` and ``history`` left as None take the suite's
    (every task, :func:`eval_defaults`); ``grounding`` is packing's and must stay "sim" otherwise.
    ``interface`` is how the reasoner acts (``r3.safety.goals.INTERFACE_ANSWERS``); on packing, an
    interface other than "instruction" takes its own step budget when ``max_steps`` is left out.

    >>> c = EvalConfig(suite="packing")
    >>> len(c.tasks), c.scenes, c.trials, c.max_steps, c.history
    (12, 5, 10, 15, 'instruction')
    """

    reasoner: str = "expert"
    suite: str = DEFAULT_SUITE
    tasks: tuple[str, ...] | None = None
    scenes: int | None = None
    trials: int | None = None
    budget: int | None = None
    max_steps: int | None = None
    history: str | None = None
    grounding: str = "sim"
    interface: str = "instruction"

    def __post_init__(self):
        if self.suite not in evaluated_suites():
            known = ", ".join(evaluated_suites())
            raise EvalError(f"suite {bounded_repr(self.suite)} unknown; known: {known}")
        try:
            check_interface(self.interface, self.suite)
        except GoalRefused as exc:
            raise EvalError(str(exc)) from None
        if self.max_steps is None and self.interface != "instruction":
            from r3.packing_episode import SUITE_ADAPTERS

            object.__setattr__(self, "max_steps", SUITE_ADAPTERS[self.interface].default_steps)
        known = get_suite(self.suite).hook("eval_tasks")()
        defaults = {"tasks": known, **eval_defaults(self.suite)}
        for name, value in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        object.__setattr__(self, "tasks", tuple(self.tasks))
        unknown = [t for t in self.tasks if t not in known]
        if unknown or not self.tasks:
            raise EvalError(
                f"tasks {bounded_repr(list(unknown), 120)} unknown or none given for suite {self.suite}; "
                f"known: {', '.join(known)}"
            )
        only_sim = not get_suite(self.suite).grounding_choice
        if self.grounding not in GROUNDINGS.names() or (only_sim and self.grounding != "sim"):
            raise EvalError(
                f"grounding {self.grounding!r}: packing takes one of {', '.join(GROUNDINGS.names())}, "
                "other suites only 'sim'"
            )
        if named_twice := sorted({t for t in self.tasks if self.tasks.count(t) > 1}):
            raise EvalError(f"tasks {named_twice} named more than once")
        # max_steps: RunTask's (a uint32), as --via-ros runs the episodes through the graph
        # whole numbers: a config.json's 1.5 scenes (or true) counted scenes 0 and 1 as its grid
        for name, most in (("scenes", MAX_SCENES), ("trials", MAX_TRIALS), ("max_steps", UINT32_MAX)):
            value = getattr(self, name)
            if not is_kind(value, int):
                raise EvalError(f"{name} must be a whole number, got {bounded_repr(value)}")
            if not 1 <= value <= most:
                raise EvalError(f"{name} must be in 1..{most}, got {value}")
        # budget: RunTask's reasoning_budget (an int32, which --via-ros wrapped to a negative budget)
        if self.budget is not None and (not is_kind(self.budget, int) or not 0 <= self.budget <= INT32_MAX):
            shown = bounded_repr(self.budget)
            raise EvalError(f"budget must be None (full) or a whole number in 0..{INT32_MAX}, got {shown}")
        if self.history not in ("response", "instruction", "none"):
            raise EvalError(f"history must be response, instruction or none, got {self.history!r}")

    def jobs(self) -> list[Job]:
        """Every episode of the evaluation, task by task, scene by scene, trial by trial."""
        return [Job(t, s, k) for t in self.tasks for s in range(self.scenes) for k in range(self.trials)]

    def outcome_fields(self) -> dict:
        return {name: getattr(self, name) for name in OUTCOME_FIELDS}


class EpisodeWorker:
    """Builds the simulator and the reasoner once, then runs jobs (a worker's state in the pool)."""

    def __init__(self, config: EvalConfig):
        from r3.reasoning import ReasoningBudget, make_backend

        self.config = config
        if get_suite(config.suite).workcell:
            from r3.packing_episode import PackingCell

            self.cell = PackingCell.build(grounding=config.grounding)
            self.env = self.cell.env
        else:
            from r3.sim.language_table.env import LanguageTableEnv

            self.env = LanguageTableEnv()
        self.backend = make_backend(config.reasoner)
        self.load_error: BackendError | None = None
        try:  # kept for the first job, so that a worker process reports it as a job's error, traceback-free
            self.backend.load()
        except BackendError as exc:
            self.load_error = exc
        self.budget = ReasoningBudget(max_reasoning_tokens=config.budget)

    def run(self, job: Job) -> dict:
        """Run ``job``; return its JSON record.

        A backend that fails (it cannot load, or its server refuses, breaks off or never answers) is
        no outcome of the episode: its :class:`BackendError` is raised, and the job is not recorded.

        Keys: task, split, scene, trial, seed, then either ``skipped`` (why the scene poses no task)
        or success, progress (final, in [0, 1]; packing: the most goal objects packed at any time),
        penalty (ERR's, on packing; None on Language Table), decision_steps, control_steps, invalid_steps,
        reasoning_words (mean per decision step), goal, instructions, errors (per step: why the
        instruction failed or the answer was refused, "" when it did not), repeated_refusals
        (:func:`r3.reasoning.claims.repeated_refusals`), wall_s.
        """
        record = {
            "task": job.task,
            "split": split_of(job.task),
            "scene": job.scene,
            "trial": job.trial,
            "seed": job.seed,
        }
        if self.load_error is not None:
            raise self.load_error
        start = time.perf_counter()
        try:
            t = self._episode(job)
        except LayoutUnavailable as exc:
            return {**record, "skipped": str(exc)}
        words = [len(s.reasoning.split()) for s in t.steps]
        return {
            **record,
            "success": t.success,
            "progress": t.progress,
            "penalty": self._penalty(),
            "decision_steps": len(t.steps),
            "control_steps": t.control_steps,
            "invalid_steps": sum(not s.valid for s in t.steps),
            "reasoning_words": sum(words) / len(words) if words else 0.0,
            "goal": t.goal,
            "instructions": t.instructions,
            "errors": [s.error for s in t.steps],
            "repeated_refusals": self._repeated_refusals(t),
            "wall_s": round(time.perf_counter() - start, 4),
        }

    def _episode(self, job: Job):
        c = self.config
        if get_suite(c.suite).workcell:
            from r3.packing_episode import run_packing_episode

            self._reset(job)  # a goal with no layout raises here
            return run_packing_episode(
                job.task,
                job.seed,
                self.backend,
                cell=self.cell,
                max_steps=c.max_steps,
                budget=self.budget,
                history=c.history,
                render=False,
                rollout=job.trial,
                interface=c.interface,
            )
        from r3.episode import run_episode

        self._reset(job)
        return run_episode(
            job.task,
            job.seed,
            self.backend,
            env=self.env,
            max_steps=c.max_steps,
            budget=self.budget,
            history=c.history,
            render=True,  # the reasoner decides on the camera image (off, it would see a blank one)
            trial=job.trial,
        )

    def _reset(self, job: Job) -> None:
        """The job's scene; :class:`LayoutUnavailable` when the env, which redraws layouts that already
        solve the task (or fit nowhere), gives up after a few."""
        try:
            self.env.reset(seed=job.seed, options={"task": job.task})
        except RuntimeError as exc:
            raise LayoutUnavailable(str(exc)) from None

    def _penalty(self) -> float | None:
        """ERR's penalty of the final state (packing; Language Table has no penalty check)."""
        if not get_suite(self.config.suite).workcell:
            return None
        return self.env.task_instance.penalty(self.env.state())

    def _repeated_refusals(self, t) -> int:
        """Instructions repeated after failing in an unchanged scene (decision states from the snapshots)."""
        from r3.reasoning.claims import repeated_refusals

        final = self.env.state()
        states = []
        for step in t.steps:
            self.env.restore(step.snapshot)
            states.append(self.env.state())
        unchanged = get_suite(self.config.suite).hook("unchanged")
        return repeated_refusals(t.instructions, [s.error for s in t.steps], [*states, final], unchanged)

    def close(self) -> None:
        self.backend.close()


# ------------------------------------------------------------------------------------ cache
def cached_records(out: Path, config: EvalConfig) -> dict[tuple[str, int, int], dict]:
    """The records ``out`` already holds for ``config``, by job key; an EvalError when ``out`` is
    no folder or holds another configuration's episodes. Writes nothing but the repair of a last
    line cut short by a crash (that episode runs again)."""
    if out.exists() and not out.is_dir():
        raise EvalError(f"{out} is a file, not a folder for an evaluation")
    unfinished = unfinished_copy(out / CONFIG_FILE).name  # a run killed as it wrote its first config.json
    held = sorted(p.name for p in out.iterdir() if p.name != unfinished) if out.is_dir() else []
    if not (out / CONFIG_FILE).is_file() and held:
        shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
        raise EvalError(  # its table.md would be written over
            f"{out} holds {shown} and is no evaluation (no {CONFIG_FILE}); choose a new or empty --out"
        )
    records = read_records(out)  # a torn last line is no record, repaired below or not
    if (out / CONFIG_FILE).is_file():
        cached = read_config(out)
        differ = {k: (cached.get(k), v) for k, v in config.outcome_fields().items() if cached.get(k) != v}
        if differ and records:  # a run that recorded nothing (no reasoner started) is no cache
            what = ", ".join(
                f"{k}: cached {bounded_repr(a)}, now {bounded_repr(b)}" for k, (a, b) in differ.items()
            )
            raise EvalError(f"{out} holds episodes of another configuration ({what}); choose another --out")
    _drop_partial_line(out / EPISODES_FILE)
    return {tuple(r[k] for k in ("task", "scene", "trial")): r for r in records}


def _drop_partial_line(path: Path) -> None:
    """Cut a last line that a crash left without its newline, so appends start on a fresh line: in
    place, in one step, so a run stopped while it cuts keeps every whole line (rewriting the file lost
    them all)."""
    if path.is_file():
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            os.truncate(path, data.rfind(b"\n") + 1)


def read_records(out: Path, unread: list[int] | None = None) -> list[dict]:
    """Every complete record in ``out/episodes.jsonl`` (later duplicates win); the numbers of the
    non-blank lines that are no record are appended to ``unread`` when given."""
    path = out / EPISODES_FILE
    if not path.is_file():
        return []
    records: dict[tuple, dict] = {}
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        try:
            r = json_value(line)
        except ValueError:  # a torn line (or one nested past the parser's depth)
            r = None
        if _is_record(r):  # else a foreign or edited line: its episode runs again on a resume
            records[(r["task"], r["scene"], r["trial"])] = r
        elif unread is not None and line.strip():
            unread.append(number)
    return list(records.values())


#: What the tables read of an episode's record (a skipped episode's says why instead of its outcome).
_RECORD_FIELDS = {"task": str, "scene": int, "trial": int}
#: Mean reasoning words per decision step at most (a record's bound, far above any answer's length).
MAX_REASONING_WORDS = 1e9
#: An episode's penalty at most (a bound that keeps out infinity; ERR's penalties are small counts).
MAX_PENALTY = 1e9
_OUTCOME_FIELDS = {
    "success": bool,
    "progress": (int, float),
    "decision_steps": int,
    "reasoning_words": (int, float),
}


def _is_record(r) -> bool:
    def typed(fields: dict) -> bool:
        return all(
            isinstance(r.get(k), t) and (t is bool or not isinstance(r[k], bool)) for k, t in fields.items()
        )

    if not isinstance(r, dict) or not typed(_RECORD_FIELDS) or r["task"] not in TASK_NAMES:
        return False
    if not (0 <= r["scene"] < MAX_SCENES and 0 <= r["trial"] < MAX_TRIALS):
        return False
    if isinstance(r.get("skipped"), str):
        return True
    # bounded: a count past them (10**400 by hand) is no episode's, and overflows a table's mean
    penalty = r.get("penalty")  # ERR's, on packing (NPR and SSR count penalty == 0); None elsewhere
    return (
        typed(_OUTCOME_FIELDS)
        and (penalty is None or (is_kind(penalty, float) and 0.0 <= penalty <= MAX_PENALTY))
        and 0.0 <= r["progress"] <= 1.0
        and 0 <= r["decision_steps"] <= UINT32_MAX
        and 0.0 <= r["reasoning_words"] <= MAX_REASONING_WORDS
    )


def read_config(out: Path) -> dict:
    """The config an evaluation folder was run with; an EvalError when it has none that reads as one."""
    path = out / CONFIG_FILE
    if not path.is_file():
        raise EvalError(f"{out} is not an evaluation folder (no {CONFIG_FILE})")
    try:
        config = json_value(read_small_text(path))
    except (OSError, ValueError) as exc:
        raise EvalError(f"{path} does not read as an evaluation's config: {exc}") from None
    fields = {"reasoner": str, "suite": str, "tasks": list}
    if not isinstance(config, dict) or any(not isinstance(config.get(k), t) for k, t in fields.items()):
        raise EvalError(f"{path} is not an evaluation's config (an object with {', '.join(fields)})")
    if unknown := [t for t in config["tasks"] if not isinstance(t, str) or t not in TASK_NAMES]:
        raise EvalError(
            f"{path} is not an evaluation's config: its tasks name no task r3 has: "
            f"{bounded_repr(unknown[:3], 120)}"
        )
    return config


def config_of(out: Path) -> EvalConfig:
    """The :class:`EvalConfig` an evaluation folder was run with (its config.json, checked as
    ``r3 eval`` checks its options); an EvalError saying why when it reads as none."""
    config = read_config(out)
    names = [f.name for f in fields(EvalConfig)]
    try:
        return EvalConfig(**{k: tuple(v) if k == "tasks" else v for k, v in config.items() if k in names})
    except (EvalError, TypeError) as exc:  # TypeError: a count or budget that is no number
        raise EvalError(f"{out / CONFIG_FILE} is not an evaluation's config: {exc}") from None


# ------------------------------------------------------------------------------------ running
def evaluate(
    config: EvalConfig,
    out: Path,
    workers: int = 1,
    ray_address: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[dict]:
    """Run every job of ``config`` not yet cached in ``out``; return all its records in job order.

    ``workers`` episode workers, each with its own simulator and reasoner; ``ray_address`` None runs
    them as local processes, else as Ray actors of one CPU each: "local" starts a private instance
    of ``workers`` CPUs, "auto" or "HOST:PORT" joins a running cluster, "ray://HOST:10001" connects a
    client (the cluster's workers need this package importable). ``on_progress(done, total)`` is
    called at the start and after each episode.
    """
    if workers < 1:
        raise EvalError(f"workers must be >= 1, got {workers}")
    try:
        check_workers(workers, ray_address)
    except ValueError as exc:
        raise EvalError(str(exc)) from None
    if out.is_dir():  # before reading it: a resume mends a torn last line another run may be writing
        _hold(out)
    cached = cached_records(out, config)
    jobs = config.jobs()
    todo = [j for j in jobs if j.key not in cached]
    if todo:  # a bad spec or a GPU this machine lacks: one error before any worker starts or file is written
        from r3.reasoning.backends import check_backend

        try:
            check_backend(config.reasoner)
        except ValueError as exc:
            raise EvalError(f"reasoner {shown_url(config.reasoner)}: {exc}") from None
    out.mkdir(parents=True, exist_ok=True)
    _hold(out)
    write_text_atomically(out / CONFIG_FILE, json.dumps(asdict(config), indent=2) + "\n")  # a resume reads it
    done = len(jobs) - len(todo)
    if on_progress:
        on_progress(done, len(jobs))
    try:
        with (
            WorkerPool(workers, EpisodeWorker, (config,), ray_address) as pool,
            open(out / EPISODES_FILE, "a") as f,
        ):
            for _, record in pool.imap_unordered(_run_job, todo):
                f.write(json.dumps(record) + "\n")
                f.flush()
                cached[(record["task"], record["scene"], record["trial"])] = record
                done += 1
                if on_progress:
                    on_progress(done, len(jobs))
    except BackendError as exc:  # no outcome of an episode: not recorded, so a resume runs it again
        raise EvalError(
            f"reasoner {config.reasoner!r} failed: {' '.join(str(exc).split())}; stopped with "
            f"{done} of {len(jobs)} episodes recorded in {out / EPISODES_FILE} (the failed one is not: "
            "run again with the same --out to resume)"
        ) from None
    return grid_records(config, cached.values())


def _hold(out: Path) -> None:
    """One run at a time in ``out`` (two wrote every episode twice into one episodes.jsonl)."""
    try:
        hold_output(out, "an evaluation")
    except FileRefused as exc:
        raise EvalError(str(exc)) from None


def evaluation_records(out: Path, config: EvalConfig, unread: list[int] | None = None) -> list[dict]:
    """The episodes of ``config`` that ``out`` holds, as ``r3 eval`` reads them when it resumes
    (:func:`grid_records`); the lines that are no record go to ``unread`` (:func:`read_records`).
    Writes nothing."""
    return grid_records(config, read_records(out, unread))


def unread_note(out: Path, unread: list[int]) -> str:
    """What a reader says of the lines of ``out``'s episodes.jsonl that are no record (the first five)."""
    shown = ", ".join(map(str, unread[:5])) + (f" and {len(unread) - 5} more" if len(unread) > 5 else "")
    return (
        f"{len(unread)} line(s) of {out / EPISODES_FILE} are no episode record, not counted: line(s) {shown}"
    )


def grid_records(config: EvalConfig, records: Iterable[dict]) -> list[dict]:
    """The records of ``config``'s jobs, in job order: a record of another task, scene or trial (one
    added by hand, or left by an earlier run of more scenes or trials) is none of its episodes."""
    order = {task: i for i, task in enumerate(config.tasks)}
    chosen = [
        r
        for r in records
        if r["task"] in order and 0 <= r["scene"] < config.scenes and 0 <= r["trial"] < config.trials
    ]
    return sorted(chosen, key=lambda r: (order[r["task"]], r["scene"], r["trial"]))


def _run_job(worker: EpisodeWorker, job: Job) -> dict:
    return worker.run(job)


def completed(records: Iterable[dict]) -> list[dict]:
    """The records of episodes that ran (skipped scenes left out)."""
    return [r for r in records if "skipped" not in r]
