"""Messages <-> core types, done once at the node boundary (the core never sees a message)."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point, Pose, PoseStamped, Vector3
from sensor_msgs.msg import CameraInfo, Image, JointState

from r3.perception.camera import CameraModel
from r3.suites import DEFAULT_SUITE, get_suite
from r3.tasks.language_table.board import BoardState
from r3_msgs.msg import (
    BoardObject,
    DetectedObject,
    DetectedObjects,
    EpisodeEvent,
    InstructionOutcome,
    PrivilegedState,
    ReasonerStep,
    SceneSnapshot,
)

if TYPE_CHECKING:
    from r3.episode_loop import StepDecision


def stamp_to_ns(stamp: Time) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def publisher_gid(info: dict) -> bytes:
    """The DDS gid of a message's publisher, from its message info (b"" where the rmw gives none)."""
    return bytes((info.get("publisher_gid") or {}).get("data", b""))


def ns_to_stamp(ns: int) -> Time:
    return Time(sec=int(ns // 1_000_000_000), nanosec=int(ns % 1_000_000_000))


def image_to_msg(rgb: np.ndarray, stamp: Time, frame_id: str) -> Image:
    """HxWx3 uint8 RGB -> sensor_msgs/Image (rgb8)."""
    h, w = rgb.shape[:2]
    msg = Image(height=h, width=w, encoding="rgb8", is_bigendian=0, step=w * 3)
    msg.header.stamp, msg.header.frame_id = stamp, frame_id
    msg.data = np.ascontiguousarray(rgb, dtype=np.uint8).tobytes()
    return msg


def pixel_rows(msg: Image, pixel_bytes: int) -> np.ndarray:
    """The pixel bytes of ``msg`` as H x (W * ``pixel_bytes``) uint8, its row padding dropped; a
    message whose size, step and data do not agree is refused (ValueError) with what disagrees."""
    row = _check_geometry(msg, pixel_bytes)
    return np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.step)[:, :row]


def _check_geometry(msg: Image, pixel_bytes: int) -> int:
    """The bytes of one row of pixels, once the size, step and data of ``msg`` agree (ValueError)."""
    if msg.width < 1 or msg.height < 1:
        raise ValueError(f"image of {msg.width} x {msg.height} pixels: both must be at least 1")
    row = msg.width * pixel_bytes
    if msg.step < row:
        raise ValueError(f"image step {msg.step} is shorter than a row of {msg.width} pixels ({row} bytes)")
    if len(msg.data) != msg.height * msg.step:
        raise ValueError(
            f"image data holds {len(msg.data)} bytes; its height x step is {msg.height * msg.step}"
        )
    return row


def check_image(msg: Image) -> Image:
    """``msg`` if :func:`msg_to_image` reads it, checked without copying its pixels (a camera
    subscriber refuses a bad frame when it arrives, before it can reach a decision)."""
    if msg.encoding not in ("rgb8", "bgr8"):
        raise ValueError(f"unsupported image encoding {msg.encoding[:40]!r}: expected rgb8 or bgr8")
    _check_geometry(msg, 3)
    return msg


def msg_to_image(msg: Image) -> np.ndarray:
    """sensor_msgs/Image (rgb8 or bgr8) -> HxWx3 uint8 RGB; other encodings are refused."""
    check_image(msg)
    rgb = pixel_rows(msg, 3).reshape(msg.height, msg.width, 3)
    return rgb[..., ::-1].copy() if msg.encoding == "bgr8" else rgb.copy()


def camera_info_msg(k: np.ndarray, width: int, height: int, stamp: Time, frame_id: str) -> CameraInfo:
    """Pinhole camera_info without distortion from a 3x3 intrinsic matrix."""
    info = CameraInfo(width=width, height=height, distortion_model="plumb_bob")
    info.header.stamp, info.header.frame_id = stamp, frame_id
    info.d = [0.0] * 5
    info.k = [float(v) for v in np.asarray(k).reshape(9)]
    info.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    info.p = [info.k[0], 0.0, info.k[2], 0.0, 0.0, info.k[4], info.k[5], 0.0, 0.0, 0.0, 1.0, 0.0]
    return info


#: The largest image side a camera_info may give, pixels.
MAX_IMAGE_SIDE = 16384


def check_camera_info(info: CameraInfo) -> CameraInfo:
    """``info`` if it describes a pinhole camera r3 can project with: a size of 1 to
    :data:`MAX_IMAGE_SIDE` pixels a side, finite intrinsics, positive focal lengths, the principal
    point on the image and ``K[8] == 1``; ValueError naming what is not (anyone may publish
    camera_info, and one bad K moved every 3D estimate)."""
    if not (0 < info.width <= MAX_IMAGE_SIDE and 0 < info.height <= MAX_IMAGE_SIDE):
        raise ValueError(f"camera_info size {info.width}x{info.height} is not 1 to {MAX_IMAGE_SIDE} a side")
    k = [float(v) for v in info.k]
    if not all(math.isfinite(v) for v in k):
        raise ValueError("camera_info K holds a value that is not finite")
    fx, cx, fy, cy = k[0], k[2], k[4], k[5]
    if not (0 < fx <= 1e3 * MAX_IMAGE_SIDE and 0 < fy <= 1e3 * MAX_IMAGE_SIDE):
        raise ValueError(f"camera_info focal lengths fx={fx:g}, fy={fy:g} are not positive and bounded")
    if not (0 <= cx <= info.width and 0 <= cy <= info.height) or k[8] != 1.0:
        raise ValueError(f"camera_info principal point ({cx:g}, {cy:g}) or K[8]={k[8]:g} is off the image")
    return info


def msg_to_camera_model(info: CameraInfo, base_from_camera: np.ndarray, name: str, **depth) -> CameraModel:
    """camera_info (intrinsics, size) plus the optical frame's pose in the base frame; ``depth``:
    ``min_depth_m`` / ``max_depth_m``."""
    k = np.array(info.k)
    return CameraModel(
        k=k, width=info.width, height=info.height, base_from_camera=base_from_camera, name=name, **depth
    )


def board_state_to_msg(state: BoardState, msg: PrivilegedState) -> PrivilegedState:
    """Fill ``msg.objects`` and ``msg.effector`` from a board state (positions are exact float64).

    A message that already holds these blocks is refilled in place: the simulator publishes one per
    control step, and building eight objects anew took 0.1 ms of Python on that loop."""
    if [obj.name for obj in msg.objects] != list(state.blocks):
        msg.objects = [BoardObject(name=name) for name in state.blocks]
    for obj, (x, y, yaw) in zip(msg.objects, state.blocks.values(), strict=True):
        position, orientation = obj.pose.position, obj.pose.orientation
        position.x, position.y = float(x), float(y)
        orientation.z, orientation.w = math.sin(yaw / 2.0), math.cos(yaw / 2.0)
    msg.effector.x, msg.effector.y = float(state.pusher[0]), float(state.pusher[1])
    return msg


def msg_to_board_state(msg: PrivilegedState) -> BoardState:
    blocks = {}
    for obj in msg.objects:
        q = obj.pose.orientation
        blocks[obj.name] = (obj.pose.position.x, obj.pose.position.y, 2.0 * math.atan2(q.z, q.w))
    return BoardState(blocks=blocks, pusher=(msg.effector.x, msg.effector.y))


def task_instance_from_msg(msg: PrivilegedState):
    """The task instance the simulator is checking, rebuilt from its JSON (None between episodes)."""
    if not msg.task_instance_json:
        return None
    tasks = get_suite(msg.suite or DEFAULT_SUITE).tasks()
    return tasks.get_task(msg.task).from_dict(json.loads(msg.task_instance_json))


def depth_to_msg(depth_m: np.ndarray, stamp: Time, frame_id: str, encoding: str = "16UC1") -> Image:
    """HxW float metres -> sensor_msgs/Image: ``16UC1`` millimetres (the RealSense driver's
    encoding; missing readings and NaN become 0) or ``32FC1`` metres."""
    h, w = depth_m.shape
    if encoding == "16UC1":
        data = (
            np.nan_to_num(depth_m * 1000.0, nan=0.0, posinf=0.0, neginf=0.0)
            .round()
            .clip(0, 65535)
            .astype("<u2")
        )
        step = w * 2
    elif encoding == "32FC1":
        data, step = depth_m.astype("<f4"), w * 4
    else:
        raise ValueError(f"unsupported depth encoding {encoding!r}: expected 16UC1 or 32FC1")
    msg = Image(height=h, width=w, encoding=encoding, is_bigendian=0, step=step)
    msg.header.stamp, msg.header.frame_id = stamp, frame_id
    msg.data = np.ascontiguousarray(data).tobytes()
    return msg


def msg_to_depth(msg: Image) -> np.ndarray:
    """sensor_msgs/Image depth (16UC1 millimetres or 32FC1 metres) -> HxW float32 metres."""
    dtypes = {"16UC1": np.uint16, "mono16": np.uint16, "32FC1": np.float32}
    if msg.encoding not in dtypes:
        raise ValueError(f"unsupported depth encoding {msg.encoding[:40]!r}: expected 16UC1 or 32FC1")
    dtype = np.dtype(dtypes[msg.encoding]).newbyteorder(">" if msg.is_bigendian else "<")
    depth = pixel_rows(msg, dtype.itemsize).copy().view(dtype).reshape(msg.height, msg.width)
    return depth.astype(np.float32) / 1000.0 if dtype.kind == "u" else depth.astype(np.float32)


def instances_to_msg(ids: np.ndarray, stamp: Time, frame_id: str) -> Image:
    """HxW instance ids (0 = background) -> sensor_msgs/Image ``32SC1``."""
    h, w = ids.shape
    msg = Image(height=h, width=w, encoding="32SC1", is_bigendian=0, step=w * 4)
    msg.header.stamp, msg.header.frame_id = stamp, frame_id
    msg.data = np.ascontiguousarray(ids.astype("<i4")).tobytes()
    return msg


def msg_to_instances(msg: Image) -> np.ndarray:
    if msg.encoding != "32SC1":
        raise ValueError(f"instance image encoding {msg.encoding[:40]!r}: expected 32SC1")
    return pixel_rows(msg, 4).copy().view("<i4").reshape(msg.height, msg.width).astype(np.int32)


def detections_to_msg(detections, msg: DetectedObjects, camera: str) -> DetectedObjects:
    """Fill ``msg.objects`` from perception detections; an object without a 3D estimate (too few
    valid depth pixels) gets NaN centroid, heights and top surface, zero axes and extent."""
    objects = []
    for d in detections:
        g = d.geometry
        nan = float("nan")
        obj = DetectedObject(
            label=d.label,
            score=float(d.score),
            mask_id=d.mask_id,
            box_xyxy=[int(v) for v in d.box],
            valid_points=d.valid_points,
            camera=camera,
        )
        obj.centroid = (
            Point(x=nan, y=nan, z=nan) if g is None else Point(**dict(zip("xyz", map(float, g.centroid))))
        )
        obj.top_height = nan if g is None else float(g.top_height)
        obj.top_centre = (
            Point(x=nan, y=nan, z=nan) if g is None else Point(**dict(zip("xyz", map(float, g.top_centre))))
        )
        obj.footprint_yaw = nan if g is None else float(g.footprint_yaw)
        obj.footprint = [nan, nan] if g is None else [float(v) for v in g.footprint]
        obj.bottom_height = nan if g is None else float(g.bottom_height)
        if g is not None:
            obj.principal_axes = [Vector3(**dict(zip("xyz", map(float, a)))) for a in g.axes]
            obj.extent = Vector3(**dict(zip("xyz", map(float, g.extent))))
        objects.append(obj)
    msg.objects = objects
    return msg


#: At most this many objects in one DetectedObjects message.
MAX_DETECTIONS = 256
#: A 3D field of a detection beyond this many metres is no object in the cell.
MAX_DETECTION_M = 100.0
#: Longest label a detection may carry.
MAX_LABEL_CHARS = 200


def check_detections(msg: DetectedObjects) -> DetectedObjects:
    """``msg`` if each object's 3D fields (top centre, footprint yaw and size, bottom height) are all
    finite and within :data:`MAX_DETECTION_M`, or all NaN (an object without a 3D estimate, as
    :func:`detections_to_msg` writes it); ValueError naming the first that is not. A forged message
    with an infinite yaw once failed every packing instruction with an OverflowError."""
    if len(msg.objects) > MAX_DETECTIONS:
        raise ValueError(f"{len(msg.objects)} detections in one message: at most {MAX_DETECTIONS}")
    for o in msg.objects:
        if len(o.label) > MAX_LABEL_CHARS:
            raise ValueError(f"a detection's label is longer than {MAX_LABEL_CHARS} characters")
        top = o.top_centre
        values = [top.x, top.y, top.z, o.footprint_yaw, *o.footprint, o.bottom_height]
        if all(math.isnan(v) for v in values):
            continue
        if not all(math.isfinite(v) and abs(v) <= MAX_DETECTION_M for v in values) or min(o.footprint) < 0:
            raise ValueError(
                f"detection {o.label[:40]!r}: its 3D fields must be all finite (within "
                f"{MAX_DETECTION_M:g} m, a footprint of no negative size) or all NaN"
            )
    return msg


def packing_state_to_msg(state, msg: PrivilegedState) -> PrivilegedState:
    """Fill ``msg.objects`` (item centres of mass and orientations), ``msg.effector`` (TCP) and
    ``msg.held`` from a :class:`~r3.tasks.packing.state.PackingState`."""
    objects = []
    for name, item in state.items.items():
        pose = Pose()
        pose.position.x, pose.position.y, pose.position.z = (float(v) for v in item.pos)
        o = pose.orientation
        o.w, o.x, o.y, o.z = (float(v) for v in item.quat)
        objects.append(BoardObject(name=name, pose=pose))
    msg.objects = objects
    msg.effector = Point(x=float(state.tcp[0]), y=float(state.tcp[1]), z=float(state.tcp[2]))
    msg.held = state.held or ""
    return msg


def msg_to_packing_state(msg: PrivilegedState):
    """The packing state a decision needs (items still, as at every settled decision point)."""
    from r3.tasks.packing.state import ItemState, PackingState

    items = {}
    for obj in msg.objects:
        p, o = obj.pose.position, obj.pose.orientation
        items[obj.name] = ItemState(pos=(p.x, p.y, p.z), quat=(o.w, o.x, o.y, o.z))
    return PackingState(
        items=items, held=msg.held or None, tcp=(msg.effector.x, msg.effector.y, msg.effector.z)
    )


def pose_msg_to_target(
    msg: PoseStamped, gripper_opening: float, max_velocity_scaling: float, approach_distance: float = 0.0
):
    """A MoveToPose goal as a :class:`~r3.execution.base.PoseTarget` (NaN opening: leave the gripper,
    scaling 0: full speed). Values are passed on unchecked: the executor refuses bad ones."""
    from r3.execution.base import PoseTarget

    p, o = msg.pose.position, msg.pose.orientation
    return PoseTarget(
        position=(p.x, p.y, p.z),
        quat=(o.w, o.x, o.y, o.z),
        gripper=None if math.isnan(gripper_opening) else float(gripper_opening),
        speed=1.0 if max_velocity_scaling == 0 else float(max_velocity_scaling),
        approach=float(approach_distance),
    )


def move_goal_to_target(goal, base_frame: str, executor):
    """A MoveToPose goal as a :class:`~r3.execution.base.PoseTarget`, or the refusal (a string) when
    its target is not in the robot base frame (an empty frame_id means the base frame) or fails
    ``executor``'s shared checks (``Executor.target_refusal``: NaN, outside the workspace, ...): known
    as the goal arrives, so such a goal preempts no running one."""
    frame = goal.target.header.frame_id
    if frame not in ("", base_frame):
        return f"refused: target frame {frame[:80]!r} is not the robot base frame {base_frame!r}"
    target = pose_msg_to_target(
        goal.target, goal.gripper_opening, goal.max_velocity_scaling, goal.approach_distance
    )
    why = executor.target_refusal(target)
    return f"refused: {why}" if why else target


def joint_state_msg(positions: dict[str, float], stamp: Time) -> JointState:
    """Joint positions by name (rad, or m for a prismatic joint) -> sensor_msgs/JointState."""
    msg = JointState(name=list(positions), position=list(positions.values()))
    msg.header.stamp = stamp
    return msg


def snapshot_msg(episode_id: str, control_step: int, fmt: str, data: bytes, stamp: Time) -> SceneSnapshot:
    """A simulator snapshot in format ``fmt`` (its readers check it) taken at ``control_step``."""
    msg = SceneSnapshot(episode_id=episode_id, control_step=control_step, format=fmt)
    msg.header.stamp, msg.data = stamp, data
    return msg


def rgbd_frame_msgs(frame, stamp: Time, frame_id: str) -> tuple[Image, CameraInfo, Image, Image]:
    """An :class:`~r3.perception.camera.RGBDFrame` as an RGB-D camera publishes it, plus the instance
    mask a simulator adds: (colour image, camera_info, aligned 32FC1 depth, 32SC1 instance ids)."""
    camera = frame.camera
    return (
        image_to_msg(frame.rgb, stamp, frame_id),
        camera_info_msg(camera.k, camera.width, camera.height, stamp, frame_id),
        depth_to_msg(frame.depth_m, stamp, frame_id, encoding="32FC1"),
        instances_to_msg(frame.instances, stamp, frame_id),
    )


def packing_decision_to_msg(state, instance, progress: float, msg: PrivilegedState) -> PrivilegedState:
    """Fill a packing cell's decision-point state into ``msg`` (whose episode, step, suite, task and
    stamp are set): the world frame, the task's goal and verdict (none between episodes: ``instance``
    None) and :func:`packing_state_to_msg`'s items, TCP and held item."""
    msg.header.frame_id, msg.goal = "world", instance.goal if instance else ""
    if instance is not None:
        msg.task_instance_json = json.dumps(instance.to_dict())
        msg.progress = float(progress)
        msg.success = bool(instance.success(state))
    return packing_state_to_msg(state, msg)


def reasoner_step_msg(
    episode_id: str, task: str, record: StepDecision, latencies, images: list[Image], stamp: Time
) -> ReasonerStep:
    """A decision step as recorded: ``latencies`` are the prompt, model and parse seconds (a negative
    one reads 0); ``images`` the frames it was decided on, which it names by their stamps."""
    out, parsed, inp = record.decision.output, record.decision.parsed, record.input
    msg = ReasonerStep(
        episode_id=episode_id,
        step=record.step,
        suite=inp.suite,
        task=task,
        goal=inp.goal,
        history=record.history,
        reasoning=parsed.reasoning or "",
        instruction=record.instruction,
        raw_response=out.raw_text,
        finish_reason=out.finish_reason,
        valid=record.valid,
        error=record.error,
        model_id=out.model_id,
        image_stamps=[im.header.stamp for im in images],
    )
    msg.latency_prompt_s, msg.latency_model_s, msg.latency_parse_s = (max(0.0, v) for v in latencies)
    msg.prompt_tokens, msg.completion_tokens = out.prompt_tokens or 0, out.completion_tokens or 0
    msg.header.stamp = stamp
    return msg


def instruction_outcome_msg(
    episode_id: str, step: int, instruction: str, follow, progress: float
) -> InstructionOutcome:
    """What came of one instruction (``follow``: its FollowInstruction result), stamped when it finished."""
    msg = InstructionOutcome(
        episode_id=episode_id,
        step=step,
        instruction=instruction,
        success=follow.success,
        reason=follow.reason,
        control_steps=follow.steps,
        progress=progress,
        outcome=follow.outcome,
    )
    msg.header.stamp = follow.finished
    return msg


def episode_event_msg(
    event: int, episode_id: str, goal, goal_text: str, backend: str, stamp: Time, result=None
) -> EpisodeEvent:
    """An episode's START or END (with its RunTask ``result``) for RunTask ``goal``."""
    msg = EpisodeEvent(
        episode_id=episode_id,
        event=event,
        suite=goal.suite or DEFAULT_SUITE,
        task=goal.task,
        seed=goal.seed,
        goal=goal_text,
        backend=backend,
    )
    if result is not None:
        msg.success, msg.progress, msg.steps, msg.reason = (
            result.success,
            result.progress,
            result.steps,
            result.reason,
        )
    msg.header.stamp = stamp
    return msg
