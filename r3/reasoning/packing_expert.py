"""The packing expert: a privileged planner that writes R^3-style reasoning for grocery packing.

It reads the true scene and goal (a :class:`PackingExpertView` in ``inp.extra["privileged"]``),
never the images, and answers like a VLM: what the base view shows per tray and on the table,
whether the previous instruction worked, what is done and what remains, an alternative it weighed,
then ``Instruction: <canonical text>`` (R^3 Appendix D.4; history is the previous instruction).

How it decides, in order: clutter still in a tray is removed first (the goals say "remove ...,
then ..."); then the goal objects that are not yet in their tray, in the order the goal names
them, skipping one whose destination has no free spot for it at the moment (a later step frees
room); an object in the wrong tray is transferred, one on the table packed; a goal object that is
in its tray but tipped over (upright constraint) is taken out to be packed again. When the previous
instruction failed, another goal object goes first if there is one (what blocked the hand may be a
neighbour that has to move anyway), so a failure is not repeated as is. When nothing is
left to move (items still settling) it repeats the last useful instruction's kind of check and
picks the first goal object not yet counted as packed.

Randomness only picks wordings: ``np.random.default_rng([seed, step])``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from r3.instructions.language_table import ParseError
from r3.instructions.packing import PackingInstruction, PackingInstructionType, format_instruction, parse
from r3.tasks.packing import placement
from r3.tasks.packing.state import PackingState
from r3.tasks.packing.tasks import UPRIGHT_TOLERANCE, PackingTaskInstance, tray_rect

MODEL_ID = "expert:packing"
T = PackingInstructionType


@dataclass(frozen=True)
class PackingExpertView:
    """The privileged information the packing expert reads (``inp.extra["privileged"]``)."""

    state: PackingState
    task: PackingTaskInstance


def _has_room(item: str, tray: str, state: PackingState) -> bool:
    others = [placement.footprint(n, i.pos[0], i.pos[1], i.yaw) for n, i in state.items.items() if n != item]
    return bool(placement.candidates(item, tray_rect(tray), others, yaws=(state.items[item].yaw,)))


def _where(item: str, state: PackingState) -> str:
    if state.held == item:
        return "in the gripper"
    tray = state.tray_of(item)
    return "on the table" if tray is None else f"in the {tray} tray"


def next_instruction(state: PackingState, task: PackingTaskInstance,
                     failed: str | None = None) -> tuple[PackingInstruction | None, str]:
    """The expert's choice and a one-line why; (None, why) when nothing is left to move.

    ``failed``: the item the previous instruction moved without success. Another goal object goes
    first when there is one (a neighbour may be what blocked the hand), then the failed one again.
    """
    if failed is not None:
        choice, why = _choose(state, task, skip=failed)
        if choice is not None:
            return choice, f"{why}, and the {failed} did not work out just now"
    return _choose(state, task)


def _choose(state: PackingState, task: PackingTaskInstance, skip: str | None = None):
    for c in task.clutter:
        tray = state.tray_of(c)
        if tray is not None and c != skip:
            return PackingInstruction(T.REMOVE, c, tray), f"the {c} does not belong in any tray"
    blocked = []
    for item, dest in task.targets.items():
        if item == skip:
            continue
        where = state.tray_of(item)
        tipped = item in task.upright and where == dest and state.items[item].tilt > UPRIGHT_TOLERANCE
        if tipped:
            return PackingInstruction(T.REMOVE, item, dest), f"the {item} has tipped over and must be upright"
        if where == dest and state.held != item:
            continue
        if not _has_room(item, dest, state):
            blocked.append((item, dest))
            continue
        if where is None:
            return PackingInstruction(T.PACK, item, dest), f"the {item} still has to go into the {dest} tray"
        return PackingInstruction(T.TRANSFER, item, where, dest), f"the {item} belongs in the {dest} tray, not the {where} one"
    for item, dest in blocked:  # make room: take out something that does not belong in that tray
        for other in state.in_tray(dest):
            if task.targets.get(other) != dest and other != skip:
                goal = task.targets.get(other)
                if goal is not None and goal != dest:
                    return (PackingInstruction(T.TRANSFER, other, dest, goal),
                            f"the {dest} tray is too full for the {item}, and the {other} belongs elsewhere")
                return PackingInstruction(T.REMOVE, other, dest), f"the {dest} tray is too full for the {item}"
    return None, "every goal object is where it should be"


def _failed_item(previous: str, state: PackingState) -> str | None:
    """The item the previous instruction was about, when it is not where that instruction sent it."""
    previous = previous.rsplit("Instruction:", 1)[-1].strip()
    ins = parse(previous) if previous else None
    if ins is None or isinstance(ins, ParseError):
        return None
    dest = None if ins.type is T.REMOVE else (ins.to_tray if ins.type is T.TRANSFER else ins.tray)
    return None if state.tray_of(ins.item) == dest and state.held != ins.item else ins.item


def _pick(rng, options):
    return options[int(rng.integers(len(options)))]


def _scene(state: PackingState, rng) -> list[str]:
    parts = []
    for tray in ("small", "medium", "large"):
        inside = state.in_tray(tray)
        parts.append(f"the {tray} tray holds the {' and the '.join(inside)}" if inside else f"the {tray} tray is empty")
    table = [i for i in state.items if state.tray_of(i) is None and state.held != i]
    if table:
        parts.append(f"on the table I can see the {', the '.join(table)}")
    if state.held:
        parts.append(f"the gripper is holding the {state.held}")
    opener = _pick(rng, ["In the base view,", "Looking at the base camera image,", "From the base view,"])
    return [f"{opener} {'; '.join(parts)}."]


def _previous(previous: str, state: PackingState, rng) -> list[str]:
    previous = previous.rsplit("Instruction:", 1)[-1].strip()  # a whole previous response works too
    ins = parse(previous) if previous else None
    if ins is None or isinstance(ins, ParseError):
        return []
    dest = None if ins.type is T.REMOVE else (ins.to_tray if ins.type is T.TRANSFER else ins.tray)
    now = state.tray_of(ins.item)
    worked = now == dest and state.held != ins.item
    if worked:
        return [_pick(rng, [f"The previous instruction worked: the {ins.item} is now {_where(ins.item, state)}.",
                            f"My last step succeeded, since the {ins.item} sits {_where(ins.item, state)}."])]
    return [_pick(rng, [f"The previous instruction did not work: the {ins.item} is {_where(ins.item, state)}.",
                        f"The last attempt failed, because the {ins.item} is still {_where(ins.item, state)}."])]


def write_reasoning(state: PackingState, task: PackingTaskInstance, previous: str, choice, why: str, rng) -> str:
    done = [i for i in task.targets if task.packed(state, i)]
    todo = [f"the {i} to the {t} tray" for i, t in task.targets.items() if not task.packed(state, i)]
    parts = _scene(state, rng) + _previous(previous, state, rng)
    if done:
        parts.append(f"Already packed where the goal wants them: the {', the '.join(done)}.")
    if todo:
        parts.append(f"Still to do: {'; '.join(todo)}.")
    clutter = [c for c in task.clutter if state.tray_of(c) is not None]
    if clutter:
        parts.append(f"The {' and the '.join(clutter)} must end up out of every tray.")
    others = [i for i, t in task.targets.items() if not task.packed(state, i) and (choice is None or i != choice.item)]
    if choice is not None and others:
        parts.append(_pick(rng, [f"I could also start with the {others[0]}, but {why}, so that comes first.",
                                 f"Handling the {others[0]} first is possible, yet {why}."]))
    if choice is not None:
        parts.append(_pick(rng, [f"Since {why}, the next step moves the {choice.item}.",
                                 f"So {why}; I will move the {choice.item} next."]))
    else:
        parts.append("Everything is in place; the items only need to settle, so I repeat a harmless check.")
    return " ".join(parts)


class PackingExpert:
    """Chooses and explains the next packing instruction (used by the ``expert`` backend)."""

    model_id = MODEL_ID

    def answer(self, view: PackingExpertView, previous: str, seed: int, step: int,
               with_reasoning: bool) -> tuple[str, str]:
        """(instruction text, reasoning text without its header)."""
        choice, why = next_instruction(view.state, view.task, _failed_item(previous, view.state))
        if choice is None:  # all placed, still settling: re-issue the first goal object's instruction
            item, dest = next(iter(view.task.targets.items()))
            where = view.state.tray_of(item)
            choice = (PackingInstruction(T.PACK, item, dest) if where is None or where == dest
                      else PackingInstruction(T.TRANSFER, item, where, dest))
            text_choice = None
        else:
            text_choice = choice
        instruction = format_instruction(choice)
        if not with_reasoning:
            return instruction, ""
        rng = np.random.default_rng([int(seed), int(step)])
        return instruction, write_reasoning(view.state, view.task, previous, text_choice, why, rng)

