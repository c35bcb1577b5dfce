"""Language Table simulator, Gymnasium env and scripted pushing policy.

Rendering is slow on CPU, so only a few tests render; the rest run physics only.
"""

from __future__ import annotations

import io
import json
import math

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from r3.instructions.language_table import Instruction, InstructionType
from r3.lowlevel.pushing import CONTACT, PushingPolicyConfig, ScriptedPushingPolicy
from r3.sim.language_table import scene
from r3.sim.language_table.env import LanguageTableEnv
from r3.tasks.language_table.board import (
    BLOCKS,
    BOARD_HALF_EXTENTS,
    LOCATIONS,
    BoardState,
)

T = InstructionType


# --------------------------------------------------------------------------- stand-in task
class _CentreInstance:
    """Stand-in for a task instance: push one block to the board centre."""

    def __init__(self, block: str, radius: float):
        self.block, self.radius = block, radius
        self.goal = f"push the {block} to the center"
        self.note = ""

    def _d(self, state):
        return float(np.linalg.norm(state.xy(self.block)))

    def success(self, state):
        return self._d(state) < self.radius

    def progress(self, state):
        return float(np.clip(1.0 - self._d(state) / 0.3, 0.0, 1.0))

    def terms(self, state):
        return {"distance": self._d(state)}

    def to_dict(self):
        return {"block": self.block, "radius": self.radius}


class _CentreTask:
    name = "stand_in_centre"

    def sample(self, rng, state):
        return _CentreInstance(BLOCKS[int(rng.integers(len(BLOCKS)))], 0.03)

    def from_dict(self, data):
        return _CentreInstance(data["block"], data["radius"])


@pytest.fixture
def env():
    e = LanguageTableEnv(task=_CentreTask())
    yield e
    e.close()


def _rollout(env, seed, n, action_seed=0):
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(action_seed)
    out = [obs]
    for _ in range(n):
        obs, *_ = env.step(rng.uniform(-0.03, 0.03, 2))
        out.append(obs)
    return out


# --------------------------------------------------------------------------- env
def test_check_env_passes(env):
    check_env(env, skip_render_check=True)


def test_check_env_with_images_and_render():
    # Made through the registry so the checker also exercises the render modes via the spec.
    e = gymnasium.make("r3/LanguageTable-v0", image_observations=True, width=160, height=120).unwrapped
    try:
        check_env(e)
    finally:
        e.close()


def test_reset_info_and_spaces(env):
    obs, info = env.reset(seed=1)
    assert env.observation_space.contains(obs)
    assert obs["blocks"].shape == (8, 3) and obs["blocks"].dtype == np.float32
    assert set(info) >= {"goal", "task", "progress", "success", "terms"}
    assert info["task"] == "stand_in_centre" and info["goal"].startswith("push the")
    assert env.action_space.high[0] == pytest.approx(0.03)


def test_no_task_env_is_a_plain_simulator():
    e = LanguageTableEnv()
    _, info = e.reset(seed=0)
    _, reward, terminated, truncated, info = e.step(np.zeros(2))
    assert (info["goal"], info["task"], reward, terminated, truncated) == ("", None, 0.0, False, False)


def test_same_seed_same_trajectory(env):
    a = _rollout(env, seed=7, n=25)
    b = _rollout(env, seed=7, n=25)
    c = _rollout(env, seed=8, n=1)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x["pusher"], y["pusher"])
        np.testing.assert_array_equal(x["blocks"], y["blocks"])
    assert not np.array_equal(a[0]["blocks"], c[0]["blocks"])


def test_layout_is_valid():
    rng = np.random.default_rng(3)
    for _ in range(20):
        layout = scene.sample_layout(rng)
        xy = np.array([layout[b][:2] for b in BLOCKS])
        assert np.all(np.abs(xy) <= np.array(BOARD_HALF_EXTENTS) - 0.022)
        d = np.linalg.norm(xy[:, None] - xy[None], axis=-1) + np.eye(8)
        assert d.min() >= scene.MIN_BLOCK_SPACING


def test_snapshot_restore_is_bit_identical(env):
    rng = np.random.default_rng(0)
    env.reset(seed=3)
    for _ in range(10):
        env.step(rng.uniform(-0.03, 0.03, 2))
    snap = env.snapshot()
    actions = rng.uniform(-0.03, 0.03, (15, 2))
    original = [env.step(a) for a in actions]
    after = env.np_random.random()

    other = LanguageTableEnv(task=_CentreTask())
    other.reset(seed=99)
    other.step(np.array([0.01, 0.02]))
    other.restore(snap)
    assert other.elapsed_steps == 10
    assert other.task_instance.to_dict() == env.task_instance.to_dict()
    for a, (obs, rew, term, trunc, info) in zip(actions, original):
        obs2, rew2, term2, trunc2, info2 = other.step(a)
        np.testing.assert_array_equal(obs["blocks"], obs2["blocks"])
        np.testing.assert_array_equal(obs["pusher"], obs2["pusher"])
        assert (rew, term, trunc, info) == (rew2, term2, trunc2, info2)
    np.testing.assert_array_equal(env.data.qpos, other.data.qpos)
    np.testing.assert_array_equal(env.data.qvel, other.data.qvel)
    assert other.np_random.random() == after
    other.close()


def test_restore_rejects_unknown_version(env):
    env.reset(seed=0)
    with np.load(io.BytesIO(env.snapshot())) as npz:
        physics, meta = npz["physics"], json.loads(npz["meta"].tobytes())
    meta["version"] = 999
    buf = io.BytesIO()
    np.savez(buf, physics=physics, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8))
    with pytest.raises(ValueError, match="version"):
        env.restore(buf.getvalue())


@pytest.mark.parametrize("bad", [[math.nan, 0.0], [0.0, math.inf], [0.01, 0.01, 0.0]])
def test_bad_action_raises_and_changes_nothing(env, bad):
    env.reset(seed=2)
    env.step(np.array([0.01, 0.0]))
    before = env.snapshot()
    with pytest.raises(ValueError):
        env.step(np.array(bad))
    assert env.snapshot() == before


def test_success_terminates_and_max_steps_truncates():
    e = LanguageTableEnv(task=_CentreTask(), max_episode_steps=3)
    e.reset(seed=0)
    block = e.task_instance.block
    far = (0.25, 0.15, 0.0)
    blocks = {b: far if b == block else e.state().blocks[b] for b in BLOCKS}
    e.set_state(BoardState(blocks=blocks, pusher=(0.0, -0.17)))
    results = [e.step(np.zeros(2)) for _ in range(3)]
    assert [r[2] for r in results] == [False] * 3
    assert [r[3] for r in results] == [False, False, True]
    assert results[-1][4]["terms"]["distance"] == pytest.approx(math.hypot(0.25, 0.15), abs=1e-3)
    e.reset(seed=0)
    e.set_state(BoardState(blocks={block: (0.0, 0.0, 0.0)}, pusher=(0.0, -0.17)))
    _, reward, terminated, truncated, info = e.step(np.zeros(2))
    assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)
    e.close()


def test_set_state_round_trip(env):
    env.reset(seed=0)
    target = {b: (-0.25 + 0.07 * i, 0.05, 0.3) for i, b in enumerate(BLOCKS)}
    env.set_state(BoardState(blocks=target, pusher=(0.1, -0.15)))
    s = env.state()
    for b in BLOCKS:
        np.testing.assert_allclose(s.blocks[b], target[b], atol=1e-9)
    assert s.pusher == pytest.approx((0.1, -0.15))


def test_released_block_stops_quickly(env):
    """A block shoved at full speed comes to rest within a couple of steps after release."""
    env.reset(seed=0)
    blocks = _parked({"green cube": (-0.1, 0.0, 0.0)})
    env.set_state(BoardState(blocks=blocks, pusher=(-0.1 - CONTACT - 0.005, 0.0)))
    for _ in range(4):
        env.step(np.array([0.03, 0.0]))
    x_release = env.state().blocks["green cube"][0]
    env.step(np.array([-0.03, 0.0]))
    env.step(np.zeros(2))
    x_rest = env.state().blocks["green cube"][0]
    env.step(np.zeros(2))
    assert x_release > -0.03  # it was pushed ~0.08 m
    assert x_rest - x_release < 0.02
    assert env.state().blocks["green cube"][0] == pytest.approx(x_rest, abs=1e-4)


def test_render_rgb_and_depth(env):
    env.reset(seed=0)
    rgb = env.render()
    assert rgb.shape == (240, 320, 3) and rgb.dtype == np.uint8
    r, g, b = (rgb[..., i].astype(int) for i in range(3))
    colour_masks = {
        "red": (r > 170) & (g < 80) & (b < 80),
        "blue": (b > 170) & (r < 80) & (g < 130),
        "green": (g > 120) & (r < 80) & (b < 100),
        "yellow": (r > 170) & (g > 150) & (b < 80),
    }
    for colour, mask in colour_masks.items():
        # Two blocks per colour, each roughly 18 x 18 px from this camera.
        assert mask.sum() > 2 * 60, colour
    # The pinhole model puts each cube's centre on a pixel of its colour.
    k = env.camera_intrinsics()
    for cube, colour in (("blue cube", "blue"), ("green cube", "green")):
        x, y, _ = env.state().blocks[cube]
        dist = scene.CAMERA_HEIGHT - scene.BLOCK_HEIGHT
        u, v = k[0, 2] + k[0, 0] * x / dist, k[1, 2] - k[1, 1] * y / dist
        assert colour_masks[colour][int(v), int(u)], cube
    depth = env.render_depth()
    assert depth.shape == (240, 320) and depth.dtype == np.float32
    assert depth[120, 160] == pytest.approx(scene.CAMERA_HEIGHT, abs=0.05)


# --------------------------------------------------------------------------- policy
_PARK = [
    (-0.27, -0.17),
    (-0.27, 0.17),
    (0.27, 0.17),
    (0.27, -0.17),
    (-0.12, 0.17),
    (0.12, 0.17),
    (-0.12, -0.17),
    (0.12, -0.17),
]


def _parked(placed: dict) -> dict:
    """A full layout: ``placed`` blocks where given, the rest parked near the board's corners."""
    spots = iter(_PARK)
    return {b: placed[b] if b in placed else (*next(spots), 0.0) for b in BLOCKS}


def _run(env, instruction, blocks, pusher, seed=0, config=None):
    env.set_state(BoardState(blocks=blocks, pusher=pusher))
    start = env.state()
    policy = ScriptedPushingPolicy(config or PushingPolicyConfig())
    policy.reset(instruction, start, np.random.default_rng(seed))
    actions = []
    while (a := policy.act(env.state())) is not None:
        assert env.action_space.contains(a.astype(np.float32))
        actions.append(a)
        env.step(a)
    assert len(actions) <= 20
    return start, env.state(), actions


@pytest.fixture
def plain_env():
    e = LanguageTableEnv()
    e.reset(seed=0)
    yield e
    e.close()


_CASES = [
    # (instruction, placed blocks, pusher, the block that must move, its target or None)
    (
        Instruction(T.BLOCK_TO_LOCATION, block="red moon", location="center"),
        {"red moon": (-0.15, 0.08, 0.4)},
        (0.1, -0.1),
        "red moon",
        LOCATIONS["center"],
    ),
    (
        Instruction(T.BLOCK_TO_SIDE, block="green star", other="blue cube", direction="left"),
        {"green star": (0.12, 0.06, 0.0), "blue cube": (0.0, -0.02, 0.0)},
        (0.0, -0.15),
        "green star",
        (-0.065, -0.02),
    ),
    (
        Instruction(T.BLOCK_INTO_BLOCK, block="yellow star", other="red pentagon"),
        {"yellow star": (-0.15, -0.05, 0.0), "red pentagon": (0.05, 0.02, 0.0)},
        (-0.2, -0.1),
        "yellow star",
        None,
    ),
    (
        Instruction(T.BLOCK_DIRECTION, block="blue moon", direction="up"),
        {"blue moon": (0.05, -0.05, 1.0)},
        (0.05, -0.15),
        "blue moon",
        (0.05, 0.05),
    ),
    (
        Instruction(T.BLOCK_DIRECTION, block="blue moon", direction="left", adverb="slightly"),
        {"blue moon": (0.05, 0.0, 0.0)},
        (0.15, 0.0),
        "blue moon",
        (0.01, 0.0),
    ),
    (
        Instruction(T.SEPARATE, block="green cube", other="yellow pentagon"),
        {"green cube": (0.0, 0.0, 0.0), "yellow pentagon": (0.045, 0.0, 0.0)},
        (-0.1, -0.1),
        "green cube",
        (-0.055, 0.0),
    ),
]


@pytest.mark.parametrize("case", _CASES, ids=lambda c: c[0].type.value + (c[0].adverb or ""))
def test_policy_moves_the_right_block_towards_target(plain_env, case):
    instruction, placed, pusher, mover, target = case
    if target is None:  # into: anywhere touching the other block
        other = placed[instruction.other]
        target = np.array(other[:2]) - 0.04 * (
            np.subtract(other[:2], placed[mover][:2])
            / np.linalg.norm(np.subtract(other[:2], placed[mover][:2]))
        )
    start, end, _ = _run(plain_env, instruction, _parked(placed), pusher)
    d0 = np.linalg.norm(start.xy(mover) - target)
    d1 = np.linalg.norm(end.xy(mover) - target)
    assert d1 < 0.35 * d0 + 0.01, (d0, d1)
    for b in BLOCKS:
        if b not in placed:  # bystanders far away stay put
            assert np.linalg.norm(end.xy(b) - start.xy(b)) < 0.005, b


def test_policy_touch_and_arm_to_location(plain_env):
    blocks = _parked({"green cube": (0.1, 0.05, 0.0)})
    _, end, _ = _run(plain_env, Instruction(T.TOUCH, block="green cube"), blocks, (-0.1, -0.1))
    gap = np.linalg.norm(np.array(end.pusher) - end.xy("green cube"))
    assert gap < CONTACT + 0.005
    assert np.linalg.norm(end.xy("green cube") - (0.1, 0.05)) < 0.02  # touched, not shoved away

    ins = Instruction(T.ARM_TO_LOCATION, location="top left corner")
    _, end, _ = _run(plain_env, ins, blocks, (0.1, -0.1))
    assert np.linalg.norm(np.array(end.pusher) - LOCATIONS["top left corner"]) < 0.04


def test_policy_approaches_around_a_neighbour(plain_env):
    """The pusher must get behind the block without pushing the neighbour sitting in its way."""
    placed = {"red moon": (0.0, 0.0, 0.0), "blue cube": (0.0, -0.08, 0.0)}
    cfg = PushingPolicyConfig(sloppy_approach_prob=0.0)
    ins = Instruction(T.BLOCK_DIRECTION, block="red moon", direction="up")
    start, end, _ = _run(plain_env, ins, _parked(placed), (0.0, -0.16), config=cfg)
    assert np.linalg.norm(end.xy("blue cube") - start.xy("blue cube")) < 0.01
    assert end.xy("red moon")[1] - start.xy("red moon")[1] > 0.06


def test_policy_separate_when_already_apart_is_done(plain_env):
    placed = {"green cube": (-0.1, 0.0, 0.0), "yellow pentagon": (0.1, 0.0, 0.0)}
    _, _, actions = _run(
        plain_env,
        Instruction(T.SEPARATE, block="green cube", other="yellow pentagon"),
        _parked(placed),
        (0.0, -0.1),
    )
    assert actions == []


def test_policy_is_deterministic_given_rng(plain_env):
    ins = Instruction(T.BLOCK_TO_LOCATION, block="yellow pentagon", location="top right corner")
    blocks = _parked({"yellow pentagon": (0.0, 0.0, 0.0)})
    _, end_a, a = _run(plain_env, ins, blocks, (0.0, -0.15), seed=5)
    _, end_b, b = _run(plain_env, ins, blocks, (0.0, -0.15), seed=5)
    _, _, c = _run(plain_env, ins, blocks, (0.0, -0.15), seed=6)
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))
    assert end_a.blocks == end_b.blocks
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))


def test_policy_budget_ends_the_instruction(plain_env):
    ins = Instruction(T.BLOCK_TO_LOCATION, block="red moon", location="top right corner")
    blocks = _parked({"red moon": (-0.2, -0.1, 0.0)})
    policy = ScriptedPushingPolicy(PushingPolicyConfig(steps=3))
    plain_env.set_state(BoardState(blocks=blocks, pusher=(0.0, -0.1)))
    policy.reset(ins, plain_env.state(), np.random.default_rng(0))
    n = 0
    while (a := policy.act(plain_env.state())) is not None:
        plain_env.step(a)
        n += 1
    assert n == 3 and policy.reason == "budget"


@pytest.mark.parametrize(
    "field, value",
    [
        ("steps", 0),
        ("max_step", 0.0),
        ("action_noise_std", -1.0),
        ("sloppy_approach_prob", 1.5),
        ("overshoot_std", math.nan),
        ("adverb_scale", 2.0),
    ],
)
def test_config_validation_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        PushingPolicyConfig(**{field: value})


def test_gymnasium_make():
    e = gymnasium.make("r3/LanguageTable-v0", max_episode_steps=5)
    obs, info = e.reset(seed=0)
    assert obs["blocks"].shape == (8, 3) and info["goal"] == ""
    e.close()


def test_every_registered_task_resets_deterministically_and_restores():
    tasks = pytest.importorskip("r3.tasks.language_table.tasks")
    a, b = LanguageTableEnv(), LanguageTableEnv()
    rng = np.random.default_rng(0)
    for name in tasks.TASKS:
        _, info = a.reset(seed=11, options={"task": name})
        _, info_b = b.reset(seed=11, options={"task": name})
        assert info == info_b and info["task"] == name and info["goal"]
        assert 0.0 <= info["progress"] <= 1.0
        b.reset(seed=12, options={"task": None})
        b.restore(a.snapshot())  # the task is rebuilt by name from the snapshot
        for action in rng.uniform(-0.03, 0.03, (3, 2)):
            obs, *rest = a.step(action)
            obs_b, *rest_b = b.step(action)
            np.testing.assert_array_equal(obs["blocks"], obs_b["blocks"])
            assert rest == rest_b
    a.close()
    b.close()


def test_path_planning_edges_are_cut_exactly_by_the_discs_they_cross():
    """The planner's visibility graph (``_edge_lengths``, squared distances only) against dense
    sampling of each segment: an edge passing clearly inside a disc is cut, one clearly outside is kept
    with its length."""
    from r3.lowlevel.pushing import _edge_lengths

    rng = np.random.default_rng(7)
    nodes, centres = rng.uniform(-0.3, 0.3, (40, 2)), rng.uniform(-0.3, 0.3, (6, 2))
    radii = rng.uniform(0.02, 0.06, 6)
    cost = _edge_lengths(nodes, centres, radii)
    s = np.linspace(0.0, 1.0, 2001)[:, None]
    checked = 0
    for i in range(len(nodes)):
        for j in range(len(nodes)):
            points = nodes[i] + s * (nodes[j] - nodes[i])
            gap = np.linalg.norm(points[:, None] - centres[None], axis=-1).min(0) - radii  # per disc
            if gap.min() < -1e-3:
                assert cost[i, j] == np.inf, (i, j)
            elif gap.min() > 1e-3:
                assert cost[i, j] == pytest.approx(np.linalg.norm(nodes[j] - nodes[i]), abs=1e-12), (i, j)
            checked += 1
    assert checked == 40 * 40 and np.isinf(cost).any() and np.isfinite(cost).any()
