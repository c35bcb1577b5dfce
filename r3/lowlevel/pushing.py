"""A scripted, language-conditioned pushing policy for the Language Table board.

It plays the role of R^3's frozen low-level policy: one :class:`Instruction` becomes at most
``steps`` (default 20, i.e. 2 s at 10 Hz) pusher displacements. It reads only the board state
(block and pusher positions in the board frame) and the constants of ``board.py``, never simulator
internals, so it can drive any executor that reports a :class:`BoardState`.

How a block is pushed: pick the block's target, go to a pre-push point just behind the block on
the side away from the target (around the block and its neighbours through one waypoint when the
straight path is blocked), then track a point behind the block that advances towards the target by
a proportional step. If the block slips off the pusher, it re-approaches.

It is imperfect on purpose (see :class:`PushingPolicyConfig`): Gaussian action noise, a random
over/undershoot of every push distance, and now and then a sloppy approach that ignores the
neighbouring blocks and may bump them. All randomness comes from the generator given to
:meth:`ScriptedPushingPolicy.reset`, so a policy run is a function of (instruction, states, rng).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from r3.instructions.language_table import Instruction, InstructionType
from r3.tasks.language_table.board import (
    BLOCK_RADIUS,
    BLOCKS,
    BOARD_HALF_EXTENTS,
    DIRECTIONS,
    LOCATIONS,
    PUSHER_RADIUS,
    BoardState,
)

#: Centre distance at which the pusher touches a block (nominal, from the board constants).
CONTACT = BLOCK_RADIUS + PUSHER_RADIUS
#: Where the pusher may go / where a block centre may be sent (inside the usable board).
_PUSHER_BOUND = np.array(BOARD_HALF_EXTENTS) - PUSHER_RADIUS
_BLOCK_BOUND = np.array(BOARD_HALF_EXTENTS) - BLOCK_RADIUS - 0.005
#: Nodes per obstacle ring in the approach planner.
_RING = 12
#: Instruction types that push a block (the other two only move the pusher).
_PUSH_TYPES = set(InstructionType) - {InstructionType.TOUCH, InstructionType.ARM_TO_LOCATION}


@dataclass
class PushingPolicyConfig:
    """Knobs of :class:`ScriptedPushingPolicy`; distances in metres. Validated on construction."""

    #: Control steps per instruction (R^3: an instruction every 20 steps at 10 Hz).
    steps: int = 20
    #: Largest pusher displacement per step; matches the env's action bound.
    max_step: float = 0.03
    #: Proportional gain on the block's remaining distance while pushing (per step).
    gain: float = 0.7
    #: Done when the moved block (or the pusher) is this close to its target; short moves use
    #: at most 30 % of their length instead, so "slightly" still moves something.
    tolerance: float = 0.015
    #: Free space left between pusher and block at the pre-push point.
    approach_gap: float = 0.008
    #: Extra margin kept around other blocks when planning the approach path.
    clearance: float = 0.012
    #: BLOCK_TO_SIDE: centre-to-centre distance from the reference block.
    side_offset: float = 0.065
    #: BLOCK_DIRECTION: push distance without an adverb.
    direction_distance: float = 0.10
    #: SEPARATE: centre distance to reach from the other block.
    separate_distance: float = 0.10
    #: BLOCK_INTO_BLOCK: aim for this centre distance (slightly inside contact, so they touch).
    into_distance: float = 0.04
    #: "slightly" / "a bit" multiply the commanded displacement by this (0.10 m -> 0.04 m).
    adverb_scale: float = 0.4
    #: Std of the Gaussian noise added to every action.
    action_noise_std: float = 0.002
    #: Std of the multiplicative error on each push distance: displacement * (1 + N(0, std)).
    overshoot_std: float = 0.1
    #: Probability that an instruction's approach ignores neighbouring blocks (may bump them).
    sloppy_approach_prob: float = 0.15

    def __post_init__(self):
        if not isinstance(self.steps, int) or isinstance(self.steps, bool) or self.steps < 1:
            raise ValueError(f"PushingPolicyConfig.steps must be an int >= 1, got {self.steps!r}")
        for f in fields(self):
            if f.name == "steps":
                continue
            value = getattr(self, f.name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"PushingPolicyConfig.{f.name} must be a finite number >= 0, got {value!r}")
        for name in (
            "max_step",
            "gain",
            "tolerance",
            "side_offset",
            "direction_distance",
            "separate_distance",
            "into_distance",
            "adverb_scale",
        ):
            if getattr(self, name) == 0:
                raise ValueError(f"PushingPolicyConfig.{name} must be > 0")
        for name in ("adverb_scale", "sloppy_approach_prob"):
            if getattr(self, name) > 1:
                raise ValueError(f"PushingPolicyConfig.{name} must be <= 1, got {getattr(self, name)}")
        if self.gain > 2:
            raise ValueError(f"PushingPolicyConfig.gain must be <= 2 (stable), got {self.gain}")


def _unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v / n if n > 1e-9 else np.array([0.0, 1.0])


def _limit(v: np.ndarray, max_norm: float) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v * (max_norm / n) if n > max_norm else v


class ScriptedPushingPolicy:
    """Follows one Language Table instruction by pushing with the cylindrical pusher.

    Usage: ``policy.reset(instruction, env.state(), rng)``, then
    ``while (a := policy.act(env.state())) is not None: env.step(a)``.

    ``reason`` says why the last ``act`` returned ``None``: "reached" or "budget".
    """

    def __init__(self, config: PushingPolicyConfig | None = None):
        self.config = config or PushingPolicyConfig()
        self.reason: str | None = None
        self._rng: np.random.Generator | None = None

    # ------------------------------------------------------------------ contract
    def reset(self, instruction: Instruction, state: BoardState, rng: np.random.Generator) -> None:
        """Start following ``instruction`` (already validated by its constructor) from ``state``."""
        cfg = self.config
        self._instr = instruction
        self._rng = rng
        self._steps = 0
        self.reason = None
        scale = max(0.0, 1.0 + cfg.overshoot_std * float(rng.standard_normal()))
        if instruction.adverb is not None:
            scale *= cfg.adverb_scale
        self._scale = scale
        self._sloppy = bool(rng.random() < cfg.sloppy_approach_prob)
        self._start_block = None if instruction.block is None else state.xy(instruction.block)
        self._start_pusher = np.array(state.pusher, dtype=float)
        # Directions fixed at the start, so the goal does not chase a moving block.
        if instruction.type in (InstructionType.BLOCK_INTO_BLOCK, InstructionType.SEPARATE):
            self._axis = _unit(self._start_block - state.xy(instruction.other))
        if instruction.type is InstructionType.SEPARATE:
            gap = float(np.linalg.norm(self._start_block - state.xy(instruction.other)))
            self._separate_push = self.config.separate_distance - gap
        if instruction.type is InstructionType.TOUCH:
            self._axis = _unit(self._start_block - self._start_pusher)
        self._waypoints: list[np.ndarray] | None = None  # None: not approaching
        self._pushing = False
        # Short moves ("slightly") get a proportionally tighter tolerance, so they still happen.
        self._tolerance = self.config.tolerance
        if instruction.type in _PUSH_TYPES and (target := self._block_target(state)) is not None:
            distance = float(np.linalg.norm(target - self._start_block))
            self._tolerance = max(0.003, min(self._tolerance, 0.3 * distance))

    def act(self, state: BoardState) -> np.ndarray | None:
        """Next pusher displacement (metres, shape (2,)), or None when the instruction is over."""
        if self._rng is None:
            raise RuntimeError("call reset() before act()")
        if self.reason is not None:
            return None
        if self._steps >= self.config.steps:
            self.reason = "budget"
            return None
        pusher = np.array(state.pusher, dtype=float)
        if self._instr.type in _PUSH_TYPES:
            move = self._push_block(state, pusher)
        else:
            move = self._move_pusher(state, pusher)
        if move is None:
            self.reason = "reached"
            return None
        self._steps += 1
        cfg = self.config
        move = _limit(move, cfg.max_step) + cfg.action_noise_std * self._rng.standard_normal(2)
        # The simulator refuses a command off the reachable board: stop at its edge instead.
        move = np.clip(pusher + move, -_PUSHER_BOUND, _PUSHER_BOUND) - pusher
        return np.clip(move, -cfg.max_step, cfg.max_step)

    # ------------------------------------------------------------------ goals
    def _block_target(self, state: BoardState) -> np.ndarray | None:
        """Where the instructed block should end up now (None: nothing to do)."""
        cfg, ins, b0 = self.config, self._instr, self._start_block
        t = ins.type
        if t is InstructionType.BLOCK_TO_LOCATION:
            goal = np.array(LOCATIONS[ins.location])
        elif t is InstructionType.BLOCK_TO_SIDE:
            goal = state.xy(ins.other) + cfg.side_offset * np.array(DIRECTIONS[ins.direction])
        elif t is InstructionType.BLOCK_INTO_BLOCK:
            goal = state.xy(ins.other) + cfg.into_distance * self._axis
        elif t is InstructionType.BLOCK_DIRECTION:
            goal = b0 + cfg.direction_distance * np.array(DIRECTIONS[ins.direction])
        else:  # SEPARATE: slide straight away from the other block
            if self._separate_push <= 0:
                return None
            goal = b0 + self._separate_push * self._axis
        target = b0 + self._scale * (goal - b0)
        return np.clip(target, -_BLOCK_BOUND, _BLOCK_BOUND)

    def _pusher_target(self, state: BoardState) -> np.ndarray:
        ins = self._instr
        if ins.type is InstructionType.TOUCH:
            # Stop a little inside nominal contact so the pusher really touches the block.
            return state.xy(ins.block) - (CONTACT - 0.004) * self._axis
        goal = np.array(LOCATIONS[ins.location])
        p0 = self._start_pusher
        return np.clip(p0 + self._scale * (goal - p0), -_PUSHER_BOUND, _PUSHER_BOUND)

    # ------------------------------------------------------------------ behaviours
    def _move_pusher(self, state: BoardState, pusher: np.ndarray) -> np.ndarray | None:
        target = self._pusher_target(state)
        if np.linalg.norm(target - pusher) < self._tolerance:
            return None
        if self._waypoints is None:
            self._waypoints = self._plan(state, pusher, target)
        return self._follow(pusher, target)

    def _push_block(self, state: BoardState, pusher: np.ndarray) -> np.ndarray | None:
        cfg = self.config
        target = self._block_target(state)
        block = state.xy(self._instr.block)
        if target is None or np.linalg.norm(target - block) < self._tolerance:
            return None
        u = _unit(target - block)
        advance = min(cfg.gain * float(np.linalg.norm(target - block)), cfg.max_step)
        push = block - u * (CONTACT - advance) - pusher  # track a point behind the block, advanced
        if self._pushing:
            rel = pusher - block
            lateral = abs(float(rel[0] * u[1] - rel[1] * u[0]))
            if lateral <= 0.5 * BLOCK_RADIUS and float(np.dot(rel, u)) <= -0.5 * CONTACT:
                return push
            self._pushing = False  # the block slipped away: approach again
        pre = np.clip(block - u * (CONTACT + cfg.approach_gap), -_PUSHER_BOUND, _PUSHER_BOUND)
        if np.linalg.norm(pre - pusher) < 0.006:
            self._pushing, self._waypoints = True, None
            return push
        if self._waypoints is None:
            self._waypoints = self._plan(state, pusher, pre)
        return self._follow(pusher, pre)

    def _follow(self, pusher: np.ndarray, goal: np.ndarray) -> np.ndarray:
        """Displacement of one full step along the path (waypoints, then ``goal``, which may move)."""
        while self._waypoints:
            w = self._waypoints[0]
            after = self._waypoints[1] if len(self._waypoints) > 1 else goal
            # Reached, or already past it along the next leg: drop it.
            if np.linalg.norm(w - pusher) < 0.006 or np.dot(pusher - w, after - w) > 0:
                self._waypoints.pop(0)
            else:
                break
        here, budget = pusher, self.config.max_step
        for point in [*self._waypoints, goal]:
            leg = float(np.linalg.norm(point - here))
            if leg >= budget:
                return here + (point - here) * (budget / leg) - pusher
            here, budget = point, budget - leg
        return goal - pusher

    def _plan(self, state: BoardState, start: np.ndarray, goal: np.ndarray) -> list[np.ndarray]:
        """Waypoints (goal excluded) of a short path from ``start`` to ``goal`` around the blocks.

        Shortest path on a small visibility graph whose nodes ring every obstacle disc. The
        instructed block is always an obstacle (only its approach corridor is left open);
        neighbours are obstacles unless this instruction drew a sloppy approach. A disc that
        already holds the start or the goal is shrunk to leave it out, since it cannot be avoided.
        """
        cfg = self.config
        centres, radii = [], []
        for name in BLOCKS:
            if name == self._instr.block and self._instr.type in _PUSH_TYPES:
                centres.append(state.xy(name))
                radii.append(CONTACT + 0.5 * cfg.approach_gap)
            elif not self._sloppy:
                centres.append(state.xy(name))
                radii.append(CONTACT + cfg.clearance)
        if not centres:
            return []
        c, r = np.array(centres), np.array(radii)
        r = np.minimum(
            r, np.minimum(np.linalg.norm(c - start, axis=1), np.linalg.norm(c - goal, axis=1)) - 1e-3
        )
        angles = np.linspace(0, 2 * np.pi, _RING, endpoint=False)
        ring = np.stack([np.cos(angles), np.sin(angles)], axis=1)
        rho = r / math.cos(math.pi / _RING) + 0.002  # chords between ring nodes stay outside the disc
        nodes = np.concatenate(
            [
                start[None],
                goal[None],
                np.clip(
                    (c[:, None] + rho[:, None, None] * ring).reshape(-1, 2), -_PUSHER_BOUND, _PUSHER_BOUND
                ),
            ]
        )
        cost = _edge_lengths(nodes, c, r)
        # Dijkstra on the dense graph (about 100 nodes).
        n = len(nodes)
        dist, prev, done = np.full(n, np.inf), np.full(n, -1), np.zeros(n, bool)
        dist[0] = 0.0
        while True:
            i = int(np.argmin(np.where(done, np.inf, dist)))
            if done[i] or not np.isfinite(dist[i]) or i == 1:
                break
            done[i] = True
            better = dist[i] + cost[i] < dist
            dist[better], prev[better] = dist[i] + cost[i][better], i
        if not np.isfinite(dist[1]):
            return []  # no clear path: go straight and accept the bumps
        path, i = [], int(prev[1])
        while i > 0:
            path.append(nodes[i])
            i = int(prev[i])
        return path[::-1]


def _edge_lengths(nodes: np.ndarray, centres: np.ndarray, radii: np.ndarray) -> np.ndarray:
    """(N, N) segment lengths between nodes, inf where a segment cuts an obstacle disc.

    Squared distances throughout (one square root per segment, none per segment and disc): the
    closest point of segment a->b to centre p is a + t (b - a), t = clip((p - a).(b - a) / |b - a|^2),
    and its squared distance |p - a|^2 + t (t |b - a|^2 - 2 (p - a).(b - a))."""
    ab = nodes[None, :, :] - nodes[:, None, :]  # (N, N, 2): a -> b
    ap = centres[None, :, :] - nodes[:, None, :]  # (N, M, 2): a -> p
    length2 = (ab * ab).sum(-1)  # (N, N)
    dot = ab @ ap.transpose(0, 2, 1)  # (N, N, M)
    t = np.clip(dot / np.maximum(length2, 1e-12)[..., None], 0.0, 1.0)
    gap2 = (ap * ap).sum(-1)[:, None, :] + t * (t * length2[..., None] - 2 * dot)
    return np.where((gap2 >= radii**2).all(-1), np.sqrt(length2), np.inf)
