"""Test peer: sends one RunTask goal and prints what came back (feedback, result, steps) as JSON."""

import json
import sys

import rclpy
from rclpy.action import ActionClient
from rclpy.node import Node

from r3_msgs.action import RunTask
from r3_msgs.msg import ReasonerStep


def main():
    rclpy.init()
    node = Node("peer_run_task_client")
    steps, feedback = [], []
    node.create_subscription(
        ReasonerStep,
        "/r3/reasoner/steps",
        lambda m: steps.append(
            {
                "step": m.step,
                "reasoning": m.reasoning,
                "instruction": m.instruction,
                "latency": m.latency_model_s,
            }
        ),
        10,
    )
    client = ActionClient(node, RunTask, "/r3/run_task")
    if not client.wait_for_server(timeout_sec=20.0):
        print(json.dumps({"error": "no server"}))
        sys.exit(1)
    # Give the ReasonerStep subscription time to be matched before the server publishes.
    deadline = node.get_clock().now().nanoseconds + 10_000_000_000
    while node.count_publishers("/r3/reasoner/steps") == 0 and node.get_clock().now().nanoseconds < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
    for _ in range(20):
        rclpy.spin_once(node, timeout_sec=0.01)
    goal = RunTask.Goal(suite="language_table", task="V", seed=3, goal="make a V", max_steps=3)
    send = client.send_goal_async(
        goal,
        feedback_callback=lambda f: feedback.append(
            {"step": f.feedback.step, "instruction": f.feedback.instruction}
        ),
    )
    rclpy.spin_until_future_complete(node, send, timeout_sec=20.0)
    handle = send.result()
    result_future = handle.get_result_async()
    rclpy.spin_until_future_complete(node, result_future, timeout_sec=20.0)
    result = result_future.result().result
    for _ in range(100):  # ReasonerStep messages travel on a topic and may arrive after the result
        if len(steps) >= 3:
            break
        rclpy.spin_once(node, timeout_sec=0.05)
    print(
        json.dumps(
            {
                "accepted": handle.accepted,
                "result": {
                    "success": result.success,
                    "steps": result.steps,
                    "episode_id": result.episode_id,
                    "instructions": list(result.instructions),
                },
                "feedback": feedback,
                "steps": steps,
            }
        )
    )
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    main()
