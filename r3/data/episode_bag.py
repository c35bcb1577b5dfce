"""In-process episodes as rosbag2 bags, in the recorder node's format (no rclpy).

``record_episode`` runs :func:`r3.episode.run_episode` with a :class:`RecordingEnv` that notes
every control step, then :func:`write_trajectory_bag` writes the bag a ``r3_recorder_node`` would
have written for the same episode: the topics of the ``sim_language_table`` profile with the same
message types and the same header conventions as the simulator, reasoner and low-level nodes.

Stamps are simulated time, as on the graph's ``/clock``: the state after control step ``c`` (0 =
the reset) is stamped ``(c + 1) * 0.1 s``. The bag's log times are the episode's wall-clock start
plus that simulated time, kept strictly increasing. Per decision step the bag holds, in order:
camera image + camera_info + SceneSnapshot (decision time), ReasonerStep, then per control step
the pusher command, joint_states and PrivilegedState, and an InstructionOutcome; the episode is
framed by EpisodeEvent START / END and ends with the settled image and snapshot.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from r3.data.bags import EpisodeBagWriter, EpisodeInfo
from r3.data.bagtypes import typestore
from r3.episode_loop import end_reason
from r3.graph import names

SUITE = "language_table"
SNAPSHOT_FORMAT = "r3-language-table-snapshot/1"  # as r3_sim_node publishes it
CAMERA_FRAME = "camera_color_optical_frame"
STEP_NS = 100_000_000  # one 0.1 s control step

IMAGE = "sensor_msgs/msg/Image"
CAMERA_INFO = "sensor_msgs/msg/CameraInfo"
JOINT_STATE = "sensor_msgs/msg/JointState"
COMMAND = "geometry_msgs/msg/Vector3Stamped"
PRIVILEGED = "r3_msgs/msg/PrivilegedState"
SNAPSHOT = "r3_msgs/msg/SceneSnapshot"
REASONER_STEP = "r3_msgs/msg/ReasonerStep"
OUTCOME = "r3_msgs/msg/InstructionOutcome"
EVENT = "r3_msgs/msg/EpisodeEvent"


@dataclass
class ControlRecord:
    """The state after one control step (or the reset: ``action`` None), with the task's verdict."""

    action: np.ndarray | None
    blocks: dict[str, tuple[float, float, float]]
    pusher: tuple[float, float]
    progress: float
    success: bool


class RecordingEnv:
    """Wraps a LanguageTableEnv and records the reset state and every control step."""

    def __init__(self, env):
        self.env = env
        self.controls: list[ControlRecord] = []

    def __getattr__(self, name):
        return getattr(self.env, name)

    def _note(self, action) -> None:
        state, instance = self.env.state(), self.env.task_instance
        self.controls.append(
            ControlRecord(
                None if action is None else np.asarray(action, dtype=float).copy(),
                dict(state.blocks),
                state.pusher,
                float(instance.progress(state)),
                bool(instance.success(state)),
            )
        )

    def reset(self, **kwargs):
        out = self.env.reset(**kwargs)
        self.controls = []
        self._note(None)
        return out

    def step(self, action):
        out = self.env.step(action)
        self._note(action)
        return out


@dataclass
class EpisodeRecording:
    """What :func:`write_trajectory_bag` needs besides the trajectory."""

    episode_id: str
    controls: list[ControlRecord]
    final_snapshot: bytes
    camera_k: np.ndarray
    width: int
    height: int
    backend_id: str
    steps_per_instruction: int = 20
    frame_every: int = 0
    started_unix: float = field(default_factory=time.time)


def record_episode(
    task: str,
    seed: int,
    backend,
    env,
    episode_id: str,
    root: str | Path,
    *,
    max_steps: int = 20,
    steps_per_instruction: int = 20,
    history: str = "response",
    frame_every: int = 0,
) -> Path:
    """Run one episode in-process and write its bag to ``root/episode_id``; returns the bag path."""
    from r3.episode import run_episode

    recorder = RecordingEnv(env)
    started = time.time()
    trajectory = run_episode(
        task,
        seed,
        backend,
        env=recorder,
        max_steps=max_steps,
        steps_per_instruction=steps_per_instruction,
        history=history,
        render=True,
        frame_every=frame_every,
    )
    recording = EpisodeRecording(
        episode_id,
        recorder.controls,
        env.snapshot(),
        env.camera_intrinsics(),
        env.width,
        env.height,
        backend.model_id,
        steps_per_instruction,
        frame_every,
        started,
    )
    return write_trajectory_bag(root, trajectory, recording)


class _Bag:
    """A writer that builds rosbags messages and keeps log times strictly increasing."""

    def __init__(self, writer: EpisodeBagWriter, start_ns: int):
        self.writer, self.start_ns, self.last_ns = writer, start_ns, 0
        self.types = typestore().types

    def msg(self, msgtype: str, **fields):
        return self.types[msgtype](**fields)

    def header(self, stamp_ns: int, frame_id: str = ""):
        stamp = self.msg(
            "builtin_interfaces/msg/Time", sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000
        )
        return self.msg("std_msgs/msg/Header", stamp=stamp, frame_id=frame_id)

    def put(self, topic: str, msgtype: str, stamp_ns: int, message) -> None:
        self.last_ns = max(self.last_ns + 1, self.start_ns + stamp_ns)
        self.writer.write_message(topic, msgtype, self.last_ns, message)


def write_trajectory_bag(root: str | Path, trajectory, rec: EpisodeRecording) -> Path:
    """Write ``trajectory`` (an r3.episode.Trajectory) as the recorder node's bag; returns its path."""
    info = EpisodeInfo(
        episode_id=rec.episode_id,
        suite=SUITE,
        task=trajectory.task,
        seed=trajectory.seed,
        goal=trajectory.goal,
        backend=rec.backend_id,
        started_unix=rec.started_unix,
    )
    writer = EpisodeBagWriter(root, info)
    bag = _Bag(writer, int(rec.started_unix * 1e9))
    instance_json = json.dumps(trajectory.instance)

    def stamp(control: int) -> int:  # the state after `control` control steps
        return (control + 1) * STEP_NS

    last_image = [-1]

    def event(kind: int, at: int, **outcome) -> None:
        m = bag.msg(
            EVENT,
            header=bag.header(at),
            episode_id=rec.episode_id,
            event=kind,
            suite=SUITE,
            task=trajectory.task,
            seed=trajectory.seed,
            goal=trajectory.goal,
            backend=rec.backend_id,
            success=outcome.get("success", False),
            progress=outcome.get("progress", 0.0),
            steps=outcome.get("steps", 0),
            reason=outcome.get("reason", ""),
        )
        bag.put(names.EPISODE_EVENTS, EVENT, at, m)

    def image_msg(rgb: np.ndarray, at: int):
        h, w = rgb.shape[:2]
        data = np.ascontiguousarray(rgb[..., :3], dtype=np.uint8).reshape(-1)
        return bag.msg(
            IMAGE,
            header=bag.header(at, CAMERA_FRAME),
            height=h,
            width=w,
            encoding="rgb8",
            is_bigendian=0,
            step=w * 3,
            data=data,
        )

    def image(rgb: np.ndarray, at: int) -> None:
        if at == last_image[0]:  # the simulator publishes one image per simulated instant
            return
        last_image[0] = at
        bag.put(names.CAMERA_IMAGE, IMAGE, at, image_msg(rgb, at))
        bag.put(names.CAMERA_INFO, CAMERA_INFO, at, _camera_info(bag, rec, at))

    def snapshot(data: bytes, control: int, at: int) -> None:
        m = bag.msg(
            SNAPSHOT,
            header=bag.header(at),
            episode_id=rec.episode_id,
            control_step=control,
            format=SNAPSHOT_FORMAT,
            data=np.frombuffer(data, dtype=np.uint8),
        )
        bag.put(names.SCENE_SNAPSHOT, SNAPSHOT, at, m)

    def state(control: int) -> None:
        c, at = rec.controls[control], stamp(control)
        joints = bag.msg(
            JOINT_STATE,
            header=bag.header(at),
            name=["pusher_x", "pusher_y"],
            position=np.array(c.pusher, dtype=float),
            velocity=np.zeros(0),
            effort=np.zeros(0),
        )
        bag.put(names.JOINT_STATES, JOINT_STATE, at, joints)
        bag.put(
            names.PRIVILEGED_STATE,
            PRIVILEGED,
            at,
            _privileged(bag, rec, trajectory, instance_json, c, control, at),
        )

    event(0, stamp(0))
    state(0)
    control = 0
    for s in trajectory.steps:
        at = stamp(control)
        image(s.image, at)
        snapshot(s.snapshot, control, at)
        bag.put(names.REASONER_FRAMES, IMAGE, at, image_msg(s.image, at))  # as the reasoner node records it
        step_msg = bag.msg(
            REASONER_STEP,
            header=bag.header(at),
            image_stamps=[bag.header(at).stamp],
            episode_id=rec.episode_id,
            step=s.step,
            suite=SUITE,
            task=trajectory.task,
            goal=trajectory.goal,
            history=s.history,
            reasoning=s.reasoning or "",
            instruction=s.instruction,
            raw_response=s.raw_response,
            finish_reason=s.finish_reason,
            valid=s.valid,
            error=s.error,
            latency_prompt_s=0.0,
            latency_model_s=float(s.model_s),
            latency_parse_s=max(0.0, float(s.latency_s - s.model_s)),
            prompt_tokens=0,
            completion_tokens=s.completion_tokens or 0,
            model_id=s.model_id,
        )
        bag.put(names.REASONER_STEPS, REASONER_STEP, at, step_msg)
        frames = iter(s.frames)
        for j in range(s.control_steps):
            action = rec.controls[control + 1].action
            command = bag.msg(
                COMMAND,
                header=bag.header(stamp(control), "board"),
                vector=bag.msg("geometry_msgs/msg/Vector3", x=float(action[0]), y=float(action[1]), z=0.0),
            )
            bag.put(names.PUSHER_COMMAND, COMMAND, stamp(control), command)
            control += 1
            state(control)
            if s.frames and (j + 1) % rec.frame_every == 0:
                image(next(frames), stamp(control))
        if s.valid:
            reason = "step_budget" if s.control_steps >= rec.steps_per_instruction else "done"
            outcome = bag.msg(
                OUTCOME,
                header=bag.header(stamp(control)),
                episode_id=rec.episode_id,
                step=s.step,
                instruction=s.instruction,
                success=True,
                reason=reason,
                control_steps=s.control_steps,
                progress=float(s.progress),
                outcome=s.outcome,
            )
            bag.put(names.INSTRUCTION_OUTCOMES, OUTCOME, stamp(control), outcome)
    end = stamp(control)
    image(trajectory.final_image, end)
    snapshot(rec.final_snapshot, control, end)
    # The RunTask result's reason, as the reasoner node gives it; an episode the guard ended is an
    # error, and the recorder keeps such a bag marked incomplete.
    reason = (
        f"error: {trajectory.aborted}"
        if trajectory.aborted
        else end_reason(trajectory.success, trajectory.agent_ended)
    )
    event(
        1,
        end,
        success=trajectory.success,
        progress=trajectory.progress,
        steps=len(trajectory.steps),
        reason=reason,
    )
    return writer.close(
        success=trajectory.success,
        progress=trajectory.progress,
        steps=len(trajectory.steps),
        reason=reason,
        complete=not trajectory.aborted,
    )


def _camera_info(bag: _Bag, rec: EpisodeRecording, at: int):
    k = [float(v) for v in np.asarray(rec.camera_k).reshape(9)]
    p = [k[0], 0.0, k[2], 0.0, 0.0, k[4], k[5], 0.0, 0.0, 0.0, 1.0, 0.0]
    roi = bag.msg(
        "sensor_msgs/msg/RegionOfInterest", x_offset=0, y_offset=0, height=0, width=0, do_rectify=False
    )
    return bag.msg(
        CAMERA_INFO,
        header=bag.header(at, CAMERA_FRAME),
        height=rec.height,
        width=rec.width,
        distortion_model="plumb_bob",
        d=np.zeros(5),
        k=np.array(k),
        r=np.array([1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]),
        p=np.array(p),
        binning_x=0,
        binning_y=0,
        roi=roi,
    )


def _privileged(
    bag: _Bag, rec: EpisodeRecording, trajectory, instance_json: str, c: ControlRecord, control: int, at: int
):
    objects = []
    for name, (x, y, yaw) in c.blocks.items():
        pose = bag.msg(
            "geometry_msgs/msg/Pose",
            position=bag.msg("geometry_msgs/msg/Point", x=float(x), y=float(y), z=0.0),
            orientation=bag.msg(
                "geometry_msgs/msg/Quaternion", x=0.0, y=0.0, z=math.sin(yaw / 2.0), w=math.cos(yaw / 2.0)
            ),
        )
        objects.append(bag.msg("r3_msgs/msg/BoardObject", name=name, pose=pose))
    effector = bag.msg("geometry_msgs/msg/Point", x=float(c.pusher[0]), y=float(c.pusher[1]), z=0.0)
    return bag.msg(
        PRIVILEGED,
        header=bag.header(at, "board"),
        episode_id=rec.episode_id,
        control_step=control,
        suite=SUITE,
        task=trajectory.task,
        goal=trajectory.goal,
        task_instance_json=instance_json,
        objects=objects,
        effector=effector,
        held="",
        progress=c.progress,
        success=c.success,
    )
