"""The ``sim`` executor: IK, a collision-checked joint-space trajectory, execution in ``PackingEnv``.

A pose target goes through the shared checks (:func:`r3.execution.base.check_target`), then IK
(:mod:`r3.execution.ik`; unreachable if it does not converge), then a collision check of the goal
configuration and of the straight joint-space path to it against the table, the trays and the items
the motion must not touch (the held item counts as part of the robot, except on a target whose
opening is no narrower than the fingers: that lets go of it). Only then does the arm move: a
smoothstep joint trajectory timed by the Panda's joint speed limits times the speed scaling, sent
to the env one control step at a time, then a short settle. The path follows the straight TCP
line (IK every 2 cm, finer where needed) so that retreat moves do not sweep sideways; a target
with an ``approach`` is planned backwards from the goal so that the final straight stretch into a
grasp or a release can be followed (see :meth:`SimExecutor._approach`). The whole motion is
planned, and checked, before its first control step; the same plan answers
:meth:`SimExecutor.reach_refusal` for a multi-leg motion. ``reached`` compares the measured TCP
pose with the target.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from r3.execution.base import (
    MoveResult,
    PoseTarget,
    WorkspaceBox,
    check_target,
    quat_to_mat,
    refused,
    rotation_error,
)
from r3.execution.ik import IKConfig, IKSolver
from r3.sim.offscreen import mujoco
from r3.sim.packing import scene
from r3.sim.packing.env import squeezes, weld_pose
from r3.tasks.packing import placement
from r3.tasks.packing.workcell import ITEM_SPECS


@dataclass(frozen=True)
class SimExecutorConfig:
    """Execution tolerances and timing, validated."""

    position_tolerance: float = 0.01
    orientation_tolerance: float = math.radians(3.0)
    #: Joint-space spacing (rad) of the collision checks along a path.
    check_resolution: float = 0.05
    #: Fraction of the Panda joint speed limits used at speed scaling 1.
    speed_fraction: float = 0.5
    min_duration: float = 0.3
    settle_steps: int = 6
    gripper_steps: int = 8
    #: Spacing (m) of the IK waypoints along a straight TCP line.
    cartesian_step: float = 0.02

    def __post_init__(self):
        if not (self.position_tolerance > 0 and self.orientation_tolerance > 0 and self.check_resolution > 0):
            raise ValueError("SimExecutorConfig: tolerances and check_resolution must be > 0")
        if not 0 < self.speed_fraction <= 1:
            raise ValueError(f"SimExecutorConfig.speed_fraction must be in (0, 1], got {self.speed_fraction}")


class SimExecutor:
    """Moves the arm of a :class:`~r3.sim.packing.env.PackingEnv`.

    ``on_step(distance_remaining)`` is called after every control step; returning False stops the
    motion (cancel) with reason "canceled". ``should_stop()``, when set, is asked before every control
    step of every motion, the gripper's included; True ends the motion there with reason "canceled"
    (a stopped arm takes no further step, whatever the caller tries next).
    """

    def __init__(
        self,
        env,
        box: WorkspaceBox | None = None,
        config: SimExecutorConfig | None = None,
        ik: IKConfig | None = None,
        on_step: Callable[[float], bool] | None = None,
    ):
        self.env = env
        self.box = box or WorkspaceBox()
        self.config = config or SimExecutorConfig()
        self.on_step = on_step
        self.should_stop: Callable[[], bool] | None = None
        self.solver = IKSolver(env.model, list(scene.ARM_JOINTS), "tcp", scene.HOME_Q, ik)
        self._check = mujoco.MjData(env.model)
        m = env.model
        self._robot = {g for g in range(m.ngeom) if env.geom_label.get(g) == "robot"}
        self._static = {
            g
            for g in range(m.ngeom)
            if env.geom_label.get(g, "").endswith("tray") or env.geom_label.get(g) == "table"
        }
        self._item_geoms = {
            name: {g for g in range(m.ngeom) if env.geom_label.get(g) == name} for name in ITEM_SPECS
        }

    # ------------------------------------------------------------------ the interface
    def move_to_pose(self, target: PoseTarget) -> MoveResult:
        why, plan = self._plan(target, *self._now(), self.carried())
        if why:
            return refused(why)
        steps = 0
        for stretch in plan:
            result = self._go(stretch.path, stretch.gripper, stretch.speed, stretch.pose)
            steps += result.control_steps
            if not result.reached:
                break
        return MoveResult(
            result.reached, result.position_error, result.orientation_error, result.reason, steps
        )

    def reach_refusal(self, path: Sequence[PoseTarget], grasped: str | None = None) -> str | None:
        """Why :meth:`move_to_pose` would refuse a leg of ``path``, or None: each leg planned as the
        motion would plan it (shared checks, IK, the TCP line, an approach, the collision checks),
        from the joints and the finger opening where the previous leg's plan ends. The item held
        now counts as carried until a leg opens the fingers (:func:`_holding`), and then, let go,
        as no obstacle of the later legs (it lies under the hand, not where the world shows it
        now); ``grasped``, the item the fingers close on once the first leg ends (a pick's way
        down), on every later leg, welded where it lies relative to the hand at the first leg's
        planned end (as the env welds it). Pure computation: the world is neither stepped nor
        changed."""
        (q, opening), carried, let_go = self._now(), self.carried(), None
        for k, target in enumerate(path):
            why, plan = self._plan(target, q, opening, carried, let_go)
            if why:
                return why
            carried, let_go = _holding(target, opening, carried, let_go)
            q, opening = plan[-1].path[-1], _opening_after(target, opening)
            if k == 0 and grasped is not None:
                carried = self._grasp(grasped, q)
        return None

    def target_refusal(self, target: PoseTarget) -> str | None:
        """The shared checks of ``target`` against this cell (``Executor.target_refusal``)."""
        return check_target(target, self.box, scene.MAX_OPENING)

    def _now(self) -> tuple[np.ndarray, float]:
        """The arm's joints and the finger opening as they are."""
        qpos = self.env.data.qpos
        return qpos[self.env.arm_qpos].copy(), float(qpos[self.env.finger_qpos].sum())

    def carried(self) -> Carried | None:
        """The item the hand holds now, at its weld's pose; None when it holds nothing."""
        item = self.env.state().held
        if item is None:
            return None
        eq = self.env.weld[item]
        return Carried(item, self.env.model.eq_data[eq, 3:6].copy(), self.env.model.eq_data[eq, 6:10].copy())

    def _grasp(self, item: str, q: np.ndarray) -> Carried:
        """``item`` as a grasp with the arm at joints ``q`` would weld it (the env's rule): where it
        lies now, but centred between the fingers, which push it there as they close (they slide
        along the hand's y axis, coupled)."""
        env, d = self.env, self._check
        d.qpos[:] = env.data.qpos
        d.qpos[env.arm_qpos] = q
        mujoco.mj_kinematics(env.model, d)
        body = env.item_body[item]
        pos, quat = weld_pose(
            d.xpos[env.hand_body], d.xquat[env.hand_body], env.data.xpos[body], env.data.xquat[body]
        )
        pos[1] = 0.0
        return Carried(item, pos, quat)

    def _plan(
        self,
        target: PoseTarget,
        q_start: np.ndarray,
        opening: float,
        carried: Carried | None,
        let_go: str | None = None,
    ) -> tuple[str | None, list[_Stretch]]:
        """The refusal reason of ``target`` from joints ``q_start`` and finger ``opening`` with the
        hand ``carried`` item (``let_go``: the item an earlier leg let go, under the hand), or (None,
        the stretches that reach it): the one rule of :meth:`move_to_pose` and
        :meth:`reach_refusal`. A stretch that moves the fingers is checked with them at the wider of
        its two openings, against the table, the trays and the items it must not touch
        (:meth:`_bystanders`)."""
        why = self.target_refusal(target)
        if why:
            return why, []
        carried, let_go = _holding(target, opening, carried, let_go)
        R = quat_to_mat(target.quat)
        p_goal = np.asarray(target.position, float)
        sol = self.solver.solve(p_goal, R, self.env.data.qpos, seeds=[q_start])
        if not sol.converged:
            return (
                f"unreachable: best IK solution misses by {sol.position_error * 1000:.1f} mm and "
                f"{math.degrees(sol.orientation_error):.1f} deg"
            ), []
        if target.approach > 0:
            return self._approach(target, p_goal, R, sol.q, q_start, opening, carried, let_go)
        path = self._cartesian_path(q_start, p_goal, target.quat, sol.q)
        hit = self.collision(
            q_start,
            path,
            self._bystanders(p_goal, carried, let_go),
            max(opening, _opening_after(target, opening)),
            carried,
        )
        if hit:
            return f"collision: {hit}", []
        return None, [_Stretch(path, target.gripper, target.speed, (p_goal, R))]

    def _approach_starts(self, target: PoseTarget, p_goal, R) -> Iterator[np.ndarray]:
        """Where an approach may start: ``approach`` back from the goal along the tool axis, then up
        to 20 cm further back while inside the workspace (see :meth:`_approach`)."""
        for extra in (0.0, 0.1, 0.2):
            p_pre = p_goal - (target.approach + extra) * R[:, 2]
            if extra and self.box.violation(p_pre):
                return
            yield p_pre

    def _approach(
        self,
        target: PoseTarget,
        p_goal,
        R,
        q_goal,
        q_start,
        opening: float,
        carried: Carried | None,
        let_go: str | None,
    ) -> tuple[str | None, list[_Stretch]]:
        """Straight along the TCP line to the approach's start, then straight in. When the arm
        cannot follow the approach from the configuration it arrives in, the approach is planned
        backwards from the goal (MoveIt Task Constructor's way; other goal configurations from
        seeded restarts too) and the arm changes configuration at its start first, in joint space,
        refused if that would touch any item, tray or the table; where it would, the change is made
        higher up (a longer approach, up to 20 cm more)."""
        quat = np.asarray(target.quat, float)
        why = _no_approach(target)
        opened = _opening_after(target, opening)  # from the end of the first stretch on
        for p_pre in self._approach_starts(target, p_goal, R):
            sol = self.solver.solve(p_pre, R, self.env.data.qpos, seeds=[q_start])
            if not sol.converged:
                continue
            to_start = self._cartesian_path(q_start, p_pre, target.quat, sol.q)
            hit = self.collision(q_start, to_start, opening=max(opening, opened), carried=carried)
            if hit:
                return f"collision: {hit}", []
            plan = [_Stretch(to_start, target.gripper, 1.0, (p_pre, R))]
            q_pre = to_start[-1]
            path = self._line(q_pre, p_pre, p_goal, quat, quat)
            if path is None:
                back, q_end = self._backwards(p_goal, p_pre, R, quat, q_goal)
                if back is None:
                    continue
                hit = self.collision(q_pre, [back[-1]], set(ITEM_SPECS), opened, carried)
                if hit:
                    why = f"collision: {hit}"
                    continue
                plan.append(_Stretch([back[-1]], None, 1.0, None))
                q_pre, path = back[-1], [*back[-2::-1], q_end]
            hit = self.collision(q_pre, path, self._bystanders(p_goal, carried, let_go), opened, carried)
            if hit:
                return f"collision: {hit}", []
            return None, [*plan, _Stretch(path, None, target.speed, (p_goal, R))]
        return why, []

    def _bystanders(self, p_goal, carried: Carried | None, let_go: str | None) -> set[str]:
        """Items a motion to ``p_goal`` must not touch: all but the ``carried`` one, the one ``let_go``
        by an earlier leg of the plan (it lies under the hand then, not where the world shows it now)
        and the ones whose footprint holds the goal (what a grasp closes on); not an item beside the
        goal whose footprint's circle covers it (a standing cracker box beside a release)."""
        held = None if carried is None else carried.item
        return {
            name
            for name, item in self.env.state().items.items()
            if name not in (held, let_go)
            and not placement.overlaps(
                placement.footprint(name, *item.pos[:2], item.yaw), (*p_goal[:2], 0, 0), 0
            )
        }

    def _backwards(self, p_goal, p_pre, R, quat, q_goal) -> tuple[list[np.ndarray] | None, np.ndarray]:
        """The approach line traced from the goal back to its start, from ``q_goal`` or from other
        goal configurations (seeded restarts); (None, q_goal) when none can follow it."""
        back = self._line(q_goal, p_goal, p_pre, quat, quat)
        rng = np.random.default_rng(0)
        for _ in range(self.solver.config.random_restarts):
            if back is not None:
                break
            alt = self.solver.solve(
                p_goal,
                R,
                self.env.data.qpos,
                seeds=[rng.uniform(self.solver.low, self.solver.high)],
                restarts=False,
            )
            if alt.converged:
                q_goal, back = alt.q, self._line(alt.q, p_goal, p_pre, quat, quat)
        return back, q_goal

    def _cartesian_path(self, q_start, p_goal, quat_goal, q_goal) -> list[np.ndarray]:
        """Joint waypoints along the straight TCP line from where joints ``q_start`` put the TCP
        (orientation slerped); a straight line in joint space to ``q_goal`` when IK cannot follow it."""
        p0, R0 = self.solver.forward(q_start, self.env.data.qpos)
        q0 = np.empty(4)
        mujoco.mju_mat2Quat(q0, R0.reshape(-1))
        q1 = np.asarray(quat_goal, float)
        if np.dot(q0, q1) < 0:
            q1 = -q1
        return self._line(q_start, p0, p_goal, q0, q1) or [q_goal]

    def _line(self, q_start, p_start, p_end, quat_start, quat_end) -> list[np.ndarray] | None:
        """Joint waypoints from ``q_start`` (at ``p_start``) along the straight TCP line to ``p_end``,
        orientation slerped, every ``cartesian_step``; a step whose IK does not follow from the
        previous waypoint is halved (near a singularity 2 cm can need large joint motion) down to
        1/16 of it. None when even that fails."""
        n = max(1, math.ceil(np.linalg.norm(p_end - p_start) / self.config.cartesian_step))
        path, q_prev, t_prev, dt = [], q_start, 0.0, 1.0 / n
        while t_prev < 1.0 - 1e-9:
            t = min(1.0, t_prev + dt)
            sol = self.solver.solve(
                p_start + t * (p_end - p_start),
                quat_to_mat(_slerp(quat_start, quat_end, t)),
                self.env.data.qpos,
                seeds=[q_prev],
                restarts=False,
            )
            if sol.converged and np.max(np.abs(sol.q - q_prev)) <= 0.5:
                path.append(sol.q)
                q_prev, t_prev, dt = sol.q, t, min(1.0 / n, 2 * dt)
            elif dt > 1.0 / (16 * n):
                dt /= 2
            else:
                return None
        return path

    def move_to_joints(self, q, gripper: float | None = None, speed: float = 1.0) -> MoveResult:
        q = np.asarray(q, dtype=float)
        if q.shape != (7,) or not np.all(np.isfinite(q)):
            return refused("joint target must be 7 finite numbers")
        low, high = self.solver.low, self.solver.high
        outside = np.flatnonzero((q < low) | (q > high))
        if outside.size:
            return refused(f"joint target outside the limits of joints {[int(i) + 1 for i in outside]}")
        if gripper is not None and not (math.isfinite(gripper) and 0 <= gripper <= scene.MAX_OPENING):
            return refused(f"gripper opening {gripper} is outside [0, {scene.MAX_OPENING}] m")
        q_now = self.env.data.qpos[self.env.arm_qpos].copy()
        hit = self.collision(q_now, [q], carried=self.carried())
        if hit:
            return refused(f"collision: {hit}")
        return self._go([q], gripper, speed, None)

    def set_gripper(self, opening: float) -> MoveResult:
        if not (math.isfinite(opening) and 0 <= opening <= scene.MAX_OPENING):
            return refused(f"gripper opening {opening} is outside [0, {scene.MAX_OPENING}] m")
        start = self.env.joint_targets
        n = self.config.gripper_steps
        for k in range(n):
            if self.should_stop is not None and self.should_stop():
                return MoveResult(False, math.nan, math.nan, "canceled", k)
            cmd = start.copy()
            cmd[7] = start[7] + (k + 1) / n * (opening - start[7])
            self.env.step(cmd)
            if self.on_step is not None and not self.on_step(0.0):
                return MoveResult(False, math.nan, math.nan, "canceled", k + 1)
        return MoveResult(True, 0.0, 0.0, "reached", n)

    # ------------------------------------------------------------------ internals
    def collision(
        self,
        q_start,
        path: list[np.ndarray],
        items: set[str] = frozenset(),
        opening: float | None = None,
        carried: Carried | None = None,
    ) -> str | None:
        """The first contact of the robot (or the ``carried`` item, moving with the hand) with the
        table, a tray or one of ``items`` along the joint path (``q_start``, then ``path``'s
        waypoints, straight between them; the fingers at ``opening``, or as they are; the world
        otherwise as it is now), described; None when clear."""
        d, m = self._check, self.env.model
        samples, q_prev = [], q_start
        for q_next in path:
            k_max = max(1, math.ceil(np.max(np.abs(q_next - q_prev)) / self.config.check_resolution))
            samples += [q_prev + k / k_max * (q_next - q_prev) for k in range(1, k_max + 1)]
            q_prev = q_next
        n = len(samples)
        held = None if carried is None else carried.item
        # the carried item moves with the hand: part of the robot, never its own obstacle (it touches
        # the fingers, so a check that counted it refused every motion it was asked about)
        obstacles = set(self._static).union(*(self._item_geoms[i] for i in items if i != held))
        robot = set(self._robot)
        if held is not None:
            robot.add(m.geom(scene.body_name(held)).id)
        d.qpos[:] = self.env.data.qpos
        if opening is not None:
            d.qpos[self.env.finger_qpos] = opening / 2
        for k, q in enumerate(samples, start=1):
            d.qpos[self.env.arm_qpos] = q
            if carried is not None:
                self._carry(d, carried)
            mujoco.mj_fwdPosition(m, d)
            for c in d.contact[: d.ncon]:
                pair = {c.geom1, c.geom2}
                hit_static = pair & obstacles
                hit_robot = pair & robot
                if hit_static and hit_robot and c.dist < 0:
                    what = m.geom(next(iter(hit_robot))).name
                    where = self.env.geom_label[next(iter(hit_static))]
                    return f"{what} would hit the {where} at {k / n:.0%} of the path"
        return None

    def _carry(self, d: mujoco.MjData, carried: Carried) -> None:
        """Move the ``carried`` item with the hand in the check data (the weld is not solved in
        kinematics)."""
        env, m = self.env, self.env.model
        mujoco.mj_kinematics(m, d)
        hand_pos, hand_quat = d.xpos[env.hand_body], d.xquat[env.hand_body]
        pos, quat = np.empty(3), np.empty(4)
        mujoco.mju_rotVecQuat(pos, carried.pos, hand_quat)
        mujoco.mju_mulQuat(quat, hand_quat, carried.quat)
        a = env.item_qpos[carried.item]
        d.qpos[a : a + 3] = hand_pos + pos
        d.qpos[a + 3 : a + 7] = quat

    def _go(self, path: list[np.ndarray], gripper: float | None, speed: float, pose) -> MoveResult:
        """Sends the joint path (checked already) to the env, timed; reached or not at ``pose``."""
        env, cfg = self.env, self.config
        start = env.joint_targets
        knots = np.array([start[:7]] + list(path))
        q_goal = knots[-1]
        opening = start[7] if gripper is None else float(gripper)
        rates = np.array(scene.JOINT_SPEED) * cfg.speed_fraction * speed
        travel = np.sum(np.abs(np.diff(knots, axis=0)), axis=0)
        duration = max(cfg.min_duration, float(np.max(travel / rates)))
        n = math.ceil(duration / scene.CONTROL_DT)
        steps = 0
        for k in range(1, n + cfg.settle_steps + 1):
            t = min(1.0, k / n)
            s = t * t * (3 - 2 * t)  # smoothstep timing along the piecewise-linear joint path
            x = s * (len(knots) - 1)
            i = min(int(x), len(knots) - 2)
            q = knots[i] + (x - i) * (knots[i + 1] - knots[i])
            cmd = np.concatenate([q, [start[7] + s * (opening - start[7])]])
            if self.should_stop is not None and self.should_stop():
                return MoveResult(False, math.nan, math.nan, "canceled", steps)
            env.step(cmd)
            steps += 1
            if self.on_step is not None:
                remaining = 0.0 if pose is None else float(np.linalg.norm(pose[0] - env.tcp_pose()[0]))
                if not self.on_step(remaining):
                    return MoveResult(False, math.nan, math.nan, "canceled", steps)
        if pose is None:
            err = float(np.max(np.abs(env.data.qpos[env.arm_qpos] - q_goal)))
            ok = err < 0.01
            return MoveResult(
                ok, 0.0, err, "reached" if ok else f"not_reached: joint error {err:.3f} rad", steps
            )
        p, R = env.tcp_pose()
        pos_err, rot_err = float(np.linalg.norm(p - pose[0])), rotation_error(pose[1], R)
        ok = pos_err <= cfg.position_tolerance and rot_err <= cfg.orientation_tolerance
        reason = (
            "reached"
            if ok
            else (
                f"not_reached: ended {pos_err * 1000:.1f} mm and "
                f"{math.degrees(rot_err):.1f} deg from the target (blocked?)"
            )
        )
        return MoveResult(ok, pos_err, rot_err, reason, steps)


@dataclass(frozen=True)
class Carried:
    """An item that moves with the hand in a plan: its name and its pose in the hand's frame
    (position, quaternion), the weld's."""

    item: str
    pos: np.ndarray
    quat: np.ndarray


@dataclass(frozen=True)
class _Stretch:
    """One joint-space stretch of a planned motion: its waypoints (collision-checked), the gripper
    opening to reach along it (None: unchanged), its speed scaling and the TCP pose (position,
    rotation) it ends at (None: checked in joint space)."""

    path: list[np.ndarray]
    gripper: float | None
    speed: float
    pose: tuple[np.ndarray, np.ndarray] | None


def _opening_after(target: PoseTarget, opening: float) -> float:
    """The finger opening once a motion to ``target`` from fingers at ``opening`` has begun."""
    return opening if target.gripper is None else target.gripper


def _holding(
    target: PoseTarget, opening: float, carried: Carried | None, let_go: str | None
) -> tuple[Carried | None, str | None]:
    """What the hand carries on a motion to ``target`` from fingers at ``opening``, and the item let
    go: a motion whose finger command stops squeezing the fingers at its start lets go of what they
    hold (the env's rule, :func:`squeezes`), so it carries nothing."""
    if carried is not None and target.gripper is not None and not squeezes(target.gripper, opening):
        return None, carried.item
    return carried, let_go


def _no_approach(target: PoseTarget) -> str:
    return f"unreachable: no straight {target.approach * 100:.0f} cm approach to the target"


def _slerp(q0: np.ndarray, q1: np.ndarray, t: float) -> np.ndarray:
    dot = float(np.clip(np.dot(q0, q1), -1.0, 1.0))
    if dot > 0.9995:
        q = q0 + t * (q1 - q0)
        return q / np.linalg.norm(q)
    theta = math.acos(dot)
    return (math.sin((1 - t) * theta) * q0 + math.sin(t * theta) * q1) / math.sin(theta)
