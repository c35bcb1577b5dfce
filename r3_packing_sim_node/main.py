"""r3_packing_sim_node: the packing workcell in MuJoCo, with the simulated arm's driver in-process.

One process owns the one ``PackingEnv`` that everything acting on it must share (its
``r3.packing_episode.PackingCell``): it publishes what a real cell publishes (base and wrist camera
images with camera_info, joint_states, /clock) plus the privileged state and snapshots, serves
ResetScene (suite "packing"), serves MoveToPose through the ``sim`` executor (the simulated robot's
driver; on a real arm ``r3_execution_node`` serves it with the ``moveit`` executor), and serves
FollowInstruction with the packing policy calling that same executor in-process
(``PackingCell.carry_out``). Images, state and a snapshot are published at every decision point
(after a reset, an instruction or a move), all with one stamp of the cell's sim time, so the
reasoner sees the state it decides on.

``grounding`` chooses how the packing policy sees the scene: ``sim`` (the simulator's item poses) or
``perception`` (the perception node's DetectedObjects and GroundPoint only, ``r3_ros.perception_client``).
For the latter, whenever the policy looks after something moved, the node publishes a base-camera
frame as an RGB-D camera would (colour, camera_info, aligned 32FC1 depth) plus the instance mask
the perception node's ``sim`` backend segments with.

The arm takes no control step once its goal must stop: cancelled, stopped on ``/r3/stop_motion``,
its reasoner silent for ``client_timeout_s`` (FollowInstruction only; ``r3_ros.stop.MotionGuard``), or
this process frozen or starved for longer than ``COMMAND_DEADLINE_S`` while it ran
(``r3.safety.freeze.GoalStop``); nor does the simulated world (``PackingCell.driven``).
"""

from __future__ import annotations

import json
import math
import threading

import numpy as np
from rclpy.callback_groups import ReentrantCallbackGroup
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import String

from r3.episode_loop import Execution
from r3.graph import names
from r3.graph.node_params import NODE_PARAMETERS
from r3.lowlevel.perceived import OncePerScene, arm_reading
from r3.packing_episode import CELL_INTERFACES, SNAPSHOT_FORMAT, SUITE, PackingCell, answer_refusal
from r3.safety.freeze import FreezeWatch, GoalStop
from r3.safety.goals import GoalRefused, check_instruction_goal
from r3.sim.packing.env import ITEM_INDEX, PackingEnv
from r3_msgs.action import FollowInstruction, MoveToPose
from r3_msgs.msg import PrivilegedState, SceneSnapshot
from r3_msgs.srv import ResetScene
from r3_ros import conversions as conv
from r3_ros.episode_topics import scene_resets
from r3_ros.goals import PREEMPTED, SingleGoal
from r3_ros.heartbeat import HeartbeatMonitor, HeartbeatPublisher
from r3_ros.node import R3Node
from r3_ros.params import declare_parameters
from r3_ros.perception_client import PerceptionUnavailable, RosPerception
from r3_ros.qos import LATCHED, recorded
from r3_ros.refusals import refusing_service
from r3_ros.sim_clock import SimClockPublisher
from r3_ros.spin import run_node
from r3_ros.stop import MotionGuard, end_stopped

#: How long this process may be frozen or starved while a goal runs before the goal counts as stale;
#: below the reasoner's heartbeat timeout (5 s), so a goal its client gave up on never moves again.
COMMAND_DEADLINE_S = 2.0
CAMERAS = {"base": (names.CAMERA_IMAGE, names.CAMERA_INFO), "wrist": (names.WRIST_IMAGE, names.WRIST_INFO)}


class PackingSimNode(R3Node):
    def __init__(self):
        super().__init__("r3_packing_sim_node")
        p = declare_parameters(self, NODE_PARAMETERS["r3_packing_sim_node"])
        width, height = p["image_width"], p["image_height"]
        self.base_frame = p["base_frame"]
        self.env = env = PackingEnv(width=width, height=height)
        env.reset(seed=0)
        self.frames = OncePerScene(env, self.publish_frame)
        source = None
        if p["grounding"] == "perception":
            camera, timeout_s = env.camera_model("base"), p["perception_timeout_s"]
            source = RosPerception(
                self, camera, self.capture, lambda: arm_reading(env), timeout_s, self.goal_must_stop
            )
        self.cell = PackingCell.build(env, grounding=p["grounding"], source=source)
        self.lock = threading.Lock()  # one goal or reset acts on the env at a time
        self.episode_id, self.task = "", ""
        self.image_pubs = {
            cam: (
                self.create_publisher(Image, img, recorded(5)),
                self.create_publisher(CameraInfo, info, recorded(5)),
            )
            for cam, (img, info) in CAMERAS.items()
        }
        self.joint_pub = self.create_publisher(JointState, names.JOINT_STATES, recorded(10))
        self.clock = SimClockPublisher(self)
        self.state_pub = self.create_publisher(PrivilegedState, names.PRIVILEGED_STATE, LATCHED)
        self.snapshot_pub = self.create_publisher(SceneSnapshot, names.SCENE_SNAPSHOT, recorded(10))
        self.depth_pub = self.create_publisher(Image, names.CAMERA_DEPTH, recorded(5))
        self.instances_pub = self.create_publisher(Image, names.SIM_INSTANCES, recorded(5))
        instance_names = self.create_publisher(String, names.SIM_INSTANCE_NAMES, LATCHED)
        instance_names.publish(String(data=json.dumps({str(i): item for item, i in ITEM_INDEX.items()})))
        group = ReentrantCallbackGroup()
        self.create_service(
            ResetScene, names.RESET_SCENE, refusing_service(self, self.on_reset), callback_group=group
        )
        # FollowInstruction and MoveToPose move one arm: one goal of either runs at a time, and a valid
        # goal preempts the running one (the single-goal rule, as the Language Table servers keep it).
        self.goals = SingleGoal(self, self.goal_refusal)
        for action, name, execute in (
            (FollowInstruction, names.FOLLOW_INSTRUCTION, self.follow),
            (MoveToPose, names.MOVE_TO_POSE, self.move),
        ):
            self.goals.serve(action, name, execute, group)
        self.heartbeat = HeartbeatPublisher(self)
        monitor = HeartbeatMonitor(self)
        self.guard = MotionGuard(self, monitor, p["client_timeout_s"], p["reasoner_node"])
        self.freezes = FreezeWatch(COMMAND_DEADLINE_S)
        self.resets = scene_resets(self, self.freezes)
        self.publish_settled()
        self.get_logger().info(f"packing workcell at {width}x{height}")

    def shutdown(self) -> None:
        self.freezes.close()

    # -- callbacks -----------------------------------------------------------------------------
    def goal_refusal(self, goal) -> str:
        """Why a FollowInstruction or MoveToPose goal will be refused before anything moves ("" = it
        will not): such a goal preempts nothing (``SingleGoal``); it waits for its turn and is refused
        then, in the words its interface answers with."""
        if isinstance(goal, MoveToPose.Goal):
            target = conv.move_goal_to_target(goal, self.base_frame, self.cell.executor)
            return target if isinstance(target, str) else ""
        try:
            interface = check_instruction_goal(goal, SUITE, CELL_INTERFACES, takes_budget=False)
        except GoalRefused as exc:
            return f"error: invalid goal: {exc}"
        return answer_refusal(interface, goal.instruction)

    def on_reset(self, request: ResetScene.Request, response: ResetScene.Response) -> ResetScene.Response:
        with self.lock:
            task = self.resets.answer(request, response, SUITE, self.reset_scene)
            if task is None:
                return response
            self.episode_id, self.task = request.episode_id, task
            self.publish_settled()
        self.get_logger().info(f"reset packing task {request.task} seed {request.seed}: {response.goal}")
        return response

    def reset_scene(self, task: str, seed: int):
        self.cell.reset(seed, task)
        return self.env.task_instance

    def follow(self, handle) -> FollowInstruction.Result:
        """One packing instruction: the policy's skills through the sim executor."""
        goal, result = handle.request, FollowInstruction.Result()
        self.get_logger().info(f"{goal.interface or 'instruction'}: {goal.instruction[:120]!r}")
        try:
            interface = check_instruction_goal(goal, SUITE, CELL_INTERFACES, takes_budget=False)
        except GoalRefused as exc:
            result.reason = f"error: invalid goal: {exc}"
            self.goals.end(handle, "aborted")
            return result

        def carry_out() -> Execution:
            self.heartbeat.state = "busy"
            try:
                rng = np.random.default_rng(goal.seed)
                return self.cell.carry_out(interface, goal.instruction, rng, goal.steps_left)
            except PerceptionUnavailable as exc:
                return Execution(0, f"error: perception: {exc}")
            finally:
                self.heartbeat.state = "idle"

        done, stopped, result.finished = self.drive(handle, True, lambda _: self.on_control_step(), carry_out)
        result.steps = done.control_steps if done is not None else 0
        if stopped is not None:
            result.success, result.reason = False, stopped
        else:
            result.success, result.reason, result.outcome = not done.error, done.error or "done", done.outcome
        self.end(handle, stopped, result.success)
        return result

    def move(self, handle) -> MoveToPose.Result:
        """One end-effector move; refusals come back as results, never clipped targets."""
        result = MoveToPose.Result()
        target = conv.move_goal_to_target(handle.request, self.base_frame, self.cell.executor)
        if isinstance(target, str):
            result.reason, result.position_error, result.orientation_error = target, math.nan, math.nan
            handle.abort()
            return result

        def on_step(remaining: float) -> bool:
            handle.publish_feedback(MoveToPose.Feedback(distance_remaining=remaining))
            return self.on_control_step()

        # No client watchdog: who sends MoveToPose is not known here (cancel and stop apply).
        moved, stopped, _ = self.drive(handle, False, on_step, self.cell.executor.move_to_pose, target)
        if moved is not None:
            result.reached, result.reason = moved.reached, moved.reason
            result.position_error, result.orientation_error = moved.position_error, moved.orientation_error
        if stopped is not None:
            result.reached, result.reason = False, stopped
        self.end(handle, stopped, result.reached)
        return result

    def drive(self, handle, watch_client: bool, on_step, act, *args):
        """``act(*args)`` on the cell once ``handle`` has the turn (a goal that preempted a running one
        waits for it to stop), the sim executor asking before every control step whether ``handle``
        must stop (preempted, ``self.guard``, a freeze of this process), and once before it begins: a
        tools call that moves nothing (``update_todo``) ran after its goal was cancelled; then a
        decision point.
        Returns ``act``'s value (None when the goal never had the turn), why the goal stopped (None if
        it did not) and the decision point's stamp."""

        def why_stop() -> str | None:
            return PREEMPTED if not handle.is_active else self.guard.stop_reason(handle, watch_client)

        with self.goals.turn(handle) as has_turn, self.lock:
            if not has_turn:
                return None, why_stop() or "canceled", self.publish_settled()
            stop = GoalStop(self.freezes, self.get_fully_qualified_name(), why_stop)
            if (
                stop()
            ):  # cancelled or stopped before it began: no part of it runs, one that moves nothing neither
                return None, stop.reason, self.publish_settled()
            with self.cell.driven(on_step, stop):
                done = act(*args)
            return done, stop.reason, self.publish_settled()

    def goal_must_stop(self) -> bool:
        """Whether the running goal must stop now: the stop that ``drive`` gives the arm's executor for
        it (``PackingCell.driven``), asked by the perception waits too (a wait for a perception node
        that never answered held the lock ``perception_timeout_s`` past its goal's cancel)."""
        should_stop = self.cell.executor.should_stop
        return should_stop is not None and should_stop()

    def end(self, handle, stopped: str | None, success: bool) -> None:
        if stopped == PREEMPTED:
            self.goals.end(handle, "aborted")
        elif stopped is not None:
            end_stopped(handle, stopped, self.goals.end)
        else:
            self.goals.end(handle, "succeeded" if success else "aborted")

    def on_control_step(self) -> bool:
        """Publish joints after every control step, the policy's settling steps too, as a driver
        publishes joint states, and /clock every ``names.CLOCK_PERIOD_NS`` (stopping is
        ``GoalStop``'s job)."""
        self.publish_time(due_only=True)
        return True

    # -- publishing (called with the lock held) ------------------------------------------------
    def capture(self, resend: bool = False) -> int:
        """The perception client's camera side: the stamp of the base camera's frame of the scene as
        it is now, published once per scene state (again with ``resend``)."""
        return self.frames(again=resend)

    def publish_frame(self) -> int:
        """The base camera's RGB-D frame and instance mask, now; its stamp."""
        stamp_ns, (image_pub, info_pub) = self.cell.now_ns, self.image_pubs["base"]
        stamp, frame = conv.ns_to_stamp(stamp_ns), self.env.rgbd_frame("base", stamp_ns)
        self.clock.publish(stamp_ns, again=True)
        image, info, depth, ids = conv.rgbd_frame_msgs(frame, stamp, "base_camera_color_optical_frame")
        info_pub.publish(info)
        self.instances_pub.publish(ids)
        self.depth_pub.publish(depth)
        image_pub.publish(image)
        return stamp_ns

    def publish_time(self, due_only: bool = False):
        """/clock (``due_only``: only if due) and joint_states, now; the stamp."""
        if due_only:
            self.clock.publish_if_due(self.cell.now_ns)
        else:
            self.clock.publish(self.cell.now_ns)
        stamp = conv.ns_to_stamp(self.cell.now_ns)
        self.joint_pub.publish(conv.joint_state_msg(self.env.joint_positions(), stamp))
        return stamp

    def publish_settled(self):
        """A decision point: time, joints, both cameras, the privileged state and a snapshot, one stamp."""
        env, stamp = self.env, self.publish_time()
        for cam, (image_pub, info_pub) in self.image_pubs.items():
            frame, k = f"{cam}_camera_color_optical_frame", env.camera_model(cam).k
            image_pub.publish(conv.image_to_msg(env.render_camera(cam), stamp, frame))
            info_pub.publish(conv.camera_info_msg(k, env.width, env.height, stamp, frame))
        step, state = env.elapsed_steps, env.state()
        msg = PrivilegedState(episode_id=self.episode_id, control_step=step, suite=SUITE, task=self.task)
        msg.header.stamp = stamp
        self.state_pub.publish(conv.packing_decision_to_msg(state, env.task_instance, env.max_progress, msg))
        snapshot = self.cell.snapshot()  # with the tools' memory
        self.snapshot_pub.publish(conv.snapshot_msg(self.episode_id, step, SNAPSHOT_FORMAT, snapshot, stamp))
        return stamp


def main(args=None) -> None:
    run_node(PackingSimNode, args)


if __name__ == "__main__":
    main()
