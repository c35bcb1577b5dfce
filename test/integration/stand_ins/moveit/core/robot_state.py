"""Stand-in of moveit.core.robot_state.RobotState: joint group positions only."""


class RobotState:
    def __init__(self, robot_model):
        self.robot_model = robot_model
        self.groups = {}

    def set_joint_group_positions(self, group, values):
        self.groups[group] = [float(v) for v in values]

    def get_joint_group_positions(self, group):
        return self.groups.get(group, [0.0] * 7)

    def update(self):
        pass

    def satisfies_bounds(self):
        return True
