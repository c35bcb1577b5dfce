"""Inverse kinematics with MuJoCo's own Jacobians: damped least squares with a posture task.

Why not mink: it would add scipy, qpsolvers and a QP solver to the core for a 7-joint arm whose
only task here is one site pose; damped least squares on ``mj_jacSite`` converges in a few dozen
iterations (sub-millisecond each) and keeps the core dependency-free. Joint limits are enforced by
clamping every iterate; the posture task (pull towards the home pose in the Jacobian's null space)
keeps solutions away from the limits and repeatable.

What makes a solve slow is a start that cannot converge: most such starts end with a wrist or base
joint pinned at a limit of its nearly full-turn range, turned the wrong way round. So a start stops
once its error stalls (it would spend all ``max_iterations`` otherwise), the next start is that
stalled configuration with the pinned joint turned a full turn the other way (clipped to its range),
and random restarts come only after.

The solver owns a private ``MjData``, so solving never moves the simulated robot.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from r3.sim.offscreen import mujoco


@dataclass(frozen=True)
class IKSolution:
    """The best start's joints and errors; ``iterations`` and ``starts`` are what the whole solve cost."""

    q: np.ndarray
    position_error: float
    orientation_error: float
    converged: bool
    iterations: int
    starts: int = 1


@dataclass(frozen=True)
class IKConfig:
    """Solver knobs, validated. Tolerances are the convergence test, far tighter than execution's."""

    damping: float = 0.02
    max_iterations: int = 200
    max_step: float = 0.25
    posture_gain: float = 0.01
    position_tolerance: float = 1.5e-3
    orientation_tolerance: float = 1e-2
    #: Seeded random starts after the given seeds and home: 24 reach every top-down pose over the
    #: table band and the trays (4 missed a third of those near the base); an unreachable target
    #: costs ~50 ms of CPU (every start stops once it stalls; ~0.2 s when each ran to max_iterations).
    random_restarts: int = 24
    #: A start stops when its error (position + 0.1 x orientation) has not fallen below
    #: ``stall_ratio`` of what it was ``stall_window`` iterations earlier.
    stall_window: int = 10
    stall_ratio: float = 0.9

    def __post_init__(self):
        for name in ("damping", "max_step", "position_tolerance", "orientation_tolerance"):
            if not getattr(self, name) > 0:
                raise ValueError(f"IKConfig.{name} must be > 0, got {getattr(self, name)}")
        if self.max_iterations < 1 or self.random_restarts < 0 or self.stall_window < 1:
            raise ValueError(
                "IKConfig: max_iterations >= 1, random_restarts >= 0 and stall_window >= 1 required"
            )
        if not 0 < self.stall_ratio <= 1:
            raise ValueError(f"IKConfig.stall_ratio must be in (0, 1], got {self.stall_ratio}")


class IKSolver:
    """Solves for the 7 arm joints that put ``site`` at a pose; other joints stay as in ``qpos``."""

    def __init__(
        self, model: mujoco.MjModel, joints: list[str], site: str, home, config: IKConfig | None = None
    ):
        self.model = model
        self.data = mujoco.MjData(model)
        self.config = config or IKConfig()
        self.qadr = np.array([model.jnt_qposadr[model.joint(j).id] for j in joints])
        self.dadr = np.array([model.jnt_dofadr[model.joint(j).id] for j in joints])
        self.low = np.array([model.jnt_range[model.joint(j).id][0] for j in joints])
        self.high = np.array([model.jnt_range[model.joint(j).id][1] for j in joints])
        self.site = model.site(site).id
        self.home = np.asarray(home, dtype=float)
        self._full_turn = self.high - self.low > 1.5 * np.pi
        self._jacp = np.zeros((3, model.nv))
        self._jacr = np.zeros((3, model.nv))

    def forward(self, q, qpos=None) -> tuple[np.ndarray, np.ndarray]:
        """Site position and rotation matrix at joints ``q``."""
        if qpos is not None:
            self.data.qpos[:] = qpos
        self.data.qpos[self.qadr] = q
        mujoco.mj_kinematics(self.model, self.data)
        return self.data.site_xpos[self.site].copy(), self.data.site_xmat[self.site].reshape(3, 3).copy()

    def solve(self, position, rotation, qpos, seeds=(), restarts: bool = True) -> IKSolution:
        """Best solution over the seeds (given ones, then home, then seeded random restarts; a start
        that stalls with a joint pinned at a limit is followed by its turned configuration);
        ``restarts=False`` tries the given seeds only (path tracking wants the nearby solution).
        A start equal to one already tried is skipped."""
        p_t, R_t = np.asarray(position, float), np.asarray(rotation, float)
        given = [np.asarray(s, dtype=float) for s in seeds]
        more = restarts or not given
        starts = [(q0, more) for q0 in given + ([self.home] if more else [])]
        randoms = self.config.random_restarts if more else 0
        rng = np.random.default_rng(0)  # restarts are part of the solver, not of the episode's randomness
        tried, best, iterations = [], None, 0
        while starts or randoms:
            if starts:
                q0, may_turn = starts.pop(0)
            else:
                q0, may_turn, randoms = rng.uniform(self.low, self.high), True, randoms - 1
            if any(np.array_equal(q0, t) for t in tried):
                continue
            tried.append(q0)
            sol = self._solve_from(p_t, R_t, qpos, q0)
            iterations += sol.iterations
            if sol.converged:
                return dataclasses.replace(sol, iterations=iterations, starts=len(tried))
            if best is None or sol.position_error + 0.1 * sol.orientation_error < (
                best.position_error + 0.1 * best.orientation_error
            ):
                best = sol
            turned = self._turned(sol.q) if may_turn else None
            if turned is not None:
                starts.insert(0, (turned, False))
        return dataclasses.replace(best, iterations=iterations, starts=len(tried))

    def _turned(self, q) -> np.ndarray | None:
        """``q`` with every joint that sits at a limit of a nearly full-turn range turned a full turn
        the other way (clipped to the range later); None when no such joint is at a limit."""
        at_high, at_low = self._full_turn & (q >= self.high), self._full_turn & (q <= self.low)
        if not (at_high.any() or at_low.any()):
            return None
        return q + 2 * np.pi * (at_low.astype(float) - at_high)

    def _solve_from(self, p_t, R_t, qpos, q0) -> IKSolution:
        cfg, m, d = self.config, self.model, self.data
        d.qpos[:] = qpos
        q = np.clip(q0, self.low, self.high)
        err_quat, cur_quat, err, target_quat = np.empty(4), np.empty(4), np.empty(6), np.empty(4)
        mujoco.mju_mat2Quat(target_quat, R_t.reshape(-1))
        lam2, eye6, eye_n = cfg.damping**2, np.eye(6), np.eye(len(q))
        score_before = math.inf
        for it in range(cfg.max_iterations + 1):
            d.qpos[self.qadr] = q
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            err[:3] = p_t - d.site_xpos[self.site]
            mujoco.mju_mat2Quat(cur_quat, d.site_xmat[self.site])
            mujoco.mju_subQuat(err_quat[:3], target_quat, cur_quat)  # body-frame rotation vector
            err[3:] = d.site_xmat[self.site].reshape(3, 3) @ err_quat[:3]
            pos_e, rot_e = float(np.linalg.norm(err[:3])), float(np.linalg.norm(err[3:]))
            if pos_e < cfg.position_tolerance and rot_e < cfg.orientation_tolerance:
                return IKSolution(q.copy(), pos_e, rot_e, True, it)
            checkpoint = it % cfg.stall_window == 0
            stalled = checkpoint and pos_e + 0.1 * rot_e > cfg.stall_ratio * score_before
            if stalled or it == cfg.max_iterations:
                return IKSolution(q.copy(), pos_e, rot_e, False, it)
            if checkpoint:
                score_before = pos_e + 0.1 * rot_e
            mujoco.mj_jacSite(m, d, self._jacp, self._jacr, self.site)
            J = np.vstack([self._jacp[:, self.dadr], self._jacr[:, self.dadr]])
            # Damping fades near the solution (fast final convergence), and so does the posture pull.
            JJt = J @ J.T + lam2 * min(1.0, 10 * pos_e + rot_e) * eye6
            dq = J.T @ np.linalg.solve(JJt, err)
            null = eye_n - J.T @ np.linalg.solve(JJt, J)
            dq += null @ (cfg.posture_gain * min(1.0, 20 * pos_e + 2 * rot_e) * (self.home - q))
            step = np.max(np.abs(dq))
            if step > cfg.max_step:
                dq *= cfg.max_step / step
            q = np.clip(q + dq, self.low, self.high)
