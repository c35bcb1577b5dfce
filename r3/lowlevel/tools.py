"""ZAP-style pose tools for the packing arm: carry out one tool call and write what the model observes.

``move_to`` is validated against the cell's declared limits first (:class:`ToolLimits`: the workspace
box of the executor, the tilt range); a pose outside them is refused with the reason before the
controller sees it, never clipped, and nothing moves. A valid pose goes to the executor
(:meth:`~r3.execution.sim.SimExecutor.move_to_pose`: IK along the straight TCP line, collision checks,
then motion), whose result is reported in ZAP's five controller outcomes (:func:`controller_outcome`)
with the cause and the measured position and orientation errors. ``set_gripper`` scales 0-1 to the
hand's opening; ``change_query`` sets what perception segments; ``update_todo`` replaces the plan that
every later observation repeats; ``done`` ends the episode.

The observation (:meth:`ToolActions.observation`) holds only what a real cell has: the result line,
perception's readouts of the queried objects (from the rendered base camera's colour, depth and masks
through :mod:`r3.perception`, never the simulator's poses), the measured tool pose (forward
kinematics of the joint readings) in ``move_to``'s own terms, the jaw opening, the todo list and the
steps left.

Orientation (:func:`tool_quat`): the tool pointing straight down with its jaw slot at ``slot_yaw``,
then leaned by ``tilt`` about the horizontal axis across ``tilt_direction``, so that the fingertips
move towards that heading. :func:`tool_angles` reads a measured rotation back into the three angles.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, replace

import numpy as np

from r3.execution.base import (
    MoveResult,
    PoseTarget,
    WorkspaceBox,
    quat_to_mat,
    rotation_error,
    told_apart,
    top_down_quat,
)
from r3.instructions.semantic import RESULT_HEADER
from r3.instructions.tools import ChangeQuery, Done, MoveTo, SetGripper, Tool, ToolCall, UpdateTodo
from r3.lowlevel.perceived import arm_reading
from r3.perception.pipeline import Perception
from r3.perception.segmenters import SimSegmenter
from r3.sim.packing import scene

#: Below this tilt (deg) a measured pose counts as pointing straight down (no tilt direction).
STRAIGHT_DOWN = 0.05
#: A jaw opening this far (m) from the command means the jaws stopped on something.
JAW_TOLERANCE = 0.004
#: A target within this distance (m) of the tool axis, at the same orientation, is straight ahead;
#: the executor follows such a line as an approach of at most MAX_APPROACH (m).
AXIS_TOLERANCE, MAX_APPROACH = 0.002, 0.3
#: The jaws are at rest when they move less than this (m) in a control step; the wait's limit (steps).
JAW_STILL, JAW_REST_STEPS = 0.0003, 20


# ------------------------------------------------------------------------------ orientation
def _quat_mul(a, b) -> tuple[float, float, float, float]:
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return (
        w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
        w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
        w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
    )


def _lean_axis(tilt_direction: float) -> np.ndarray:
    """The horizontal axis that turning about by +tilt moves the tool axis (down) towards the heading."""
    return np.array([math.sin(tilt_direction), -math.cos(tilt_direction), 0.0])


def tool_quat(slot_yaw: float, tilt: float = 0.0, tilt_direction: float | None = None) -> tuple:
    """The TCP quaternion (w, x, y, z) for ZAP's angles in degrees. The TCP's x axis is the jaw slot,
    y the closing direction, z the tool axis (r3.execution.base.top_down_quat).

    >>> (np.round(quat_to_mat(tool_quat(90)), 6) + 0.0).tolist()  # down, slot along +y, closing along x
    [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]]
    """
    down = top_down_quat(math.radians(slot_yaw) - math.pi / 2)  # the slot is 90 deg from the closing axis
    if tilt == 0:
        return down
    half = math.radians(tilt) / 2
    k = _lean_axis(math.radians(tilt_direction))
    lean = (math.cos(half), *(math.sin(half) * k))
    return _quat_mul(lean, down)


def _wrap(deg: float) -> float:
    """An angle in (-180, 180] degrees."""
    d = math.remainder(deg, 360.0)
    return 180.0 if d == -180.0 else d


def tool_angles(R: np.ndarray) -> tuple[float, float, float | None]:
    """(slot_yaw, tilt, tilt_direction) in degrees of a TCP rotation matrix; slot yaw and tilt direction
    in (-180, 180], tilt direction None when the tool points straight down (it has no meaning there)."""
    z = R[:, 2]
    tilt = math.degrees(math.acos(float(np.clip(-z[2], -1.0, 1.0))))
    if tilt < STRAIGHT_DOWN:
        return _wrap(math.degrees(math.atan2(R[1, 0], R[0, 0]))), 0.0, None
    direction = math.atan2(z[1], z[0])
    k, t = _lean_axis(direction), math.radians(tilt)
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    lean = np.eye(3) + math.sin(t) * K + (1 - math.cos(t)) * K @ K
    down = lean.T @ R
    return _wrap(math.degrees(math.atan2(down[1, 0], down[0, 0]))), tilt, _wrap(math.degrees(direction))


# ------------------------------------------------------------------------------ outcomes
class Outcome(str, enum.Enum):
    """ZAP's controller outcomes, and ok / failed for the tools that do not move the arm."""

    REACHED = "reached"  # done, the arm came to rest within tolerance
    SHORT = "short"  # came to rest outside tolerance (jaws: stopped on something)
    INCOMPLETE = "incomplete"  # began but did not finish (a stop, a refusal part way)
    NOT_ATTEMPTED = "not attempted"  # nothing moved (refused by validation or planning)
    UNKNOWN = "unknown"  # could not be determined
    OK = "ok"
    FAILED = "failed"


def controller_outcome(r: MoveResult) -> tuple[Outcome, str]:
    """The executor's result as (outcome, cause); the cause names its stage ("planning: ...",
    "execution: ...") and is "" when reached."""
    if r.reached:
        return Outcome.REACHED, ""
    if r.refused:
        why = f"planning: {r.reason.removeprefix('refused: ')}"
        return (Outcome.INCOMPLETE if r.control_steps else Outcome.NOT_ATTEMPTED), why
    if r.reason.startswith("not_reached"):
        return Outcome.SHORT, f"execution: {r.reason.removeprefix('not_reached: ')}"
    if r.reason == "canceled":
        return (Outcome.INCOMPLETE if r.control_steps else Outcome.NOT_ATTEMPTED), "execution: stopped"
    return Outcome.UNKNOWN, r.reason


@dataclass(frozen=True)
class ToolResult:
    """What one call did: ``outcome``, its ``cause`` ("" when none), the ``detail`` the result line adds,
    and the control steps taken."""

    tool: Tool
    outcome: Outcome
    cause: str = ""
    detail: str = ""
    control_steps: int = 0

    @property
    def ok(self) -> bool:
        return self.outcome in (Outcome.REACHED, Outcome.OK)

    @property
    def line(self) -> str:
        """The result line: "Result: <tool> <outcome> (<cause>); <detail>."."""
        cause = f" ({self.cause})" if self.cause else ""
        detail = f"; {self.detail}" if self.detail else ""
        return f"{RESULT_HEADER} {self.tool.value} {self.outcome.value}{cause}{detail}."


def read_result(observation: str) -> tuple[str, str]:
    """(tool, outcome word) of an observation's result line; ("", "") when it has none.

    >>> read_result("Result: move_to not attempted (validation: tilt 100 deg); position error 3 mm.")
    ('move_to', 'not attempted')
    """
    line = observation.strip().split("\n", 1)[0]
    if not line.startswith(RESULT_HEADER):
        return "", ""
    tool, _, rest = line[len(RESULT_HEADER) :].strip().partition(" ")
    word = next((o.value for o in Outcome if rest.startswith(o.value)), "")
    return tool, word


# ------------------------------------------------------------------------------ the tools
@dataclass(frozen=True)
class ToolLimits:
    """The cell's declared limits a ``move_to`` must respect (validated): the workspace box of the
    TCP and the largest tilt (deg)."""

    box: WorkspaceBox = field(default_factory=WorkspaceBox)
    max_tilt: float = 90.0

    def __post_init__(self):
        if not 0 <= self.max_tilt <= 180:
            raise ValueError(f"ToolLimits.max_tilt must be in [0, 180] deg, got {self.max_tilt}")

    def violation(self, call: MoveTo) -> str | None:
        """Why the pose is outside the limits (validation's words), or None."""
        why = self.box.violation((call.x, call.y, call.z))
        if why:
            return f"outside the workspace: {why}"
        if call.tilt > self.max_tilt:
            tilt = told_apart(call.tilt, self.max_tilt, 0)
            return f"tilt {tilt} deg is above this cell's limit of {self.max_tilt:g} deg"
        return None


class ToolActions:
    """The five tools over an executor and a simulated cell (``env``: joint readings, base camera).

    One instance serves one episode: the perception query starts empty (the model names what to find)
    and the todo list empty. ``speed`` scales every motion (r3.execution.base.PoseTarget).
    """

    def __init__(self, executor, env, limits: ToolLimits | None = None, speed: float = 0.5):
        if not 0 < speed <= 1:
            raise ValueError(f"speed must be in (0, 1], got {speed}")
        self.executor, self.env, self.speed = executor, env, speed
        self.limits = limits or ToolLimits(executor.box)
        self.perception = Perception(SimSegmenter())
        self.todo: tuple[str, ...] = ()

    def state(self) -> dict:
        """What the tools remember between calls (the perception query, the todo list), JSON-able."""
        return {"query": list(self.perception.query), "todo": list(self.todo)}

    def restore(self, state: dict) -> None:
        """Take up :meth:`state` again (a query this segmenter accepted when it was set)."""
        self.perception.query, self.todo = list(state["query"]), tuple(state["todo"])

    def run(self, call: ToolCall) -> ToolResult:
        if isinstance(call, MoveTo):
            return self.move_to(call)
        if isinstance(call, SetGripper):
            return self.set_gripper(call)
        if isinstance(call, ChangeQuery):
            why = self.perception.set_query(list(call.queries))
            if why:
                return ToolResult(Tool.CHANGE_QUERY, Outcome.FAILED, why)
            looks = "perception looks for " + ", ".join(self.perception.query)  # each name once
            return ToolResult(Tool.CHANGE_QUERY, Outcome.OK, detail=looks)
        if isinstance(call, UpdateTodo):
            self.todo = call.items
            holds = f"the todo list holds {len(call.items)} items"
            return ToolResult(Tool.UPDATE_TODO, Outcome.OK, detail=holds)
        if isinstance(call, Done):
            return ToolResult(Tool.DONE, Outcome.OK, detail="the episode ends")
        raise TypeError(f"not a tool call: {call!r}")

    def move_to(self, call: MoveTo) -> ToolResult:
        quat = tool_quat(call.slot_yaw, call.tilt, call.tilt_direction)
        why = self.limits.violation(call)
        if why:
            errors = self._errors(call, quat)
            return ToolResult(Tool.MOVE_TO, Outcome.NOT_ATTEMPTED, f"validation: {why}", errors)
        target = PoseTarget((call.x, call.y, call.z), quat, None, self.speed)
        ahead = self._along_tool_axis(call, quat)
        r = self.executor.move_to_pose(replace(target, approach=ahead) if ahead else target)
        steps = r.control_steps
        if ahead and r.refused:  # the change of configuration was refused: the line as it comes
            r = self.executor.move_to_pose(target)
            steps += r.control_steps
        outcome, cause = controller_outcome(r)
        return ToolResult(Tool.MOVE_TO, outcome, cause, self._errors(call, quat), steps)

    def set_gripper(self, call: SetGripper) -> ToolResult:
        command = call.opening * scene.MAX_OPENING
        r = self.executor.set_gripper(command)
        steps = r.control_steps + (self._jaws_at_rest() if r.reached else 0)
        opening = self._opening()
        jaws = f"jaws at {opening / scene.MAX_OPENING:.2f} ({opening * 1000:.0f} mm)"
        outcome, cause = controller_outcome(r)
        if outcome is Outcome.REACHED and abs(opening - command) > JAW_TOLERANCE:
            outcome, cause = Outcome.SHORT, "execution: the jaws stopped on something between them"
        return ToolResult(Tool.SET_GRIPPER, outcome, cause, jaws, steps)

    def _jaws_at_rest(self) -> int:
        """Hold everything still until the fingers stop moving (at most :data:`JAW_REST_STEPS`); the
        steps taken. The controller reports when the jaws come to rest, as ZAP's does for the arm."""
        for k in range(1, JAW_REST_STEPS + 1):
            before = self._opening()
            self.env.step(self.env.joint_targets)
            if abs(self._opening() - before) < JAW_STILL:
                return k
        return JAW_REST_STEPS

    # ------------------------------------------------------------------ the observation
    def observation(self, result: ToolResult, steps_left: int) -> str:
        """What the model reads after a call (see the module docstring), one fact per line."""
        return "\n".join(
            [result.line, *self.readouts(), self.tool_pose(), self.todo_line(), f"Steps left: {steps_left}"]
        )

    def readouts(self) -> list[str]:
        """Perception's measurements of the queried objects in a fresh base-camera frame."""
        query = self.perception.query
        if not query:
            return ["Objects: none queried (change_query names what to look for)."]
        stamp = self.env.elapsed_steps * scene.STEP_NS
        detections = self.perception.process(self.env.rgbd_frame("base", stamp))
        lines = [f"Objects (query: {', '.join(query)}):"]
        for d in detections:
            g = d.geometry
            if g is None:
                lines.append(f"- #{d.mask_id} {d.label}: seen, but too little depth to measure ({d.reason})")
                continue
            c, t = g.centroid, g.top_centre
            lines.append(
                f"- #{d.mask_id} {d.label}: top centre ({t[0]:.3f}, {t[1]:.3f}, {t[2]:.3f}), "
                f"centroid ({c[0]:.3f}, {c[1]:.3f}, {c[2]:.3f}), "
                f"height {g.top_height - g.bottom_height:.3f}, "
                f"footprint {g.footprint[0]:.3f} x {g.footprint[1]:.3f} m, "
                f"long axis {math.degrees(g.footprint_yaw):.0f} deg"
            )
        lines += [f"- {label}: not found" for label in query if label not in {d.label for d in detections}]
        return lines

    def tool_pose(self) -> str:
        """The measured tool pose (forward kinematics of the joint readings) and jaw opening."""
        p, R = self.env.tcp_pose()
        slot_yaw, tilt, direction = tool_angles(R)
        lean = "" if direction is None else f", tilt_direction={round(direction)}"
        opening = self._opening()
        return (
            f"Tool: x={p[0]:.3f}, y={p[1]:.3f}, z={p[2]:.3f}, "
            f"slot_yaw={round(slot_yaw)}, tilt={round(tilt)}{lean}; "
            f"jaws {opening / scene.MAX_OPENING:.2f} open ({opening * 1000:.0f} mm)"
        )

    def todo_line(self) -> str:
        if not self.todo:
            return "Todo: (empty)"
        return "Todo: " + " ".join(f"{k}. {item}" for k, item in enumerate(self.todo, 1))

    def _along_tool_axis(self, call: MoveTo, quat) -> float:
        """How far the target lies straight ahead along the tool axis, keeping the orientation (a
        descent onto an item or a tray floor); 0 for any other move. Such a move is planned as the
        executor's approach: when the arm cannot follow the line from its present configuration, it
        changes configuration first, where it is, and then follows it; where that change is refused,
        the line is planned from the present configuration after all."""
        p, R = self.env.tcp_pose()
        d = np.array([call.x, call.y, call.z]) - p
        ahead = float(d @ R[:, 2])
        lateral = float(np.linalg.norm(d - ahead * R[:, 2]))
        turned = rotation_error(quat_to_mat(quat), R)
        straight = lateral < AXIS_TOLERANCE and turned < math.radians(1.0)
        return ahead if straight and 0 < ahead <= MAX_APPROACH else 0.0

    def _opening(self) -> float:
        return arm_reading(self.env).gripper_opening

    def _errors(self, call: MoveTo, quat) -> str:
        """The measured distance of the tool from the pose asked for, as the result line gives it."""
        p, R = self.env.tcp_pose()
        moved = float(np.linalg.norm(p - np.array([call.x, call.y, call.z])))
        turned = math.degrees(rotation_error(quat_to_mat(quat), R))
        return f"position error {moved * 1000:.0f} mm, orientation error {turned:.1f} deg"
