"""r3_packing_sim_node: the packing workcell in MuJoCo, with the simulated arm's driver in-process.

One process owns the one ``PackingEnv`` that everything acting on it must share: it publishes what
a real cell publishes (base and wrist camera images with camera_info, joint_states, /clock) plus the
privileged state and snapshots, serves ResetScene (suite "packing"), serves MoveToPose through the
``sim`` executor (the simulated robot's driver; on a real arm ``r3_execution_node`` serves it with
the ``moveit`` executor), and serves FollowInstruction with the packing policy calling that same
executor in-process. Images, state and a snapshot are published at every decision point (after a
reset, an instruction or a move), all with one stamp, so the reasoner sees the state it decides on.
Sim time advances 50 ms per control step and never goes back, across resets too.

``grounding`` chooses how the packing policy sees the scene: ``sim`` (the simulator's item poses) or
``perception`` (the perception node's DetectedObjects and GroundPoint only, ``r3_ros.perception_client``).
For the latter, whenever the policy looks after something moved, the node publishes a base-camera
frame as an RGB-D camera would (colour, camera_info, aligned 32FC1 depth) plus the instance mask
the perception node's ``sim`` backend segments with.

The arm takes no control step once its goal is cancelled, once a stop of the goal's family arrives on
``/r3/stop_motion``, or (FollowInstruction only, whose client is the reasoner) once the reasoner falls
silent for ``client_timeout_s`` (watchdog): ``r3_ros.stop.MotionGuard``, asked by the sim executor
before every control step. Nor once this process was frozen (SIGSTOP) or starved for longer than
``COMMAND_DEADLINE_S`` while the goal ran (``r3.safety.freeze.FreezeWatch``): by the time it runs
again its client may have given up on the goal (the reasoner does after its 5 s heartbeat timeout),
so the goal is stale; the arm holds still and the goal ends with an error. MoveIt Servo's
incoming-command timeout, applied to the goal being executed. Once a goal must stop, the simulated
world takes no further step for it (the policy's settling steps are skipped too).
"""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import dataclass

import numpy as np
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import String

from r3.episode_loop import Execution
from r3.graph import names
from r3.graph.node_params import NODE_PARAMETERS
from r3.lowlevel.perceived import arm_reading, scene_key
from r3.packing_episode import CELL_INTERFACES, PackingCell
from r3.safety.freeze import FreezeWatch
from r3.safety.goals import GoalRefused, canonical_task, check_interface, check_seed
from r3.sim.packing import scene
from r3.sim.packing.env import ITEM_INDEX, PackingEnv
from r3_msgs.action import FollowInstruction, MoveToPose
from r3_msgs.msg import PrivilegedState, SceneSnapshot
from r3_msgs.srv import ResetScene
from r3_ros.conversions import (
    camera_info_msg,
    depth_to_msg,
    image_to_msg,
    instances_to_msg,
    move_goal_to_target,
    ns_to_stamp,
    packing_state_to_msg,
)
from r3_ros.goals import SingleGoal
from r3_ros.heartbeat import HeartbeatMonitor, HeartbeatPublisher
from r3_ros.params import declare_parameters
from r3_ros.perception_client import PerceptionUnavailable, RosPerception
from r3_ros.qos import LATCHED, recorded
from r3_ros.refusals import refusing_action, refusing_service
from r3_ros.services import ResetRecord
from r3_ros.spin import run_node
from r3_ros.stop import MotionGuard, end_stopped

SUITE = "packing"  # the suite this node simulates
SNAPSHOT_FORMAT = "r3-packing-snapshot/1"
STEP_NS = round(scene.CONTROL_DT * 1e9)
#: How long this process may be frozen or starved while a goal runs before the goal counts as stale;
#: below the reasoner's heartbeat timeout (5 s), so a goal its client gave up on never moves again.
COMMAND_DEADLINE_S = 2.0
CAMERAS = {"base": (names.CAMERA_IMAGE, names.CAMERA_INFO), "wrist": (names.WRIST_IMAGE, names.WRIST_INFO)}


@dataclass
class _Stop:
    """Why a goal's motion stopped; None while it may move."""

    reason: str | None = None


class PackingSimNode(Node):
    def __init__(self):
        super().__init__("r3_packing_sim_node")
        p = declare_parameters(self, NODE_PARAMETERS["r3_packing_sim_node"])
        width, height = p["image_width"], p["image_height"]
        self.base_frame = p["base_frame"]
        grounding = p["grounding"]
        env = PackingEnv(width=width, height=height)
        env.reset(seed=0)
        self.env = env
        self._frame_key, self._frame_ns = None, 0
        source = None
        if grounding == "perception":
            source = RosPerception(
                self,
                env.camera_model("base"),
                self.capture,
                lambda: arm_reading(env),
                p["perception_timeout_s"],
            )
        self.cell = PackingCell.build(env, grounding=grounding, source=source)
        self.lock = threading.Lock()  # one goal or reset acts on the env at a time
        self.episode_id, self.task = "", ""
        self.base_ns = 0  # sim time of the current episode's step 0

        self.image_pubs = {
            cam: (
                self.create_publisher(Image, img, recorded(5)),
                self.create_publisher(CameraInfo, info, recorded(5)),
            )
            for cam, (img, info) in CAMERAS.items()
        }
        self.joint_pub = self.create_publisher(JointState, names.JOINT_STATES, recorded(10))
        self.clock_pub = self.create_publisher(ClockMsg, names.CLOCK, recorded(10))
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
        self.goals = SingleGoal(self)  # only its end(): the goals run one at a time under the lock
        for action, name, execute in (
            (FollowInstruction, names.FOLLOW_INSTRUCTION, self.follow),
            (MoveToPose, names.MOVE_TO_POSE, self.move),
        ):
            ActionServer(
                self,
                action,
                name,
                execute_callback=refusing_action(self, execute, action.Result, self.goals.end),
                goal_callback=lambda _: GoalResponse.ACCEPT,
                cancel_callback=lambda _: CancelResponse.ACCEPT,
                callback_group=group,
            )
        self.heartbeat = HeartbeatPublisher(self)
        self.guard = MotionGuard(
            self,
            HeartbeatMonitor(self, callback_group=MutuallyExclusiveCallbackGroup()),
            p["client_timeout_s"],
            p["reasoner_node"],
        )
        self.freezes = FreezeWatch(COMMAND_DEADLINE_S)
        self.resets = ResetRecord()
        self.publish_settled()
        self.get_logger().info(f"packing workcell at {width}x{height}")

    @property
    def now_ns(self) -> int:
        return self.base_ns + self.env.elapsed_steps * STEP_NS

    # -- callbacks -----------------------------------------------------------------------------
    def on_reset(self, request: ResetScene.Request, response: ResetScene.Response) -> ResetScene.Response:
        with self.lock:
            if request.suite != SUITE:
                response.ok, response.reason = False, f"suite {request.suite!r} is not simulated by this node"
                return response
            if self.resets.repeat(request, response):
                return response  # the caller resent it: its first answer was lost
            next_ns = self.now_ns + STEP_NS  # time moves on across a reset, so every stamp is unique
            try:
                task = canonical_task(SUITE, request.task)
                self.cell.reset(check_seed(request.seed), task)
            except (KeyError, ValueError, RuntimeError) as exc:
                response.ok, response.reason = False, f"cannot reset task {request.task[:80]!r}: {exc}"
                return response
            self.base_ns, self.episode_id, self.task = next_ns, request.episode_id, task
            instance = self.env.task_instance
            response.ok, response.goal = True, instance.goal
            response.task_instance_json = json.dumps(instance.to_dict())
            self.resets.remember(request, response)
            self.publish_settled()
        self.get_logger().info(f"reset packing task {request.task} seed {request.seed}: {instance.goal}")
        return response

    def follow(self, handle) -> FollowInstruction.Result:
        """One packing instruction: the policy's skills through the sim executor; a cancel, a stop or
        a silent reasoner stops the arm before its next control step."""
        goal, result = handle.request, FollowInstruction.Result()
        self.get_logger().info(f"{goal.interface or 'instruction'}: {goal.instruction[:120]!r}")
        try:
            if goal.suite != SUITE:
                raise GoalRefused(f"suite {goal.suite[:80]!r} is not served here ({SUITE})")
            check_seed(goal.seed)
            interface = check_interface(goal.interface, SUITE, served=CELL_INTERFACES)
        except GoalRefused as exc:
            result.reason = f"error: invalid goal: {exc}"
            self.goals.end(handle, "aborted")
            return result
        with self.lock:
            self.heartbeat.state = "busy"
            stop = self.arm_guard(handle, watch_client=True)
            self.cell.executor.on_step = lambda _: self.on_control_step()
            idle = self.cell.policy.idle
            self.cell.policy.idle = lambda: (
                None if stop.reason is not None else (idle(), self.on_control_step())
            )
            try:
                rng = np.random.default_rng(goal.seed)
                done = self.cell.carry_out(interface, goal.instruction, rng, goal.steps_left)
            except PerceptionUnavailable as exc:
                done = Execution(0, f"error: perception: {exc}")
            finally:
                self.cell.executor.on_step = self.cell.executor.should_stop = None
                self.cell.policy.idle = idle
                self.heartbeat.state = "idle"
            result.steps, result.finished = done.control_steps, self.publish_settled()
        if stop.reason is not None:
            result.success, result.reason = False, stop.reason
            end_stopped(handle, stop.reason, self.goals.end)
            return result
        result.success, result.reason, result.outcome = not done.error, done.error or "done", done.outcome
        self.goals.end(handle, "succeeded" if result.success else "aborted")
        return result

    def arm_guard(self, handle, watch_client: bool) -> _Stop:
        """Make the sim executor ask ``self.guard`` before every control step of ``handle``'s motion;
        the first reason to stop sticks (a reasoner heard again does not restart the arm)."""
        stop, started = _Stop(), time.monotonic()

        def should_stop() -> bool:
            if stop.reason is None and (frozen_s := self.freezes.frozen_since(started)):
                stop.reason = (
                    f"error: {self.get_fully_qualified_name()} was frozen or starved for {frozen_s:.1f} s "
                    f"(deadline {COMMAND_DEADLINE_S} s); its goal is stale, motion stopped"
                )
            if stop.reason is None:
                stop.reason = self.guard.stop_reason(handle, watch_client)
            return stop.reason is not None

        self.cell.executor.should_stop = should_stop
        return stop

    def move(self, handle) -> MoveToPose.Result:
        """One end-effector move; refusals come back as results, never clipped targets."""
        result = MoveToPose.Result()
        target = move_goal_to_target(handle.request, self.base_frame)
        if isinstance(target, str):
            result.reason, result.position_error, result.orientation_error = target, math.nan, math.nan
            handle.abort()
            return result

        def on_step(remaining: float) -> bool:
            handle.publish_feedback(MoveToPose.Feedback(distance_remaining=remaining))
            return self.on_control_step()

        with self.lock:
            # No client watchdog: who sends MoveToPose is not known here (cancel and stop apply).
            stop = self.arm_guard(handle, watch_client=False)
            self.cell.executor.on_step = on_step
            try:
                moved = self.cell.executor.move_to_pose(target)
            finally:
                self.cell.executor.on_step = self.cell.executor.should_stop = None
            self.publish_settled()
        result.reached, result.reason = moved.reached, moved.reason
        result.position_error, result.orientation_error = moved.position_error, moved.orientation_error
        if stop.reason is not None:
            result.reached, result.reason = False, stop.reason
            end_stopped(handle, stop.reason, self.goals.end)
        else:
            self.goals.end(handle, "succeeded" if moved.reached else "aborted")
        return result

    def on_control_step(self) -> bool:
        """Publish time and joints after every control step, the policy's settling steps too, as a
        driver publishes joint states (stopping is ``should_stop``'s job)."""
        stamp = ns_to_stamp(self.now_ns)
        self.clock_pub.publish(ClockMsg(clock=stamp))
        self.publish_joints(stamp)
        return True

    # -- publishing (called with the lock held) ------------------------------------------------
    def capture(self, resend: bool = False) -> int:
        """The base camera's RGB-D frame and instance mask of the scene as it is now, published once
        per scene state (again with ``resend``); returns its stamp (the perception client waits for
        its detections)."""
        key = scene_key(self.env)
        if key == self._frame_key and not resend:
            return self._frame_ns
        stamp_ns = self.now_ns
        stamp = ns_to_stamp(stamp_ns)
        frame = self.env.rgbd_frame("base", stamp_ns)
        optical = "base_camera_color_optical_frame"
        self.clock_pub.publish(ClockMsg(clock=stamp))
        image_pub, info_pub = self.image_pubs["base"]
        info_pub.publish(camera_info_msg(frame.camera.k, self.env.width, self.env.height, stamp, optical))
        self.instances_pub.publish(instances_to_msg(frame.instances, stamp, optical))
        self.depth_pub.publish(depth_to_msg(frame.depth_m, stamp, optical, encoding="32FC1"))
        image_pub.publish(image_to_msg(frame.rgb, stamp, optical))
        self._frame_key, self._frame_ns = key, stamp_ns
        return stamp_ns

    def publish_settled(self):
        """A decision point: time, joints, both cameras, the privileged state and a snapshot, one stamp."""
        stamp = ns_to_stamp(self.now_ns)
        self.clock_pub.publish(ClockMsg(clock=stamp))
        self.publish_joints(stamp)
        for cam, (image_pub, info_pub) in self.image_pubs.items():
            frame = f"{cam}_camera_color_optical_frame"
            image_pub.publish(image_to_msg(self.env.render_camera(cam), stamp, frame))
            info_pub.publish(
                camera_info_msg(self.env.camera_model(cam).k, self.env.width, self.env.height, stamp, frame)
            )
        state, instance = self.env.state(), self.env.task_instance
        msg = PrivilegedState(
            episode_id=self.episode_id,
            control_step=self.env.elapsed_steps,
            suite=SUITE,
            task=self.task,
            goal=instance.goal if instance else "",
        )
        msg.header.stamp, msg.header.frame_id = stamp, "world"
        if instance is not None:
            msg.task_instance_json = json.dumps(instance.to_dict())
            msg.progress = float(self.env.max_progress)
            msg.success = bool(instance.success(state))
        self.state_pub.publish(packing_state_to_msg(state, msg))
        snap = SceneSnapshot(
            episode_id=self.episode_id, control_step=self.env.elapsed_steps, format=SNAPSHOT_FORMAT
        )
        snap.header.stamp, snap.data = stamp, self.cell.snapshot()  # with the tools' memory
        self.snapshot_pub.publish(snap)
        return stamp

    def publish_joints(self, stamp) -> None:
        s = self.env.state()
        joints = JointState(
            name=[*scene.ARM_JOINTS, *scene.FINGER_JOINTS],
            position=[*s.joints, s.gripper_opening / 2, s.gripper_opening / 2],
        )
        joints.header.stamp = stamp
        self.joint_pub.publish(joints)


def main(args=None) -> None:
    run_node(PackingSimNode, args)


if __name__ == "__main__":
    main()
