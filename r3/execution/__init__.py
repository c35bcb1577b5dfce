"""Motion execution behind one interface: ``sim`` (MuJoCo IK + joint trajectories); ``moveit``
(moveit_py, written against its API, not run here).

Both take an end-effector pose (tool centre point, robot base frame) and a gripper opening, refuse
invalid targets with a reason before any motion (never clipping them), and report what happened as
a :class:`~r3.execution.base.MoveResult`.
"""

from r3.execution.base import Executor, MoveResult, PoseTarget, WorkspaceBox, make_executor

__all__ = ["Executor", "MoveResult", "PoseTarget", "WorkspaceBox", "make_executor"]
