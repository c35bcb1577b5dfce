"""Turn rewards for the multi-turn interfaces (ERR's checkers), scored in the simulator.

One turn is scored from its decision-time snapshot: restore it exactly in a packing cell, parse the
completion with the interface's grammar, carry the action out through
:meth:`r3.packing_episode.PackingCell.carry_out` (the one way an answer acts on the cell, the graph's
packing sim node included), and read the task's checkers before and after. The named terms, each
unscaled (weights come from the config, and TRL logs every term as ``rewards/<term>/mean``):

- ``validity``: 0 for an answer that parses as exactly one action, -1 for one that does not (ZAP
  gives such turns a negative advantage); an invalid answer is never executed, so its other terms are
  0: nothing changed.
- ``progress``: the gain of ERR's progress check over the turn, :func:`turn_progress`: goal objects
  packed plus half a goal object while an unpacked goal object is held, over the goal objects. The
  half credit is what tells a good pick from a bad one, since a pick packs nothing by itself.
- ``penalty``: minus the change of ERR's penalty check
  (:meth:`~r3.tasks.packing.tasks.PackingTaskInstance.penalty`): picking up an item the goal does not
  name costs 0.5, putting anything in a wrong tray costs 1; undoing it earns the cost back.
- ``success``: 1 when the task's success check holds after the turn.

A turn's outcome is a pure function of (snapshot, canonical action): the cell runs with a fixed seed,
so outcomes are cached per that pair (paraphrases of one action, and the K samples of a group that
agree, run once) and can be computed on any worker. :class:`TurnSimulator` follows
:class:`r3.rewards.semantic.OutcomeSimulator`: one private cell, a :class:`r3.workers.WorkerPool` of
spawned processes (or Ray actors) for the misses of a batch, an LRU cache.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from r3.reasoning.parsing import ParsedResponse, parse_response
from r3.rewards.functions import RewardComposer, _column, completion_text

#: The terms of a turn reward, in log order.
TURN_TERMS = ("validity", "progress", "penalty", "success")
#: Weights when a config names none: every term as it is (ours; ERR's appendix gives none).
TURN_WEIGHTS = dict.fromkeys(TURN_TERMS, 1.0)
#: Seed of the cell's generator in every scored turn (grasp noise, table spots).
TURN_SEED = 0
#: Credit, in goal objects, for holding a goal object that is not packed yet (ERR's grasp bonus).
GRASP_CREDIT = 0.5


def turn_progress(instance, state) -> float:
    """ERR's progress check on the packing cell: (packed goal objects + :data:`GRASP_CREDIT` while an
    unpacked goal object is held) / goal objects."""
    packed = sum(instance.packed(state, i) for i in instance.targets)
    holding = state.held in instance.targets and not instance.packed(state, state.held)
    return (packed + GRASP_CREDIT * holding) / len(instance.targets)


@dataclass(frozen=True)
class TurnOutcome:
    """What one executed action did, read by ERR's checkers before and after."""

    progress_before: float
    progress_after: float
    penalty_before: float
    penalty_after: float
    success: bool
    result: str  # the result line the model would read next

    def terms(self) -> dict[str, float]:
        return {
            "validity": 0.0,
            "progress": self.progress_after - self.progress_before,
            "penalty": self.penalty_before - self.penalty_after,
            "success": float(self.success),
        }


#: The terms of an answer that does not parse: refused, nothing executed.
INVALID_TERMS = {"validity": -1.0, "progress": 0.0, "penalty": 0.0, "success": 0.0}


def snapshot_key(snapshot: bytes) -> bytes:
    return hashlib.blake2b(snapshot, digest_size=16).digest()


class TurnSimulator:
    """Scores actions from snapshots in one private packing cell (built on first use), with a cache per
    (snapshot, canonical action) and a pool of ``workers`` spawned processes for a batch's misses
    (``ray_address`` for Ray actors instead). Pickling drops the cell, pool and cache."""

    def __init__(
        self,
        interface: str = "semantic",
        workers: int = 0,
        ray_address: str | None = None,
        cache_size: int = 4096,
        seed: int = TURN_SEED,
    ):
        if interface != "semantic":
            raise ValueError(f"turn rewards score the semantic interface, not {interface!r}")
        if cache_size < 1:
            raise ValueError(f"cache_size must be >= 1, got {cache_size}")
        self.interface, self.workers, self.ray_address = interface, workers, ray_address
        self.cache_size, self.seed = cache_size, seed
        self.hits = self.misses = 0
        self._cell = None
        self._pool = None
        self._cache: OrderedDict = OrderedDict()

    def __getstate__(self):
        return {**self.__dict__, "_cell": None, "_pool": None, "_cache": OrderedDict()}

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    @property
    def hit_rate(self) -> float:
        asked = self.hits + self.misses
        return self.hits / asked if asked else 0.0

    def _get_cell(self):
        if self._cell is None:
            from r3.packing_episode import PackingCell  # MuJoCo only when needed

            self._cell = PackingCell.build()
        return self._cell

    def execute(self, snapshot: bytes, action: str) -> TurnOutcome:
        """One uncached turn: restore ``snapshot`` exactly, carry out the canonical ``action``."""
        cell = self._get_cell()
        cell.restore(snapshot)
        instance = cell.env.task_instance
        before = cell.env.state()
        done = cell.carry_out(self.interface, action, np.random.default_rng(self.seed))
        after = cell.env.state()
        return TurnOutcome(
            turn_progress(instance, before),
            turn_progress(instance, after),
            instance.penalty(before),
            instance.penalty(after),
            bool(instance.success(after)),
            done.outcome,
        )

    def outcomes(self, jobs: list[tuple[bytes, str]]) -> list[TurnOutcome]:
        """The outcome of each (snapshot, canonical action): cached ones from the cache, the distinct
        rest on the pool when ``workers`` > 1 (else here). Counts cache hits and misses per job."""
        keys = [(snapshot_key(s), a) for s, a in jobs]
        found: dict = {}
        missing: dict = {}
        for key, job in zip(keys, jobs):
            if key in found or key in missing:
                self.hits += 1
            elif key in self._cache:
                self.hits += 1
                self._cache.move_to_end(key)
                found[key] = self._cache[key]
            else:
                self.misses += 1
                missing[key] = job
        if missing:
            parallel = (self.workers > 1 or self.ray_address is not None) and len(missing) > 1
            if parallel:
                if self._pool is None:
                    from r3.workers import WorkerPool

                    self._pool = WorkerPool(
                        max(self.workers, 1),
                        _worker_simulator,
                        (self.interface, self.seed),
                        ray_address=self.ray_address,
                    )
                results = self._pool.map(_execute, list(missing.values()))
            else:
                results = [self.execute(*job) for job in missing.values()]
            for key, result in zip(missing, results):
                found[key] = self._cache[key] = result
                if len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return [found[key] for key in keys]

    def score(self, completions, snapshots, mode: str = "reason") -> list[dict[str, float]]:
        """Every term for each completion at its snapshot (bytes or a file path)."""
        from r3.rewards.semantic import load_snapshot

        parsed = [
            parse_response(completion_text(c), "packing", mode, interface=self.interface) for c in completions
        ]
        jobs, where = [], []
        for i, (p, snap) in enumerate(zip(parsed, snapshots)):
            if isinstance(p, ParsedResponse):
                if snap is None:
                    raise ValueError("a turn reward needs the 'snapshot' column")
                jobs.append((load_snapshot(snap), p.instruction_text))
                where.append(i)
        scores = [dict(INVALID_TERMS) for _ in completions]
        for i, outcome in zip(where, self.outcomes(jobs)):
            scores[i] = outcome.terms()
        return scores


def _worker_simulator(interface: str, seed: int) -> TurnSimulator:
    """A pool worker's simulator: the parent's settings, no cache of its own."""
    return TurnSimulator(interface, seed=seed, cache_size=1)


def _execute(simulator: TurnSimulator, job: tuple[bytes, str]) -> TurnOutcome:
    return simulator.execute(*job)


class TurnTerm:
    """One term of the turn reward as a TRL reward function; reads ``snapshot`` by name. The terms of
    one batch share their :class:`TurnSimulator`, so the first term runs the turns and the others read
    the cache."""

    def __init__(self, simulator: TurnSimulator, term: str, mode: str = "reason"):
        if term not in TURN_TERMS:
            raise ValueError(f"unknown turn term {term!r}; expected one of {TURN_TERMS}")
        self.simulator, self.term, self.mode, self.__name__ = simulator, term, mode, term

    def __call__(self, completions, **kwargs) -> list[float]:
        snapshots = _column(kwargs, "snapshot", len(completions))
        return [s[self.term] for s in self.simulator.score(completions, snapshots, self.mode)]


def turn_rewards(
    simulator: TurnSimulator | None = None, weights: dict[str, float] | None = None, mode: str = "reason"
) -> RewardComposer:
    """The turn reward as named terms (the configured subset of :data:`TURN_TERMS`)."""
    simulator = simulator or TurnSimulator()
    weights = dict(weights or TURN_WEIGHTS)
    return RewardComposer({k: TurnTerm(simulator, k, mode) for k in weights}, weights)
