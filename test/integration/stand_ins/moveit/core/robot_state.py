"""Stand-in of moveit.core.robot_state.RobotState: joint group positions and IK by a reach rule."""

import math
import os


def within_reach(p) -> bool:
    """The stand-in arm's one rule: a pose is reachable (IK finds it, a plan reaches it) when it lies
    within ``R3_STANDIN_REACH_M`` (default 0.855 m) of the base."""
    return math.sqrt(p.x**2 + p.y**2 + p.z**2) <= float(os.environ.get("R3_STANDIN_REACH_M", "0.855"))


class RobotState:
    def __init__(self, robot_model):
        self.robot_model = robot_model
        self.groups = {}

    def set_joint_group_positions(self, group, values):
        self.groups[group] = [float(v) for v in values]

    def get_joint_group_positions(self, group):
        return self.groups.get(group, [0.0] * 7)

    def set_from_ik(self, joint_model_group_name, geometry_pose, tip_name, timeout=0.0):
        return within_reach(geometry_pose.position)

    def update(self):
        pass

    def satisfies_bounds(self):
        return True
