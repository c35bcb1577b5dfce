"""Stand-in of moveit.planning: MoveItPy and PlanRequestParameters (see ../../README.md)."""

import json
import os
from contextlib import contextmanager
from types import SimpleNamespace

from moveit.core.robot_state import within_reach


class PlanRequestParameters:
    def __init__(self, robot, namespace=""):
        self.namespace = namespace
        self.max_velocity_scaling_factor = 1.0
        self.max_acceleration_scaling_factor = 1.0


class _Pose:
    def __init__(self):
        self.position = SimpleNamespace(x=0.3, y=0.0, z=0.5)
        self.orientation = SimpleNamespace(w=0.0, x=1.0, y=0.0, z=0.0)


class _State:
    def __init__(self, robot):
        self.robot = robot

    def update(self):
        pass

    def get_pose(self, link):
        return self.robot.pose

    def get_joint_group_positions(self, group):
        return [0.0] * 7


class _Component:
    def __init__(self, robot, group):
        self.robot, self.group, self.goal = robot, group, None

    def set_start_state_to_current_state(self):
        pass

    def set_goal_state(self, pose_stamped_msg=None, pose_link=None, robot_state=None):
        self.goal = pose_stamped_msg

    def plan(self, single_plan_parameters=None):
        entry = {"group": self.group, "planner": getattr(single_plan_parameters, "namespace", "")}
        reachable = True
        if self.goal is not None:
            p = self.goal.pose.position
            entry.update(frame=self.goal.header.frame_id, position=[p.x, p.y, p.z])
            reachable = within_reach(p)
        entry["planned"] = reachable
        if os.environ.get("R3_STANDIN_LOG"):
            with open(os.environ["R3_STANDIN_LOG"], "a") as log:
                log.write(json.dumps(entry) + "\n")
        return SimpleNamespace(trajectory=(self.group, self.goal)) if reachable else None


class MoveItPy:
    def __init__(self, node_name="moveit_py", config_dict=None, **_):
        self.node_name = node_name
        self.pose = _Pose()

    def get_planning_component(self, group):
        return _Component(self, group)

    def get_robot_model(self):
        return SimpleNamespace(name="panda")

    def execute(self, trajectory, controllers=None):
        _group, goal = trajectory
        if goal is not None:
            self.pose.position, self.pose.orientation = goal.pose.position, goal.pose.orientation

    def get_planning_scene_monitor(self):
        robot = self

        class Monitor:
            @contextmanager
            def read_only(self):
                yield SimpleNamespace(current_state=_State(robot))

        return Monitor()
