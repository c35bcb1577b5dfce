"""r3_suite_sim_node: hosts the simulator of any registered suite that brings its own
(``Suite.make_sim``, an ``r3.episode_loop.SuiteSim``), so that a suite added by a package of its
own through the ``r3.suites`` entry points runs through the graph with no node of its own.

It is both the simulator and the low-level side of the graph for that suite: ResetScene draws a
scene; FollowInstruction carries out one instruction of the suite's grammar (the suite's simulator
parses it; text outside the grammar moves nothing and ends the goal with ``parse_error``). After
each, it publishes the privileged state and then the camera image, stamped from one clock that never
goes back, which is what the reasoner node waits for at each decision step. The suite's ``follow``
is one bounded call: a stop or a cancel takes effect at the next instruction, which is not sent.
"""

from __future__ import annotations

import json
import threading
import time

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from sensor_msgs.msg import Image

from r3.graph import names
from r3.graph.node_params import NODE_PARAMETERS
from r3.safety.freeze import FreezeWatch
from r3.safety.goals import GoalRefused, check_instruction_goal
from r3.suites import get_suite, suite_names
from r3_msgs.action import FollowInstruction
from r3_msgs.msg import PrivilegedState
from r3_msgs.srv import ResetScene
from r3_ros.conversions import image_to_msg, ns_to_stamp
from r3_ros.episode_topics import scene_resets
from r3_ros.goals import SingleGoal
from r3_ros.heartbeat import HeartbeatPublisher
from r3_ros.node import R3Node
from r3_ros.params import declare_parameters
from r3_ros.qos import LATCHED, recorded
from r3_ros.refusals import refusing_service
from r3_ros.spin import run_node

#: A freeze of this process longer than this makes a reset that waited through it stale (``ResetRecord``).
FREEZE_DEADLINE_S = 1.0


def simulated_suite(name: str):
    """The record of suite ``name``, refused unless it brings its own simulator."""
    suite = get_suite(name)  # an unknown name is refused with the registered ones
    if suite.make_sim is None:
        simulated = [n for n in suite_names() if get_suite(n).make_sim is not None]
        raise ValueError(
            f"suite {name!r} brings no simulator of its own (Suite.make_sim); "
            f"this node simulates {', '.join(simulated) or 'no registered suite'}"
        )
    return suite


class SuiteSimNode(R3Node):
    def __init__(self):
        super().__init__("r3_suite_sim_node")
        p = declare_parameters(self, NODE_PARAMETERS["r3_suite_sim_node"])
        self.suite = simulated_suite(p["suite"])
        self.camera_frame = p["camera_frame"]
        self.sim = self.suite.make_sim()
        self.lock = threading.Lock()  # the simulator and what is published of it
        self.episode_id, self.stamp_ns, self.task = "", 0, ""
        self.freezes = FreezeWatch(FREEZE_DEADLINE_S)
        self.resets = scene_resets(self, self.freezes)
        self.goals = SingleGoal(self, self.goal_refusal)
        self.image_pub = self.create_publisher(Image, names.CAMERA_IMAGE, recorded(5))
        self.state_pub = self.create_publisher(PrivilegedState, names.PRIVILEGED_STATE, LATCHED)
        group = MutuallyExclusiveCallbackGroup()
        self.create_service(
            ResetScene, names.RESET_SCENE, refusing_service(self, self.on_reset), callback_group=group
        )
        self.server = self.goals.serve(FollowInstruction, names.FOLLOW_INSTRUCTION, self.execute, group)
        self.heartbeat = HeartbeatPublisher(self)
        self.get_logger().info(f"simulating {self.suite.name} ({self.suite.title})")

    def on_reset(self, request: ResetScene.Request, response: ResetScene.Response) -> ResetScene.Response:
        with self.lock:
            task = self.resets.answer(request, response, self.suite.name, self.reset_scene)
            if task is None:
                return response
            self.episode_id, self.task = request.episode_id, task
            self.publish()
        self.get_logger().info(f"reset {task} seed {request.seed}: {response.goal}")
        return response

    def reset_scene(self, task: str, seed: int):
        self.sim.reset(task, seed)
        return self.sim.task_instance

    def goal_refusal(self, goal) -> str:
        """Why ``goal`` is refused before anything moves ("" = it is not)."""
        try:
            check_instruction_goal(goal, self.suite.name, served=("instruction",))
            if self.sim.task_instance is None:
                raise GoalRefused("no scene has been reset yet")
        except GoalRefused as exc:
            return f"error: invalid goal: {exc}"
        return ""

    def execute(self, handle) -> FollowInstruction.Result:
        goal, result = handle.request, FollowInstruction.Result()
        if reason := self.goal_refusal(goal):
            return self.finish(handle, result, False, reason)
        if handle.is_cancel_requested:
            return self.finish(handle, result, False, "canceled")
        self.heartbeat.state = "busy"
        try:
            with self.lock:
                done = self.sim.follow(goal.instruction, goal.max_steps, goal.seed)
                result.steps, result.outcome = done.control_steps, done.outcome
                result.finished = self.publish()
        finally:
            self.heartbeat.state = "idle"
        return self.finish(handle, result, not done.error, done.error or "done")

    def finish(self, handle, result, success: bool, reason: str) -> FollowInstruction.Result:
        result.success, result.reason = success, reason
        outcome = "succeeded" if success else ("canceled" if reason == "canceled" else "aborted")
        self.goals.end(handle, outcome)
        return result

    def publish(self):
        """The state, then its image, under one new stamp (called with the lock held); the stamp."""
        self.stamp_ns = max(self.stamp_ns + 1, time.time_ns())
        stamp, instance = ns_to_stamp(self.stamp_ns), self.sim.task_instance
        state = self.sim.state()
        msg = PrivilegedState(
            episode_id=self.episode_id,
            suite=self.suite.name,
            task=self.task,
            goal=instance.goal,
            task_instance_json=json.dumps(instance.to_dict()),
            progress=float(instance.progress(state)),
            success=bool(instance.success(state)),
        )
        msg.header.stamp, msg.header.frame_id = stamp, "world"
        self.state_pub.publish(msg)
        self.image_pub.publish(image_to_msg(self.sim.image(), stamp, self.camera_frame))
        return stamp

    def shutdown(self) -> None:
        self.freezes.close()


def main(args=None) -> None:
    run_node(SuiteSimNode, args)


if __name__ == "__main__":
    main()
