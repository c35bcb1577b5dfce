"""r3_execution_node: the MoveToPose action for a real arm, through the ``moveit`` executor.

The sim arm's MoveToPose is served by ``r3_packing_sim_node`` (the simulator owns the physics, as a
robot's driver owns its hardware); on a real arm this node serves the same action, with the same
refusals, through MoveIt 2 (:mod:`r3.execution.moveit_backend`). moveit_py is started when the node
is constructed, so a missing MoveIt install or config ends the node at once with one ``fatal:``
line naming what to install. A new goal preempts the running one; moveit_py executes a trajectory
to its end, so a cancel takes effect between the legs of a move (the controller's limits and the
hardware e-stop bound a leg, see SAFETY.md).
"""

from __future__ import annotations

import math

from rclpy.callback_groups import ReentrantCallbackGroup

from r3.execution.base import WorkspaceBox, make_executor
from r3.execution.moveit_backend import MoveItConfig
from r3.graph import names
from r3.graph.node_params import NODE_PARAMETERS
from r3_msgs.action import MoveToPose
from r3_ros.conversions import move_goal_to_target
from r3_ros.goals import SingleGoal
from r3_ros.heartbeat import HeartbeatPublisher
from r3_ros.node import R3Node
from r3_ros.params import declare_parameters
from r3_ros.spin import run_node


class ExecutionNode(R3Node):
    def __init__(self):
        super().__init__("r3_execution_node")
        p = declare_parameters(self, NODE_PARAMETERS["r3_execution_node"])
        self.base_frame = p["base_frame"]
        config = MoveItConfig(
            planning_group=p["planning_group"],
            pose_link=p["pose_link"],
            base_frame=p["base_frame"],
            hand_group=p["hand_group"],
            linear_planner=p["linear_planner"],
            max_opening=p["max_opening"],
        )
        box = WorkspaceBox(tuple(p["workspace_low"]), tuple(p["workspace_high"]))
        self.arm = make_executor("moveit", config, box)
        self.arm.connect()  # import moveit_py and start MoveItPy now, not at the first goal
        self.goals = SingleGoal(self, self.goal_refusal)
        self.goals.serve(MoveToPose, names.MOVE_TO_POSE, self.move, ReentrantCallbackGroup())
        self.heartbeat = HeartbeatPublisher(self)
        self.get_logger().info(
            f"MoveToPose through MoveIt: group {config.planning_group}, link {config.pose_link}"
        )

    def goal_refusal(self, goal) -> str:
        """Why ``goal`` is refused before anything moves ("" = it is not)."""
        target = move_goal_to_target(goal, self.base_frame, self.arm)
        return target if isinstance(target, str) else ""

    def move(self, handle) -> MoveToPose.Result:
        result = MoveToPose.Result()
        target = move_goal_to_target(handle.request, self.base_frame, self.arm)
        if isinstance(target, str):
            result.reason, result.position_error, result.orientation_error = target, math.nan, math.nan
            self.goals.end(handle, "aborted")
            return result
        with self.goals.turn(handle) as has_turn:  # one motion of the arm at a time
            if not has_turn or handle.is_cancel_requested:
                result.reason = "canceled"
                self.goals.end(handle, "canceled" if handle.is_cancel_requested else "aborted")
                return result
            self.heartbeat.state = "busy"
            self.arm.should_stop = lambda: handle.is_cancel_requested or not handle.is_active
            try:
                moved = self.arm.move_to_pose(target)
            finally:
                self.arm.should_stop = None
                self.heartbeat.state = "idle"
        result.reached, result.reason = moved.reached, moved.reason
        result.position_error, result.orientation_error = moved.position_error, moved.orientation_error
        self.goals.end(handle, "succeeded" if moved.reached else "aborted")
        return result


def main(args=None) -> None:
    run_node(ExecutionNode, args)


if __name__ == "__main__":
    main()
