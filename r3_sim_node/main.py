"""r3_sim_node: the Language Table simulator, publishing what a real cell publishes.

Lock-step: one pusher command advances the simulation by one 0.1 s control step and publishes the
new state, so the simulation runs as fast as its consumers (faster than real time when nothing
waits). The camera renders at ``camera_rate_hz`` of simulated time and, whatever that rate, at each
decision point (so the reasoner always sees the state it decides on); a snapshot is published at the
same points. A decision point is the moment a FollowInstruction goal ends (its terminal status on the
action's status topic: the low-level node has seen the state of its last command), or, for commands
from anything else (a teleoperator), ``settle_s`` of wall time without a command. /clock is simulated
time and never goes back, across resets too; it goes out at every reset and decision point, and
between them every ``names.CLOCK_PERIOD_NS`` of simulated time.

The pusher driver refuses, never clips: a command in another frame than the board's, with a z, that
is non-finite, over the per-step limit, off the reachable board area (``LanguageTableEnv.off_board``),
or older than ``PUSHER_COMMAND_DEADLINE_S`` by its DDS source stamp (a command that waited in a queue while
this process was frozen, MoveIt Servo's incoming-command timeout; checked between the step's physics
substeps too, so a step this process was frozen in the middle of is undone, not finished), moves
nothing, is logged and counted, and is answered on ``/pusher/refusals`` with the reason, so its
sender ends the instruction at once. The deadline is below the low-level node's ``state_timeout_s``
(its range's lower bound), so a command whose FollowInstruction has already ended is always refused.

With a ``controller`` (a low-level policy's name) the node serves FollowInstruction itself
(``r3_ros.instruction_server``): the policy acts on the simulation in this process, as ros2_control
runs a controller beside its hardware interface, so no control step waits on DDS; r3_lowlevel_node
is not part of such a graph. Each command it applies goes through the same checks as one received,
and is published on ``/pusher/command`` for the record (the bag holds what a low-level node's
episode holds); commands on that topic from anyone else are not taken (the controller owns the
pusher). The decision point is the instruction's end, published before its goal ends, and only
then: no idle time counts as one (``settle_s`` is for others' commands, which it does not take). Besides the
goal's stops (``r3_ros.stop.MotionGuard``), a goal stops when this process was frozen or starved
for longer than ``PUSHER_COMMAND_DEADLINE_S`` while it ran (``r3.safety.freeze``), as a stale command is
refused, and a step frozen in its middle past that deadline is undone, as a received command's is.
"""

from __future__ import annotations

import json
import threading
import time

import numpy as np
from action_msgs.msg import GoalStatusArray
from geometry_msgs.msg import Vector3Stamped
from rclpy.qos import qos_profile_action_status_default
from sensor_msgs.msg import CameraInfo, Image, JointState

from r3.graph import names
from r3.graph.names import PUSHER_COMMAND_DEADLINE_S
from r3.graph.node_params import NODE_PARAMETERS
from r3.safety.freeze import FreezeWatch, stale_goal
from r3.sim.language_table.env import LanguageTableEnv
from r3.sim.language_table.scene import CONTROL_DT
from r3_msgs.msg import CommandRefusal, PrivilegedState, SceneSnapshot
from r3_msgs.srv import ResetScene
from r3_ros.conversions import board_state_to_msg, camera_info_msg, image_to_msg, ns_to_stamp
from r3_ros.episode_topics import scene_resets
from r3_ros.goals import ENDED
from r3_ros.heartbeat import HeartbeatMonitor, HeartbeatPublisher
from r3_ros.instruction_server import Ended, InstructionServer
from r3_ros.node import R3Node
from r3_ros.params import declare_parameters
from r3_ros.qos import LATCHED, REFUSALS, recorded
from r3_ros.refusals import refusing_message, refusing_service
from r3_ros.sim_clock import SimClockPublisher
from r3_ros.spin import run_node
from r3_ros.stop import MotionGuard

SNAPSHOT_FORMAT = "r3-language-table-snapshot/1"
STEP_NS = round(CONTROL_DT * 1e9)
#: The frames a pusher command may name: the board's ("" is read as it, as a teleoperator sends).
COMMAND_FRAMES = ("board", "")


class SimNode(R3Node):
    def __init__(self):
        super().__init__("r3_sim_node")
        p = declare_parameters(self, NODE_PARAMETERS["r3_sim_node"])
        self.suite, width, height = p["suite"], p["image_width"], p["image_height"]  # the suite simulated
        rate = p["camera_rate_hz"]
        self.camera_period_ns = 0 if rate <= 0 else round(1e9 / rate)
        self.settle_s = p["settle_s"]
        self.camera_frame = p["camera_frame"]
        self.controller = p["controller"]

        self.env = LanguageTableEnv(width=width, height=height)
        _, self.env_info = self.env.reset(seed=0)  # the env's info on its state now (success, progress)
        self.lock = threading.Lock()
        self.command_or_close = threading.Condition(self.lock)  # wakes the settle thread
        self.closing = False
        self.ended_goals: set[bytes] = set()  # FollowInstruction goals seen in a terminal state
        self.episode_id = ""
        self.clock_ns = 0
        self.last_image_ns = -1
        self.last_command_wall = 0.0
        self.idle_published = False
        self.refused_commands = 0
        self.freezes = FreezeWatch(PUSHER_COMMAND_DEADLINE_S)
        self.resets = scene_resets(self, self.freezes)

        self.image_pub = self.create_publisher(Image, names.CAMERA_IMAGE, recorded(5))
        self.info_pub = self.create_publisher(CameraInfo, names.CAMERA_INFO, recorded(5))
        self.joint_pub = self.create_publisher(JointState, names.JOINT_STATES, recorded(10))
        self.clock = SimClockPublisher(self)
        self.state_pub = self.create_publisher(PrivilegedState, names.PRIVILEGED_STATE, LATCHED)
        self.snapshot_pub = self.create_publisher(SceneSnapshot, names.SCENE_SNAPSHOT, recorded(10))
        self.refusal_pub = self.create_publisher(CommandRefusal, names.PUSHER_REFUSALS, REFUSALS)
        self.create_service(ResetScene, names.RESET_SCENE, refusing_service(self, self.on_reset))
        self.heartbeat = HeartbeatPublisher(self)
        if self.controller:
            self.command_pub = self.create_publisher(Vector3Stamped, names.PUSHER_COMMAND, recorded(10))
            self.goal_started: dict[bytes, float] = {}  # monotonic start of each running goal
            self.guard = MotionGuard(self, HeartbeatMonitor(self), p["client_timeout_s"], p["reasoner_node"])
            self.server = InstructionServer(
                self, self, self.controller, p["default_max_steps"], self.guard, self.heartbeat
            )
        else:
            self.create_subscription(
                Vector3Stamped,
                names.PUSHER_COMMAND,
                refusing_message(self, self.on_command),
                10,
            )
            self.create_subscription(
                GoalStatusArray,
                names.FOLLOW_INSTRUCTION_STATUS,
                refusing_message(self, self.on_follow_status),
                qos_profile_action_status_default,
            )
        self.joints = JointState(name=["pusher_x", "pusher_y"])
        self.state_msg = self.episode_state_message()
        self.publish_state()
        # Idle time marks decision points only for commands from others; a controller marks its own.
        self.settler = threading.Thread(target=self.settle_when_idle, name="settle", daemon=True)
        if not self.controller:
            self.settler.start()
        camera = rate or "at decision points"
        self.get_logger().info(f"simulating {self.suite} at {width}x{height}, camera {camera}")

    def shutdown(self) -> None:
        with self.lock:
            self.closing = True
            self.command_or_close.notify()
        if self.settler.is_alive():
            self.settler.join(timeout=5)
        self.freezes.close()

    # -- callbacks -----------------------------------------------------------------------------
    def on_reset(self, request: ResetScene.Request, response: ResetScene.Response) -> ResetScene.Response:
        with self.lock:
            if self.resets.answer(request, response, self.suite, self.reset_scene) is None:
                return response
            self.episode_id = request.episode_id
            self.state_msg = self.episode_state_message()
            self.clock_ns += STEP_NS  # time moves on across a reset, so every stamp is unique
            self.publish_state()
            self.publish_settled()
        self.get_logger().info(f"reset {request.task} seed {request.seed}: {response.goal}")
        return response

    def reset_scene(self, task: str, seed: int):
        _, self.env_info = self.env.reset(seed=seed, options={"task": task})
        return self.env.task_instance

    def on_command(self, msg: Vector3Stamped, info) -> None:
        """One control step, unless the command is stale or out of range (refused, never clipped)."""
        sent_ns = info["source_timestamp"]
        age_s = (time.time_ns() - sent_ns) / 1e9
        if age_s > PUSHER_COMMAND_DEADLINE_S / 2:  # on time still, but late: a loaded or starved graph
            self.get_logger().warning(f"pusher command arrived {age_s:.2f} s after it was sent")
        with self.lock:
            self.apply(msg, cut_off=lambda: self.staleness(sent_ns))

    def staleness(self, sent_ns: int) -> str:
        """Why a command sent at ``sent_ns`` (wall clock) is stale now ("" while it is not): asked as it
        arrives and between its step's substeps (a freeze can come in the middle of a step)."""
        age_s = (time.time_ns() - sent_ns) / 1e9
        if age_s <= PUSHER_COMMAND_DEADLINE_S:
            return ""
        return f"stale, sent {age_s:.2f} s ago (deadline {PUSHER_COMMAND_DEADLINE_S} s){self.why_late(age_s)}"

    def why_late(self, age_s: float) -> str:
        """What a stale command's refusal adds when this process stood still since the command was sent:
        its sender reports the refusal, and must not look like the one that was late."""
        if frozen_s := self.freezes.frozen_since(time.monotonic() - age_s):
            return f"; {self.get_fully_qualified_name()} was frozen or starved for {frozen_s:.1f} s meanwhile"
        return ""

    def apply(self, msg: Vector3Stamped, cut_off=None) -> str:
        """One control step (called with the lock held), or the reason it was refused; ``cut_off`` is
        the step's ``LanguageTableEnv.step`` check."""
        if cut_off is not None and (why := cut_off()):
            return self.refuse(msg, f"refused: {why}")
        if (frame := msg.header.frame_id) not in COMMAND_FRAMES:
            return self.refuse(msg, f"refused: frame {frame[:40]!r}: commands move in the board frame")
        if msg.vector.z != 0.0:  # NaN too: it is not 0
            return self.refuse(msg, f"refused: z={msg.vector.z!r}: the pusher moves in the board's plane")
        action = np.array([msg.vector.x, msg.vector.y])
        if off_board := self.env.off_board(action):  # a driver refuses what the board's rim would stop
            return self.refuse(msg, f"refused: {off_board}")
        try:
            *_, self.env_info = self.env.step(action, cut_off=cut_off)
        except ValueError as exc:
            return self.refuse(msg, str(exc))
        self.clock_ns += STEP_NS
        self.last_command_wall = time.monotonic()
        self.idle_published = False
        self.command_or_close.notify()
        self.publish_state()
        if self.camera_period_ns and self.clock_ns - self.last_image_ns >= self.camera_period_ns:
            self.publish_image()
        return ""

    def refuse(self, msg: Vector3Stamped, reason: str) -> str:
        """Log, count and answer a command that moves nothing (called with the lock held); ``reason``."""
        self.refused_commands += 1
        self.get_logger().error(  # at most once a second: a flood of bad commands must not flood the log
            f"pusher command {[msg.vector.x, msg.vector.y]} {reason}; the pusher holds still "
            f"({self.refused_commands} refused so far)",
            throttle_duration_sec=1.0,
        )
        self.refusal_pub.publish(
            CommandRefusal(
                header=msg.header,
                command_topic=names.PUSHER_COMMAND,
                reason=reason,
                refused_so_far=self.refused_commands,
            )
        )
        return reason

    # -- the controller's plant (``controller`` set): the simulation itself -------------------------
    def begin(self, handle):
        self.goal_started[bytes(handle.goal_id.uuid)] = time.monotonic()
        with self.lock:
            return self.env.state(), ns_to_stamp(self.clock_ns)

    def step(self, handle, action, stamp):
        """The command a low-level node would send, published for the record and carried out. The
        controller sends it as the step begins, so the caller has given up on a step still running
        ``PUSHER_COMMAND_DEADLINE_S`` later, as on a received command (``staleness``, one rule for both;
        the freeze check between steps has the same deadline): a step this process was frozen in
        the middle of is undone, not finished after the goal's client had its error."""
        began_ns = time.time_ns()
        command = Vector3Stamped()
        command.header.stamp, command.header.frame_id = stamp, "board"
        command.vector.x, command.vector.y = float(action[0]), float(action[1])
        refusal = ""

        def send() -> None:
            nonlocal refusal
            self.command_pub.publish(command)
            refusal = self.apply(command, cut_off=lambda: self.staleness(began_ns))

        with self.lock:
            if frozen_s := self.freezes.frozen_since(self.goal_started[bytes(handle.goal_id.uuid)]):
                raise Ended(
                    stale_goal(self.get_fully_qualified_name(), frozen_s, PUSHER_COMMAND_DEADLINE_S),
                    stopped=True,
                )
            if (stop := self.guard.command(handle, send)) is not None:
                raise Ended(stop, stopped=True)
            if refusal:
                raise Ended(f"error: the simulator {refusal}")
            return self.published  # the step's state and stamp, as its state message has them

    def end(self, handle) -> None:
        """The instruction's end is the decision point, published before its goal ends."""
        self.goal_started.pop(bytes(handle.goal_id.uuid), None)
        with self.lock:
            if not self.idle_published:
                self.publish_settled()

    def on_follow_status(self, msg: GoalStatusArray) -> None:
        """A FollowInstruction goal that has just ended makes this a decision point, at once."""
        ended = {bytes(s.goal_info.goal_id.uuid) for s in msg.status_list if s.status in ENDED}
        with self.lock:
            new, self.ended_goals = ended - self.ended_goals, ended  # the array lists retained goals only
            if new and not self.idle_published:
                self.publish_settled()

    def settle_when_idle(self) -> None:
        """Publishes a decision point once ``settle_s`` has passed without a command; sleeps between
        commands (no polling: a timer would wake the executor a hundred times a second)."""
        publish = refusing_message(self, self.publish_settled)  # a failure is logged, the thread lives
        with self.lock:
            while not self.closing:
                left = self.last_command_wall + self.settle_s - time.monotonic()
                if self.idle_published or left > 0:
                    self.command_or_close.wait(None if self.idle_published else left)
                    continue
                publish()
                self.idle_published = True  # also after a failure: once per idle point, not in a loop

    # -- publishing (called with the lock held) ------------------------------------------------
    def publish_settled(self) -> None:
        """The robot is idle: publish the time, the current image and a snapshot (decision points)."""
        self.clock.publish(self.clock_ns)
        if self.last_image_ns != self.clock_ns:
            self.publish_image()
        snap = SceneSnapshot(
            episode_id=self.episode_id, control_step=self.env.elapsed_steps, format=SNAPSHOT_FORMAT
        )
        snap.header.stamp = ns_to_stamp(self.clock_ns)
        snap.data = self.env.snapshot()
        self.snapshot_pub.publish(snap)
        self.idle_published = True

    def publish_image(self) -> None:
        stamp = ns_to_stamp(self.clock_ns)
        self.image_pub.publish(image_to_msg(self.env.render(), stamp, self.camera_frame))
        self.info_pub.publish(
            camera_info_msg(
                self.env.camera_intrinsics(), self.env.width, self.env.height, stamp, self.camera_frame
            )
        )
        self.last_image_ns = self.clock_ns

    def episode_state_message(self) -> PrivilegedState:
        """The privileged state message of the episode just reset, its per-episode fields set: the
        lock-step loop refills and publishes it at every control step (building one anew, eight
        blocks and the task's JSON, was a tenth of a millisecond of Python each time)."""
        instance = self.env.task_instance
        msg = PrivilegedState(
            episode_id=self.episode_id,
            suite=self.suite,
            task=instance.spec.name if instance else "",
            goal=instance.goal if instance else "",
            task_instance_json=json.dumps(instance.to_dict()) if instance else "",
        )
        msg.header.frame_id = "board"
        return msg

    def publish_state(self) -> None:
        """/clock when it is due, joint states and the privileged state, now (the messages are this
        node's own, refilled: rclpy copies a message when it publishes it); ``published`` keeps the
        state and stamp sent, which the controller's plant hands its policy."""
        self.clock.publish_if_due(self.clock_ns)
        stamp = ns_to_stamp(self.clock_ns)
        state = self.env.state()
        self.published = state, stamp
        self.joints.header.stamp, self.joints.position = stamp, [float(v) for v in state.pusher]
        self.joint_pub.publish(self.joints)
        msg = self.state_msg
        msg.header.stamp, msg.control_step = stamp, self.env.elapsed_steps
        if self.env.task_instance is not None:  # the env's own figures of this state, not computed again
            msg.progress, msg.success = self.env_info["progress"], self.env_info["success"]
        self.state_pub.publish(board_state_to_msg(state, msg))


def main(args=None) -> None:
    # Without a controller every callback is short: no pool hand-off per command. A controller's
    # goal runs for a whole instruction, beside resets, cancels and stops.
    run_node(SimNode, args, threads=lambda node: 8 if node.controller else 1)


if __name__ == "__main__":
    main()
