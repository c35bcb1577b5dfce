"""ERR-style semantic actions for the packing arm: ``pick``, ``place``, ``home``, ``done``.

Each action checks its preconditions first and answers an ordinary failure result with a reason
(never an exception), then moves through an :class:`~r3.execution.base.Executor`, then verifies
its outcome against the scene. Points are base-camera image points, 0-1000 (see
:mod:`r3.lowlevel.grounding`).

Failure reasons:
  ``invalid_point`` (not two finite numbers in [0, 1000]), ``gripper_not_empty`` (pick while
  holding), ``no_object_at_point`` (the point shows no item), ``label_mismatch`` (it shows another
  item), ``not_graspable`` (wider than the open gripper), ``nothing_held`` (place with an empty
  gripper), ``wrong_object_held``, ``invalid_container`` (place point on neither a tray nor the
  table), ``no_room_at_point`` (the item would overlap others or a tray wall there),
  ``item_not_visible`` (no estimate of the item after a failed attempt), ``held_item_not_visible``
  (no estimate of the held item's size), ``motion_failed: <executor reason>`` (refused or not
  reached; a pick or place with a leg the executor would refuse, a point beyond the workspace box
  or out of the arm's reach, or (``sim``) a leg that would touch a tray or a neighbour, the place's
  opening of the fingers and its retreat included, is refused before the hand moves:
  ``Executor.reach_refusal``),
  ``grasp_failed`` (not held after the last attempt), ``place_failed: <where it ended>``. A retry
  refused after a first attempt that moved ends with that attempt's failure and
  ``, then the retry was refused: <why>`` (the retry is planned from where the miss left the item).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from r3.execution.base import PoseTarget, refused, top_down_quat
from r3.instructions.semantic import RESULT_HEADER
from r3.lowlevel.grounding import Grounder
from r3.sim.packing import scene
from r3.tasks.packing import placement
from r3.tasks.packing.state import PackingState
from r3.tasks.packing.workcell import TRAY_SPECS, tray_of


@dataclass(frozen=True)
class ActionResult:
    ok: bool
    reason: str
    control_steps: int = 0


def place_of(item: str, state: PackingState) -> str:
    """Where an item is, in the words of a result line."""
    if item not in state.items:
        return "out of sight"
    if state.held == item:
        return "in the gripper"
    tray = state.tray_of(item)
    return "on the table" if tray is None else f"in the {tray} tray"


def describe_result(result: ActionResult, before: PackingState, after: PackingState) -> str:
    """The line the model reads at its next step about an action: ok or the failure reason, then the
    items that changed place (only what the scene shows: no task checker's verdict).

    >>> from r3.tasks.packing.state import ItemState
    >>> item = ItemState((0.4, 0.0, 0.02), (1.0, 0.0, 0.0, 0.0))
    >>> describe_result(ActionResult(True, "ok"), PackingState({"soup can": item}),
    ...                 PackingState({"soup can": item}, held="soup can"))
    'Result: ok. The soup can is now in the gripper.'
    >>> describe_result(ActionResult(False, "no_object_at_point"), PackingState({}), PackingState({}))
    'Result: failed (no_object_at_point). No item changed place.'
    """
    head = f"{RESULT_HEADER} ok." if result.ok else f"{RESULT_HEADER} failed ({result.reason})."
    moved = [
        f"the {name} is now {place_of(name, after)}"
        for name in before.items
        if place_of(name, before) != place_of(name, after)
    ]
    changed = "; ".join(moved)
    return f"{head} {changed[0].upper() + changed[1:]}." if moved else f"{head} No item changed place."


@dataclass(frozen=True)
class SemanticConfig:
    """Heights (m) and retries of the skills, validated."""

    #: TCP height above the item top / support for approach and retreat.
    approach: float = 0.10
    #: Height of the carried item's bottom while transporting (clears trays and standing items).
    carry_bottom: float = 0.21
    #: Gap between the carried item's bottom and the support when it is released.
    release_gap: float = 0.01
    #: Grasp this far below the item top, at most (tall items are grasped near the top).
    grasp_depth: float = 0.035
    #: Gap between each open finger and the item on the way down (less where the hand opens no wider).
    width_slack: float = 0.010
    #: Least gap between an open finger and the item: narrower than that, the item is not graspable.
    min_finger_gap: float = 0.003
    max_attempts: int = 2
    approach_speed: float = 0.4

    def __post_init__(self):
        if not 0 < self.min_finger_gap <= self.width_slack:
            raise ValueError("SemanticConfig: 0 < min_finger_gap <= width_slack required")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        for name in ("approach", "carry_bottom", "grasp_depth"):
            if getattr(self, name) <= 0:
                raise ValueError(f"SemanticConfig.{name} must be > 0")


#: Closing yaw of the Panda's fingers at its home pose (they close along world -y); joint 1 turns
#: it with the azimuth of the hand, and joint 7 (range +-2.9 rad around home 0.79) turns it further.
HOME_CLOSING_YAW = -math.pi / 2


def wrist_friendly_yaw(yaw: float, x: float, y: float) -> float:
    """Of the two closing yaws that grasp across the same axis (``yaw`` and ``yaw + pi``; the hand
    is symmetric), the one nearer the arm's natural yaw at (x, y). The other one can put joint 7
    near its limit, where a straight descent has no smooth IK path and the hand sweeps sideways.

    >>> round(wrist_friendly_yaw(1.67, 0.298, 0.144), 3)  # to the left: the flipped grasp
    -1.472
    """
    natural = HOME_CLOSING_YAW + math.atan2(y, x)
    return min(
        (yaw, yaw + math.pi, yaw - math.pi), key=lambda c: abs(math.remainder(c - natural, 2 * math.pi))
    )


def _valid_point(point) -> bool:
    try:
        u, v = (float(c) for c in point)
    except (TypeError, ValueError):
        return False
    return math.isfinite(u) and math.isfinite(v) and 0 <= u <= 1000 and 0 <= v <= 1000


class SemanticActions:
    """pick / place / home / done over an executor, a grounder and a state reader.

    ``grasp_noise`` (m, std) perturbs the grasp point, standing in for perception error; the
    generator passed to each call makes it reproducible.
    """

    def __init__(
        self,
        executor,
        grounder: Grounder,
        state: Callable[[], PackingState],
        config: SemanticConfig | None = None,
    ):
        self.executor, self.grounder, self.state = executor, grounder, state
        self.config = config or SemanticConfig()

    # ------------------------------------------------------------------ actions
    def pick(
        self, label: str, point, rng: np.random.Generator | None = None, grasp_noise: float = 0.0
    ) -> ActionResult:
        if not _valid_point(point):
            return ActionResult(False, "invalid_point")
        if self.state().held is not None:
            return ActionResult(False, "gripper_not_empty")
        hit = self.grounder.at_point(point)
        if hit is None or not hit.is_item:
            return ActionResult(False, "no_object_at_point")
        if hit.label != label:
            return ActionResult(False, "label_mismatch")
        est = self.grounder.estimate(label)
        if est is None or est.size[0] + 2 * self.config.min_finger_gap > scene.MAX_OPENING:
            return ActionResult(False, "not_graspable")
        steps, reason, down = 0, "grasp_failed", None
        for _ in range(self.config.max_attempts):
            est = self.grounder.estimate(label)  # as it lies now: a failed attempt may have moved it
            if est is None:
                return ActionResult(False, "item_not_visible", steps)
            width, height = est.size[0], est.size[2]
            cx, cy, cz = est.centre
            if rng is not None and grasp_noise > 0:
                cx, cy = np.array([cx, cy]) + rng.normal(0.0, grasp_noise, 2)
            top = cz + height / 2
            bottom = cz - height / 2
            z = max(top - self.config.grasp_depth, bottom + 0.012, cz - 0.01 if height < 0.05 else -1)
            above = (cx, cy, top + self.config.approach)
            # Close across the narrow axis; across the other one too when it fits the hand and the
            # first way down would touch a neighbour (the hand is long along its closing axis).
            grasps = [(est.yaw, width)]
            if est.size[1] + 2 * self.config.min_finger_gap <= scene.MAX_OPENING:
                grasps.append((est.yaw + math.pi / 2, est.size[1]))
            # Open just wide enough: fully open fingers would not fit beside an item near a tray wall;
            # where even that touches, open only the least gap wider than the item.
            tries = dict.fromkeys(
                (yaw, min(scene.MAX_OPENING, across + 2 * slack))
                for yaw, across in grasps
                for slack in (self.config.width_slack, self.config.min_finger_gap)
            )
            for yaw, opening in tries:
                quat = top_down_quat(wrist_friendly_yaw(yaw, cx, cy))
                grasp = PoseTarget(
                    (cx, cy, z), quat, opening, self.config.approach_speed, approach=above[2] - z
                )
                lift = PoseTarget(above, quat, None, self.config.approach_speed)
                # The way down and back up (the item carried) are refused together, before the hand
                # moves, or not at all.
                why = self.executor.reach_refusal((grasp, lift), grasped=label)
                r = refused(why) if why else self.executor.move_to_pose(grasp)
                steps += r.control_steps
                if not r.reason.startswith("refused: collision"):
                    break
            if not r.reached:
                if r.refused and steps:
                    return self._retry_refused(reason, r.reason, down, steps)
                return ActionResult(False, f"motion_failed: {r.reason}", steps)
            steps += self.executor.set_gripper(0.0).control_steps
            lifted = self.executor.move_to_pose(lift)
            steps += lifted.control_steps
            s = self.state()
            if s.held == label and lifted.reached and s.items[label].pos[2] > cz + 0.03:
                return ActionResult(True, "ok", steps)
            steps += self.executor.set_gripper(scene.MAX_OPENING).control_steps
            down = None if lifted.reached else lift
            if not lifted.reached:
                reason = f"motion_failed: {lifted.reason}"
        return ActionResult(False, reason, steps)

    def _retry_refused(self, failed: str, refusal: str, down: PoseTarget | None, steps: int) -> ActionResult:
        """A pick whose retry is refused after an attempt that moved: that attempt's failure, not a
        refusal (the hand did move). Where that attempt's lift did not bring the hand back up, it
        tries again with the fingers open now, so that the hand is not left down by the item."""
        why = f"{failed}, then the retry was {refusal}"
        if down is not None:
            back = self.executor.move_to_pose(down)
            steps += back.control_steps
            why += "; the hand went back up" if back.reached else f"; the hand stayed down ({back.reason})"
        return ActionResult(False, why, steps)

    def place(self, label: str, point) -> ActionResult:
        if not _valid_point(point):
            return ActionResult(False, "invalid_point")
        s = self.state()
        if s.held is None:
            return ActionResult(False, "nothing_held")
        if s.held != label:
            return ActionResult(False, "wrong_object_held")
        hit = self.grounder.at_point(point, containers_only=True)
        if hit is None or not (hit.tray or hit.label == "table"):
            return ActionResult(False, "invalid_container")
        x, y = hit.xyz[0], hit.xyz[1]
        held = s.items[label]
        box = placement.footprint(label, x, y, held.yaw)
        if not self._room(label, box, hit.tray, s):
            return ActionResult(False, "no_room_at_point")
        support = TRAY_SPECS[hit.tray].floor if hit.tray else 0.0
        tcp_z, item_z = s.tcp[2], held.pos[2]
        offset = tcp_z - item_z  # TCP height above the carried item's centre
        est = self.grounder.estimate(label)  # as it hangs (a tipped item is lower)
        if est is None:
            return ActionResult(False, "held_item_not_visible")
        width, _, h = est.size
        # Keep the hand's yaw, so the item keeps its yaw and its offset from the TCP.
        quat = top_down_quat(held.yaw if s.tcp_yaw is None else s.tcp_yaw)
        # Aim the item, not the hand: the grasp may hold it off the TCP axis.
        tx, ty = x + s.tcp[0] - held.pos[0], y + s.tcp[1] - held.pos[1]
        carry = (tx, ty, self.config.carry_bottom + h / 2 + offset)
        lift = (s.tcp[0], s.tcp[1], carry[2])
        # Open only a little: wide-open fingers would strike a tray wall or a neighbour.
        opening = min(scene.MAX_OPENING, max(width, s.gripper_opening) + 0.02)
        # A path the executor would refuse a leg of (beyond the workspace box, out of the arm's
        # reach, a touch, the opening's included) is refused before the hand lifts, not after.
        # Where the hand would touch a neighbour at the release, the item is let go one gap higher
        # (trying moves nothing).
        for gap in (self.config.release_gap, 2 * self.config.release_gap):
            release = (tx, ty, support + h / 2 + gap + offset)
            path = (
                PoseTarget(lift, quat),
                PoseTarget(carry, quat),
                PoseTarget(release, quat, None, self.config.approach_speed, approach=carry[2] - release[2]),
                PoseTarget(release, quat, opening),  # the fingers open there: the item is let go
            )
            retreat = PoseTarget((tx, ty, release[2] + self.config.approach), quat)
            why = self.executor.reach_refusal((*path, retreat))
            if not (why or "").startswith("collision"):
                break
        if why:
            return ActionResult(False, f"motion_failed: refused: {why}")
        steps = 0
        for target in path:
            r = self.executor.move_to_pose(target)
            steps += r.control_steps
            if not r.reached:
                return ActionResult(False, f"motion_failed: {r.reason}", steps)
        r = self.executor.move_to_pose(retreat)
        steps += r.control_steps
        after = self.state()
        if label not in after.items:
            return ActionResult(False, f"place_failed: the {label} is not visible", steps)
        ended = tray_of(after.items[label].pos)
        if after.held is None and ended == hit.tray:
            return ActionResult(True, "ok", steps)
        where = "held" if after.held == label else (f"in the {ended} tray" if ended else "on the table")
        return ActionResult(False, f"place_failed: the {label} ended {where}", steps)

    def home(self) -> ActionResult:
        r = self.executor.move_to_joints(scene.HOME_Q)
        return ActionResult(r.reached, "ok" if r.reached else f"motion_failed: {r.reason}", r.control_steps)

    def done(self) -> ActionResult:
        return ActionResult(True, "ok")

    # ------------------------------------------------------------------ helpers
    def _room(self, label: str, box, tray: str | None, s: PackingState) -> bool:
        if tray is not None:
            t = TRAY_SPECS[tray]
            lo = np.asarray(t.centre) - np.asarray(t.inner) / 2
            hi = np.asarray(t.centre) + np.asarray(t.inner) / 2
            if (
                box[0] - box[2] < lo[0]
                or box[0] + box[2] > hi[0]
                or box[1] - box[3] < lo[1]
                or box[1] + box[3] > hi[1]
            ):
                return False
        others = [placement.footprint(n, i.pos[0], i.pos[1], i.yaw) for n, i in s.items.items() if n != label]
        return not any(placement.overlaps(box, o, gap=0.004) for o in others)
