"""Test peer: offers the RunTask action but never answers a goal (its goal callback never returns),
as a server whose answer was lost would."""

import threading

import rclpy
from rclpy.action import ActionServer, GoalResponse
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

from r3_msgs.action import RunTask

NEVER = threading.Event()


def never_answer(_goal) -> GoalResponse:
    NEVER.wait()
    return GoalResponse.REJECT


def main():
    rclpy.init()
    node = Node("peer_unanswering_run_task_server")
    ActionServer(node, RunTask, "/r3/run_task", lambda handle: RunTask.Result(), goal_callback=never_answer)
    print("ready", flush=True)
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass


if __name__ == "__main__":
    main()
