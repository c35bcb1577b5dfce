"""``PackingEnv``: the packing workcell as a Gymnasium environment.

Physics lives in :mod:`.scene`, goals in ``r3.tasks.packing.tasks`` (a task instance gives the
initial layout and judges success/progress), so one simulator serves every packing goal.

Action: absolute targets for one 50 ms control step, ``[q1..q7 (rad), gripper opening (m)]``,
ramped linearly from the previous targets over the step. Targets outside the joint limits or the
gripper range, and NaN/Inf, raise ``ValueError`` and leave the env untouched (the execution layer
refuses such targets before they get here; nothing is clipped). Motion planning is not the env's
job: :mod:`r3.execution.sim` turns poses into joint trajectories.

Grasp: see :mod:`.scene` — a weld switches on when the closing fingers both touch one item, and
off when the gripper opens.

Snapshots capture the MuJoCo integration state (qpos, qvel, act, ctrl, warm start, active welds,
...), the weld's relative pose, the still-step counters, the step counter, the task instance and
``np_random``, so a restored env continues bit-identically.
"""

from __future__ import annotations

import io
import json
import weakref
from typing import Any, ClassVar
from zipfile import BadZipFile

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from r3.files import bounded_repr
from r3.perception.camera import CameraModel, RGBDFrame
from r3.sim.offscreen import mujoco
from r3.sim.packing import scene
from r3.tasks.packing.state import STILL_SPEED, STILL_STEPS, ItemState, PackingState
from r3.tasks.packing.workcell import ITEM_SPECS, TRAY_SPECS

SNAPSHOT_VERSION = 1
_STATE_SPEC = mujoco.mjtState.mjSTATE_INTEGRATION
#: What :meth:`PackingEnv.restore` reads from a snapshot's meta record.
SNAPSHOT_FIELDS = frozenset(
    {
        "version",
        "steps",
        "held",
        "active",
        "still",
        "max_progress",
        "task",
        "instance",
        "np_random",
        "nq",
        "nv",
    }
)


def squeezes(opening_target: float, opening: float) -> bool:
    """Whether a finger command squeezes fingers ``opening`` apart: the hand holds an item while it
    does and lets go once it does not (the env's grasp rule, and the planner's)."""
    return opening_target < opening - 0.002


def weld_pose(hand_pos, hand_quat, item_pos, item_quat) -> tuple[np.ndarray, np.ndarray]:
    """The pose (position, quaternion) in the hand's frame at which a grasp welds an item: where the
    item is relative to the hand at that moment. A plan that predicts a grasp asks it too."""
    inv = np.empty(4)
    mujoco.mju_negQuat(inv, np.asarray(hand_quat, float))
    rel_pos, rel_quat = np.empty(3), np.empty(4)
    mujoco.mju_rotVecQuat(rel_pos, np.asarray(item_pos, float) - hand_pos, inv)
    mujoco.mju_mulQuat(rel_quat, inv, np.asarray(item_quat, float))
    return rel_pos, rel_quat


def read_snapshot(snapshot: bytes) -> tuple[np.ndarray, np.ndarray, dict]:
    """The physics state, equality data and meta record of a :meth:`PackingEnv.snapshot` (or a packing
    cell's, which adds an array); a ValueError in one line for bytes that are none (no npz, an array
    or a meta field missing) or of another version."""
    try:
        with np.load(io.BytesIO(snapshot), allow_pickle=False) as npz:
            physics, eq_data = npz["physics"], npz["eq_data"]
            meta = json.loads(npz["meta"].tobytes().decode())
        if not isinstance(meta, dict) or not SNAPSHOT_FIELDS <= meta.keys():
            raise KeyError("meta")
    except (OSError, EOFError, ValueError, KeyError, TypeError, AttributeError, BadZipFile) as exc:
        # np.load's own message for foreign bytes speaks of allow_pickle, which would mislead
        raise ValueError(f"not a packing snapshot ({type(exc).__name__})") from None
    if meta["version"] != SNAPSHOT_VERSION:
        raise ValueError(f"unsupported snapshot version {bounded_repr(meta['version'])}")
    return physics, eq_data, meta


#: Control steps run after a reset so that dropped items come to rest before the episode starts.
SETTLE_STEPS = 10
#: Camera names, base first (the order the reasoner's images use).
CAMERAS = ("base", "wrist")
#: Instance id of each catalogue item in :meth:`PackingEnv.rgbd_frame` (0 is background).
ITEM_INDEX = {item: i + 1 for i, item in enumerate(ITEM_SPECS)}


def _resolve_task(task):
    if task is None or not isinstance(task, str):
        return task
    from r3.tasks.packing.tasks import get_task  # lazy, as for Language Table

    return get_task(task)


class PackingEnv(gym.Env):
    """A Panda-kinematics arm, three trays and grocery items on a table; 20 Hz control.

    With ``task=None`` the env is a plain simulator with every item stored away; call
    :meth:`set_layout` to place items. ``render_mode`` is ``"rgb_array"`` (base camera).
    """

    metadata: ClassVar[dict] = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(
        self,
        task=None,
        *,
        render_mode: str | None = "rgb_array",
        width: int = 320,
        height: int = 240,
        max_episode_steps: int = 4000,
    ):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None")
        if max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be >= 1, got {max_episode_steps}")
        self.render_mode = render_mode
        self.width, self.height = int(width), int(height)
        self.max_episode_steps = int(max_episode_steps)
        self._task_spec = _resolve_task(task)
        self._instance = None
        self.model = mujoco.MjModel.from_xml_string(scene.build_mjcf(self.width, self.height))
        self.data = mujoco.MjData(self.model)
        mujoco.mj_forward(self.model, self.data)  # camera and body poses valid before the first reset
        self._unwelded = self.model.eq_data.copy()  # the welds' data before any grasp measured them
        m = self.model
        self.arm_qpos = np.array([m.jnt_qposadr[m.joint(j).id] for j in scene.ARM_JOINTS])
        self.arm_dof = np.array([m.jnt_dofadr[m.joint(j).id] for j in scene.ARM_JOINTS])
        self.finger_qpos = np.array([m.jnt_qposadr[m.joint(j).id] for j in scene.FINGER_JOINTS])
        self.item_body = {i: m.body(scene.body_name(i)).id for i in ITEM_SPECS}
        self.item_qpos = {i: m.jnt_qposadr[m.joint(scene.body_name(i)).id] for i in ITEM_SPECS}
        self.item_dof = {i: m.jnt_dofadr[m.joint(scene.body_name(i)).id] for i in ITEM_SPECS}
        self.item_geom = {m.geom(scene.body_name(i)).id: i for i in ITEM_SPECS}
        self.weld = {i: m.equality(f"grasp_{scene.body_name(i)}").id for i in ITEM_SPECS}
        self.pads = (m.geom("panda_leftfinger").id, m.geom("panda_rightfinger").id)
        self.hand_body = m.body("panda_hand").id
        self.tcp_site = m.site("tcp").id
        #: Geom id -> what it is: an item name, "<size> tray", "table" or "robot".
        self.geom_label: dict[int, str] = {}
        for g in range(m.ngeom):
            name = m.geom(g).name
            if g in self.item_geom:
                self.geom_label[g] = self.item_geom[g]
            elif name.startswith(tuple(TRAY_SPECS)) and "_tray" in name:
                self.geom_label[g] = f"{name.split('_')[0]} tray"
            elif name == "table":
                self.geom_label[g] = "table"
            elif name.startswith("panda"):
                self.geom_label[g] = "robot"
        self._active: list[str] = []
        self._still = {i: STILL_STEPS for i in ITEM_SPECS}
        self._held: str | None = None
        self._max_progress = 0.0
        self._steps = 0
        self._renderer: mujoco.Renderer | None = None
        self._close_renderer = None

        lo = np.array([lim[0] for lim in scene.JOINT_LIMITS] + [0.0])
        hi = np.array([lim[1] for lim in scene.JOINT_LIMITS] + [scene.MAX_OPENING])
        self.action_space = spaces.Box(lo.astype(np.float32), hi.astype(np.float32), dtype=np.float32)
        n = len(ITEM_SPECS)
        self.observation_space = spaces.Dict(
            {
                # Servos may overshoot a limit by a hair under load, so the observation bounds have slack.
                "joints": spaces.Box(
                    (lo - 0.1).astype(np.float32), (hi + 0.1).astype(np.float32), dtype=np.float32
                ),
                "tcp": spaces.Box(-2.0, 2.0, shape=(3,), dtype=np.float32),
                "items": spaces.Box(-10.0, 10.0, shape=(n, 7), dtype=np.float32),
                "held": spaces.Discrete(n + 1),
            }
        )

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """New layout and task instance; ``options={"task": name_or_spec_or_None}`` switches task."""
        super().reset(seed=seed)
        options = options or {}
        if "task" in options:
            self._task_spec = _resolve_task(options["task"])
        self._instance = None if self._task_spec is None else self._task_spec.sample(self.np_random)
        self.set_layout({} if self._instance is None else self._instance.layout)
        self._max_progress = self._progress(self.state())
        return self._obs(), self._info(self.state())

    def step(self, action):
        action = np.asarray(action, dtype=np.float64)
        if action.shape != (8,):
            raise ValueError(f"action must have shape (8,), got {action.shape}")
        if not np.all(np.isfinite(action)):
            raise ValueError(f"action must be finite, got {action.tolist()}")
        lo, hi = self.action_space.low.astype(np.float64), self.action_space.high.astype(np.float64)
        bad = np.flatnonzero((action < lo - 1e-6) | (action > hi + 1e-6))
        if bad.size:
            raise ValueError(f"action components {bad.tolist()} are outside the joint/gripper limits")
        self._advance(action)
        self._steps += 1
        state = self.state()
        info = self._info(state)
        terminated = bool(info["success"])
        truncated = self._steps >= self.max_episode_steps
        return self._obs(), float(terminated), terminated, truncated, info

    def render(self):
        if self.render_mode is None:
            gym.logger.warn("render() called with render_mode=None; pass render_mode='rgb_array'")
            return None
        return self.render_camera("base")

    def close(self):
        if self._close_renderer is not None:
            self._close_renderer()
            self._renderer = self._close_renderer = None

    # ------------------------------------------------------------------ scene access
    @property
    def task_instance(self):
        return self._instance

    @property
    def elapsed_steps(self) -> int:
        return self._steps

    @property
    def max_progress(self) -> float:
        """Progress K/N counts the most goal objects packed at any point of the episode (R^3 A.2)."""
        return self._max_progress

    @property
    def joint_targets(self) -> np.ndarray:
        """The current servo targets ``[q1..q7, opening]``: where the last command left them."""
        return np.concatenate([self.data.ctrl[:7], [2 * self.data.ctrl[7]]])

    def set_layout(self, layout: dict[str, tuple[float, float, float]], arm_q=scene.HOME_Q) -> None:
        """Place items ``name -> (x, y, yaw)`` upright at rest, store the others away, put the arm at
        ``arm_q`` with the gripper open, release any grasp and let everything settle."""
        mujoco.mj_resetData(self.model, self.data)
        for k, item in enumerate(ITEM_SPECS):
            a = self.item_qpos[item]
            h = ITEM_SPECS[item].height
            x, y, yaw = layout.get(item, (scene.STORAGE[0], scene.STORAGE[1] + 0.3 * k, 0.0))
            z = h / 2 + 0.0005 + self._support_height(x, y)
            self.data.qpos[a : a + 7] = (x, y, z, np.cos(yaw / 2), 0, 0, np.sin(yaw / 2))
        self.data.qpos[self.arm_qpos] = arm_q
        self.data.qpos[self.finger_qpos] = scene.MAX_OPENING / 2
        self.data.ctrl[:7] = arm_q
        self.data.ctrl[7] = scene.MAX_OPENING / 2
        self.data.eq_active[:] = 0
        self.data.eq_active[0] = 1  # finger coupling
        self.model.eq_data[:] = self._unwelded  # no earlier episode's grasp in this one's snapshots
        self._held = None
        self._active = [i for i in ITEM_SPECS if i in layout]
        mujoco.mj_forward(self.model, self.data)
        for _ in range(SETTLE_STEPS):
            self._advance(self.joint_targets)
        self._still = {i: STILL_STEPS for i in ITEM_SPECS}
        self._steps = 0

    def state(self) -> PackingState:
        R = self.data.site_xmat[self.tcp_site].reshape(3, 3)
        items = {}
        for item in self._active:
            a, dof = self.item_qpos[item], self.item_dof[item]
            q = self.data.qpos[a : a + 7]
            items[item] = ItemState(
                pos=tuple(float(v) for v in q[:3]),
                quat=tuple(float(v) for v in q[3:7]),
                speed=float(np.linalg.norm(self.data.qvel[dof : dof + 3])),
                still_steps=int(self._still[item]),
            )
        return PackingState(
            items=items,
            held=self._held,
            tcp=tuple(float(v) for v in self.data.site_xpos[self.tcp_site]),
            tcp_yaw=float(np.arctan2(R[1, 1], R[0, 1])),  # the fingers close along the TCP's y axis
            gripper_opening=float(self.data.qpos[self.finger_qpos].sum()),
            joints=tuple(float(v) for v in self.data.qpos[self.arm_qpos]),
        )

    def joint_positions(self) -> dict[str, float]:
        """What the arm's driver reports on joint_states: the seven arm joints (rad), and each finger
        at half the gripper's opening (m). Read from the joints alone, not :meth:`state`: the simulator
        node publishes these after every control step, and the items' states cost ten times more."""
        half_opening = float(self.data.qpos[self.finger_qpos].sum()) / 2
        arm = (float(v) for v in self.data.qpos[self.arm_qpos])
        return dict(zip((*scene.ARM_JOINTS, *scene.FINGER_JOINTS), (*arm, half_opening, half_opening)))

    def tcp_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """Tool centre point position (m) and rotation matrix, world frame."""
        return self.data.site_xpos[self.tcp_site].copy(), self.data.site_xmat[self.tcp_site].reshape(
            3, 3
        ).copy()

    # ------------------------------------------------------------------ cameras
    def render_camera(self, camera: str = "base", kind: str = "rgb") -> np.ndarray:
        """``kind`` "rgb" (HxWx3 uint8), "depth" (HxW float32 metres along the optical axis) or
        "segmentation" (HxW int32 geom ids, -1 for background; :attr:`geom_label` names them)."""
        if camera not in CAMERAS:
            raise ValueError(f"camera must be one of {CAMERAS}, got {camera!r}")
        if self._renderer is None:
            self._renderer = mujoco.Renderer(self.model, self.height, self.width)
            self._close_renderer = weakref.finalize(self, self._renderer.close)
        r = self._renderer
        if kind == "depth":
            r.enable_depth_rendering()
        elif kind == "segmentation":
            r.enable_segmentation_rendering()
        elif kind != "rgb":
            raise ValueError(f"kind must be rgb, depth or segmentation, got {kind!r}")
        r.update_scene(self.data, camera=camera)
        frame = r.render()
        r.disable_depth_rendering()
        r.disable_segmentation_rendering()
        if kind == "segmentation":
            ids = frame[..., 0].astype(np.int32)
            return np.where(frame[..., 1] == int(mujoco.mjtObj.mjOBJ_GEOM), ids, -1)
        return frame

    def camera_intrinsics(self, camera: str = "base") -> np.ndarray:
        """3x3 pinhole K (square pixels, principal point at the image centre)."""
        fovy = np.radians(self.model.cam_fovy[self.model.camera(camera).id])
        f = 0.5 * self.height / np.tan(fovy / 2)
        return np.array([[f, 0.0, self.width / 2], [0.0, f, self.height / 2], [0.0, 0.0, 1.0]])

    def camera_extrinsics(self, camera: str = "base") -> np.ndarray:
        """4x4 pose of the camera's *optical* frame (x right, y down, z forward) in the world."""
        cid = self.model.camera(camera).id
        T = np.eye(4)
        T[:3, :3] = self.data.cam_xmat[cid].reshape(3, 3) @ np.diag([1.0, -1.0, -1.0])
        T[:3, 3] = self.data.cam_xpos[cid]
        return T

    def camera_model(self, camera: str = "base") -> CameraModel:
        """The camera as perception sees it: intrinsics in the pixel-centre convention of ROS
        camera_info (MuJoCo's principal point at ``width / 2`` is pixel ``(width - 1) / 2``) and
        the optical frame's pose in the world (the robot base frame)."""
        k = self.camera_intrinsics(camera)
        k[0, 2] -= 0.5
        k[1, 2] -= 0.5
        return CameraModel(
            k=k,
            width=self.width,
            height=self.height,
            base_from_camera=self.camera_extrinsics(camera),
            name=camera,
            min_depth_m=0.1,
            max_depth_m=3.0,
        )

    def rgbd_frame(self, camera: str = "base", stamp_ns: int = 0) -> RGBDFrame:
        """Colour, aligned depth and the simulator's instance masks of the items in the scene
        (instance i = the i-th catalogue item; trays, table and robot are background), for the
        ``sim`` segmenter."""
        seg = self.render_camera(camera, "segmentation")
        lut = np.zeros(self.model.ngeom + 1, dtype=np.int32)
        names = {}
        for geom, item in self.item_geom.items():
            if item in self._active:
                lut[geom] = ITEM_INDEX[item]
                names[ITEM_INDEX[item]] = item
        instances = lut[np.where(seg >= 0, seg, self.model.ngeom)]
        return RGBDFrame(
            rgb=self.render_camera(camera),
            depth_m=self.render_camera(camera, "depth"),
            camera=self.camera_model(camera),
            stamp_ns=stamp_ns,
            instances=instances,
            instance_names=names,
        )

    # ------------------------------------------------------------------ snapshots
    def snapshot(self) -> bytes:
        """Everything needed to continue this episode bit-identically, as versioned npz bytes."""
        physics = np.empty(mujoco.mj_stateSize(self.model, _STATE_SPEC))
        mujoco.mj_getState(self.model, self.data, physics, _STATE_SPEC)
        meta = {
            "version": SNAPSHOT_VERSION,
            "steps": self._steps,
            "held": self._held,
            "active": self._active,
            "still": self._still,
            "max_progress": self._max_progress,
            "task": None if self._task_spec is None else self._task_spec.name,
            "instance": None if self._instance is None else self._instance.to_dict(),
            "np_random": self.np_random.bit_generator.state,
            "nq": int(self.model.nq),
            "nv": int(self.model.nv),
        }
        buf = io.BytesIO()
        np.savez(
            buf,
            physics=physics,
            eq_data=self.model.eq_data.copy(),
            meta=np.frombuffer(json.dumps(meta).encode(), np.uint8),
        )
        return buf.getvalue()

    def restore(self, snapshot: bytes) -> None:
        physics, eq_data, meta = read_snapshot(snapshot)
        if (meta["nq"], meta["nv"]) != (
            self.model.nq,
            self.model.nv,
        ) or eq_data.shape != self.model.eq_data.shape:
            raise ValueError("snapshot was taken from a different model")
        spec = (
            None
            if meta["task"] is None
            else (
                self._task_spec
                if self._task_spec is not None and self._task_spec.name == meta["task"]
                else _resolve_task(meta["task"])
            )
        )
        mujoco.mj_setState(self.model, self.data, physics, _STATE_SPEC)
        self.model.eq_data[:] = eq_data
        mujoco.mj_forward(self.model, self.data)
        self._task_spec = spec
        self._instance = None if spec is None else spec.from_dict(meta["instance"])
        self._steps, self._held, self._active = int(meta["steps"]), meta["held"], list(meta["active"])
        self._still, self._max_progress = (
            {k: int(v) for k, v in meta["still"].items()},
            float(meta["max_progress"]),
        )
        rng = np.random.Generator(getattr(np.random, meta["np_random"]["bit_generator"])())
        rng.bit_generator.state = meta["np_random"]
        self.np_random = rng

    # ------------------------------------------------------------------ internals
    def _support_height(self, x: float, y: float) -> float:
        for tray in TRAY_SPECS.values():
            if tray.contains_xy((x, y)):
                return tray.floor
        return 0.0

    def _advance(self, target: np.ndarray) -> None:
        """One control step towards ``target`` = [q1..q7, opening]; updates grasp and still counters."""
        start = self.joint_targets
        target = np.asarray(target, dtype=np.float64)
        for k in range(scene.SUBSTEPS):
            cmd = start + min(1.0, (k + 1) / (scene.SUBSTEPS // 2)) * (target - start)
            self.data.ctrl[:7] = cmd[:7]
            self.data.ctrl[7] = cmd[7] / 2
            mujoco.mj_step(self.model, self.data)
        self._update_grasp(target[7])
        for item in self._active:
            dof = self.item_dof[item]
            slow = np.linalg.norm(self.data.qvel[dof : dof + 3]) < STILL_SPEED
            self._still[item] = min(self._still[item] + 1, 10 * STILL_STEPS) if slow else 0
        if self._instance is not None:
            self._max_progress = max(self._max_progress, self._progress(self.state()))

    def _update_grasp(self, opening_target: float) -> None:
        """The hand holds an item while the command squeezes it: an item both pads touch is welded
        when it starts, and let go when it stops (a let-go that waited for a command some mm wider
        than the fingers could never come for an item near the widest opening: they creep open
        with the command and stop at the hand's limit, the item still welded)."""
        opening = float(self.data.qpos[self.finger_qpos].sum())
        squeezing = squeezes(opening_target, opening)
        if self._held is not None:
            if not squeezing:
                self.data.eq_active[self.weld[self._held]] = 0
                self._held = None
            return
        if not squeezing:
            return
        touching = {0: set(), 1: set()}
        for c in self.data.contact[: self.data.ncon]:
            for pad_index, pad in enumerate(self.pads):
                other = c.geom2 if c.geom1 == pad else c.geom1 if c.geom2 == pad else None
                if other in self.item_geom:
                    touching[pad_index].add(self.item_geom[other])
        both = touching[0] & touching[1]
        if not both:
            return
        item = min(both)
        self._attach(item)

    def _attach(self, item: str) -> None:
        """Weld ``item`` to the hand where it is now (relative pose measured, not imposed)."""
        body = self.item_body[item]
        rel_pos, rel_quat = weld_pose(
            self.data.xpos[self.hand_body],
            self.data.xquat[self.hand_body],
            self.data.xpos[body],
            self.data.xquat[body],
        )
        eq = self.weld[item]
        self.model.eq_data[eq, 0:3] = 0.0
        self.model.eq_data[eq, 3:6] = rel_pos
        self.model.eq_data[eq, 6:10] = rel_quat
        self.model.eq_data[eq, 10] = 1.0
        self.data.eq_active[eq] = 1
        self._held = item

    def _progress(self, state: PackingState) -> float:
        return float(self._instance.progress(state)) if self._instance is not None else 0.0

    def _obs(self) -> dict[str, Any]:
        items = np.zeros((len(ITEM_SPECS), 7), dtype=np.float32)
        for k, item in enumerate(ITEM_SPECS):
            a = self.item_qpos[item]
            items[k] = self.data.qpos[a : a + 7]
        joints = np.concatenate([self.data.qpos[self.arm_qpos], [self.data.qpos[self.finger_qpos].sum()]])
        held = 0 if self._held is None else 1 + list(ITEM_SPECS).index(self._held)
        return {
            "joints": joints.astype(np.float32),
            "tcp": self.data.site_xpos[self.tcp_site].astype(np.float32),
            "items": items,
            "held": held,
        }

    def _info(self, state: PackingState) -> dict[str, Any]:
        inst = self._instance
        return {
            "task": None if self._task_spec is None else self._task_spec.name,
            "goal": "" if inst is None else inst.goal,
            "success": False if inst is None else bool(inst.success(state)),
            "progress": 0.0 if inst is None else float(inst.progress(state)),
            "max_progress": self._max_progress,
            "held": state.held,
        }
