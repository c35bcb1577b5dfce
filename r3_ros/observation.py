"""What the reasoner sees of the scene: the simulator's settled privileged state and the camera images
of it, waited for (bounded) and turned into the core's ``StepView``.

The simulator publishes a state every control step, but the reasoner reads one per decision: the
state subscription is taken when read (``r3_ros.executor.PolledCallbackGroup``) rather than waking
the reasoner's executor on each of them, beside the simulator and the low-level node on the
lock-step loop's critical path.

Language Table decides on the base camera, packing (with ``wrist_camera`` set) on the base and wrist
cameras; the expert reads the privileged state of either.

A state counts only from the simulator, the node ``sim_node`` names, looked up by its publisher's
DDS gid (``r3_ros.senders``: a publisher the graph does not name yet waits for its name, up to
``NAME_WAIT_S``); any other publisher's is refused and logged. A forged state stamped later
than the simulator's would otherwise be the one decided on, and one that says ``success`` ends the
episode as a success.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import CameraInfo, Image

from r3.episode_loop import StepView
from r3.graph import names
from r3.perception.camera import pose_matrix
from r3.reasoning.expert import ExpertView
from r3.reasoning.packing_expert import PackingExpertView
from r3.safety.goals import GoalRefused
from r3.suites import get_suite
from r3_msgs.msg import PrivilegedState
from r3_ros.adaptive_subscriptions import AdaptiveSubscriptions
from r3_ros.conversions import (
    check_camera_info,
    check_image,
    msg_to_board_state,
    msg_to_camera_model,
    msg_to_image,
    msg_to_packing_state,
    publisher_gid,
    stamp_to_ns,
    task_instance_from_msg,
)
from r3_ros.episode_watch import EpisodeError
from r3_ros.executor import PolledCallbackGroup, deliver_pending
from r3_ros.node import named_publishers, type_name
from r3_ros.qos import FRAMES_HEARD_DEPTH, STATES_HEARD
from r3_ros.refusals import refusing_message
from r3_ros.senders import NAME_WAIT_S, Senders

#: While the reasoner waits for a decision's state and images, how often it looks for a new state
#: (the wait is a few milliseconds long: the images of a decision point follow its state).
STATE_POLL_S = 0.005
#: How often that wait asks whether the episode should go on (``check()``).
CHECK_S = 0.05


@dataclass
class Observation:
    state: PrivilegedState
    images: list[Image]  # base camera, then the wrist camera where there is one


class SceneObserver:
    """The latest state and images, and the scene the running episode acts on (``scene_id``, the
    simulator's episode id of it). ``param`` is the node's live parameter mapping (``wrist_camera``,
    ``observation_timeout_s``, ``sim_node``, ``base_from_camera``), read at each use."""

    def __init__(self, node: Node, param: Mapping, callback_group=None):
        self.node, self.param = node, param
        self.senders = Senders(self.state_publishers, NAME_WAIT_S)
        self.cv = threading.Condition()
        self.state: PrivilegedState | None = None
        self.image: Image | None = None
        self.wrist_image: Image | None = None
        self.camera_info: CameraInfo | None = None  # the base camera's, for the expert's image points
        self.scene_id = ""
        self._states = node.create_subscription(
            PrivilegedState,
            names.PRIVILEGED_STATE,
            refusing_message(node, self.on_state),
            STATES_HEARD,
            callback_group=PolledCallbackGroup(),
            raw=True,  # taken as bytes: only the simulator's newest is deserialised (``latest_state``)
        )
        self._newest: bytes | None = None  # the simulator's newest state, serialised
        self._decoded: bytes | None = None  # the bytes ``self.state`` was deserialised from
        # The cameras as their publishers offer them: a simulator's frame, sent once per decision right
        # after a reset, reaches this node even when DDS matched the two sides late.
        self.cameras = AdaptiveSubscriptions(node, FRAMES_HEARD_DEPTH, callback_group=callback_group)
        image, info = type_name(Image), type_name(CameraInfo)
        on_image = refusing_message(node, self.on_image)
        on_wrist = refusing_message(node, self.on_wrist_image)
        self.cameras.add(names.CAMERA_IMAGE, lambda _: on_image, image)
        self.cameras.add(names.CAMERA_INFO, lambda _: refusing_message(node, self.on_camera_info), info)
        if param["wrist_camera"]:
            self.cameras.add(names.WRIST_IMAGE, lambda _: on_wrist, image)
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        node.create_timer(0.2, self.cameras.refresh, callback_group=callback_group, clock=steady)

    def on_state(self, data: bytes, info) -> None:
        gid = publisher_gid(info)
        if not gid:  # an rmw that gives no publisher: nothing to check it by
            self._newest = data
        else:
            self.senders.add(data, info, gid, time.monotonic())

    def state_publishers(self) -> dict[bytes, str]:
        """The fully qualified node name of each state publisher, by gid, where the graph gives one."""
        return named_publishers(self.node, names.PRIVILEGED_STATE, qualified=True)

    def latest_state(self) -> PrivilegedState | None:
        """The newest state received from the simulator (None before any). The states of a whole
        instruction wait in the queue until the next decision reads one: each is checked by its
        publisher as bytes, and only the newest of the simulator's deserialised."""
        with self.cv:
            deliver_pending([self._states])
            if self.senders.pending:
                for decided in self.senders.decided(time.monotonic()):
                    if decided.sender == self.param["sim_node"]:
                        self._newest = decided.message
                    else:
                        self.node.get_logger().error(
                            f"refused a state from {decided.sender or 'an unknown node'!r}: only "
                            f"{self.param['sim_node']} publishes the simulator's state",
                            throttle_duration_sec=1.0,
                        )
            if self._newest is not self._decoded:
                self.state, self._decoded = deserialize_message(self._newest, PrivilegedState), self._newest
            return self.state

    def on_camera_info(self, msg: CameraInfo) -> None:
        self.camera_info = check_camera_info(msg)

    def on_image(self, msg: Image) -> None:
        """A camera frame, kept when it is one the reasoner can read (anyone may publish on the
        camera topic; a frame it cannot read is refused here, not in the middle of a decision)."""
        check_image(msg)
        with self.cv:
            self.image = msg
            self.cv.notify_all()

    def on_wrist_image(self, msg: Image) -> None:
        check_image(msg)
        with self.cv:
            self.wrist_image = msg
            self.cv.notify_all()

    def progress(self) -> float:
        """The task progress the latest state reports (0 before any)."""
        s = self.latest_state()
        return s.progress if s else 0.0

    def current_scene(self, suite: str, task: str) -> str:
        """reset_scene=false: the simulator's episode id of the scene to continue on, which must be
        a ``task`` scene of ``suite``; GoalRefused otherwise."""
        s = self.latest_state()
        if s is None or not s.episode_id:
            raise GoalRefused("reset_scene is false but no scene has been reset yet")
        if (s.suite, s.task) != (suite, task):
            raise GoalRefused(
                f"reset_scene is false but the current scene is {s.suite} task {s.task!r}, "
                f"not {suite} task {task!r}"
            )
        return s.episode_id

    def observe(self, not_before_ns: int, check: Callable[[], None]) -> Observation:
        """The settled state of the episode's scene at or after ``not_before_ns`` and the images of it;
        ``check()`` runs between waits (it raises to end the wait)."""
        deadline = time.monotonic() + self.param["observation_timeout_s"]
        checked = time.monotonic()
        with self.cv:
            while True:
                s = self.latest_state()
                images = [self.image, self.wrist_image] if self.param["wrist_camera"] else [self.image]
                if (
                    s is not None
                    and s.episode_id == self.scene_id
                    and stamp_to_ns(s.header.stamp) >= not_before_ns
                    and all(
                        im is not None and stamp_to_ns(im.header.stamp) >= stamp_to_ns(s.header.stamp)
                        for im in images
                    )
                ):
                    return Observation(s, images)
                if time.monotonic() > deadline:
                    check()  # a freeze of this node (the frames sent meanwhile lost) is named first
                    raise EpisodeError(
                        f"{self.param['sim_node']} sent no state and image for this episode within "
                        f"{self.param['observation_timeout_s']:.1f} s"
                    )
                self.cv.wait(STATE_POLL_S)  # an image wakes it at once; a state is looked for this often
                if time.monotonic() - checked >= CHECK_S:
                    checked = time.monotonic()
                    check()

    def step_view(self, obs: Observation, goal: str, seed: int, interface: str) -> StepView:
        """The suite's view for the reasoner: its camera views and, for the expert, its privileged view;
        ``goal`` ("" = the task instance's own)."""
        instance, suite = task_instance_from_msg(obs.state), get_suite(obs.state.suite)
        if suite.make_sim is not None:  # a suite's own simulator shows the reasoner its camera only
            view = None
        elif suite.workcell:
            info, pose = self.camera_info, pose_matrix(self.param["base_from_camera"])
            camera = None if info is None else msg_to_camera_model(info, pose, "base")
            view = PackingExpertView(msg_to_packing_state(obs.state), instance, camera)
        else:
            view = ExpertView(msg_to_board_state(obs.state), instance)
        return StepView(
            obs.state.suite,
            goal or instance.goal,
            [msg_to_image(im) for im in obs.images],
            instance.note,
            view,
            seed,
            interface,
        )
