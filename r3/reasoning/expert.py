"""The Language Table expert: a privileged planner that writes R^3-style reasoning.

It plays Gemini's role in R^3's data collection. It reads the true board state and the task (an
:class:`ExpertView` in ``inp.extra["privileged"]``), never the image, and answers like a VLM:
free-form reasoning in plain spatial words (where the blocks are, what is done, what remains, an
alternative it weighed, the decision), then ``Instruction: <canonical text>``.

How it decides. ``task.plan(state)`` gives a target for every block that still has to move. For
each of those blocks the expert enumerates the instructions of the grammar that push it
(absolute location, side of another block, direction with and without "slightly", into another
block, separate) and predicts where the scripted policy would leave it, using the policy's
nominal distances (:class:`PushingPolicyConfig`). A move's cost is its predicted miss plus the
policy's expected overshoot (proportional to travel) plus penalties for sweeping through other
blocks or needing a push from beyond the board edge. The move that brings a block closest to its
target, relative to where it is now, wins. When no planned move helps (no plan, or only residuals
smaller than any push) it falls back to the move that most raises the task's progress score.

Reasons. A block that is not one of the goal's blocks moves only to clear the way
(``planner.clearing_reason``: it stands too close to a goal block's planned spot, or where the goal
wants no block), and the trace says which before it gives that block a target; the trace checker
(``r3.reasoning.claims``) verifies every such statement against the state.

History. The expert reads its previous answer (``inp.history_text``): when it is about to repeat
the same instruction and the block got no closer (the previous trace states the distance left), it
treats the last attempt as failed and takes the best move of another kind instead.

Randomness only picks wordings: ``np.random.default_rng([seed, step])``, so an answer is a
function of (state, task, history, seed, step).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, replace

import numpy as np

from r3.instructions.language_table import (
    SIDE_DIRECTIONS,
    Instruction,
    InstructionType,
    ParseError,
    format_instruction,
    parse,
)
from r3.lowlevel.pushing import CONTACT, PushingPolicyConfig
from r3.reasoning.backends.base import (
    BackendError,
    BackendOutput,
    Generation,
    OnText,
    ReasonerBackend,
    ReasoningBudget,
)
from r3.reasoning.parsing import ParsedResponse, parse_response
from r3.reasoning.prompts import ANSWER_HEADERS, INSTRUCTION_HEADER, REASONING_HEADER, ReasonerInput
from r3.suites import get_suite
from r3.tasks.language_table.board import (
    BLOCK_RADIUS,
    BLOCKS,
    BOARD_HALF_EXTENTS,
    DIRECTIONS,
    LOCATIONS,
    PUSHER_RADIUS,
    BoardState,
    board_region,
)
from r3.tasks.language_table.planner import clearing_reason
from r3.tasks.language_table.tasks import TaskInstance

MODEL_ID = "expert:language_table"
#: The default budget: reasoning of any length.
NO_BUDGET = ReasoningBudget()
#: Where the policy can send a block centre (its own clip) and where the pusher can stand.
_BLOCK_BOUND = np.array(BOARD_HALF_EXTENTS) - BLOCK_RADIUS - 0.005
_PUSHER_BOUND = np.array(BOARD_HALF_EXTENTS) - PUSHER_RADIUS
#: Another block closer than this to a push's path gets shoved along (block diameter plus slack).
SWEEP_CLEARANCE = 0.05
#: Cost of shoving one other block (metres of predicted miss it is worth).
SWEEP_PENALTY = 0.04
#: Cost of a push that needs the pusher beyond the board edge (it cannot get behind the block).
EDGE_PENALTY = 0.06
#: Expected miss per metre travelled (the policy over/undershoots by ~10 % of every push).
TRAVEL_NOISE = 0.08
#: Tie-breaks between instruction kinds (metres): absolute places read most naturally.
KIND_BIAS = {
    InstructionType.BLOCK_TO_LOCATION: 0.0,
    InstructionType.BLOCK_TO_SIDE: 0.002,
    InstructionType.BLOCK_DIRECTION: 0.004,
    InstructionType.BLOCK_INTO_BLOCK: 0.004,
    InstructionType.SEPARATE: 0.004,
}
#: Cost added to the instruction that just failed, so another kind of move wins.
RETRY_PENALTY = 0.06
#: A repeated instruction counts as failed unless its block got at least this much closer.
MIN_PROGRESS = 0.01


@dataclass(frozen=True)
class ExpertView:
    """The privileged information the expert reads (``inp.extra["privileged"]``)."""

    state: BoardState
    task: TaskInstance


@dataclass(frozen=True)
class Move:
    """One candidate instruction and what the expert predicts it does."""

    instruction: Instruction
    block: str
    start: np.ndarray
    target: np.ndarray
    predicted: np.ndarray
    swept: tuple[str, ...]
    edge: bool
    cost: float

    @property
    def gain(self) -> float:
        return float(np.linalg.norm(self.start - self.target)) - self.cost

    @property
    def miss(self) -> float:
        return float(np.linalg.norm(self.predicted - self.target))


@dataclass(frozen=True)
class Choice:
    """The decision and the facts the reasoning is written from."""

    move: Move
    alternative: Move | None
    plan: dict[str, np.ndarray]
    previous: Instruction | None
    retried: bool  # the previous instruction was repeated without effect and is avoided now
    fallback: bool  # no planned move helped; chosen by the progress score


# ------------------------------------------------------------------------------------ planning
def predict(ins: Instruction, state: BoardState, cfg: PushingPolicyConfig) -> np.ndarray | None:
    """Where the policy nominally leaves the instructed block (None: it would not move it)."""
    b0 = state.xy(ins.block)
    t = ins.type
    if t is InstructionType.BLOCK_TO_LOCATION:
        goal = np.array(LOCATIONS[ins.location])
    elif t is InstructionType.BLOCK_TO_SIDE:
        goal = state.xy(ins.other) + cfg.side_offset * np.array(DIRECTIONS[ins.direction])
    elif t is InstructionType.BLOCK_INTO_BLOCK:
        axis = b0 - state.xy(ins.other)
        goal = state.xy(ins.other) + cfg.into_distance * axis / max(np.linalg.norm(axis), 1e-9)
    elif t is InstructionType.BLOCK_DIRECTION:
        goal = b0 + cfg.direction_distance * np.array(DIRECTIONS[ins.direction])
    elif t is InstructionType.SEPARATE:
        axis = b0 - state.xy(ins.other)
        gap = float(np.linalg.norm(axis))
        if gap >= cfg.separate_distance:
            return None
        goal = b0 + (cfg.separate_distance - gap) * axis / max(gap, 1e-9)
    else:
        return None
    scale = cfg.adverb_scale if ins.adverb else 1.0
    return np.clip(b0 + scale * (goal - b0), -_BLOCK_BOUND, _BLOCK_BOUND)


def instructions_for(block: str) -> list[Instruction]:
    """Every block-moving instruction of the grammar for ``block``."""
    T = InstructionType
    out = [Instruction(T.BLOCK_TO_LOCATION, block, location=loc) for loc in LOCATIONS]
    for d in DIRECTIONS:
        out += [Instruction(T.BLOCK_DIRECTION, block, direction=d, adverb=a) for a in (None, "slightly")]
    for o in BLOCKS:
        if o != block:
            out += [Instruction(T.BLOCK_TO_SIDE, block, other=o, direction=d) for d in SIDE_DIRECTIONS]
            out += [Instruction(T.BLOCK_INTO_BLOCK, block, other=o), Instruction(T.SEPARATE, block, other=o)]
    return out


def _segment_distance(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    ab = b - a
    t = float(np.clip(np.dot(p - a, ab) / max(float(np.dot(ab, ab)), 1e-12), 0.0, 1.0))
    return float(np.linalg.norm(a + t * ab - p))


def evaluate(
    ins: Instruction, state: BoardState, target: np.ndarray, cfg: PushingPolicyConfig
) -> Move | None:
    """Score one instruction for moving its block towards ``target`` (None if it does nothing)."""
    predicted = predict(ins, state, cfg)
    if predicted is None:
        return None
    b0 = state.xy(ins.block)
    travel = float(np.linalg.norm(predicted - b0))
    if travel < 0.003:
        return None
    meant = ins.other if ins.type is InstructionType.BLOCK_INTO_BLOCK else None  # it is meant to touch
    swept = tuple(
        o
        for o in BLOCKS
        if o not in (ins.block, meant) and _segment_distance(state.xy(o), b0, predicted) < SWEEP_CLEARANCE
    )
    pre = b0 - (predicted - b0) / travel * (CONTACT + cfg.approach_gap)
    edge = bool(np.any(np.abs(pre) > _PUSHER_BOUND + 0.005))
    miss = float(np.linalg.norm(predicted - target))
    cost = (
        miss
        + TRAVEL_NOISE * travel
        + SWEEP_PENALTY * len(swept)
        + EDGE_PENALTY * edge
        + KIND_BIAS[ins.type]
        + (0.002 if ins.adverb else 0.0)
    )
    return Move(ins, ins.block, b0, np.asarray(target, float), predicted, swept, edge, cost)


def _moved_state(state: BoardState, move: Move) -> BoardState:
    blocks = dict(state.blocks)
    x, y = move.predicted
    blocks[move.block] = (float(x), float(y), state.blocks[move.block][2])
    return BoardState(blocks, state.pusher)


def choose(
    state: BoardState,
    task: TaskInstance,
    previous: Instruction | None = None,
    previous_distance: float | None = None,
    cfg: PushingPolicyConfig | None = None,
) -> Choice:
    """The next move for ``task`` in ``state``, given the previous instruction (if any)."""
    cfg = cfg or PushingPolicyConfig()
    plan = {b: np.array(t, float) for b, t in task.plan(state).items()}
    moves = [
        m
        for b, t in plan.items()
        for ins in instructions_for(b)
        if (m := evaluate(ins, state, t, cfg)) is not None
    ]
    retried = False
    if previous is not None and previous.block in plan:
        now = float(np.linalg.norm(state.xy(previous.block) - plan[previous.block]))
        if previous_distance is None:  # unknown: only a repeated fixed destination counts as failed
            stuck = previous.type is not InstructionType.BLOCK_DIRECTION
        else:
            stuck = now > previous_distance - MIN_PROGRESS
        best = max(moves, key=lambda m: m.gain) if moves else None
        if stuck and best is not None and best.instruction == previous:
            retried = True
            moves = [
                replace(m, cost=m.cost + RETRY_PENALTY) if m.instruction == previous else m for m in moves
            ]
    useful = sorted((m for m in moves if m.gain > 0.002), key=lambda m: -m.gain)
    if useful:
        best = useful[0]
        alternative = next(
            (
                m
                for m in useful[1:]
                if m.instruction.type is not best.instruction.type or m.block != best.block
            ),
            None,
        )
        return Choice(best, alternative, plan, previous, retried, False)
    # Nothing planned helps: maximise the progress score over every block's moves.
    pool = [
        m
        for b in (task.blocks or BLOCKS)
        for ins in instructions_for(b)
        if (m := evaluate(ins, state, plan.get(b, state.xy(b)), cfg)) is not None
    ]
    scored = sorted(
        pool, key=lambda m: (-task.progress(_moved_state(state, m)) + 0.01 * len(m.swept), m.cost)
    )
    return Choice(scored[0], scored[1] if len(scored) > 1 else None, plan, previous, retried, True)


# ------------------------------------------------------------------------------------ wording
def _cm(metres: float) -> int:
    return max(1, round(metres * 100))


def _pick(rng: np.random.Generator, options):
    return options[int(rng.integers(len(options)))]


def where(p: np.ndarray, rng: np.random.Generator) -> str:
    """A place on the board in the words a person would use ("in the upper left part of the board")."""
    x, y = float(p[0]), float(p[1])
    v, h = board_region(p)
    far_h, far_v = abs(x) > 0.17, abs(y) > 0.11
    if h and v:
        if far_h and far_v:
            return _pick(rng, (f"close to the {v} {h} corner", f"tucked into the {v} {h} corner"))
        return _pick(rng, (f"in the {v} {h} part of the board", f"toward the {v} {h}"))
    if h:
        edge = f"near the {h} edge" if far_h else f"on the {h} side"
        return _pick(rng, (f"{edge}, about halfway up", f"{edge} at mid height"))
    if v:
        edge = f"near the {v} edge" if far_v else f"in the {v} half"
        return _pick(rng, (f"{edge}, roughly centred left to right", f"{edge}, close to the middle column"))
    return _pick(rng, ("near the centre of the board", "right in the middle of the board"))


def relation(a: np.ndarray, b: np.ndarray) -> str:
    """Where ``a`` is relative to ``b``: "just above", "well to the left of", "below and to the right of"."""
    dx, dy = (a - b).tolist()
    vert = "above" if dy > 0 else "below"
    horiz = "to the left of" if dx < 0 else "to the right of"
    if abs(dx) > 2 * abs(dy):
        words = horiz
    elif abs(dy) > 2 * abs(dx):
        words = vert
    else:
        words = f"{vert} and {horiz}"
    dist = math.hypot(dx, dy)
    return ("just " if dist < 0.07 else "well " if dist > 0.2 else "") + words


def heading(v: np.ndarray) -> str:
    """The nearest of eight directions, as words ("up and to the right")."""
    angle = math.degrees(math.atan2(float(v[1]), float(v[0]))) % 360
    names = (
        "to the right",
        "up and to the right",
        "up",
        "up and to the left",
        "to the left",
        "down and to the left",
        "down",
        "down and to the right",
    )
    return names[int(((angle + 22.5) % 360) // 45)]


def landmark(target: np.ndarray, state: BoardState, skip: set[str], rng: np.random.Generator) -> str:
    """The target in words: a named location if it is one, else next to the nearest staying block."""
    name, spot = min(LOCATIONS.items(), key=lambda kv: np.linalg.norm(np.array(kv[1]) - target))
    if np.linalg.norm(np.array(spot) - target) < 0.03:
        return f"at the {name}"
    others = [b for b in BLOCKS if b not in skip]
    near = min(others, key=lambda b: np.linalg.norm(state.xy(b) - target))
    if np.linalg.norm(state.xy(near) - target) < 0.16:
        return f"{relation(target, state.xy(near))} the {near}"
    return where(target, rng)


def _join(names: list[str]) -> str:
    names = [f"the {n}" for n in names]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _distance_pattern(block: str) -> re.Pattern:
    """Finds the distance-to-target sentence the expert writes about ``block`` (see _remaining)."""
    return re.compile(rf"the {block}\b[^.]*?\babout (\d+) cm", re.IGNORECASE)


def _scene(choice: Choice, state: BoardState, task: TaskInstance, rng) -> list[str]:
    """One group of sentences per relevant block (its place, then its closest neighbour)."""
    move = choice.move
    names = list(dict.fromkeys([move.block, *task.blocks, *choice.plan, *move.swept]))[:5]
    out = []
    for i, b in enumerate(names):
        p = state.xy(b)
        sentence = _pick(rng, ("The {b} is {w}.", "I can see the {b} {w}.", "The {b} sits {w}."))
        group = sentence.format(b=b, w=where(p, rng))
        near = min((o for o in BLOCKS if o != b), key=lambda o: np.linalg.norm(state.xy(o) - p))
        if i < 3 and np.linalg.norm(state.xy(near) - p) < 0.12:
            template = _pick(
                rng, ("It is {r} the {o}.", "Its closest neighbour is the {o}; it sits {r} that block.")
            )
            group += " " + template.format(r=relation(p, state.xy(near)), o=near)
        out.append(group)
    if rng.random() < 0.5:
        out.append(f"The pusher is {where(np.array(state.pusher), rng)}.")
    return out


def _previous_step(choice: Choice, state: BoardState, rng) -> list[str]:
    prev = choice.previous
    if prev is None or prev.block is None:
        return []
    said = format_instruction(prev)
    if choice.retried:
        return [
            _pick(
                rng,
                (
                    (
                        f'Last step I asked the robot to "{said}", yet the {prev.block} has not really come '
                        "closer to its spot. Repeating the same request is unlikely to help, so a different "
                        "kind of push is worth a try."
                    ),
                    (
                        f'My previous instruction, "{said}", did not get the {prev.block} where it has to '
                        "be. Rather than send the same words again, I should approach it another way."
                    ),
                ),
            )
        ]
    if prev.block not in choice.plan:
        return [
            _pick(
                rng,
                (
                    f'The previous instruction, "{said}", worked: the {prev.block} now looks settled.',
                    f'After "{said}" the {prev.block} ended up in a usable place, so that part is finished.',
                ),
            )
        ]
    return [
        _pick(
            rng,
            (
                f'After my last instruction, "{said}", the {prev.block} still needs more work.',
                f'The last request was "{said}"; the {prev.block} is not in its final place yet.',
            ),
        )
    ]


def _roles(choice: Choice, state: BoardState, task: TaskInstance, rng) -> list[str]:
    """Which block plays which part of the shape in the planned layout (V apex, L corner, ...)."""
    if not task.spec.role_names:
        return []
    blocks = dict(state.blocks)
    for b, (x, y) in choice.plan.items():
        blocks[b] = (float(x), float(y), blocks[b][2])
    roles = task.roles(BoardState(blocks, state.pusher))
    parts = [f"the {b} the {r} position" for r, b in roles.items()]
    parts[0] = parts[0].replace(" the ", " takes the ", 1).replace("the ", "", 0)
    lead = _pick(rng, ("In the layout I am aiming for, ", "The plan for the shape: ", "As for roles, "))
    return [lead + ", ".join(parts[:-1]) + " and " + parts[-1] + "."]


def _done(choice: Choice, task: TaskInstance, rng) -> list[str]:
    placed = [b for b in task.blocks if b not in choice.plan]
    if placed:
        verb, them = ("is", "it") if len(placed) == 1 else ("are", "them")
        return [
            _pick(
                rng,
                (
                    f"{_join(placed).capitalize()} {verb} already where the arrangement needs {them}.",
                    f"Nothing has to change for {_join(placed)}.",
                ),
            )
        ]
    if task.blocks:
        return [
            _pick(
                rng,
                (
                    "None of the goal blocks is in its final place yet.",
                    "So far no goal block is where it has to end up.",
                ),
            )
        ]
    return []


def why_it_moves(block: str, choice: Choice, state: BoardState, task: TaskInstance) -> str:
    """Why a block that is not one of the goal's blocks has a planned spot ("" for a goal block)."""
    if block in task.blocks or block not in choice.plan:
        return ""
    current = {b: state.xy(b) for b in BLOCKS}
    kind, other = clearing_reason(
        current,
        choice.plan,
        block,
        task.blocks,
        lambda final, pts, strict: task.spec.rest_ok(task, final, pts, strict),
    )
    if kind == "in_the_way" and other is not None:
        return (
            f"the {block} is not part of the goal, but it stands too close to the spot the {other} has to "
            "reach, so it must make room"
        )
    if task.blocks:
        return (
            f"the {block} is not part of the goal, but the goal wants no other block where it stands "
            f"now, too close to {_join(list(task.blocks))}"
        )
    return f"the {block} stands where the goal wants no block at all, so it has to leave"


def _remaining(choice: Choice, state: BoardState, task: TaskInstance, rng) -> list[str]:
    move = choice.move
    if choice.fallback:
        return [
            _pick(
                rng,
                (
                    (
                        "The planned spots are nearly reached, but the layout still does not count as done; "
                        f"a small correction of the {move.block} should settle it."
                    ),
                    (
                        f"Everything is close to its place, yet not close enough. The {move.block} is the "
                        "block whose nudge improves the arrangement the most."
                    ),
                ),
            )
        ]
    out = []
    order = sorted(choice.plan, key=lambda b: b != move.block)
    for b in order[:3]:
        gap = choice.plan[b] - state.xy(b)
        spot = landmark(choice.plan[b], state, set(choice.plan), rng)
        why = why_it_moves(b, choice, state, task)
        out.append(
            (f"{why[0].upper()}{why[1:]}. " if why else "")
            + _pick(
                rng,
                (
                    "The {b} still has to travel about {d} cm {h}, ending up {s}.",
                    "For the {b}, the distance left is about {d} cm: it should go {h} to end up {s}.",
                    "The {b} is about {d} cm from its spot; it should end up {s}, so it has to go {h}.",
                ),
            ).format(b=b, d=_cm(float(np.linalg.norm(gap))), h=heading(gap), s=spot)
        )
    return out


def _alternative(choice: Choice, rng) -> list[str]:
    alt, move = choice.alternative, choice.move
    if alt is None:
        return []
    said = format_instruction(alt.instruction)
    if choice.retried and alt.instruction == choice.previous:
        why = "that is exactly what failed last time"
    elif alt.swept and not move.swept:
        why = f"on the way the {alt.block} would shove the {alt.swept[0]} out of place"
    elif alt.edge and not move.edge:
        why = f"the pusher cannot get behind the {alt.block} there, it is too close to the edge"
    elif alt.block != move.block:
        why = _pick(
            rng,
            (
                f"the {move.block} has the clearer and more useful move right now",
                f"moving the {move.block} first gets more done with one push",
            ),
        )
    elif alt.miss > move.miss + 0.01:
        why = f"it would leave the {alt.block} about {_cm(alt.miss)} cm away from where I want it"
    else:
        why = _pick(rng, ("it is a less direct way to the same spot", "it is less precise for the robot"))
    return [
        _pick(
            rng,
            (
                f'Another option is "{said}", but {why}.',
                f'I also thought about "{said}"; I am not choosing it because {why}.',
            ),
        )
    ]


def _decision(choice: Choice, rng) -> list[str]:
    move = choice.move
    text = format_instruction(move.instruction)
    prose = (
        text.replace("move ", _pick(rng, ("move ", "push ", "slide ")), 1)
        if text.startswith("move ")
        else text
    )
    reason = ""
    if move.swept:
        reason = f" even though it may nudge the {move.swept[0]}"
    return [
        _pick(
            rng,
            (
                f"So the next step is to {prose}{reason}.",
                f"Putting this together, the robot should {prose} now{reason}.",
                f"Hence I will ask the robot to {prose}{reason}.",
            ),
        )
    ]


def write_reasoning(choice: Choice, state: BoardState, task: TaskInstance, rng: np.random.Generator) -> str:
    """The reasoning trace for ``choice``: scene, previous step, done, remaining, alternative, decision."""
    scene = _scene(choice, state, task, rng)
    head = (
        scene[:1] + list(rng.permutation(scene[1:])) if rng.random() < 0.5 else list(rng.permutation(scene))
    )
    prev = _previous_step(choice, state, rng)
    done, remaining = (
        _roles(choice, state, task, rng) + _done(choice, task, rng),
        _remaining(choice, state, task, rng),
    )
    middle = done + remaining if rng.random() < 0.6 else remaining + done
    parts = prev + head + middle if rng.random() < 0.5 else head + prev + middle
    return " ".join(parts + _alternative(choice, rng) + _decision(choice, rng))


def read_previous(history_text: str) -> tuple[Instruction | None, float | None]:
    """The previous block-moving instruction and, if the text states it, its block's distance left (m)."""
    text = (history_text or "").strip()
    if not text:
        return None, None
    parsed = parse_response(text, "language_table", "instruction_only")
    ins = parsed.instruction if isinstance(parsed, ParsedResponse) else parse(text)
    if isinstance(ins, ParseError) or ins.type not in KIND_BIAS:
        return None, None
    found = _distance_pattern(ins.block).search(text)
    return ins, (int(found.group(1)) / 100 if found else None)


# ------------------------------------------------------------------------------------ backend
class LanguageTableExpert(ReasonerBackend):
    """The privileged data expert as a reasoner backend (spec "expert", "expert:language_table" or
    "expert:packing": one backend serves both suites and picks the planner by ``inp.suite``, so a
    reasoner node configured with "expert" runs either suite).

    Needs ``inp.extra["privileged"]`` (an :class:`ExpertView`, or a
    :class:`~r3.reasoning.packing_expert.PackingExpertView` for packing) and reads ``inp.extra["seed"]``
    (default 0) for wording. Token counts in its :class:`BackendOutput` are whitespace word
    counts of the answer (there is no tokenizer and no prompt, so ``prompt_tokens`` is None).
    """

    model_id = MODEL_ID

    def __init__(self, policy_config: PushingPolicyConfig | None = None):
        self.policy_config = policy_config or PushingPolicyConfig()
        self._packing_expert = None  # made on the first packing input; it remembers refused instructions

    @classmethod
    def from_spec(cls, rest: str, **options) -> LanguageTableExpert:
        if rest not in ("", "language_table", "packing"):
            raise ValueError(
                f"expert spec 'expert:{rest}': experts are 'expert:language_table' and 'expert:packing'"
            )
        return cls(**options)

    def _generate(self, messages, prefix, max_tokens, stop, on_text) -> Generation:
        raise BackendError("the expert answers from privileged state (decide), not from chat messages")

    def decide(
        self, inp: ReasonerInput, budget: ReasoningBudget = NO_BUDGET, on_text: OnText | None = None
    ) -> BackendOutput:
        start = time.perf_counter()
        if get_suite(inp.suite).workcell:
            return self._packing(inp, budget, on_text, start)
        view = inp.extra.get("privileged")
        if not isinstance(view, ExpertView):
            raise BackendError("the expert needs inp.extra['privileged'] = ExpertView(state, task)")
        previous, distance = read_previous(inp.history_text if inp.history != "none" else "")
        choice = choose(view.state, view.task, previous, distance, self.policy_config)
        instruction = format_instruction(choice.move.instruction)
        limit = 0 if inp.mode == "instruction_only" else budget.max_reasoning_tokens
        words, truncated = [], False
        if limit != 0:
            rng = np.random.default_rng([int(inp.extra.get("seed", 0)), int(inp.step)])
            words = write_reasoning(choice, view.state, view.task, rng).split()
            truncated = limit is not None and len(words) > limit
            words = words[:limit] if truncated else words
        reasoning = f"{REASONING_HEADER} {' '.join(words)}\n" if words else ""
        raw = f"{reasoning}{INSTRUCTION_HEADER} {instruction}"
        if on_text is not None:
            on_text(raw)
        elapsed = time.perf_counter() - start
        return BackendOutput(
            raw_text=raw,
            finish_reason="stop",
            prompt_tokens=None,
            completion_tokens=len(raw.split()),
            reasoning_tokens=None if budget.max_reasoning_tokens is None else len(words),
            latency_s=elapsed,
            model_s=elapsed,
            model_id=self.model_id,
            stages=1,
            reasoning_truncated=truncated,
        )

    def _packing(
        self, inp: ReasonerInput, budget: ReasoningBudget, on_text: OnText | None, start: float
    ) -> BackendOutput:
        from r3.reasoning.packing_expert import PackingExpert, PackingExpertView  # packing only when asked

        view = inp.extra.get("privileged")
        if not isinstance(view, PackingExpertView):
            raise BackendError(
                "the packing expert needs inp.extra['privileged'] = PackingExpertView(state, task)"
            )
        limit = 0 if inp.mode == "instruction_only" else budget.max_reasoning_tokens
        previous = inp.history_text if inp.history != "none" else ""
        if self._packing_expert is None:
            self._packing_expert = PackingExpert()
        if inp.interface in ("semantic", "plan") and view.camera is None:
            raise BackendError("the packing expert's semantic actions need PackingExpertView.camera")
        expert = self._packing_expert
        speak = {"semantic": expert.act, "tools": expert.call, "plan": expert.plan}.get(
            inp.interface, expert.answer
        )
        instruction, reasoning = speak(
            view, previous, int(inp.extra.get("seed", 0)), int(inp.step), limit != 0
        )
        words = reasoning.split()
        truncated = limit is not None and len(words) > limit
        words = words[:limit] if truncated else words
        raw = (f"{REASONING_HEADER} {' '.join(words)}\n" if words else "") + (
            f"{ANSWER_HEADERS[inp.interface]} {instruction}" if instruction else ""
        )  # none: nothing is left to try
        if on_text is not None:
            on_text(raw)
        elapsed = time.perf_counter() - start
        return BackendOutput(
            raw_text=raw,
            finish_reason="stop",
            prompt_tokens=None,
            completion_tokens=len(raw.split()),
            reasoning_tokens=None if budget.max_reasoning_tokens is None else len(words),
            latency_s=elapsed,
            model_s=elapsed,
            model_id="expert:packing",
            stages=1,
            reasoning_truncated=truncated,
        )
