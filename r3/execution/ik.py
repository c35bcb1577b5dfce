"""Inverse kinematics with MuJoCo's own Jacobians: damped least squares with a posture task.

Why not mink: it would add scipy, qpsolvers and a QP solver to the core for a 7-joint arm whose
only task here is one site pose; damped least squares on ``mj_jacSite`` converges in a few dozen
iterations (sub-millisecond each) and keeps the core dependency-free. Joint limits are enforced by
clamping every iterate; the posture task (pull towards the home pose in the Jacobian's null space)
keeps solutions away from the limits and repeatable.

The solver owns a private ``MjData``, so solving never moves the simulated robot.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from r3.execution.base import rotation_error
from r3.sim.offscreen import mujoco


@dataclass(frozen=True)
class IKSolution:
    q: np.ndarray
    position_error: float
    orientation_error: float
    converged: bool
    iterations: int


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
    #: costs ~0.25 s.
    random_restarts: int = 24

    def __post_init__(self):
        for name in ("damping", "max_step", "position_tolerance", "orientation_tolerance"):
            if not getattr(self, name) > 0:
                raise ValueError(f"IKConfig.{name} must be > 0, got {getattr(self, name)}")
        if self.max_iterations < 1 or self.random_restarts < 0:
            raise ValueError("IKConfig: max_iterations >= 1 and random_restarts >= 0 required")


class IKSolver:
    """Solves for the 7 arm joints that put ``site`` at a pose; other joints stay as in ``qpos``."""

    def __init__(self, model: mujoco.MjModel, joints: list[str], site: str, home, config: IKConfig | None = None):
        self.model = model
        self.data = mujoco.MjData(model)
        self.config = config or IKConfig()
        self.qadr = np.array([model.jnt_qposadr[model.joint(j).id] for j in joints])
        self.dadr = np.array([model.jnt_dofadr[model.joint(j).id] for j in joints])
        self.low = np.array([model.jnt_range[model.joint(j).id][0] for j in joints])
        self.high = np.array([model.jnt_range[model.joint(j).id][1] for j in joints])
        self.site = model.site(site).id
        self.home = np.asarray(home, dtype=float)
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
        """Best solution over the seeds (given ones, then home, then seeded random restarts);
        ``restarts=False`` tries the given seeds only (path tracking wants the nearby solution)."""
        rng = np.random.default_rng(0)  # restarts are part of the solver, not of the episode's randomness
        starts = [np.asarray(s, dtype=float) for s in seeds]
        if restarts or not starts:
            starts += [self.home] + [rng.uniform(self.low, self.high) for _ in range(self.config.random_restarts)]
        best = None
        for q0 in starts:
            sol = self._solve_from(np.asarray(position, float), np.asarray(rotation, float), qpos, q0)
            if sol.converged:
                return sol
            if best is None or sol.position_error + 0.1 * sol.orientation_error < (
                    best.position_error + 0.1 * best.orientation_error):
                best = sol
        return best

    def _solve_from(self, p_t, R_t, qpos, q0) -> IKSolution:
        cfg, m, d = self.config, self.model, self.data
        d.qpos[:] = qpos
        q = np.clip(q0, self.low, self.high)
        err_quat, cur_quat, err = np.empty(4), np.empty(4), np.empty(6)
        target_quat = np.empty(4)
        mujoco.mju_mat2Quat(target_quat, R_t.reshape(-1))
        lam2 = cfg.damping ** 2
        for it in range(cfg.max_iterations):
            d.qpos[self.qadr] = q
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            err[:3] = p_t - d.site_xpos[self.site]
            mujoco.mju_mat2Quat(cur_quat, d.site_xmat[self.site])
            mujoco.mju_subQuat(err_quat[:3], target_quat, cur_quat)  # body-frame rotation vector
            rot_world = d.site_xmat[self.site].reshape(3, 3) @ err_quat[:3]
            err[3:] = rot_world
            pos_e, rot_e = float(np.linalg.norm(err[:3])), float(np.linalg.norm(err[3:]))
            if pos_e < cfg.position_tolerance and rot_e < cfg.orientation_tolerance:
                return IKSolution(q.copy(), pos_e, rot_e, True, it)
            mujoco.mj_jacSite(m, d, self._jacp, self._jacr, self.site)
            J = np.vstack([self._jacp[:, self.dadr], self._jacr[:, self.dadr]])
            # Damping fades near the solution (fast final convergence), and so does the posture pull.
            JJt = J @ J.T + lam2 * min(1.0, 10 * pos_e + rot_e) * np.eye(6)
            dq = J.T @ np.linalg.solve(JJt, err)
            null = np.eye(len(q)) - J.T @ np.linalg.solve(JJt, J)
            dq += null @ (cfg.posture_gain * min(1.0, 20 * pos_e + 2 * rot_e) * (self.home - q))
            step = np.max(np.abs(dq))
            if step > cfg.max_step:
                dq *= cfg.max_step / step
            q = np.clip(q + dq, self.low, self.high)
        p, R = self.forward(q, qpos)
        return IKSolution(q, float(np.linalg.norm(p_t - p)), rotation_error(R_t, R), False, cfg.max_iterations)
