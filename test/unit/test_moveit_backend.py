"""The ``moveit`` executor without moveit_py: shared refusals before any import, one clear error when
moveit_py is missing, and the plan -> execute -> read-back flow against a stand-in of moveit_py's API."""

from __future__ import annotations

import math
from contextlib import contextmanager
from types import SimpleNamespace

import pytest

from r3.execution import make_executor, moveit_backend
from r3.execution.base import PoseTarget, top_down_quat
from r3.execution.moveit_backend import MoveItConfig, MoveItExecutor, MoveItUnavailable


@pytest.mark.parametrize(
    "target, reason",
    [
        (PoseTarget((2.0, 0.0, 0.3), top_down_quat(0.0)), "outside the workspace"),
        (PoseTarget((0.4, 0.0, math.nan), top_down_quat(0.0)), "NaN or Inf"),
        (PoseTarget((0.4, 0.0, 0.3), (1.0, 1.0, 0.0, 0.0)), "quaternion"),
        (PoseTarget((0.4, 0.0, 0.3), top_down_quat(0.0), gripper=0.2), "gripper opening"),
        (
            PoseTarget((0.4, 0.0, 0.3), top_down_quat(0.0), speed=1e-9),
            "speed scaling 1e-09 is outside [0.01, 1]",
        ),
    ],
)
def test_bad_targets_are_refused_before_moveit_py_is_imported(target, reason, monkeypatch):
    def no_import():
        raise AssertionError("moveit_py imported for a refused target")

    monkeypatch.setattr(moveit_backend, "import_moveit", no_import)
    result = make_executor("moveit").move_to_pose(target)
    assert result.refused and reason in result.reason and not result.reached


def test_missing_moveit_py_names_what_to_install():
    try:
        import moveit  # noqa: F401

        pytest.skip("moveit_py is installed here")
    except ImportError:
        pass
    with pytest.raises(MoveItUnavailable, match="ros-\\$ROS_DISTRO-moveit-py"):
        MoveItExecutor().move_to_pose(PoseTarget((0.4, 0.0, 0.3), top_down_quat(0.0)))


#: The fake IK's rule: a pose of the TCP is reachable when it lies within this distance (m) of the
#: base (the Panda reaches about 0.85 m), whatever its orientation.
FAKE_REACH = 0.8
#: The arm's joints as the fake monitors them.
MONITORED_Q = [0.0, -0.78, 0.0, -2.36, 0.0, 1.57, 0.79]


class FakeRobotState:
    """moveit_py's ``RobotState`` as far as IK goes: ``set_from_ik`` solves by :data:`FAKE_REACH`,
    and a solution becomes the state's joints (the seed of the next query)."""

    def __init__(self, robot_model):
        self.robot, self.q = robot_model, None

    def set_joint_group_positions(self, group, q):
        self.q = list(q)

    def set_from_ik(self, joint_model_group_name, geometry_pose, tip_name, timeout):
        p = geometry_pose.position
        reachable = math.dist((p.x, p.y, p.z), (0.0, 0.0, 0.0)) <= FAKE_REACH
        self.robot.ik_queries.append((joint_model_group_name, tip_name, round(p.z, 6), self.q, timeout))
        if reachable:
            self.q = [round(p.x, 6), round(p.y, 6), round(p.z, 6)]  # stands for the solution's joints
        return reachable


class FakeMoveIt:
    """The slice of moveit_py's API the executor uses; the arm lands where it was told to go."""

    def __init__(self, plans: bool):
        self.plans, self.goal, self.executed, self.planned, self.ik_queries = plans, None, [], [], []
        pose = SimpleNamespace(
            position=SimpleNamespace(x=0, y=0, z=0), orientation=SimpleNamespace(w=1, x=0, y=0, z=0)
        )
        self.state = SimpleNamespace(
            update=lambda: None, get_pose=lambda link: pose, get_joint_group_positions=lambda g: MONITORED_Q
        )
        self.pose = pose

    def get_robot_model(self):
        return self

    def get_planning_component(self, group):
        fake = self

        class Component:
            def set_start_state_to_current_state(self):
                pass

            def set_goal_state(self, pose_stamped_msg=None, pose_link=None, robot_state=None):
                fake.goal = (group, pose_stamped_msg, pose_link)

            def plan(self, single_plan_parameters=None):
                _, msg, _ = fake.goal
                fake.planned.append((round(msg.pose.position.z, 6), single_plan_parameters.namespace))
                return SimpleNamespace(trajectory=group) if fake.plans else None

        return Component()

    def execute(self, trajectory, controllers):
        self.executed.append(trajectory)
        _, msg, _ = self.goal
        self.pose.position, self.pose.orientation = msg.pose.position, msg.pose.orientation

    def get_planning_scene_monitor(self):
        fake = self

        class Monitor:
            @contextmanager
            def read_only(self):
                yield SimpleNamespace(current_state=fake.state)

        return Monitor()


def _executor(monkeypatch, plans: bool):
    pytest.importorskip(
        "geometry_msgs.msg", reason="needs geometry_msgs (the ROS 2 wheels) for the pose message"
    )
    robot = FakeMoveIt(plans)
    monkeypatch.setattr(
        moveit_backend,
        "import_moveit",
        lambda: (None, lambda robot, namespace="": SimpleNamespace(namespace=namespace), FakeRobotState),
    )
    return MoveItExecutor(MoveItConfig(), robot=robot), robot


def test_no_plan_is_refused_as_unreachable_and_nothing_executes(monkeypatch):
    executor, robot = _executor(monkeypatch, plans=False)
    result = executor.move_to_pose(PoseTarget((0.5, 0.1, 0.3), top_down_quat(0.0)))
    assert result.refused and result.reason == "refused: unreachable: no plan" and robot.executed == []


def test_a_planned_pose_is_executed_and_checked_from_the_robot_state(monkeypatch):
    executor, robot = _executor(monkeypatch, plans=True)
    result = executor.move_to_pose(PoseTarget((0.5, 0.1, 0.3), top_down_quat(0.0)))
    group, msg, link = robot.goal
    assert (group, link, msg.header.frame_id) == ("panda_arm", "panda_hand_tcp", "panda_link0")
    assert robot.executed == ["panda_arm"]
    assert result.reached and result.reason == "reached" and result.position_error < 1e-9


def test_an_approach_plans_to_its_start_then_straight_in_with_the_linear_planner(monkeypatch):
    executor, robot = _executor(monkeypatch, plans=True)
    result = executor.move_to_pose(PoseTarget((0.5, 0.1, 0.1), top_down_quat(0.0), speed=0.4, approach=0.12))
    assert robot.planned == [(0.22, ""), (0.1, "pilz_lin")]  # the tool points down: the start is above
    assert robot.executed == ["panda_arm", "panda_arm"] and result.reached


def test_a_stop_ends_the_motion_between_its_legs_and_before_the_gripper(monkeypatch):
    """A cancelled or preempted MoveToPose stops at the next leg (before, every leg and the gripper
    ran whatever the goal's state)."""
    executor, robot = _executor(monkeypatch, plans=True)
    asked = []
    executor.should_stop = lambda: asked.append(len(robot.executed)) or len(robot.executed) >= 1
    target = PoseTarget((0.5, 0.1, 0.1), top_down_quat(0.0), speed=0.4, approach=0.12, gripper=0.02)
    result = executor.move_to_pose(target)
    assert (result.reached, result.reason) == (False, "canceled")
    assert robot.executed == ["panda_arm"] and asked == [0, 1]  # the approach's start only
    executor.should_stop = lambda: len(robot.executed) >= 3  # after both legs: the gripper is held back
    result = executor.move_to_pose(target)
    assert result.reason == "canceled" and robot.executed == ["panda_arm"] * 3


def test_a_pose_out_of_reach_is_refused_by_ik_before_anything_is_planned(monkeypatch):
    executor, robot = _executor(monkeypatch, plans=True)
    result = executor.move_to_pose(PoseTarget((0.8, 0.3, 0.3), top_down_quat(0.0)))  # in the box
    assert result.refused and result.reason == "refused: unreachable: no IK solution for the goal"
    assert robot.planned == [] and robot.executed == []
    assert robot.ik_queries == [("panda_arm", "panda_hand_tcp", 0.3, MONITORED_Q, 0.1)]


def test_a_path_with_a_leg_out_of_reach_is_refused_before_its_first_leg_moves(monkeypatch):
    """The hostile place: lift and carry, the carry out of reach. Each leg's IK is seeded with the
    previous leg's solution, the first with the monitored joints; nothing is planned or executed."""
    executor, robot = _executor(monkeypatch, plans=True)
    lift, carry = (PoseTarget(p, top_down_quat(0.0)) for p in ((0.5, 0.1, 0.3), (0.8, 0.3, 0.3)))
    why = executor.reach_refusal([lift, carry])
    assert why == "unreachable: no IK solution for the goal"
    seeds = [seed for _, _, _, seed, _ in robot.ik_queries]
    assert seeds == [MONITORED_Q, [0.5, 0.1, 0.3]]
    assert robot.planned == [] and robot.executed == []


def test_an_approach_s_start_is_asked_before_its_goal(monkeypatch):
    executor, robot = _executor(monkeypatch, plans=True)
    near = PoseTarget((0.5, 0.1, 0.1), top_down_quat(0.0), speed=0.4, approach=0.12)
    assert executor.reach_refusal([near]) is None
    assert [z for _, _, z, _, _ in robot.ik_queries] == [0.22, 0.1] and robot.executed == []
    high = PoseTarget((0.6, 0.4, 0.3), top_down_quat(0.0), approach=0.2)  # its start is out of reach
    assert executor.reach_refusal([high]) == "unreachable: no IK solution for the approach's start"
