"""Test peer: a RunTask action server that publishes a ReasonerStep and feedback per step."""

import time

import rclpy
from rclpy.action import ActionServer
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

from r3_msgs.action import RunTask
from r3_msgs.msg import ReasonerStep

#: rclpy's topic for an action's feedback (not exposed by rclpy's ActionServer).
FEEDBACK_TOPIC = "/r3/run_task/_action/feedback"


class Server(Node):
    def __init__(self):
        super().__init__("peer_run_task_server")
        self.steps = self.create_publisher(ReasonerStep, "/r3/reasoner/steps", 10)
        self.server = ActionServer(self, RunTask, "/r3/run_task", self.execute)
        self.get_logger().info("ready")

    def execute(self, handle):
        """Publishes once this server's endpoints know the client's readers. Discovery runs each way
        on its own: the client seeing this server (its wait_for_server) does not mean this server's
        writers have matched the client's readers, and on a loaded machine a step or a feedback
        published before that is dropped while the goal and its result (services) still arrive."""
        goal = handle.request
        deadline = time.monotonic() + 20.0
        while time.monotonic() < deadline and not (
            self.steps.get_subscription_count() and self.count_subscribers(FEEDBACK_TOPIC)
        ):
            time.sleep(0.01)
        result = RunTask.Result(episode_id=f"{goal.task}-{goal.seed}")
        for step in range(goal.max_steps):
            instruction = f"move the red moon up {step}"
            msg = ReasonerStep(
                step=step, goal=goal.goal, reasoning=f"reasoning {step}", instruction=instruction
            )
            msg.valid = True
            msg.latency_model_s = 0.5 * step
            msg.header.stamp = self.get_clock().now().to_msg()
            self.steps.publish(msg)
            handle.publish_feedback(RunTask.Feedback(step=step, instruction=instruction, progress=step / 10))
            result.instructions.append(instruction)
        handle.succeed()
        result.success, result.steps, result.progress, result.reason = True, goal.max_steps, 1.0, "success"
        return result


def main():
    rclpy.init()
    node = Server()
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
