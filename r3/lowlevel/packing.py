"""The low-level packing policy: one packing instruction -> grounding + pick/place skills.

It plays R^3's frozen packing policy (a fine-tuned pi0.5 there; scripted skills here). It accepts
exactly the packing grammar (:mod:`r3.instructions.packing`) and rejects anything else with the
parser's reason. Steps for "Pack / Remove / Transfer the X ...":

1. check where X is: on the table for pack, in the named source tray for remove and transfer
   (``item_not_on_table`` / ``item_not_in_source_tray`` otherwise); an item already in the hand
   skips the pick; another item in the hand is first put down on the table;
2. choose a free spot (corner-first in a tray, a random free spot on the table band for remove;
   ``no_room_in_<size>_tray`` when none) and turn it into a base-camera point; when the place is
   refused because the hand would touch a neighbour there, the next of up to three spots;
3. ``pick(X, locate(X))``, ``place(X, point)``, ``home()``, then wait (arm still) until the items
   stop moving or :data:`SETTLE_LIMIT` steps pass, so the next decision sees a settled scene. An
   instruction refused before any motion (at step 1 or 2) ends there: no home, no step of the world.

Deliberately imperfect (:class:`PackingPolicyConfig`): Gaussian grasp-point noise, and with a small
probability the item slips out of the hand on the way (the gripper opens mid-transport), so the
reasoner has failures to notice and repair. All randomness comes from the generator given to
:meth:`PackingPolicy.follow`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from r3.instructions.language_table import ParseError
from r3.instructions.packing import PackingInstruction, PackingInstructionType, parse
from r3.lowlevel.grounding import Grounder
from r3.lowlevel.semantic import ActionResult, SemanticActions
from r3.sim.packing import scene
from r3.tasks.packing import placement
from r3.tasks.packing.state import PackingState
from r3.tasks.packing.tasks import tray_rect
from r3.tasks.packing.workcell import DROP_REGION, TRAY_SPECS

#: Idle control steps at most after an instruction while waiting for items to come to rest.
SETTLE_LIMIT = 40
#: Spots in the destination tray tried in turn when the hand would touch a neighbour at one.
SPOT_CHOICES = 3
#: How a place or pick refused for a collision begins (the arm did not touch anything).
REFUSED_COLLISION = "motion_failed: refused: collision"


@dataclass(frozen=True)
class PolicyResult:
    """Ordinary outcome of one instruction: ``reason`` is "done" or why it failed."""

    success: bool
    reason: str
    control_steps: int


@dataclass(frozen=True)
class PackingPolicyConfig:
    """Imperfections and budgets of :class:`PackingPolicy`, validated."""

    #: Std (m) of the grasp point's offset: simulated perception error under ``sim`` grounding
    #: (``r3.packing_episode`` sets it to 0 when the policy sees through perception).
    grasp_noise: float = 0.004
    slip_prob: float = 0.06
    #: Control steps (20 Hz) an instruction may use; R^3 gives 300 steps at 60 Hz (5 s) per instruction,
    #: our skills move slower, so 20 s.
    max_steps: int = 400

    def __post_init__(self):
        if self.grasp_noise < 0 or not 0 <= self.slip_prob <= 1 or self.max_steps < 1:
            raise ValueError("PackingPolicyConfig: grasp_noise >= 0, slip_prob in [0, 1], max_steps >= 1")


class PackingPolicy:
    """Follows one packing instruction on a cell: ``actions`` (semantic actions), ``grounder``,
    ``state`` (a callable returning the current :class:`PackingState`) and ``idle`` (a callable
    that holds the arm still for one control step and returns True, or takes no step and returns False:
    the goal driving the cell has stopped)."""

    def __init__(
        self, actions: SemanticActions, grounder: Grounder, idle, config: PackingPolicyConfig | None = None
    ):
        self.actions, self.grounder, self.idle = actions, grounder, idle
        self.config = config or PackingPolicyConfig()

    def follow(self, text: str, rng: np.random.Generator) -> PolicyResult:
        parsed = parse(text)
        if isinstance(parsed, ParseError):
            return PolicyResult(False, f"rejected: {parsed.reason}", 0)
        result = self._execute(parsed, rng)
        if not result.ok and not result.control_steps:  # refused before any motion: nothing to undo
            return PolicyResult(False, result.reason, 0)
        home = self.actions.home()
        steps = result.control_steps + home.control_steps + self.settle()
        reason = result.reason if not result.ok else ("done" if home.ok else home.reason)
        return PolicyResult(result.ok and home.ok, reason, steps)

    # ------------------------------------------------------------------ internals
    def _execute(self, ins: PackingInstruction, rng) -> ActionResult:
        s = self.actions.state()
        item = ins.item
        if item not in s.items:
            return ActionResult(False, "no_such_item_in_scene")
        steps = 0
        if s.held not in (None, item):
            r = self._put_down(s.held, s, rng)
            steps += r.control_steps
            if not r.ok:
                return ActionResult(False, r.reason, steps)
            s = self.actions.state()
        if s.held != item:
            where = s.tray_of(item)
            if ins.type is PackingInstructionType.PACK and where is not None:
                return ActionResult(False, f"item_not_on_table: it is in the {where} tray", steps)
            if ins.type is not PackingInstructionType.PACK and where != ins.tray:
                found = "on the table" if where is None else f"in the {where} tray"
                return ActionResult(False, f"item_not_in_source_tray: it is {found}", steps)
        dest = (
            None
            if ins.type is PackingInstructionType.REMOVE
            else (ins.to_tray if ins.type is PackingInstructionType.TRANSFER else ins.tray)
        )
        spots = self._spots(item, dest, s, rng)
        if not spots:
            return ActionResult(False, f"no_room_in_{dest}_tray" if dest else "no_room_on_table", steps)
        if s.held != item:
            point = self.grounder.locate(item)
            if point is None:
                return ActionResult(False, "item_not_visible", steps)
            r = self.actions.pick(item, point, rng, self.config.grasp_noise)
            steps += r.control_steps
            if not r.ok:
                return ActionResult(False, r.reason, steps)
        if rng.random() < self.config.slip_prob:
            steps += self.actions.executor.set_gripper(scene.MAX_OPENING).control_steps
            return ActionResult(False, "slipped: the item fell out of the gripper", steps)
        r = ActionResult(False, "target_not_visible")
        for spot in spots:  # the next spot when the hand cannot set the item down at one untouched
            point = self._point(spot, dest)
            if point is None:
                continue
            r = self.actions.place(item, point)
            steps += r.control_steps
            if not r.reason.startswith(REFUSED_COLLISION):
                break
        return ActionResult(r.ok, r.reason, steps)

    def _spots(self, item: str, dest: str | None, s: PackingState, rng) -> list[tuple[float, float, float]]:
        """Free spots for the item, best first: corner-first in a tray, random on the table."""
        others = [placement.footprint(n, i.pos[0], i.pos[1], i.yaw) for n, i in s.items.items() if n != item]
        # The item keeps its yaw from grasp to release, so spots are searched at its current yaw.
        yaws = (s.items[item].yaw,)
        if dest is None:
            spot = placement.random_spot(item, DROP_REGION, others, rng, yaws)
            return [] if spot is None else [spot]
        return placement.corner_spots(item, tray_rect(dest), others, yaws, count=SPOT_CHOICES)

    def _point(self, spot, dest: str | None):
        """Base-camera point of the floor at the spot (the place action grounds it back)."""
        z = TRAY_SPECS[dest].floor if dest else 0.0
        return self.grounder.project((spot[0], spot[1], z))

    def _put_down(self, held: str, s: PackingState, rng) -> ActionResult:
        spots = self._spots(held, None, s, rng)
        point = None if not spots else self._point(spots[0], None)
        if point is None:
            return ActionResult(False, "no_room_on_table")
        return self.actions.place(held, point)

    def settle(self) -> int:
        """Hold the arm still until the items come to rest (at most SETTLE_LIMIT steps) or ``idle`` takes
        no step; the steps taken."""
        steps = 0
        while steps < SETTLE_LIMIT and not all(i.still for i in self.actions.state().items.values()):
            if not self.idle():
                break
            steps += 1
        return steps
