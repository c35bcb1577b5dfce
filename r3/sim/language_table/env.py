"""``LanguageTableEnv``: the Language Table board as a Gymnasium environment.

Physics lives in :mod:`.scene`; goals live in the task objects of
``r3.tasks.language_table.tasks`` (protocol below), so one simulator serves all 14 tasks.

Action: a 2D pusher displacement in metres for one 0.1 s control step, bounded by the Box
``[-action_limit, action_limit]^2`` (default 0.03 m, i.e. at most 0.3 m/s per axis). An action
is refused, never clipped: NaN/Inf actions and actions outside the Box raise ``ValueError`` and leave
the env untouched (``refused_actions`` counts them). Every action in the Box is valid (Gymnasium's
contract): one whose commanded point leaves the reachable board area stops the pusher at the edge,
as the board's rim would, and says so (``info["stopped_at_edge"]``, counted in ``edge_stops``); a
robot driver refuses such a command instead, asking :meth:`LanguageTableEnv.off_board` first
(``r3_sim_node`` does). A driver may also give ``step`` a ``cut_off`` check, asked between physics
substeps: a reason from it undoes the step's substeps and refuses the action, so a step whose caller
gave up while it ran (the process frozen mid-step) moves nothing. The displacement is taken from
the pusher's *measured* position, so a pusher blocked by a pinned block does not wind up a large
target behind it.

Snapshots (``snapshot`` / ``restore``) capture the full MuJoCo integration state (qpos, qvel, act,
ctrl, warm start, time, ...), the step counter, the task instance and the ``np_random`` state, so a
restored env continues bit-identically.
"""

from __future__ import annotations

import io
import json
import math
import weakref
from collections.abc import Callable
from typing import Any, ClassVar, Protocol
from zipfile import BadZipFile

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from r3.sim.language_table import scene
from r3.sim.offscreen import mujoco
from r3.tasks.language_table.board import BLOCKS, BOARD_HALF_EXTENTS, BoardState

SNAPSHOT_VERSION = 1
SNAPSHOT_FIELDS = {"version", "steps", "task", "instance", "np_random", "nq", "nv"}
#: Layouts drawn per reset before giving up on finding one where the task is not already solved.
LAYOUT_TRIES = 20
_STATE_SPEC = mujoco.mjtState.mjSTATE_INTEGRATION


class TaskInstance(Protocol):
    """One sampled goal (the contract of ``r3.tasks.language_table.tasks``)."""

    goal: str
    note: str

    def success(self, state: BoardState) -> bool: ...
    def progress(self, state: BoardState) -> float: ...
    def terms(self, state: BoardState) -> dict[str, float]: ...
    def to_dict(self) -> dict: ...


class TaskSpec(Protocol):
    """A task family: samples instances for a layout and rebuilds them from ``to_dict`` output."""

    name: str

    def sample(self, rng: np.random.Generator, state: BoardState) -> TaskInstance: ...
    def from_dict(self, data: dict) -> TaskInstance: ...


def _resolve_task(task: str | TaskSpec | None) -> TaskSpec | None:
    if task is None or not isinstance(task, str):
        return task
    from r3.tasks.language_table.tasks import get_task  # lazy: tasks may import heavier helpers

    return get_task(task)


def _yaw(quat: np.ndarray) -> float:
    w, x, y, z = quat
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


class LanguageTableEnv(gym.Env):
    """Eight blocks and a cylindrical pusher on a board, 10 Hz control, an optional task.

    With ``task=None`` the env is a plain simulator: goal ``""``, progress 0, never terminates.
    ``render_mode`` defaults to ``"rgb_array"`` (the only mode) so ``render()`` works out of the
    box; rendering is lazy and costs nothing until first used.

    ``sleep=True`` enables MuJoCo's sleeping: a block at rest leaves collision detection and the
    solver until an awake body touches it, which halves the cost of a push where seven of the
    eight blocks never move. It moves where blocks end by millimetres (a different solver path),
    so episodes keep it off and recorded data stays comparable; the judge's rollouts, which only
    compare outcomes of one simulator with each other, turn it on (:mod:`r3.rewards.semantic`).
    """

    metadata: ClassVar[dict] = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(
        self,
        task: str | TaskSpec | None = None,
        *,
        render_mode: str | None = "rgb_array",
        width: int = 320,
        height: int = 240,
        max_episode_steps: int = 400,
        action_limit: float = 0.03,
        image_observations: bool = False,
        sleep: bool = False,
    ):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None")
        if max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be >= 1, got {max_episode_steps}")
        if not 0 < action_limit <= 0.1:
            raise ValueError(f"action_limit must be in (0, 0.1] metres, got {action_limit}")
        self.render_mode = render_mode
        self.width, self.height = int(width), int(height)
        self.max_episode_steps = int(max_episode_steps)
        self.image_observations = image_observations
        self._task_spec = _resolve_task(task)
        self._instance: TaskInstance | None = None

        self.model = mujoco.MjModel.from_xml_string(scene.build_mjcf(self.width, self.height))
        if sleep:
            self.model.opt.enableflags |= mujoco.mjtEnableBit.mjENBL_SLEEP
        self.data = mujoco.MjData(self.model)
        self._renderer: mujoco.Renderer | None = None
        self._close_renderer: weakref.finalize | None = None
        self._block_qpos = np.array(
            [self.model.jnt_qposadr[self.model.joint(scene.body_name(b)).id] for b in BLOCKS]
        )
        self._block_dof = np.array(
            [self.model.jnt_dofadr[self.model.joint(scene.body_name(b)).id] for b in BLOCKS]
        )
        self._pusher_qpos = np.array(
            [self.model.jnt_qposadr[self.model.joint(n).id] for n in ("pusher_x", "pusher_y")]
        )
        self._steps = 0
        self.refused_actions = 0  # actions refused by step() since construction
        self.edge_stops = 0  # actions stopped at the board's edge since construction

        self.action_limit = float(action_limit)  # exact; the float32 Box bound is a hair below it
        self.action_space = spaces.Box(-action_limit, action_limit, shape=(2,), dtype=np.float32)
        hx, hy = BOARD_HALF_EXTENTS
        lim = np.array([hx + scene.RIM_WIDTH, hy + scene.RIM_WIDTH, math.pi], dtype=np.float32)
        obs = {
            "pusher": spaces.Box(-lim[:2], lim[:2], dtype=np.float32),
            "blocks": spaces.Box(
                np.tile(-lim, (len(BLOCKS), 1)), np.tile(lim, (len(BLOCKS), 1)), dtype=np.float32
            ),
        }
        if image_observations:
            obs["rgb"] = spaces.Box(0, 255, (self.height, self.width, 3), dtype=np.uint8)
        self.observation_space = spaces.Dict(obs)

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """New random layout and task instance; ``options={"task": name_or_spec_or_None}`` switches
        the task for this and later episodes."""
        super().reset(seed=seed)
        options = options or {}
        if "task" in options:
            self._task_spec = _resolve_task(options["task"])
        self._steps = 0
        for _ in range(LAYOUT_TRIES):
            mujoco.mj_resetData(self.model, self.data)
            self.set_state(BoardState(scene.sample_layout(self.np_random), scene.PUSHER_START))
            state = self.state()
            if self._task_spec is None:
                self._instance = None
                break
            try:
                self._instance = self._task_spec.sample(self.np_random, state)
                break
            except RuntimeError:  # this layout already satisfies every variant of the task: draw again
                continue
        else:
            raise RuntimeError(
                f"no layout with an unsolved {self._task_spec.name!r} task in {LAYOUT_TRIES} draws"
            )
        return self._obs(), self._info(state)

    def step(self, action, *, cut_off: Callable[[], str] | None = None):
        """Gymnasium's step; ``cut_off()`` (a driver's, not Gymnasium's) says before every physics
        substep why the step must not go on ("" while it may)."""
        action = np.asarray(action, dtype=np.float64)
        if action.shape != (2,):
            raise ValueError(f"action must have shape (2,), got {action.shape}")
        if not np.all(np.isfinite(action)):
            self._refuse(f"action must be finite, got {action.tolist()}")
        if np.any(np.abs(action) > self.action_limit):
            self._refuse(f"action {action.tolist()} exceeds +-{self.action_limit} m per step on an axis")
        stopped_at_edge = bool(self.off_board(action))
        start = self.data.qpos[self._pusher_qpos].copy()
        lo, hi = self.model.actuator_ctrlrange[:, 0], self.model.actuator_ctrlrange[:, 1]
        target = np.clip(start + action, lo, hi)
        before = None if cut_off is None else self._physics_state()

        def unless_cut_off() -> None:
            if cut_off is not None and (why := cut_off()):
                mujoco.mj_setState(self.model, self.data, before, _STATE_SPEC)
                mujoco.mj_forward(self.model, self.data)
                self._refuse(why)

        for k in range(scene.SUBSTEPS):
            unless_cut_off()
            frac = min(1.0, (k + 1) / scene.RAMP_SUBSTEPS)
            self.data.ctrl[:] = start + frac * (target - start)
            mujoco.mj_step(self.model, self.data)
        unless_cut_off()  # once more after the last substep: a step ends unseen until it is published
        self.edge_stops += stopped_at_edge
        self._steps += 1
        state = self.state()
        info = self._info(state)
        info["stopped_at_edge"] = stopped_at_edge
        terminated = bool(info["success"])
        truncated = self._steps >= self.max_episode_steps
        return self._obs(), float(terminated), terminated, truncated, info

    def off_board(self, action) -> str:
        """Why ``action`` would take the pusher off the reachable board area ("" when it would not).
        The measured pusher may rest a hair outside the servo range: moving back in is always fine."""
        action = np.asarray(action, dtype=np.float64)
        start = self.data.qpos[self._pusher_qpos]
        lo, hi = self.model.actuator_ctrlrange[:, 0], self.model.actuator_ctrlrange[:, 1]
        target = start + action
        if not np.any(((target < lo) & (action < 0)) | ((target > hi) & (action > 0))):
            return ""
        return (
            f"action {action.tolist()} would take the pusher from {start.round(4).tolist()} off the "
            f"reachable board area (x in [{lo[0]:.3f}, {hi[0]:.3f}], y in [{lo[1]:.3f}, {hi[1]:.3f}])"
        )

    def _refuse(self, why: str) -> None:
        self.refused_actions += 1
        raise ValueError(f"refused: {why}")

    def render(self):
        if self.render_mode is None:
            gym.logger.warn("render() called with render_mode=None; pass render_mode='rgb_array'")
            return None
        return self._render(depth=False)

    def close(self):
        if self._close_renderer is not None:
            self._close_renderer()
            self._renderer = self._close_renderer = None

    # ------------------------------------------------------------------ extras
    @property
    def task_instance(self) -> TaskInstance | None:
        return self._instance

    @property
    def elapsed_steps(self) -> int:
        return self._steps

    def render_depth(self) -> np.ndarray:
        """Depth image (metres from the top camera), float32 of shape (height, width)."""
        return self._render(depth=True)

    def camera_intrinsics(self) -> np.ndarray:
        """3x3 pinhole matrix K of the top camera (square pixels, principal point at the centre).

        The camera sits ``scene.CAMERA_HEIGHT`` above the board centre looking straight down, image
        right = +x and image down = -y, so a board point (x, y, z) lands at pixel
        ``u = cx + fx * x / (H - z)``, ``v = cy - fy * y / (H - z)``.
        """
        fovy = math.radians(self.model.cam_fovy[self.model.camera("top").id])
        f = 0.5 * self.height / math.tan(fovy / 2)
        return np.array([[f, 0.0, self.width / 2], [0.0, f, self.height / 2], [0.0, 0.0, 1.0]])

    def state(self) -> BoardState:
        q = self.data.qpos
        blocks = {
            b: (float(q[a]), float(q[a + 1]), _yaw(q[a + 3 : a + 7]))
            for b, a in zip(BLOCKS, self._block_qpos)
        }
        return BoardState(blocks=blocks, pusher=tuple(float(v) for v in q[self._pusher_qpos]))

    def set_state(self, state: BoardState) -> None:
        """Place blocks flat on the board and the pusher at rest (velocities and warm start zeroed).

        Blocks missing from ``state.blocks`` keep their poses.
        """
        for b, a, dof in zip(BLOCKS, self._block_qpos, self._block_dof):
            if b in state.blocks:
                x, y, yaw = state.blocks[b]
                self.data.qpos[a : a + 7] = (
                    x,
                    y,
                    scene.BLOCK_HEIGHT / 2,
                    math.cos(yaw / 2),
                    0.0,
                    0.0,
                    math.sin(yaw / 2),
                )
                self.data.qvel[dof : dof + 6] = 0.0
        self.data.qpos[self._pusher_qpos] = state.pusher
        self.data.ctrl[:] = state.pusher
        self.data.qvel[self.model.jnt_dofadr[self.model.joint("pusher_x").id]] = 0.0
        self.data.qvel[self.model.jnt_dofadr[self.model.joint("pusher_y").id]] = 0.0
        self.data.qacc_warmstart[:] = 0.0
        mujoco.mj_forward(self.model, self.data)

    def _physics_state(self) -> np.ndarray:
        """The MuJoCo integration state (what ``mj_setState`` puts back)."""
        physics = np.empty(mujoco.mj_stateSize(self.model, _STATE_SPEC))
        mujoco.mj_getState(self.model, self.data, physics, _STATE_SPEC)
        return physics

    def snapshot(self) -> bytes:
        """Everything needed to continue this episode bit-identically, as versioned npz bytes."""
        physics = self._physics_state()
        meta = {
            "version": SNAPSHOT_VERSION,
            "steps": self._steps,
            "task": None if self._task_spec is None else self._task_spec.name,
            "instance": None if self._instance is None else self._instance.to_dict(),
            "np_random": self.np_random.bit_generator.state,
            "nq": int(self.model.nq),
            "nv": int(self.model.nv),
        }
        buf = io.BytesIO()
        np.savez(buf, physics=physics, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8))
        return buf.getvalue()

    def restore(self, snapshot: bytes) -> None:
        try:
            with np.load(io.BytesIO(snapshot), allow_pickle=False) as npz:
                physics = npz["physics"]
                meta = json.loads(npz["meta"].tobytes().decode())
            if not isinstance(meta, dict) or not SNAPSHOT_FIELDS <= meta.keys():
                raise KeyError("meta")
        except (OSError, EOFError, ValueError, KeyError, TypeError, AttributeError, BadZipFile) as exc:
            # np.load's own message for foreign bytes speaks of allow_pickle, which would mislead
            raise ValueError(f"not a Language Table snapshot ({type(exc).__name__})") from None
        if meta.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"unsupported snapshot version {meta.get('version')!r}")
        if (meta["nq"], meta["nv"]) != (self.model.nq, self.model.nv) or physics.size != (
            mujoco.mj_stateSize(self.model, _STATE_SPEC)
        ):
            raise ValueError("snapshot was taken from a different model")
        if meta["task"] is None:
            spec = None
        elif self._task_spec is not None and self._task_spec.name == meta["task"]:
            spec = self._task_spec
        else:
            spec = _resolve_task(meta["task"])
        mujoco.mj_setState(self.model, self.data, physics, _STATE_SPEC)
        mujoco.mj_forward(self.model, self.data)
        self._task_spec = spec
        self._instance = None if spec is None else spec.from_dict(meta["instance"])
        self._steps = int(meta["steps"])
        rng = np.random.Generator(getattr(np.random, meta["np_random"]["bit_generator"])())
        rng.bit_generator.state = meta["np_random"]
        self.np_random = rng

    # ------------------------------------------------------------------ internals
    def _obs(self) -> dict[str, np.ndarray]:
        q = self.data.qpos
        blocks = np.array(
            [(q[a], q[a + 1], _yaw(q[a + 3 : a + 7])) for a in self._block_qpos], dtype=np.float32
        )
        obs = {"pusher": q[self._pusher_qpos].astype(np.float32), "blocks": blocks}
        if self.image_observations:
            obs["rgb"] = self._render(depth=False)
        return obs

    def _info(self, state: BoardState) -> dict[str, Any]:
        inst = self._instance
        return {
            "task": None if self._task_spec is None else self._task_spec.name,
            "goal": "" if inst is None else inst.goal,
            "success": False if inst is None else bool(inst.success(state)),
            "progress": 0.0 if inst is None else float(inst.progress(state)),
            "terms": {} if inst is None else dict(inst.terms(state)),
        }

    def _render(self, depth: bool) -> np.ndarray:
        if self._renderer is None:
            self._renderer = mujoco.Renderer(self.model, self.height, self.width)
            # Free the GL context even if close() is never called (before interpreter teardown).
            self._close_renderer = weakref.finalize(self, self._renderer.close)
        r = self._renderer
        if depth:
            r.enable_depth_rendering()
        r.update_scene(self.data, camera="top")
        frame = r.render()
        if depth:
            r.disable_depth_rendering()
        return frame
