"""The ``moveit`` executor: the same contract as ``sim``, planned and executed by MoveIt 2 (moveit_py).

A pose target goes through the shared checks (:func:`r3.execution.base.check_target`) before
moveit_py is even imported, so a bad target is refused identically by both backends. Then MoveIt's
IK is asked for the pose of ``pose_link`` (none found: "unreachable: no IK solution for the goal";
the same query lets a multi-leg motion be refused before its first leg, see ``reach_refusal``), the
planning component plans from the current state to that pose (a failed plan is refused as
"unreachable: no plan"; nothing moves), the trajectory is executed, and the errors are
read back from the robot state MoveIt monitors. The gripper is a second planning group (``hand``
in panda_moveit_config) whose joint target is half the opening per finger.

Written against moveit_py's API (``moveit.planning.MoveItPy``); not run on this project's machines,
where moveit_py is not installable. Execution blocks until the trajectory ends: a stop
(``should_stop``, asked before every leg and before the gripper) takes effect between moves, not
inside one (the controller's own limits and the hardware e-stop bound a move, see SAFETY.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
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

INSTALL_HINT = (
    "the 'moveit' executor needs moveit_py (MoveIt 2's Python API), which is not installed: "
    "install ros-$ROS_DISTRO-moveit-py (with a MoveIt config such as "
    "ros-$ROS_DISTRO-moveit-resources-panda-moveit-config) and source /opt/ros/$ROS_DISTRO/setup.bash"
)


class MoveItUnavailable(RuntimeError):
    """moveit_py cannot be imported; the message names what to install."""


@dataclass(frozen=True)
class MoveItConfig:
    """Where the arm is in MoveIt's terms (defaults: panda_moveit_config), validated."""

    planning_group: str = "panda_arm"
    pose_link: str = "panda_hand_tcp"  # the TCP, 0.1034 m past the flange, as in the sim arm
    base_frame: str = "panda_link0"
    hand_group: str = "hand"
    node_name: str = "r3_moveit_py"
    #: PlanRequestParameters namespace of a straight-line planner for approaches (in the MoveIt
    #: config: planning_pipeline pilz_industrial_motion_planner, planner_id LIN).
    linear_planner: str = "pilz_lin"
    max_opening: float = 0.08
    #: Seconds MoveIt's IK may take to find each leg's goal before a motion is refused as unreachable
    #: (it retries from random seeds until then: too short a budget would refuse reachable poses).
    ik_timeout: float = 0.1
    position_tolerance: float = 0.01
    orientation_tolerance: float = math.radians(3.0)

    def __post_init__(self):
        for key in ("planning_group", "pose_link", "base_frame", "node_name"):
            if not getattr(self, key):
                raise ValueError(f"MoveItConfig.{key} must not be empty")
        if not (
            self.max_opening > 0
            and self.ik_timeout > 0
            and self.position_tolerance > 0
            and self.orientation_tolerance > 0
        ):
            raise ValueError("MoveItConfig: max_opening, ik_timeout and the tolerances must be > 0")


def import_moveit():
    """``(MoveItPy, PlanRequestParameters, RobotState)`` from moveit_py, or :class:`MoveItUnavailable`."""
    try:
        from moveit.core.robot_state import RobotState
        from moveit.planning import MoveItPy, PlanRequestParameters
    except ImportError as exc:
        raise MoveItUnavailable(INSTALL_HINT) from exc
    return MoveItPy, PlanRequestParameters, RobotState


def _approach_start(target: PoseTarget) -> np.ndarray:
    """``approach`` back from the target along the tool axis."""
    return np.asarray(target.position, float) - target.approach * quat_to_mat(target.quat)[:, 2]


class MoveItExecutor:
    """Moves a real (or MoveIt-simulated) arm through moveit_py.

    ``config_dict`` is MoveItPy's configuration (e.g. ``MoveItConfigsBuilder("moveit_resources_panda")
    .moveit_cpp(...).to_moveit_configs().to_dict()``); None reads it from the node's parameters.
    ``robot`` is an already constructed ``MoveItPy`` to share one; it is created on first use otherwise.
    """

    def __init__(
        self,
        config: MoveItConfig | None = None,
        box: WorkspaceBox | None = None,
        config_dict: dict | None = None,
        robot=None,
    ):
        self.config = config or MoveItConfig()
        self.box = box or WorkspaceBox()
        self._config_dict = config_dict
        self._robot = robot
        self._api = None
        #: Asked before each leg of a motion and before the gripper; True ends the motion "canceled"
        #: there (the same attribute as the sim executor's).
        self.should_stop: Callable[[], bool] | None = None

    def connect(self):
        """Import moveit_py and start MoveItPy (a node configures here, not at its first goal)."""
        if self._api is None:
            self._api = import_moveit()
        if self._robot is None:
            self._robot = self._api[0](node_name=self.config.node_name, config_dict=self._config_dict)
        return self._robot

    # ------------------------------------------------------------------ the interface
    def move_to_pose(self, target: PoseTarget) -> MoveResult:
        why = self.reach_refusal([target])
        if why:
            return refused(why)
        robot = self.connect()
        legs = [(target.position, self._params(target.speed))]
        if target.approach > 0:  # to the approach's start freely, then straight in (pilz LIN)
            legs = [
                (_approach_start(target), self._params(1.0)),
                (target.position, self._params(target.speed, self.config.linear_planner)),
            ]
        for position, params in legs:
            if self._stopped():
                return MoveResult(False, math.nan, math.nan, "canceled")
            arm = robot.get_planning_component(self.config.planning_group)
            arm.set_start_state_to_current_state()
            arm.set_goal_state(
                pose_stamped_msg=self._pose_msg(target, position), pose_link=self.config.pose_link
            )
            plan = arm.plan(single_plan_parameters=params)
            if not plan:
                return refused("unreachable: no plan")
            robot.execute(plan.trajectory, controllers=[])
        if target.gripper is not None:
            if self._stopped():
                return MoveResult(False, math.nan, math.nan, "canceled")
            grip = self.set_gripper(target.gripper)
            if not grip.reached:
                return grip
        return self._pose_result(np.asarray(target.position, float), quat_to_mat(target.quat))

    def target_refusal(self, target: PoseTarget) -> str | None:
        """The shared checks of ``target`` against this arm (``Executor.target_refusal``)."""
        return check_target(target, self.box, self.config.max_opening)

    def reach_refusal(self, path: Sequence[PoseTarget], grasped: str | None = None) -> str | None:
        """Why :meth:`move_to_pose` would refuse a leg of ``path`` before planning it (the shared
        checks, then MoveIt's IK for ``pose_link`` at an approach's start and at the leg's goal), or
        None. Each leg's IK is seeded with the previous leg's solution, the first with the monitored
        state; the query sets a scratch ``RobotState`` only, so nothing moves. moveit_py is imported
        only for a leg that passes the shared checks. It does not plan the legs: one that MoveIt
        cannot plan (a collision on the way, a straight line it cannot follow) is still refused
        only when its turn comes, after the earlier legs moved. So ``grasped`` (the item a pick's
        first leg closes on), or a leg that opens the fingers and lets the item go, changes nothing
        here: IK does not depend on what the hand carries, and
        a collision of the carried item is one of the things this check does not see."""
        state, group = None, self.config.planning_group
        for target in path:
            why = self.target_refusal(target)
            if why:
                return why
            if state is None:
                state = self._current_state()
            goals = [("goal", target.position)]
            if target.approach > 0:
                goals.insert(0, ("approach's start", _approach_start(target)))
            for what, position in goals:
                pose = self._pose_msg(target, position).pose
                if not state.set_from_ik(group, pose, self.config.pose_link, self.config.ik_timeout):
                    return f"unreachable: no IK solution for the {what}"
        return None

    def _current_state(self):
        """A scratch ``RobotState`` with the arm's joints as MoveIt monitors them."""
        robot, group = self.connect(), self.config.planning_group
        state = self._api[2](robot.get_robot_model())
        with robot.get_planning_scene_monitor().read_only() as scene:
            state.set_joint_group_positions(group, scene.current_state.get_joint_group_positions(group))
        return state

    def _stopped(self) -> bool:
        return self.should_stop is not None and self.should_stop()

    def move_to_joints(self, q, gripper: float | None = None, speed: float = 1.0) -> MoveResult:
        q = np.asarray(q, dtype=float)
        if q.ndim != 1 or not np.all(np.isfinite(q)):
            return refused("joint target must be finite numbers")
        if gripper is not None and not (math.isfinite(gripper) and 0 <= gripper <= self.config.max_opening):
            return refused(f"gripper opening {gripper} is outside [0, {self.config.max_opening}] m")
        robot = self.connect()
        state = self._api[2](robot.get_robot_model())
        state.set_joint_group_positions(self.config.planning_group, q)
        state.update()
        if not state.satisfies_bounds():
            return refused("joint target outside the joint limits")
        result = self._plan_and_execute(self.config.planning_group, state, speed)
        if result is None and gripper is not None:
            result = self.set_gripper(gripper)
            if result.reached:
                result = None
        if result is not None:
            return result
        with self._robot.get_planning_scene_monitor().read_only() as scene:
            now = np.asarray(scene.current_state.get_joint_group_positions(self.config.planning_group), float)
        err = float(np.max(np.abs(now - q)))
        ok = err < 0.01
        return MoveResult(ok, 0.0, err, "reached" if ok else f"not_reached: joint error {err:.3f} rad")

    def set_gripper(self, opening: float) -> MoveResult:
        if not (math.isfinite(opening) and 0 <= opening <= self.config.max_opening):
            return refused(f"gripper opening {opening} is outside [0, {self.config.max_opening}] m")
        robot = self.connect()
        state = self._api[2](robot.get_robot_model())
        state.set_joint_group_positions(self.config.hand_group, np.array([opening / 2.0]))
        state.update()
        return self._plan_and_execute(self.config.hand_group, state, 1.0) or MoveResult(
            True, 0.0, 0.0, "reached"
        )

    # ------------------------------------------------------------------ internals
    def _plan_and_execute(self, group: str, goal_state, speed: float) -> MoveResult | None:
        """None when the plan was executed; a refusal when there was no plan."""
        component = self._robot.get_planning_component(group)
        component.set_start_state_to_current_state()
        component.set_goal_state(robot_state=goal_state)
        plan = component.plan(single_plan_parameters=self._params(speed))
        if not plan:
            return refused(f"unreachable: no plan for {group}")
        self._robot.execute(plan.trajectory, controllers=[])
        return None

    def _params(self, speed: float, namespace: str = ""):
        params = self._api[1](self._robot, namespace) if namespace else self._api[1](self._robot)
        params.max_velocity_scaling_factor = float(speed)
        params.max_acceleration_scaling_factor = float(speed)
        return params

    def _pose_msg(self, target: PoseTarget, position=None):
        from geometry_msgs.msg import PoseStamped  # a ROS install is there whenever moveit_py is

        msg = PoseStamped()
        msg.header.frame_id = self.config.base_frame
        position = target.position if position is None else position
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (float(v) for v in position)
        w, x, y, z = (float(v) for v in target.quat)
        msg.pose.orientation.w, msg.pose.orientation.x = w, x
        msg.pose.orientation.y, msg.pose.orientation.z = y, z
        return msg

    def _pose_result(self, p_target: np.ndarray, R_target: np.ndarray) -> MoveResult:
        """Errors between the target and the pose of ``pose_link`` in the monitored robot state."""
        with self._robot.get_planning_scene_monitor().read_only() as scene:
            scene.current_state.update()
            pose = scene.current_state.get_pose(self.config.pose_link)
        p = np.array([pose.position.x, pose.position.y, pose.position.z])
        o = pose.orientation
        pos_err = float(np.linalg.norm(p - p_target))
        rot_err = rotation_error(R_target, quat_to_mat((o.w, o.x, o.y, o.z)))
        ok = pos_err <= self.config.position_tolerance and rot_err <= self.config.orientation_tolerance
        reason = (
            "reached"
            if ok
            else (
                f"not_reached: ended {pos_err * 1000:.1f} mm and "
                f"{math.degrees(rot_err):.1f} deg from the target"
            )
        )
        return MoveResult(ok, pos_err, rot_err, reason)
