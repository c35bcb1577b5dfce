"""The packing expert: a privileged planner that writes R^3-style reasoning for grocery packing.

It reads the true scene and goal (a :class:`PackingExpertView` in ``inp.extra["privileged"]``),
never the images, and answers like a VLM: what the base view shows per tray and on the table,
what the previous instruction did and why it failed, what is done and what remains, why the item
it moves has to move, then ``Instruction: <canonical text>`` (R^3 Appendix D.4; history is the
previous instruction).

How it decides, in order:

1. clutter still in a tray is removed; a goal object tipped over in its tray (upright constraint)
   is taken out to be packed again;
2. goal objects not in their tray, in the goal's order, but an item that has to *leave* a tray
   goes before any item that *enters* it (packing the sugar box next to the foam brick that still
   has to leave the tray would box the foam brick in); when the leaver's own move was refused, it
   goes by way of another tray or the table before anything enters its tray;
3. a destination with no free spot first loses an item that does not belong there;
4. before a pick and a place, the hand's way down is checked (:func:`hand_blockers`,
   :func:`place_blockers`: a taller neighbour under the hand's footprint, for every way the hand
   can close and every spot the policy tries): the move waits while its obstacle is cleared, by
   the obstacle's own goal move when it has one, else by putting it aside on the table (it goes
   back afterwards) or, for a distractor on the table, into a tray the goal leaves free; the move
   itself stays the last resort (the prediction may be wrong).

What it remembers. The expert keeps the scene it decided on last; when the previous instruction
left the scene unchanged (:func:`packing_unchanged`) that instruction was refused, and it is not
given again in that scene: the expert changes plan (another order, another way by a tray or the
table). The reasoning names what happened (refused, fell out of the gripper, landed elsewhere,
still held) and the visible cause (the neighbour in the hand's way, a full tray, a face too wide
for the hand). When nothing is left to try it says why and gives no instruction (the grammar has
none that ends an episode; a response guard ends it after such answers). The memory starts afresh
at step 0 or with another goal or seed.

The semantic interface (ERR; :meth:`PackingExpert.act`). The same plan, spoken as actions: each move
becomes ``pick`` (a base-view point on the item's top face, from the base camera's model in the view)
and ``place`` (a point on the floor of the spot the packing policy would choose), then ``home()``;
``done()`` when every goal object is in place, and also when nothing is left to try (the reasoning
says it is stuck and why; the episode ends there, unsolved, as the plan and tools interfaces end it
too, where an answer of nothing would end it three answers later as an error). It reads the
previous action's result line from the history: a failed place refused for a touch tries the next
free spot, any other failure counts the move as refused in that scene, as for instructions.

The tools interface (ZAP; :meth:`PackingExpert.call`). The same plan, spoken as pose-tool calls: the
goal written into the todo list first; then per move: ``change_query`` for the item, ``set_gripper`` to
``move_to`` above it, ``set_gripper`` to open just wider than it, ``move_to`` down around it,
``set_gripper(opening=0)``, up to the carrying height, across above the free spot the packing policy
would choose, down to just above the floor, ``set_gripper`` a little open, back up, and back to the
arm's first pose (as the other interfaces go home); ``done()`` when every goal object is in place. The poses
are those of the semantic skills (:class:`~r3.lowlevel.semantic.SemanticConfig`), computed from the
scene at each call. It reads the previous call's outcome from the observation in the history: a descent
refused for a collision tries the next way of closing the hand, a lowering refused so the next free
spot; any other shortfall (or an item not held after the lift) counts the move as refused in that
scene, as for the other interfaces.

Randomness only picks wordings (and the table spot of a semantic or tool place):
``np.random.default_rng([seed, step])``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from r3.instructions import plan as plans
from r3.instructions import semantic, tools
from r3.instructions.language_table import ParseError
from r3.instructions.packing import PackingInstruction, PackingInstructionType, format_instruction, parse
from r3.instructions.semantic import RESULT_HEADER, ActionType, SemanticAction
from r3.lowlevel.packing import REFUSED_COLLISION, SPOT_CHOICES
from r3.lowlevel.semantic import SemanticConfig, wrist_friendly_yaw
from r3.lowlevel.tools import read_result
from r3.perception.camera import CameraModel
from r3.reasoning.prompts import ANSWER_HEADERS
from r3.sim.packing import scene
from r3.tasks.packing import placement
from r3.tasks.packing.state import PackingState, resting_geometry
from r3.tasks.packing.tasks import UPRIGHT_TOLERANCE, PackingTaskInstance, tray_rect
from r3.tasks.packing.workcell import DROP_REGION, TRAY_SPECS, TRAYS

MODEL_ID = "expert:packing"
T = PackingInstructionType
#: The Panda hand's body seen from above: half length along the closing axis, half width across it (m),
#: and the height of its underside above the tool centre point (r3.sim.packing.scene).
HAND_HALF = (0.10, 0.025)
HAND_ABOVE_TCP = 0.047
#: A neighbour counts as in the hand's way only when it rises this much above the hand's underside.
HAND_MARGIN = 0.01
#: The widest an item may be across the fingers (open hand minus the least finger gaps) and the grasp
#: height below an item's top, as the pick skill has them.
MAX_ACROSS = scene.MAX_OPENING - 2 * SemanticConfig().min_finger_gap
GRASP_DEPTH = SemanticConfig().grasp_depth
#: Items closer than this to where they were (m), and turned by less than QUAT_TOLERANCE in every
#: quaternion component, count as not moved.
STILL_TOLERANCE = 0.001
QUAT_TOLERANCE = 0.003


@dataclass(frozen=True)
class PackingExpertView:
    """The privileged information the packing expert reads (``inp.extra["privileged"]``); ``camera``
    (the base camera's model) turns positions into image points for the semantic interface."""

    state: PackingState
    task: PackingTaskInstance
    camera: CameraModel | None = None


@dataclass(frozen=True)
class Plan:
    """The next instruction and why its item moves: ``role`` is clutter, tipped, goal, room, obstacle or
    detour (None with ``role`` done or stuck: nothing to move, or nothing left to try)."""

    instruction: PackingInstruction | None
    role: str
    why: str


# ------------------------------------------------------------------------------------ geometry
def packing_unchanged(a: PackingState, b: PackingState) -> bool:
    """Whether state ``b`` shows the scene of the earlier ``a``: the same item held, and every item where
    it was and turned the same way. The tolerances are tight: an item at rest does not creep, while
    one that was lifted and fell back onto its own spot lands a few millimetres or degrees off. Only
    poses count, which the privileged state topic carries too (the graph decides as in process)."""
    if a.held != b.held or set(a.items) != set(b.items):
        return False
    for name, before in a.items.items():
        after = b.items[name]
        turned = max(abs(x - y) for x, y in zip(before.quat, after.quat))
        if math.dist(before.pos, after.pos) > STILL_TOLERANCE or turned > QUAT_TOLERANCE:
            return False
    return True


def _grasp_axes(item: str, state: PackingState) -> list[float]:
    """Closing yaws the hand can grasp ``item`` with as it lies (across its narrow side, and its long
    side when that fits the hand too)."""
    yaw, (across, along, _) = resting_geometry(item, state.items[item].quat)
    return [a for a, width in ((yaw, across), (yaw + math.pi / 2, along)) if width <= MAX_ACROSS]


def graspable(item: str, state: PackingState) -> bool:
    return bool(_grasp_axes(item, state))


def _overlap(box, centre, yaw: float, half: tuple[float, float]) -> bool:
    """Whether an axis-aligned box (cx, cy, hx, hy) meets the rectangle at ``centre`` turned by ``yaw``."""
    c, s = math.cos(yaw), math.sin(yaw)
    d = np.array([box[0] - centre[0], box[1] - centre[1]])
    for axis, h in (((c, s), half[0]), ((-s, c), half[1])):  # the hand rectangle's axes
        reach = abs(axis[0]) * box[2] + abs(axis[1]) * box[3]
        if abs(float(d @ axis)) > h + reach:
            return False
    hand_x = abs(c) * half[0] + abs(s) * half[1]
    hand_y = abs(s) * half[0] + abs(c) * half[1]
    return abs(d[0]) <= box[2] + hand_x and abs(d[1]) <= box[3] + hand_y


def _in_the_way(centre, yaw: float, underside: float, state: PackingState, item: str) -> list[str]:
    """Items (not ``item``, not the held one) taller than the hand's ``underside`` and under its footprint
    at ``centre`` with closing yaw ``yaw``, nearest first."""
    hits = []
    for other, o in state.items.items():
        if other in (item, state.held):
            continue
        _, (_, _, oh) = resting_geometry(other, o.quat)
        if o.pos[2] + oh / 2 > underside + HAND_MARGIN and _overlap(
            placement.footprint(other, o.pos[0], o.pos[1], o.yaw), centre, yaw, HAND_HALF
        ):
            hits.append((math.dist(o.pos[:2], centre[:2]), other))
    return [name for _, name in sorted(hits)]


def grasp_height(centre_z: float, height: float) -> float:
    """The TCP height of a top-down grasp of an item of ``height`` centred at ``centre_z``, as the pick
    skill takes it: GRASP_DEPTH below the top, but clear of the support, and low on a short item."""
    top, bottom = centre_z + height / 2, centre_z - height / 2
    return max(top - GRASP_DEPTH, bottom + 0.012, centre_z - 0.01 if height < 0.05 else -1.0)


def hand_blockers(item: str, state: PackingState) -> list[str]:
    """The neighbours the hand would hit coming down to grasp ``item``, nearest first; empty when one
    way of closing the hand has a clear way down (or the item is held)."""
    if state.held == item:
        return []
    s = state.items[item]
    _, (_, _, height) = resting_geometry(item, s.quat)
    grasp = grasp_height(s.pos[2], height)
    found: list[str] = []
    for yaw in _grasp_axes(item, state) or [resting_geometry(item, s.quat)[0]]:
        hits = _in_the_way(s.pos, yaw, grasp + HAND_ABOVE_TCP, state, item)
        if not hits:
            return []
        found += [name for name in hits if name not in found]
    return found


def place_blockers(item: str, tray: str, state: PackingState) -> list[str]:
    """The neighbours the hand would hit setting ``item`` down in ``tray``, at every spot the packing
    policy tries there (corner first, at the item's yaw); empty when one spot is clear or none is free."""
    s = state.items[item]
    others = [placement.footprint(n, i.pos[0], i.pos[1], i.yaw) for n, i in state.items.items() if n != item]
    spots = placement.corner_spots(item, tray_rect(tray), others, yaws=(s.yaw,), count=SPOT_CHOICES)
    yaw, (_, _, height) = resting_geometry(item, s.quat)
    if state.held == item and state.tcp_yaw is not None:
        yaw = state.tcp_yaw
    # Released just above the floor, held GRASP_DEPTH below its top: where the hand's underside is then.
    underside = TRAY_SPECS[tray].floor + 0.01 + height - GRASP_DEPTH + HAND_ABOVE_TCP
    found: list[str] = []
    for x, y, _ in spots:
        hits = _in_the_way((x, y), yaw, underside, state, item)
        if not hits:
            return []
        found += [name for name in hits if name not in found]
    return found


def has_room(item: str, tray: str, state: PackingState) -> bool:
    others = [placement.footprint(n, i.pos[0], i.pos[1], i.yaw) for n, i in state.items.items() if n != item]
    return bool(placement.candidates(item, tray_rect(tray), others, yaws=(state.items[item].yaw,)))


def _where(item: str, state: PackingState) -> str:
    if state.held == item:
        return "in the gripper"
    tray = state.tray_of(item)
    return "on the table" if tray is None else f"in the {tray} tray"


def _where_to(tray: str | None) -> str:
    return "on the table" if tray is None else f"in the {tray} tray"


def _dest(ins: PackingInstruction) -> str | None:
    return None if ins.type is T.REMOVE else (ins.to_tray if ins.type is T.TRANSFER else ins.tray)


def _move(item: str, dest: str | None, state: PackingState) -> PackingInstruction:
    where = state.tray_of(item)
    if dest is None:
        return PackingInstruction(T.REMOVE, item, where)
    if where is None:
        return PackingInstruction(T.PACK, item, dest)
    return PackingInstruction(T.TRANSFER, item, where, dest)


# ------------------------------------------------------------------------------------ planning
def leaving(state: PackingState, task: PackingTaskInstance) -> dict[str, list[str]]:
    """Per tray, the items in it that must leave it (clutter, goal objects of another tray, tipped ones)."""
    out: dict[str, list[str]] = {t: [] for t in TRAYS}
    for item in state.items:
        tray = state.tray_of(item)
        if tray is None:
            continue
        goal = task.targets.get(item)
        tipped = goal == tray and item in task.upright and state.items[item].tilt > UPRIGHT_TOLERANCE
        if item in task.clutter or (goal is not None and goal != tray) or tipped:
            out[tray].append(item)
    return out


def _wanted(state: PackingState, task: PackingTaskInstance) -> tuple[list[Plan], list[Plan]]:
    """Every move the goal asks for now, first things first (rules 1 and 2 of the module docstring):
    the moves to make now, and the moves into a tray that something still has to leave (deferred)."""
    first, entering = [], []
    for c in task.clutter:
        tray = state.tray_of(c)
        if tray is not None:
            first.append(
                Plan(PackingInstruction(T.REMOVE, c, tray), "clutter", f"the {c} does not belong in any tray")
            )
    for item, dest in task.targets.items():
        where = state.tray_of(item)
        if where == dest and state.held != item:
            if item in task.upright and state.items[item].tilt > UPRIGHT_TOLERANCE:
                first.append(
                    Plan(
                        PackingInstruction(T.REMOVE, item, dest),
                        "tipped",
                        f"the {item} has tipped over and must stand upright",
                    )
                )
            continue
        why = (
            f"the {item} still has to go into the {dest} tray"
            if where is None
            else f"the {item} belongs in the {dest} tray, not the {where} one"
        )
        plan = Plan(_move(item, dest, state), "goal", why)
        (first if where is not None else entering).append(plan)
    leavers = leaving(state, task)
    ready, deferred = [], []
    for p in first + entering:
        stays = [o for o in leavers.get(_dest(p.instruction) or "", []) if o != p.instruction.item]
        (deferred if stays else ready).append(p)
    return ready, deferred


def _spare_tray(state: PackingState, task: PackingTaskInstance, item: str) -> str | None:
    """A tray with room for ``item`` that no pending goal object needs, else any tray with room."""
    needed = {d for i, d in task.targets.items() if not task.packed(state, i)}
    fits = [t for t in TRAYS if has_room(item, t, state)]
    free = [t for t in fits if t not in needed]
    return (free or fits or [None])[0]


def _clear(
    blocker: str, item: str, state: PackingState, task: PackingTaskInstance, at: str | None = None
) -> Plan | None:
    """The move that takes ``blocker`` out of the hand's way to ``item`` (``at``: setting it down in
    that tray)."""
    goal, where = task.targets.get(blocker), state.tray_of(blocker)
    if not graspable(blocker, state) or hand_blockers(blocker, state):
        return None
    in_the_way = (
        f"the {blocker} stands in the hand's way down to the {item}"
        if at is None
        else f"the {blocker} stands in the hand's way when it sets the {item} down in the {at} tray"
    )
    if goal is not None and goal != where and has_room(blocker, goal, state):
        return Plan(
            _move(blocker, goal, state), "obstacle", f"{in_the_way} and belongs in the {goal} tray anyway"
        )
    if where is not None:
        back = f" (it goes back into the {where} tray afterwards)" if goal == where else ""
        return Plan(
            PackingInstruction(T.REMOVE, blocker, where),
            "obstacle",
            f"{in_the_way} and must go aside onto the table first{back}",
        )
    spare = _spare_tray(state, task, blocker)
    if spare is None or blocker in task.clutter:  # clutter put into a tray would only be taken out again
        return None
    return Plan(
        PackingInstruction(T.PACK, blocker, spare),
        "obstacle",
        f"{in_the_way} and must go into the {spare} tray for now, which the goal leaves free",
    )


def _make_room(item: str, dest: str, state: PackingState, task: PackingTaskInstance) -> Plan | None:
    for other in state.in_tray(dest):
        if task.targets.get(other) == dest:
            continue
        goal = task.targets.get(other)
        why = f"the {dest} tray is too full for the {item}, and the {other} does not belong there"
        if goal is not None and has_room(other, goal, state):
            return Plan(_move(other, goal, state), "room", why)
        return Plan(PackingInstruction(T.REMOVE, other, dest), "room", why)
    return None


def next_plan(
    state: PackingState,
    task: PackingTaskInstance,
    refused: frozenset[str] = frozenset(),
    hidden: frozenset[str] = frozenset(),
) -> Plan:
    """The expert's next move; ``refused`` holds instruction texts already refused in this very scene,
    ``hidden`` the items no action can name (outside the base view, for the interfaces that point).

    A :class:`Plan` with ``instruction`` None means nothing is left that the expert can try.
    """
    ready, deferred = _wanted(state, task)
    options = (
        _feasible(ready, state, task, hidden)
        + _detours(state, task, refused, hidden)
        + _feasible(deferred, state, task, hidden)
    )
    for plan in options:
        if (
            plan is not None
            and format_instruction(plan.instruction) not in refused
            and (plan.instruction.item not in hidden or state.held == plan.instruction.item)
        ):
            return plan
    if any(not task.packed(state, i) for i in task.targets) or not task.clutter_cleared(state):
        return Plan(None, "stuck", _stuck(state, task, hidden))
    return Plan(None, "done", "every goal object is where it should be")


def _feasible(
    plans: list[Plan], state: PackingState, task: PackingTaskInstance, hidden: frozenset[str]
) -> list[Plan | None]:
    """Each wanted move, or what has to happen before it (room made, an obstacle cleared; None: nothing);
    none for an item in ``hidden``, which no action can pick."""
    out: list[Plan | None] = []
    for plan in plans:
        item, dest = plan.instruction.item, _dest(plan.instruction)
        if item in hidden and state.held != item:
            continue
        if dest is not None and not has_room(item, dest, state):
            out.append(_make_room(item, dest, state, task))
            continue
        blockers = hand_blockers(item, state)
        if blockers and state.held != item:  # the move itself last: the prediction may be wrong
            out += [_clear(b, item, state, task) for b in blockers] + [plan]
            continue
        if not graspable(item, state) and state.held != item:
            continue
        blockers = [] if dest is None else place_blockers(item, dest, state)
        out += [_clear(b, item, state, task, dest) for b in blockers] + [plan]
    return out


def _detours(
    state: PackingState, task: PackingTaskInstance, refused: frozenset[str], hidden: frozenset[str]
) -> list[Plan]:
    """Other ways for a goal object whose own move was refused here: by way of another tray or the table."""
    out = []
    for item, dest in task.targets.items():
        where = state.tray_of(item)
        if (
            where == dest
            or item in hidden
            or format_instruction(_move(item, dest, state)) not in refused
            or not graspable(item, state)
        ):
            continue
        for via in [t for t in TRAYS if t not in (where, dest) and has_room(item, t, state)][:1]:
            out.append(
                Plan(
                    _move(item, via, state),
                    "detour",
                    f"the direct move of the {item} was refused here, so it goes by way of the {via} tray",
                )
            )
        if where is not None:
            out.append(
                Plan(
                    PackingInstruction(T.REMOVE, item, where),
                    "detour",
                    f"the direct move of the {item} was refused here, so it goes by way of the table",
                )
            )
    return out


def gave_up(why: str) -> str:
    """Why the expert of an interface with ``done()`` (semantic, plan, tools) ends an episode it is stuck
    in: ending it is a clean outcome, not successful, where answering nothing would end it three
    answers later as an error (and its bag, valid steps included, out of every dataset)."""
    return (
        f"I am stuck because {why}. No action I could take changes that, so I end the episode here with "
        "the goal not reached"
    )


def _sentence(why: str) -> str:
    """``why`` (a clause, or sentences without the last full stop) as the sentence a reasoning says."""
    return f"{why[0].upper()}{why[1:]}."


def _stuck(state: PackingState, task: PackingTaskInstance, hidden: frozenset[str] = frozenset()) -> str:
    """Why no move is left to try (the reason the episode cannot go on usefully)."""
    for item in task.targets:
        if task.packed(state, item):
            continue
        if item in hidden and state.held != item:
            return f"the {item} is outside the base camera's view, so no point can name it to pick it up"
        if not graspable(item, state) and state.held != item:
            return f"the {item} lies with every face wider than the open hand, so it cannot be grasped"
        dest = task.targets[item]
        if not has_room(item, dest, state):
            return f"the {dest} tray has no room left for the {item}"
    return "every move that is left was refused in this very scene"


# ------------------------------------------------------------------------------------ reasoning
def _pick(rng, options):
    return options[int(rng.integers(len(options)))]


def _names(items) -> str:
    return ", the ".join(items)


def _scene(state: PackingState, rng) -> list[str]:
    parts = []
    for tray in TRAYS:
        inside = state.in_tray(tray)
        parts.append(
            f"the {tray} tray holds the {' and the '.join(inside)}" if inside else f"the {tray} tray is empty"
        )
    table = [i for i in state.items if state.tray_of(i) is None and state.held != i]
    if table:
        parts.append(f"on the table I can see the {_names(table)}")
    if state.held:
        parts.append(f"the gripper is holding the {state.held}")
    opener = _pick(rng, ["In the base view,", "Looking at the base camera image,", "From the base view,"])
    return [f"{opener} {'; '.join(parts)}."]


def read_instruction(previous: str) -> PackingInstruction | None:
    """The instruction of a previous answer (or of a bare instruction), None when there is none."""
    text = (previous or "").rsplit("Instruction:", 1)[-1].strip()
    ins = parse(text) if text else None
    return None if ins is None or isinstance(ins, ParseError) else ins


def cause(ins: PackingInstruction, state: PackingState) -> str:
    """The visible reason an instruction cannot be carried out in ``state`` ("" when none is visible)."""
    item, dest = ins.item, _dest(ins)
    if state.held != item:
        blockers = hand_blockers(item, state)
        if blockers:
            return f"the hand would hit the {blockers[0]} right beside the {item}"
        if not graspable(item, state):
            return f"the {item} lies with every face wider than the open hand"
    if dest is not None and not has_room(item, dest, state):
        return f"the {dest} tray has no free spot for the {item}"
    blockers = [] if dest is None else place_blockers(item, dest, state)
    if blockers:
        return f"the hand would hit the {blockers[0]} when setting the {item} down in the {dest} tray"
    return ""


def _previous(ins: PackingInstruction | None, refused: bool, state: PackingState, rng) -> list[str]:
    """What the previous instruction did, and the cause where it failed (all true of ``state``)."""
    if ins is None:
        return []
    said, item, dest = format_instruction(ins), ins.item, _dest(ins)
    now = _where(item, state)
    if state.tray_of(item) == dest and state.held != item:
        return [
            _pick(
                rng,
                [
                    f"The previous instruction worked: the {item} is now {now}.",
                    f"My last step succeeded, since the {item} sits {now}.",
                ],
            )
        ]
    if refused:
        why = cause(ins, state)
        why = f": {why}" if why else ", although nothing visible is in its way"
        return [
            f'The previous instruction, "{said}", was refused before anything moved{why}.',
            "Repeating it in the same scene would fail the same way.",
        ]
    source = None if ins.type is T.PACK else ins.tray
    if state.held == item:
        return [f"The previous instruction did not finish: the {item} is still in the gripper."]
    if state.tray_of(item) == source:
        return [
            _pick(
                rng,
                [
                    (
                        f"The previous instruction did not work: the {item} did not end up "
                        f"{_where_to(dest)}, and it is {now} again."
                    ),
                    f"The last attempt failed: the {item} is {now} again, not {_where_to(dest)}.",
                ],
            )
        ]
    if state.tray_of(item) is None:
        return [
            f"The previous instruction did not work: the {item} fell out of the gripper on the way.",
            "It now lies on the table.",
        ]
    return [f"The previous instruction did not work: the {item} landed {now} instead."]


def write_reasoning(
    state: PackingState,
    task: PackingTaskInstance,
    previous: PackingInstruction | None,
    refused: bool,
    plan: Plan,
    rng,
) -> str:
    done = [i for i in task.targets if task.packed(state, i)]
    todo = [f"the {i} to the {t} tray" for i, t in task.targets.items() if not task.packed(state, i)]
    parts = _scene(state, rng) + _previous(previous, refused, state, rng)
    if done:
        parts.append(f"Already packed where the goal wants them: the {_names(done)}.")
    if todo:
        parts.append(f"Still to do: {'; '.join(todo)}.")
    clutter = [c for c in task.clutter if state.tray_of(c) is not None]
    if clutter:
        parts.append(f"The {' and the '.join(clutter)} must end up out of every tray.")
    if plan.instruction is None:
        if plan.role == "done":
            parts.append(
                "Everything is in place; the items only need to settle, so I repeat a harmless check."
            )
        else:
            parts.append(
                f"I am stuck: {plan.why}. No instruction I could give would change that, so I give "
                "none and the episode should end here."
            )
        return " ".join(parts)
    item = plan.instruction.item
    others = [i for i, t in task.targets.items() if not task.packed(state, i) and i != item]
    if others and plan.role == "goal":
        parts.append(
            _pick(
                rng,
                [
                    f"I could also start with the {others[0]}, but {plan.why}, so that comes first.",
                    f"Handling the {others[0]} first is possible, yet {plan.why}.",
                ],
            )
        )
    parts.append(
        _pick(
            rng,
            [
                f"Since {plan.why}, the next step moves the {item}.",
                f"So {plan.why}; I will move the {item} next.",
            ],
        )
    )
    return " ".join(parts)


@dataclass
class PackingExpert:
    """Chooses and explains the next packing instruction (used by the ``expert`` backend).

    It remembers the scene of its last decision and the instructions refused in an unchanged scene
    (see the module docstring); one instance follows one episode at a time.
    """

    model_id: str = MODEL_ID
    _last: tuple | None = None  # (episode key, step, state) of the last decision
    _refused: set[str] = field(default_factory=set)
    _serving: Plan | None = None  # the planned move the last semantic action served
    _spot: int = 0  # which of the free spots the place of that move aims at
    _moving: ToolMove | None = None  # the planned move the tool calls carry out
    _query: tuple[str, ...] = ()  # what the last change_query asked perception for
    _rest: tuple = (0.3, 0.0, 0.5, 0.0)  # the arm's pose at the first step (x, y, z, slot yaw)
    _planned: tuple[Plan | None, ...] = ()  # the planned move each step of the last plan served

    def answer(
        self, view: PackingExpertView, previous: str, seed: int, step: int, with_reasoning: bool
    ) -> tuple[str, str]:
        """(instruction text, reasoning text without its header); the instruction is "" when nothing is
        left to try (the answer then has no instruction, and a response guard ends the episode)."""
        state, task = view.state, view.task
        key = (task.goal, tuple(sorted(task.layout.items())), int(seed))
        ins = read_instruction(previous)
        last = self._last
        if step == 0 or last is None or last[0] != key or last[1] != step - 1:
            self._refused = set()
            last = None
        refused = (
            ins is not None
            and last is not None
            and packing_unchanged(last[2], state)
            and not (state.tray_of(ins.item) == _dest(ins) and state.held != ins.item)
        )
        if last is not None and not packing_unchanged(last[2], state):
            self._refused = set()
        if refused:
            self._refused.add(format_instruction(ins))
        self._last = (key, step, state)
        plan = next_plan(state, task, frozenset(self._refused))
        if plan.role == "stuck":  # no instruction: the answer asks for nothing, and the episode can end
            instruction = ""
        else:
            instruction = format_instruction(plan.instruction or self._check(task, state))
        if not with_reasoning:
            return instruction, ""
        rng = np.random.default_rng([int(seed), int(step)])
        return instruction, write_reasoning(state, task, ins, refused, plan, rng)

    def act(
        self, view: PackingExpertView, previous: str, seed: int, step: int, with_reasoning: bool
    ) -> tuple[str, str]:
        """The semantic interface's answer: (action call text, reasoning without its header); the call
        is ``done()`` when nothing is left to try (:func:`gave_up`). The instruction a failed action
        served counts as refused in that scene, as a refused instruction does for :meth:`answer`."""
        state, task = view.state, view.task
        key = (task.goal, tuple(sorted(task.layout.items())), int(seed))
        action, outcome = read_action(previous)
        last = self._last
        if step == 0 or last is None or last[0] != key or last[1] != step - 1:
            self._refused, self._serving, last = set(), None, None
        if last is not None and not packing_unchanged(last[2], state):
            self._refused = set()
        failed = action is not None and outcome != "ok"
        serving = self._serving
        # A place the hand could not make untouched at one spot tries the next, as the packing policy does.
        another_spot = (
            failed
            and action.type is ActionType.PLACE
            and outcome.startswith((f"failed ({REFUSED_COLLISION}", "failed (no_room_at_point"))
            and serving is not None
            and state.held == serving.instruction.item
            and self._spot + 1 < SPOT_CHOICES
        )
        self._spot = self._spot + 1 if another_spot else 0
        if failed and serving is not None and not another_spot:
            self._refused.add(format_instruction(serving.instruction))
        self._last = (key, step, state)
        rng = np.random.default_rng([int(seed), int(step)])
        after_place = action is not None and action.type is ActionType.PLACE and not failed
        carrying = serving if another_spot or not failed else None
        chosen, self._serving = next_step(
            state, task, view.camera, frozenset(self._refused), after_place, carrying, rng, self._spot
        )
        call = "" if chosen.action is None else semantic.format_instruction(chosen.action)
        if not with_reasoning:
            return call, ""
        return call, write_semantic_reasoning(state, task, action, outcome, chosen, rng)

    def plan(
        self, view: PackingExpertView, previous: str, seed: int, step: int, with_reasoning: bool
    ) -> tuple[str, str]:
        """The plan interface's answer: (plan text, reasoning without its header); the plan is
        ``1. done()`` when nothing is left to try (:func:`gave_up`). The plan is the semantic
        interface's actions for every remaining move,
        each planned on the scene the earlier steps are predicted to leave (:func:`predict_step`). After
        a plan that stopped at a failed step it plans again from the scene it finds, the failed step's
        move refused in that scene, as :meth:`act` counts a failed action (a place refused for a touch
        tries the next free spot instead)."""
        state, task = view.state, view.task
        key = (task.goal, tuple(sorted(task.layout.items())), int(seed))
        stopped, failed, outcome = read_plan_result(previous)
        last = self._last
        if step == 0 or last is None or last[0] != key or last[1] != step - 1:
            self._refused, self._planned, self._spot, last = set(), (), 0, None
            stopped = 0
        if last is not None and not packing_unchanged(last[2], state):
            self._refused = set()
        serving = self._planned[stopped - 1] if 0 < stopped <= len(self._planned) else None
        another_spot = (
            failed is not None
            and failed.type is ActionType.PLACE
            and outcome.startswith((f"failed ({REFUSED_COLLISION}", "failed (no_room_at_point"))
            and serving is not None
            and state.held == serving.instruction.item
            and self._spot + 1 < SPOT_CHOICES
        )
        self._spot = self._spot + 1 if another_spot else 0
        if failed is not None and serving is not None and not another_spot:
            self._refused.add(format_instruction(serving.instruction))
        self._last = (key, step, state)
        rng = np.random.default_rng([int(seed), int(step)])
        carrying = serving if another_spot else None
        chosen, stuck = plan_steps(
            state, task, view.camera, frozenset(self._refused), carrying, self._spot, rng
        )
        self._planned = tuple(served for _, served in chosen)
        text = plans.format_instruction(plans.Plan(tuple(c.action for c, _ in chosen))) if chosen else ""
        if not with_reasoning:
            return text, ""
        return text, write_plan_reasoning(state, task, stopped, failed, outcome, chosen, stuck, rng)

    def call(
        self, view: PackingExpertView, previous: str, seed: int, step: int, with_reasoning: bool
    ) -> tuple[str, str]:
        """The tools interface's answer: (tool call text, reasoning without its header); the call is
        ``done()`` when nothing is left to try (:func:`gave_up`). A move whose call fell short counts
        as refused in that scene, as a refused instruction does for :meth:`answer` (but see
        :meth:`_retry`)."""
        state, task = view.state, view.task
        key = (task.goal, tuple(sorted(task.layout.items())), int(seed))
        said, outcome = read_tool_call(previous)
        last = self._last
        if step == 0 or last is None or last[0] != key or last[1] != step - 1:
            self._refused, self._moving, self._query, last = set(), None, (), None
        if last is not None and not packing_unchanged(last[2], state):
            self._refused = set()
        if isinstance(said, tools.ChangeQuery) and outcome == "ok":
            self._query = said.queries
        moving = self._moving
        if moving is not None and said is not None and not self._retry(moving, outcome, state):
            if moving.instruction is not None:
                self._refused.add(format_instruction(moving.instruction))
            moving = None
        self._last = (key, step, state)
        rng = np.random.default_rng([int(seed), int(step)])
        if step == 0:
            self._rest = (*state.tcp, _slot_yaw(state.tcp_yaw or 0.0))
            made, why = tools.UpdateTodo(todo_items(state, task)), "writing the plan down keeps it in view"
        else:
            plan = None if moving else next_plan(state, task, frozenset(self._refused))
            moving = moving or start_move(plan, state)
            if moving is not None:
                made, why = next_tool_call(moving, state, self._query, self._rest, rng)
                moving = None if made is None or moving.phase == PHASES[-1] else moving
            elif plan.role == "done":
                made, why = tools.Done(), "every goal object is where it should be, so the episode can end"
            else:
                made, why = tools.Done(), gave_up(plan.why)
        self._moving = moving
        text = "" if made is None else tools.format_instruction(made)
        if not with_reasoning:
            return text, ""
        return text, write_tool_reasoning(state, task, said, outcome, why, made is not None, rng)

    @staticmethod
    def _retry(moving: ToolMove, outcome: str, state: PackingState) -> bool:
        """Whether the move goes on after its last call came back ``outcome`` (the call's phase is
        ``moving.phase``): on reached / ok; after a descent that would touch a tray, with the next way
        of closing the hand; after a lowering that would (or that stopped short on something), at the
        next free spot, lifted again first; after a refused rise from a set-down item,
        with the jaws closed in round it first (an open finger may be against a tray wall)."""
        if moving.phase == "close":  # the jaws stop on the item (short), or close on nothing
            return state.held == moving.item
        if moving.phase == "release" and state.held != moving.item:
            if outcome == "short":  # let go, but a finger stopped on a wall or a neighbour
                moving.narrowed = moving.width
            return True
        if outcome in ("reached", "ok"):
            return moving.phase != "lift" or state.held == moving.item
        blocked = outcome in ("not attempted", "incomplete")
        if moving.phase == "down" and blocked and moving.grasp + 1 < len(moving.grasps):
            moving.grasp, moving.phase = moving.grasp + 1, "query"
            return True
        set_down_on_something = outcome == "short" and state.held == moving.item
        if moving.phase == "lower" and (blocked or set_down_on_something) and moving.spot + 1 < SPOT_CHOICES:
            moving.spot, moving.phase, moving.target = moving.spot + 1, "lift", None
            return True
        if moving.phase == "up" and blocked and moving.narrowed is None:
            moving.narrowed, moving.phase = moving.width, "release"
            return True
        return False

    @staticmethod
    def _check(task: PackingTaskInstance, state: PackingState) -> PackingInstruction:
        """A harmless instruction while placed items settle: the first goal object's own move, which does
        nothing (it is in place)."""
        item, dest = next(iter(task.targets.items()))
        where = state.tray_of(item)
        return (
            PackingInstruction(T.PACK, item, dest)
            if where is None or where == dest
            else PackingInstruction(T.TRANSFER, item, where, dest)
        )


# ------------------------------------------------------------------------------ semantic interface
def item_point(item: str, state: PackingState, camera: CameraModel) -> tuple[int, int] | None:
    """The base-view point (0-1000) of the middle of ``item``'s top face: the point that names it to pick."""
    s = state.items[item]
    _, (_, _, height) = resting_geometry(item, s.quat)
    point = camera.normalised_point((s.pos[0], s.pos[1], s.pos[2] + height / 2 - 0.002))
    return None if point is None else (round(point[0]), round(point[1]))


def floor_spot(
    item: str, dest: str | None, state: PackingState, rng, choice: int = 0, camera: CameraModel | None = None
) -> tuple[float, float, float] | None:
    """The point of the floor (x, y, z in the base frame) where ``item`` goes in ``dest`` (None: the
    table), at the spot the packing policy would choose (corner first in a tray: the ``choice``-th free
    one, the last when fewer are free; a random free spot on the table); with ``camera``, only among
    the free spots its image shows (a place names its spot by an image point)."""
    rect, others, yaws, z = _floor(item, dest, state)
    keep = None if camera is None else _shown_by(camera, z)
    if dest is None:
        spot = placement.random_spot(item, rect, others, rng, yaws, keep)
        spots = [] if spot is None else [spot]
    else:
        spots = placement.corner_spots(item, rect, others, yaws, count=choice + 1, keep=keep)
    if not spots:
        return None
    x, y, _ = spots[min(choice, len(spots) - 1)]
    return x, y, z


def _floor(item: str, dest: str | None, state: PackingState):
    """Where ``item`` may go down in ``dest`` (None: the table): the area, the other items' footprints,
    the item's yaw (as the only one tried) and the floor's height."""
    rect = DROP_REGION if dest is None else tray_rect(dest)
    others = [placement.footprint(n, i.pos[0], i.pos[1], i.yaw) for n, i in state.items.items() if n != item]
    return rect, others, (state.items[item].yaw,), TRAY_SPECS[dest].floor if dest else 0.0


def _shown_by(camera: CameraModel, z: float) -> placement.Keep:
    """Whether the base view shows a spot's centre at height ``z``."""
    return lambda x, y: camera.normalised_point((x, y, z)) is not None


def floor_point(
    item: str, dest: str | None, state: PackingState, camera: CameraModel, rng, choice: int = 0
) -> tuple[int, int] | None:
    """The base-view point of :func:`floor_spot` among the spots the base view shows (None: none is
    free and shown)."""
    spot = floor_spot(item, dest, state, rng, choice, camera)
    point = None if spot is None else camera.normalised_point(spot)
    return None if point is None else (round(point[0]), round(point[1]))


def no_floor_point(item: str, dest: str | None, state: PackingState, camera: CameraModel) -> str:
    """Why no base-view point names a free spot to set ``item`` down in ``dest`` (None: the table);
    "" when one does (the spots :func:`floor_point` chooses among)."""
    rect, others, yaws, z = _floor(item, dest, state)
    shown = _shown_by(camera, z)
    free = placement.candidates(item, rect, others, yaws=yaws)
    if any(shown(x, y) for x, y, _ in free):
        return ""
    why = "no spot there is free" if not free else "none of the free spots there is in the base camera's view"
    return f"the {item} cannot be set down {_where_to(dest)}: {why}, so no point can name one"


def read_action(previous: str) -> tuple[SemanticAction | None, str]:
    """The action of a previous step's history text and its result ("ok", "failed (<reason>)" or "")."""
    text, result = semantic.split_result((previous or "").strip())
    body = text.strip().splitlines()
    action = semantic.parse(body[-1].rsplit(ANSWER_HEADERS["semantic"], 1)[-1]) if body else None
    outcome = result[len(RESULT_HEADER) :].strip().split(". ", 1)[0].rstrip(".")
    return (action if isinstance(action, SemanticAction) else None), outcome


@dataclass(frozen=True)
class Step:
    """The expert's next semantic action (None: nothing left to try) and the sentence that explains it."""

    action: SemanticAction | None
    why: str


def next_step(
    state: PackingState,
    task: PackingTaskInstance,
    camera: CameraModel,
    refused: frozenset[str],
    after_place: bool,
    carrying: Plan | None,
    rng,
    spot: int = 0,
) -> tuple[Step, Plan | None]:
    """The next action for the semantic interface, and the planned move it serves (None for none).

    A move of :func:`next_plan` takes two actions: pick its item (a point on its top face), then place
    it (a point on the floor of the free spot); ``carrying`` is the move whose pick put the item held
    in the gripper, and its place comes next (at the ``spot``-th free spot). An item held for no move
    goes down on the table first; after each successful place the arm goes home, as the packing policy
    does; ``done()`` when every goal object is in place, or when no free spot the base view shows is
    left to set the planned item down (:func:`no_floor_point` says why), before it is picked up.
    """
    if after_place:
        return Step(
            SemanticAction(ActionType.HOME), "the item is down, so the arm goes back to its rest pose"
        ), None
    held = state.held
    # Items no point of the base view names cannot be picked; the plan leaves them (and makes no room
    # for them), else it would pick one with no point to give, an answer of nothing.
    hidden = frozenset(i for i in state.items if i != held and item_point(i, state, camera) is None)
    plan = (
        carrying
        if carrying is not None and held == carrying.instruction.item
        else next_plan(state, task, refused, hidden)
    )
    if plan.instruction is None:
        if plan.role == "done":
            return Step(SemanticAction(ActionType.DONE), "every goal object is where it should be"), None
        return Step(SemanticAction(ActionType.DONE), gave_up(plan.why)), None
    item, dest = plan.instruction.item, _dest(plan.instruction)
    if held is not None and held != item:
        point = floor_point(held, None, state, camera, rng)
        if point is None:
            return Step(
                SemanticAction(ActionType.DONE), gave_up(no_floor_point(held, None, state, camera))
            ), None
        why = f"the gripper holds the {held}, which no planned move needs now, so it goes down on the table"
        return Step(SemanticAction(ActionType.PLACE, held, point), why), None
    if held != item:
        if nowhere := no_floor_point(item, dest, state, camera):  # it could only be held, not set down
            return Step(SemanticAction(ActionType.DONE), gave_up(nowhere)), None
        point = item_point(item, state, camera)
        why = f"{plan.why}, so the hand picks up the {item} at the middle of its top face"
        return Step(None if point is None else SemanticAction(ActionType.PICK, item, point), why), plan
    point = floor_point(item, dest, state, camera, rng, spot)
    if point is None:
        return Step(SemanticAction(ActionType.DONE), gave_up(no_floor_point(item, dest, state, camera))), None
    why = f"the gripper holds the {item} and {plan.why}, so it goes down on a free spot {_where_to(dest)}"
    return Step(SemanticAction(ActionType.PLACE, item, point), why), plan


def write_semantic_reasoning(
    state: PackingState,
    task: PackingTaskInstance,
    previous: SemanticAction | None,
    outcome: str,
    step: Step,
    rng,
) -> str:
    """The reasoning of a semantic answer: the scene, what came of the previous action, what is done and
    left, and why the next action (all true of ``state``)."""
    parts = _scene(state, rng)
    if previous is not None:
        said = semantic.format_instruction(previous)
        parts.append(f"My previous step, {said}, " + ("worked." if outcome == "ok" else f"{outcome}."))
    done = [i for i in task.targets if task.packed(state, i)]
    todo = [f"the {i} to the {t} tray" for i, t in task.targets.items() if not task.packed(state, i)]
    if done:
        parts.append(f"Already packed where the goal wants them: the {_names(done)}.")
    if todo:
        parts.append(f"Still to do: {'; '.join(todo)}.")
    why = _sentence(step.why)
    parts.append(
        why if step.action is not None else f"{why} No call I could make changes that, so I make none."
    )
    return " ".join(parts)


# ------------------------------------------------------------------------------ plan interface
def read_plan_result(previous: str) -> tuple[int, SemanticAction | None, str]:
    """From a previous plan step's history text: the step the plan stopped at (0 when it ran to its end
    or there is no plan result), that step's action and its result ("failed (<reason>)"; "" if none)."""
    _, result = plans.split_plan_result((previous or "").strip())
    lines = result.splitlines()
    if not lines or " stopped at step " not in lines[0]:
        return 0, None, ""
    stopped = len(lines) - 1
    call, _, line = lines[-1].partition(": ")
    action = semantic.parse(call.split(" ", 2)[-1])
    outcome = line[len(RESULT_HEADER) :].strip().split(". ", 1)[0].rstrip(".")
    return stopped, (action if isinstance(action, SemanticAction) else None), outcome


def predict_step(state: PackingState, action: SemanticAction, spot) -> PackingState:
    """The scene an action is expected to leave: a pick holds its item, a place sets it down upright as
    it was, on the floor at ``spot`` (the base-frame point its image point was made from), home and
    done move no item."""
    if action.type is ActionType.PICK:
        return replace(state, held=action.label)
    if action.type is not ActionType.PLACE:
        return state
    item = state.items[action.label]
    _, (_, _, height) = resting_geometry(action.label, item.quat)
    items = dict(state.items)
    items[action.label] = replace(item, pos=(spot[0], spot[1], spot[2] + height / 2))
    return replace(state, items=items, held=None)


def plan_steps(
    state: PackingState,
    task: PackingTaskInstance,
    camera: CameraModel,
    refused: frozenset[str],
    carrying: Plan | None,
    spot: int,
    rng,
) -> tuple[list[tuple[Step, Plan | None]], str]:
    """The plan, and why it stops short when nothing is left to try ("" otherwise). The plan is
    :func:`next_step`'s actions one after the other, each on the scene the earlier ones are predicted to
    leave, with the move each serves. It ends where the goal is predicted reached,
    early when nothing is left to try, and before a move that would not fit whole (pick, place, home)
    in :data:`~r3.instructions.plan.MAX_PLAN_STEPS`. ``done()`` is a plan of its own, given when the
    goal is seen reached: a prediction (an item that slips as the arm leaves) does not end an episode."""
    chosen: list[tuple[Step, Plan | None]] = []
    after_place, stuck = False, ""
    while len(chosen) < plans.MAX_PLAN_STEPS:
        drawn = dict(rng.bit_generator.state)  # the table spot a place draws, drawn again to predict it
        step, serving = next_step(state, task, camera, refused, after_place, carrying, rng, spot)
        action = step.action
        stuck = step.why if action is None else ""
        if (
            action is None
            or (action.type is ActionType.DONE and chosen)
            or (action.type is ActionType.PICK and len(chosen) + 3 > plans.MAX_PLAN_STEPS)
        ):
            break
        chosen.append((step, serving))
        if action.type is ActionType.DONE:
            break
        where = None
        if action.type is ActionType.PLACE:
            dest = None if serving is None else _dest(serving.instruction)
            again = np.random.default_rng()
            again.bit_generator.state = drawn
            where = floor_spot(action.label, dest, state, again, spot, camera)
        state = predict_step(state, action, where)
        after_place, spot = action.type is ActionType.PLACE, 0
        carrying = serving if action.type is ActionType.PICK else None
    return chosen, stuck


def write_plan_reasoning(
    state: PackingState,
    task: PackingTaskInstance,
    stopped: int,
    failed: SemanticAction | None,
    outcome: str,
    chosen: list[tuple[Step, Plan | None]],
    stuck: str,
    rng,
) -> str:
    """The reasoning of a plan answer: the scene, where the previous plan stopped and why, what is done
    and left, and why each move of the new plan (all true of ``state``)."""
    parts = _scene(state, rng)
    if failed is not None:
        parts.append(
            f"My previous plan stopped at step {stopped}, {semantic.format_instruction(failed)}, which "
            f"{outcome}; I plan again from what I see now."
        )
    done = [i for i in task.targets if task.packed(state, i)]
    todo = [f"the {i} to the {t} tray" for i, t in task.targets.items() if not task.packed(state, i)]
    if done:
        parts.append(f"Already packed where the goal wants them: the {_names(done)}.")
    if todo:
        parts.append(f"Still to do: {'; '.join(todo)}.")
    reasons = [s.why for s, _ in chosen if s.action.type is not ActionType.HOME]
    if not chosen:
        parts.append(f"{_sentence(stuck)} No plan I could make changes that, so I give none.")
    elif chosen[0][0].action.type is ActionType.DONE:  # a plan of its own: its reason, not a list of steps
        parts.append(_sentence(chosen[0][0].why))
    else:
        parts.append("Step by step: " + "; then ".join(reasons) + ".")
        if chosen[-1][0].action.type is not ActionType.DONE:
            parts.append("I will look again once these steps are carried out.")
    return " ".join(parts)


# ------------------------------------------------------------------------------ tools interface
#: A move's tool calls in order (each phase may be skipped when there is nothing to do).
PHASES = (
    *("query", "above", "open", "down", "close"),
    *("lift", "carry", "lower", "release", "narrow", "up", "rest"),
)
SEMANTIC = SemanticConfig()


@dataclass
class ToolMove:
    """A move carried out by tool calls: ``item`` to ``dest`` (None: the table), the planned
    ``instruction`` it serves (None for an item put down because it is held for no move), the phase of
    the last call made ("" before the first), the grasps to try (closing yaw, opening in metres), which
    one and which free spot is being tried, and the TCP (x, y) above that spot once chosen."""

    item: str
    dest: str | None
    instruction: PackingInstruction | None
    why: str
    grasps: list[tuple[float, float]]
    phase: str = ""
    grasp: int = 0
    spot: int = 0
    target: tuple[float, float] | None = None
    width: float = 0.0  # of the item across the jaws, as it was held
    narrowed: float | None = None  # the width the jaws close to around a set-down item before rising


def read_tool_call(previous: str) -> tuple[tools.ToolCall | None, str]:
    """The call of a previous step's history text and its outcome word ("" without an observation)."""
    text, observation = tools.split_observation((previous or "").strip())
    body = text.strip().splitlines()
    said = tools.parse(body[-1].rsplit(ANSWER_HEADERS["tools"], 1)[-1]) if body else None
    return (None if isinstance(said, ParseError) else said), read_result(observation)[1]


def todo_items(state: PackingState, task: PackingTaskInstance) -> list[str]:
    """The goal as todo items, as many as the list holds."""
    items = [f"{i} into the {t} tray" for i, t in task.targets.items() if not task.packed(state, i)]
    items += [f"{c} out of every tray" for c in task.clutter if state.tray_of(c) is not None]
    return [i[: tools.MAX_TODO_CHARS] for i in items[: tools.MAX_TODO_ITEMS]]


def _grasps(item: str, state: PackingState) -> list[tuple[float, float]]:
    """The ways the pick skill closes the hand on ``item``: across its narrow side, across the other
    when that fits too, each opened with the usual gap to the item and then with the least one."""
    yaw, (across, along, _) = resting_geometry(item, state.items[item].quat)
    widths = [(yaw, across)] + ([(yaw + math.pi / 2, along)] if along <= MAX_ACROSS else [])
    return list(
        dict.fromkeys(
            (closing, min(scene.MAX_OPENING, width + 2 * slack))
            for closing, width in widths
            for slack in (SEMANTIC.width_slack, SEMANTIC.min_finger_gap)
        )
    )


def start_move(plan: Plan | None, state: PackingState) -> ToolMove | None:
    """The move that carries out ``plan`` (None when there is none: done or stuck). An item held for no
    planned move goes down on the table first; a held item's own move starts at its lift."""
    if plan is None:
        return None
    held = state.held
    if held is not None and (plan.instruction is None or plan.instruction.item != held):
        why = f"the gripper holds the {held}, which no planned move needs now, so it goes down on the table"
        return ToolMove(held, None, None, why, [], phase="close")
    if plan.instruction is None:
        return None
    item = plan.instruction.item
    phase = "close" if held == item else ""
    return ToolMove(item, _dest(plan.instruction), plan.instruction, plan.why, _grasps(item, state), phase)


def _slot_yaw(closing: float) -> float:
    """The slot yaw (deg, -180..180) of a hand closing along ``closing`` (rad)."""
    return float(round(math.degrees(math.remainder(closing + math.pi / 2, 2 * math.pi))))


def _held_geometry(item: str, state: PackingState) -> tuple[float, float, float]:
    """(width across the jaws, vertical size, TCP height above the item's centre) of the held item."""
    _, (across, _, height) = resting_geometry(item, state.items[item].quat)
    return across, height, state.tcp[2] - state.items[item].pos[2]


def _spot(moving: ToolMove, state: PackingState, rng) -> tuple[float, float] | None:
    """The TCP (x, y) that sets the held item down on the chosen free spot (the item, not the hand,
    is aimed: the grasp may hold it off the TCP axis)."""
    item = state.items[moving.item]
    others = [
        placement.footprint(n, i.pos[0], i.pos[1], i.yaw) for n, i in state.items.items() if n != moving.item
    ]
    if moving.dest is None:
        spot = placement.random_spot(moving.item, DROP_REGION, others, rng, (item.yaw,))
        spots = [] if spot is None else [spot]
    else:
        spots = placement.corner_spots(
            moving.item, tray_rect(moving.dest), others, (item.yaw,), count=moving.spot + 1
        )
    if not spots:
        return None
    x, y, _ = spots[min(moving.spot, len(spots) - 1)]
    return (x + state.tcp[0] - item.pos[0], y + state.tcp[1] - item.pos[1])


def _move_to(x: float, y: float, z: float, slot_yaw: float) -> tools.MoveTo:
    return tools.MoveTo(round(x, 3), round(y, 3), round(z, 3), slot_yaw)


def next_tool_call(
    moving: ToolMove, state: PackingState, query: tuple[str, ...], rest: tuple, rng
) -> tuple[tools.ToolCall | None, str]:
    """The move's next call after its last phase, and why (phases with nothing to do are skipped; the
    last one takes the arm back to ``rest``, its pose at the first step: x, y, z, slot yaw); no call
    when no free spot is left."""
    item = moving.item
    for phase in PHASES[PHASES.index(moving.phase) + 1 :] if moving.phase else PHASES:
        moving.phase = phase
        if phase in ("query", "above", "open", "down"):
            s = state.items[item]
            closing, opening = moving.grasps[moving.grasp]
            slot = _slot_yaw(wrist_friendly_yaw(closing, s.pos[0], s.pos[1]))
            height = resting_geometry(item, s.quat)[1][2]
            grasp, top = grasp_height(s.pos[2], height), s.pos[2] + height / 2
        if phase == "query" and query != (item,):
            return tools.ChangeQuery((item,)), f"{moving.why}; perception is asked to measure the {item}"
        if phase == "open" and abs(state.gripper_opening - opening) > 0.003:
            return tools.SetGripper(round(opening / scene.MAX_OPENING, 3)), (
                f"the jaws open to {opening * 1000:.0f} mm, just wider than the {item}"
            )
        if phase == "above":
            return _move_to(s.pos[0], s.pos[1], top + SEMANTIC.approach, slot), (
                f"the hand goes {SEMANTIC.approach * 100:.0f} cm above the {item}, jaws across it"
            )
        if phase == "down":
            why = f"the fingertips go down either side of the {item}"
            return _move_to(s.pos[0], s.pos[1], grasp, slot), why
        if phase == "close" and state.held != item:
            return tools.SetGripper(0.0), f"closing the jaws grasps the {item}"
        if phase == "narrow" and moving.narrowed is not None:
            jaws = moving.narrowed + 2 * SEMANTIC.min_finger_gap
            return tools.SetGripper(round(jaws / scene.MAX_OPENING, 3)), (
                f"the jaws close in round the {item} without touching it, clear of the tray walls"
            )
        if phase == "up":
            x, y = moving.target or state.tcp[:2]
            return _move_to(x, y, state.tcp[2] + SEMANTIC.approach, _slot_yaw(state.tcp_yaw or 0.0)), (
                f"the hand rises clear of the {item}"
            )
        if phase == "rest" or state.held != item:
            continue  # nothing held to carry: the lift's check ends the move
        width, height, offset = _held_geometry(item, state)
        slot = _slot_yaw(state.tcp_yaw if state.tcp_yaw is not None else 0.0)
        carry = SEMANTIC.carry_bottom + height / 2 + offset
        support = TRAY_SPECS[moving.dest].floor if moving.dest else 0.0
        release = support + height / 2 + SEMANTIC.release_gap + offset
        if phase == "lift":
            return _move_to(state.tcp[0], state.tcp[1], carry, slot), (
                f"the {item} goes straight up, high enough to clear the trays"
            )
        if phase == "carry":
            moving.target = _spot(moving, state, rng)
            if moving.target is None:
                return None, f"no free spot is left {_where_to(moving.dest)} for the {item}"
            why = f"the {item} is carried above a free spot {_where_to(moving.dest)}"
            return _move_to(*moving.target, carry, slot), why
        if phase == "lower":
            why = f"the {item} is lowered until it almost touches down"
            return _move_to(*moving.target, release, slot), why
        if phase == "release":
            moving.width = width
            jaws = min(scene.MAX_OPENING, max(width, state.gripper_opening) + 0.02)
            return tools.SetGripper(round(jaws / scene.MAX_OPENING, 3)), (
                f"opening the jaws a little sets the {item} down without touching its neighbours"
            )
    moving.phase = "rest"
    return _move_to(*rest), "the arm goes back to the pose it started in, out of the camera's way"


def write_tool_reasoning(
    state: PackingState,
    task: PackingTaskInstance,
    previous: tools.ToolCall | None,
    outcome: str,
    why: str,
    calls: bool,
    rng,
) -> str:
    """The reasoning of a tools answer: the scene, what came of the previous call, what is done and
    left, and why the next call (all true of ``state``)."""
    parts = _scene(state, rng)
    if previous is not None:
        came = outcome or "without a result"
        parts.append(f"My previous call, {tools.format_instruction(previous)}, came back {came}.")
    done = [i for i in task.targets if task.packed(state, i)]
    todo = [f"the {i} to the {t} tray" for i, t in task.targets.items() if not task.packed(state, i)]
    if done:
        parts.append(f"Already packed where the goal wants them: the {_names(done)}.")
    if todo:
        parts.append(f"Still to do: {'; '.join(todo)}.")
    sentence = _sentence(why)
    parts.append(sentence if calls else f"{sentence} No call I could make changes that, so I make none.")
    return " ".join(parts)
