"""The executor contract: targets, results, the workspace box and the checks every backend shares.

Refusal order (cheapest first, each with its own reason): non-finite numbers -> bad quaternion ->
outside the workspace box -> gripper opening out of range -> (backend) unreachable -> (backend)
colliding. A refused target moves nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from r3.plugins import Registry, built_as, having


@dataclass(frozen=True)
class PoseTarget:
    """Tool-centre-point target in the robot base frame: ``position`` (m), ``quat`` (w, x, y, z),
    ``gripper`` opening in metres (None: leave as is), ``speed`` scaling in (0, 1].

    ``approach`` > 0 (m): arrive along the tool axis, straight, from this far back (the pre-grasp
    pose of a pick or the pre-release pose of a place); ``speed`` applies to that last straight
    stretch and the move to its start runs at full speed. The backend plans the stretch backwards
    from the target, so that the arm starts it in a configuration that can follow it.
    """

    position: tuple[float, float, float]
    quat: tuple[float, float, float, float]
    gripper: float | None = None
    speed: float = 1.0
    approach: float = 0.0


@dataclass(frozen=True)
class MoveResult:
    """``reason``: "reached", "refused: <why>", "not_reached: <why>" or "error: <why>"."""

    reached: bool
    position_error: float
    orientation_error: float
    reason: str
    control_steps: int = 0

    @property
    def refused(self) -> bool:
        return self.reason.startswith("refused")


def refused(why: str) -> MoveResult:
    return MoveResult(False, math.nan, math.nan, f"refused: {why}")


@dataclass(frozen=True)
class WorkspaceBox:
    """Axis-aligned box (robot base frame) that end-effector targets must lie in; validated."""

    low: tuple[float, float, float] = (0.15, -0.55, 0.005)
    high: tuple[float, float, float] = (0.85, 0.55, 0.75)

    def __post_init__(self):
        if len(self.low) != 3 or len(self.high) != 3:
            raise ValueError("low and high must have three components")
        for axis, lo, hi in zip("xyz", self.low, self.high):
            if not lo < hi:
                raise ValueError(f"workspace {axis}: low {lo} must be below high {hi}")

    def violation(self, p) -> str | None:
        """Why ``p`` is outside (naming the axis and bound), or None when inside."""
        for axis, v, lo, hi in zip("xyz", p, self.low, self.high):
            if v < lo:
                return f"{axis}={told_apart(v, lo, 3)} m is below the workspace bound {lo:.3f} m"
            if v > hi:
                return f"{axis}={told_apart(v, hi, 3)} m is above the workspace bound {hi:.3f} m"
        return None


def told_apart(value: float, bound: float, decimals: int) -> str:
    """``value`` with ``decimals`` decimals, or as many more as tell it from the ``bound`` it breaks: a
    refusal never reads "x=0.150 m is below the workspace bound 0.150 m" (x = 0.1499999); a value a
    thousand times past any bound in four significant digits (1e300 had 301)."""
    if abs(value) >= 1000 * max(abs(bound), 1.0):
        return f"{value:.4g}"
    while decimals < 17 and f"{value:.{decimals}f}" == f"{bound:.{decimals}f}":
        decimals += 1
    return f"{value:.{decimals}f}"


#: Slowest speed scaling a motion may ask for: its duration grows as one over the scaling, and at
#: 1e-9 a half-radian move would have taken nine billion control steps with the arm's lock held.
MIN_SPEED = 0.01


def check_target(target: PoseTarget, box: WorkspaceBox, max_opening: float) -> str | None:
    """The shared refusal checks; returns the reason, or None when the target may be planned."""
    numbers = [*target.position, *target.quat, target.speed, target.approach] + (
        [] if target.gripper is None else [target.gripper]
    )
    if len(target.position) != 3 or len(target.quat) != 4:
        return "position needs 3 and quat 4 components"
    if not all(math.isfinite(float(v)) for v in numbers):
        return "target contains NaN or Inf"
    norm = float(np.linalg.norm(target.quat))
    if abs(norm - 1.0) > 1e-3:
        return f"orientation quaternion has norm {norm:.4f}, not 1"
    why = box.violation(target.position)
    if why:
        return f"outside the workspace: {why}"
    if target.gripper is not None and not 0.0 <= target.gripper <= max_opening + 1e-9:
        return f"gripper opening {target.gripper:.4f} m is outside [0, {max_opening}] m"
    if not MIN_SPEED <= target.speed <= 1.0:
        return f"speed scaling {target.speed} is outside [{MIN_SPEED}, 1]"
    if not 0.0 <= target.approach <= 0.3:
        return f"approach distance {target.approach} m is outside [0, 0.3] m"
    R = quat_to_mat(target.quat)
    why = box.violation(np.asarray(target.position, float) - target.approach * R[:, 2])
    if target.approach > 0 and why:
        return f"the approach starts outside the workspace: {why}"
    return None


def rotation_error(R_target: np.ndarray, R: np.ndarray) -> float:
    """Angle (rad) of the rotation taking ``R`` to ``R_target``."""
    c = (np.trace(R_target @ R.T) - 1.0) / 2.0
    return float(np.arccos(np.clip(c, -1.0, 1.0)))


def quat_to_mat(q) -> np.ndarray:
    w, x, y, z = (float(v) for v in q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def top_down_quat(closing_yaw: float) -> tuple[float, float, float, float]:
    """Gripper pointing straight down (TCP z = world -z) with the fingers closing along the world
    direction at angle ``closing_yaw`` (the TCP's y axis).

    >>> np.round(quat_to_mat(top_down_quat(math.pi / 2)), 6).tolist()
    [[-1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, -1.0]]
    """
    # A half turn about a horizontal axis at angle phi sends the y axis to angle 2 phi - pi/2.
    phi = (closing_yaw + math.pi / 2) / 2
    return (0.0, math.cos(phi), math.sin(phi), 0.0)


class Executor(Protocol):
    """A motion backend. ``move_to_pose`` refuses or moves; ``reach_refusal`` tells, moving nothing,
    why ``move_to_pose`` would refuse a leg of a multi-leg motion (so that the motion is refused
    before its first leg moves, not after), told by ``grasped`` which item the fingers close on once
    the first leg ends (a pick), so that a backend that checks what the hand carries checks it on
    the later legs (and a leg whose ``gripper`` opening is no narrower than the fingers, a place's
    release, lets go of what the hand carries: the legs after it are checked without it);
    ``target_refusal`` is its first part, the shared checks
    (:func:`check_target`) against this arm's workspace and gripper, with no IK and no look at the
    arm's state (an action server asks it as a goal arrives, while another goal may be moving the
    arm); ``move_to_joints`` goes to a named or given joint configuration (home); ``box`` is the
    cell's workspace, which the tools' limits check."""

    box: WorkspaceBox

    def move_to_pose(self, target: PoseTarget) -> MoveResult: ...
    def target_refusal(self, target: PoseTarget) -> str | None: ...
    def reach_refusal(self, path: Sequence[PoseTarget], grasped: str | None = None) -> str | None: ...
    def move_to_joints(self, q, gripper: float | None = None) -> MoveResult: ...
    def set_gripper(self, opening: float) -> MoveResult: ...


#: executor name -> "module:Class"; classes are imported only when chosen (moveit_py is imported
#: by the ``moveit`` backend at its first motion or ``connect()``); more through ``r3.executors``. What
#: a class builds has every member of :class:`Executor`.
EXECUTORS = Registry(
    "executor",
    {"sim": "r3.execution.sim:SimExecutor", "moveit": "r3.execution.moveit_backend:MoveItExecutor"},
    check=having("__call__"),
    built=built_as(Executor),
)


def make_executor(name: str, *args, **kwargs) -> Executor:
    """The executor ``name``, built with the arguments its class takes."""
    return EXECUTORS.build(name, *args, **kwargs)
