"""The simulator-verified semantic tier: execute both instructions and compare the outcomes.

R^3 asks a VLM to *imagine* whether two differently worded instructions end the same way. When a
state was recorded in our simulator we can instead restore it, let the low-level policy carry out
each instruction, and compare the final boards. The rubric's two conditions become:

1. the same block moved: the block with the largest displacement is the same in both rollouts,
   and it moved at least :data:`MOVED_THRESHOLD_M`. A rollout that moves no block (touch, arm
   moves, a push that misses) never matches, since the rubric asks for the same block moved;
2. the same final positions: every block ends within :data:`SEMANTIC_TOLERANCE_M` of its position
   in the other rollout (Euclidean, in the board plane; yaw is ignored).

Reverse instructions ("push A into B" / "push B into A") fail condition 1 by construction.

The policy runs noise-free by default (:data:`JUDGE_POLICY_CONFIG`) with a fixed seed: the judge
compares what the instructions *ask for*, and a noisy push would make the verdict depend on luck.

Rollouts run with MuJoCo's sleeping on (:class:`~r3.sim.language_table.env.LanguageTableEnv`'s
``sleep``): a push moves one or two of the eight blocks, and the resting ones then cost nothing.
That halves a rollout's time. Against the awake simulation, the final positions of the labelled
set's 160 rollouts differ by 0.8 mm (median; 6 mm at the 90th percentile, 23 mm at most) and the
moved block never does: as much as moving every block 0.1 mm before the rollout changes them
(1.8 / 5.5 / 24 mm), since a push amplifies small differences. The labelled set's agreement is the
same either way, and both outcomes of a verdict come from the same physics.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from r3.instructions.language_table import Instruction, format_instruction
from r3.lowlevel.pushing import PushingPolicyConfig, ScriptedPushingPolicy
from r3.tasks.language_table.board import BLOCKS

#: Largest per-block distance (m) between the two final boards that still counts as "the same
#: place": about two thirds of a block's footprint (circumscribed radius 0.022 m), well under the
#: 0.04 m push of "slightly", so a slight push and a full push never match each other.
SEMANTIC_TOLERANCE_M = 0.03
#: A block displaced less than this (m) did not move (contact jitter, a nudge by the pusher).
MOVED_THRESHOLD_M = 0.01
#: Seed of the policy's generator in every rollout, so a verdict is a function of its inputs.
POLICY_SEED = 0
#: The low-level policy as the judge runs it: its nominal behaviour, without injected mistakes.
JUDGE_POLICY_CONFIG = PushingPolicyConfig(action_noise_std=0.0, overshoot_std=0.0, sloppy_approach_prob=0.0)


@dataclass(frozen=True)
class Outcome:
    """Final block positions of one rollout (``(len(BLOCKS), 2)``, BLOCKS order) and what moved."""

    positions: np.ndarray
    moved: str | None
    displacement: float
    steps: int


#: The largest snapshot read (bytes). A simulator snapshot is a few kilobytes (Language Table's about
#: 3 KB, the packing cell's about 6 KB); anything near this is no snapshot, and reading it whole would
#: cost memory without limit (``--snapshot /dev/zero``).
MAX_SNAPSHOT_BYTES = 4 * 1024 * 1024


def load_snapshot(snapshot: bytes | str | os.PathLike) -> bytes:
    """Snapshot bytes from bytes or a file path (dataset columns and the CLI carry paths). Raises
    ValueError, in one line, for more than :data:`MAX_SNAPSHOT_BYTES` or a path that is not a regular
    file (a device, a FIFO, a folder): it is never read without a bound, nor waited on."""
    if isinstance(snapshot, (bytes, bytearray, memoryview)):
        if len(snapshot) > MAX_SNAPSHOT_BYTES:
            raise ValueError(f"a snapshot of {len(snapshot)} bytes: at most {MAX_SNAPSHOT_BYTES}")
        return bytes(snapshot)
    fd = os.open(snapshot, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not block the open
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValueError(f"snapshot {os.fsdecode(snapshot)!r} is not a regular file")
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_SNAPSHOT_BYTES + 1)
    if len(data) > MAX_SNAPSHOT_BYTES:
        raise ValueError(f"snapshot {os.fsdecode(snapshot)!r} is larger than {MAX_SNAPSHOT_BYTES} bytes")
    return data


class OutcomeSimulator:
    """Runs instructions from snapshots in one private env, created on first use and reused.

    Outcomes are cached per (snapshot, instruction): in GRPO the K candidates of one prompt share
    the snapshot and the reference, so the reference runs once per prompt, and repeated candidates
    (paraphrases parse to the same instruction) run once. :meth:`prefetch` runs the missing
    rollouts of a whole batch at once, on ``workers`` spawned processes when given (each with its
    own env); a rollout is a pure function of (snapshot, instruction), so where it runs does not
    change a verdict. Pickling drops the env, the pool and the cache (MuJoCo objects do not
    pickle); the copy builds its own on first use.
    """

    def __init__(
        self,
        tolerance_m: float = SEMANTIC_TOLERANCE_M,
        moved_threshold_m: float = MOVED_THRESHOLD_M,
        policy_config: PushingPolicyConfig = JUDGE_POLICY_CONFIG,
        seed: int = POLICY_SEED,
        cache_size: int = 4096,
        workers: int = 0,
        sleep: bool = True,
    ):
        if not tolerance_m > 0 or not moved_threshold_m > 0:
            raise ValueError(f"tolerances must be > 0, got {tolerance_m=} {moved_threshold_m=}")
        self.tolerance_m = tolerance_m
        self.moved_threshold_m = moved_threshold_m
        self.policy_config = policy_config
        self.seed = seed
        self.cache_size = cache_size
        self.workers = workers
        self.sleep = sleep
        self._env = None
        self._pool = None
        self._cache: OrderedDict = OrderedDict()

    def __getstate__(self):
        return {**self.__dict__, "_env": None, "_pool": None, "_cache": OrderedDict()}

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def _get_env(self):
        if self._env is None:
            from r3.sim.language_table.env import LanguageTableEnv  # MuJoCo only when needed

            self._env = LanguageTableEnv(task=None, render_mode=None, sleep=self.sleep)
        return self._env

    def outcome(self, snapshot: bytes, instruction: Instruction) -> Outcome:
        """Restore ``snapshot``, run the policy on ``instruction`` to completion, read the board."""
        key = _key(snapshot, instruction)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        return self._remember(key, self.rollout(snapshot, instruction))

    def prefetch(self, jobs: list[tuple[bytes, Instruction]]) -> int:
        """Run the rollouts of ``jobs`` that are not cached yet (on the pool when ``workers`` > 1).

        Returns how many rollouts ran. Afterwards :meth:`outcome` answers every job from the cache.
        """
        missing: dict = {}
        for snapshot, instruction in jobs:
            key = _key(snapshot, instruction)
            if key not in self._cache and key not in missing:
                missing[key] = (snapshot, instruction)
        if not missing:
            return 0
        if self.workers > 1 and len(missing) > 1:
            if self._pool is None:
                from r3.workers import WorkerPool

                self._pool = WorkerPool(
                    self.workers,
                    _worker_simulator,
                    (self.moved_threshold_m, self.policy_config, self.seed, self.sleep),
                )
            results = self._pool.map(_rollout, list(missing.values()))
        else:
            results = [self.rollout(*job) for job in missing.values()]
        for key, result in zip(missing, results):
            self._remember(key, result)
        return len(missing)

    def _remember(self, key, result: Outcome) -> Outcome:
        self._cache[key] = result
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return result

    def rollout(self, snapshot: bytes, instruction: Instruction) -> Outcome:
        """One uncached rollout: restore, run the policy to completion, measure what moved."""
        env = self._get_env()
        env.restore(snapshot)
        start = env.state()
        policy = ScriptedPushingPolicy(self.policy_config)
        policy.reset(instruction, start, np.random.default_rng(self.seed))
        steps = 0
        while (action := policy.act(env.state())) is not None:
            env.step(action)
            steps += 1
        positions = env.state().positions()
        moves = np.linalg.norm(positions - start.positions(), axis=1)
        i = int(np.argmax(moves))
        moved = BLOCKS[i] if moves[i] >= self.moved_threshold_m else None
        return Outcome(positions, moved, float(moves[i]), steps)

    def same_outcome(
        self, snapshot: bytes, candidate: Instruction, reference: Instruction
    ) -> tuple[bool, str]:
        """Whether both instructions end the same way from ``snapshot``, and why (see module doc)."""
        a, b = self.outcome(snapshot, candidate), self.outcome(snapshot, reference)
        for who, instr, out in (("candidate", candidate, a), ("reference", reference, b)):
            if out.moved is None:
                return False, f"the {who} '{format_instruction(instr)}' moves no block in the simulator"
        if a.moved != b.moved:
            return False, f"the candidate moves the {a.moved}, the reference moves the {b.moved}"
        worst, gap = _worst_gap(a, b)
        if gap > self.tolerance_m:
            return False, (
                f"both move the {a.moved}, but the {BLOCKS[worst]} ends {gap:.3f} m apart "
                f"(tolerance {self.tolerance_m:.3f} m)"
            )
        return True, (
            f"both move the {a.moved} and every block ends within {gap:.3f} m of the other "
            f"outcome (tolerance {self.tolerance_m:.3f} m)"
        )

    def agreement(self, snapshot: bytes, candidate: Instruction, reference: Instruction) -> float:
        """How far the candidate carries the board towards the reference's outcome, in [0, 1]: the
        semantic tier's two conditions made graded. 0 unless both move the same block; then
        ``1 - gap / push``, clipped at 0, where ``gap`` is the largest distance of a block between
        the two outcomes and ``push`` how far the reference moves its block. Doing nothing leaves
        ``gap == push``, so a short push that hedges between directions earns only its progress
        along the right one, and a push of the right block the wrong way earns nothing."""
        a, b = self.outcome(snapshot, candidate), self.outcome(snapshot, reference)
        if a.moved is None or a.moved != b.moved:
            return 0.0
        return max(0.0, 1.0 - _worst_gap(a, b)[1] / b.displacement)

    def progress_gain(self, snapshot: bytes, instruction: Instruction) -> float | None:
        """How much the instruction, carried out from ``snapshot``, raises the progress of the
        snapshot's task (in [-1, 1]; negative when it undoes work); None without a task. Computed
        here from the cached outcome, so rollouts for the judge alone never pay for it."""
        end = self.outcome(snapshot, instruction).positions
        env = self._get_env()
        env.restore(snapshot)
        task = env.task_instance
        if task is None:
            return None
        return task.progress_at(dict(zip(BLOCKS, end))) - task.progress(env.state())


def _worst_gap(a: Outcome, b: Outcome) -> tuple[int, float]:
    """The block that ends farthest apart in two outcomes (its index in BLOCKS) and that distance."""
    gaps = np.linalg.norm(a.positions - b.positions, axis=1)
    worst = int(np.argmax(gaps))
    return worst, float(gaps[worst])


def _key(snapshot: bytes, instruction: Instruction) -> tuple:
    return hashlib.blake2b(snapshot, digest_size=16).digest(), instruction


def _worker_simulator(
    moved_threshold_m: float, policy_config: PushingPolicyConfig, seed: int, sleep: bool
) -> OutcomeSimulator:
    """A pool worker's simulator: the parent's rollout settings, no cache of its own."""
    return OutcomeSimulator(
        moved_threshold_m=moved_threshold_m,
        policy_config=policy_config,
        seed=seed,
        cache_size=1,
        sleep=sleep,
    )


def _rollout(simulator: OutcomeSimulator, job: tuple[bytes, Instruction]) -> Outcome:
    return simulator.rollout(*job)
