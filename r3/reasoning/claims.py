"""The trace checker: the claims of an expert trace, verified against the state it was written in.

The experts' traces are Stage I's training data, so every statement about the scene must be true of
the decision-time state. :func:`check_step` splits one step's reasoning into sentences, recognises
the statements the experts make (where blocks and items are, tray contents, relations and
distances, what the previous instruction did and why it failed, what is done and what remains,
why a block or item that is not a goal object moves) and returns one :class:`Claim` for each,
``verified`` or not. A sentence it does not recognise (weighing an alternative, the decision) is
not a claim about the scene and is not counted.

Each move a trace plans for a block or item outside the goal also yields a ``reason`` claim,
verified when the trace states why that block or item has to move.

Also here: :func:`board_unchanged` (no block moved) and :func:`repeated_refusals`, the count of
instructions given again right after failing in an unchanged scene (the packing rule of "unchanged"
is :func:`r3.reasoning.packing_expert.packing_unchanged`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from r3.instructions.packing import ITEMS, TRAYS
from r3.reasoning import expert as lt
from r3.reasoning import packing_expert as pk
from r3.suites import get_suite
from r3.tasks.language_table.board import BLOCKS

#: Blocks closer than this to where they were count as not moved (m).
STILL_TOLERANCE = 0.005


@dataclass(frozen=True)
class Claim:
    """One statement of a trace: its kind, its text, and whether the recorded state bears it out."""

    kind: str
    text: str
    verified: bool


@dataclass(frozen=True)
class Previous:
    """The step before: its instruction, its recorded failure ("" done, None unknown) and its state."""

    instruction: str
    error: str | None
    state: object


def board_unchanged(a, b) -> bool:
    """Whether two Language Table boards show the same scene: no block moved."""
    return set(a.blocks) == set(b.blocks) and all(
        math.dist(a.blocks[n][:2], b.blocks[n][:2]) <= STILL_TOLERANCE for n in a.blocks
    )


def repeated_refusals(
    instructions: Sequence[str],
    errors: Sequence[str],
    states: Sequence,
    unchanged: Callable[[object, object], bool],
) -> int:
    """How often an instruction that failed was given again in the scene it failed in and failed again
    for the same reason. ``states[i]`` is the decision-time state of step i, ``states[i + 1]`` the one
    after it (one more state than steps)."""
    return sum(
        1
        for i in range(1, len(instructions))
        if errors[i - 1]
        and instructions[i]
        and instructions[i] == instructions[i - 1]
        and errors[i] == errors[i - 1]
        and unchanged(states[i - 1], states[i])
    )


def sentences(text: str) -> list[str]:
    """The sentences of a trace (a period inside a quoted instruction does not end one)."""
    return [s.strip() for s in re.split(r"(?<=[.])\s+(?=[A-Z])", text.strip()) if s.strip()]


def check_step(suite: str, reasoning: str, state, task, previous: Previous | None = None) -> list[Claim]:
    """Every checkable claim of one step's reasoning, verified against ``state`` (and ``previous``)."""
    return get_suite(suite).hook("claim_checker")(state, task, previous).check(reasoning)


def verified_fraction(claims: Sequence[Claim]) -> float:
    return sum(c.verified for c in claims) / len(claims) if claims else 1.0


def _alternation(names) -> str:
    return "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))


def _listed(text: str, names) -> list[str]:
    """The names in a list like "the a, the b and the c" (in order of appearance)."""
    found = [(m.start(), m.group(0)) for m in re.finditer(_alternation(names), text)]
    return [n for _, n in sorted(found)]


# ------------------------------------------------------------------------------------ packing
_I = _alternation(ITEMS)
_TR = _alternation(TRAYS)
_WHERE = rf"in the gripper|on the table|in the (?:{_TR}) tray"


class PackingChecker:
    """Claims of a packing expert trace (see ``r3.reasoning.packing_expert``)."""

    def __init__(self, state, task, previous: Previous | None):
        self.state, self.task, self.previous = state, task, previous

    def check(self, reasoning: str) -> list[Claim]:
        out = []
        for sentence in sentences(reasoning):
            out += self._sentence(sentence)
        return out

    def _where(self, item: str, where: str) -> bool:
        return item in self.state.items and pk._where(item, self.state) == where

    def _failed(self) -> bool | None:
        """Whether the previous instruction failed, from its recorded result (None: not recorded)."""
        if self.previous is None or self.previous.error is None:
            return None
        return bool(self.previous.error)

    def _sentence(self, s: str) -> list[Claim]:
        st, task, out = self.state, self.task, []
        claim = lambda kind, ok: out.append(Claim(kind, s, bool(ok)))
        if s.startswith(("In the base view,", "Looking at the base camera image,", "From the base view,")):
            for part in s.split(",", 1)[1].rstrip(".").split(";"):
                part = part.strip()
                if m := re.fullmatch(rf"the ({_TR}) tray is empty", part):
                    claim("tray", not st.in_tray(m.group(1)))
                elif m := re.fullmatch(rf"the ({_TR}) tray holds (.+)", part):
                    claim("tray", sorted(_listed(m.group(2), ITEMS)) == sorted(st.in_tray(m.group(1))))
                elif m := re.fullmatch(r"on the table I can see (.+)", part):
                    table = [i for i in st.items if st.tray_of(i) is None and st.held != i]
                    claim("table", sorted(_listed(m.group(1), ITEMS)) == sorted(table))
                elif m := re.fullmatch(rf"the gripper is holding the ({_I})", part):
                    claim("held", st.held == m.group(1))
            return out
        if m := re.match(
            rf"(?:The previous instruction worked: the ({_I}) is now|My last step succeeded, since "
            rf"the ({_I}) sits) ({_WHERE})\.",
            s,
        ):
            item = m.group(1) or m.group(2)
            claim("previous", self._where(item, m.group(3)) and self._failed() is not True)
        elif m := re.match(r'The previous instruction, "(.+?)", was refused before anything moved(.*)\.$', s):
            ins = pk.read_instruction(m.group(1))
            prev = self.previous
            claim(
                "previous",
                prev is not None and pk.packing_unchanged(prev.state, st) and self._failed() is not False,
            )
            cause = m.group(2)
            if cause.startswith(":") and ins is not None:
                claim("cause", pk.cause(ins, st) == cause[1:].strip())
        elif m := re.match(
            rf"The previous instruction did not finish: the ({_I}) is still in the gripper\.", s
        ):
            claim("previous", st.held == m.group(1) and self._failed() is not False)
        elif m := re.match(
            rf"(?:The previous instruction did not work: the ({_I}) did not end up ({_WHERE}), "
            rf"and it is ({_WHERE}) again|The last attempt failed: the ({_I}) is ({_WHERE}) again, "
            rf"not ({_WHERE}))\.",
            s,
        ):
            item, now, meant = (m.group(1), m.group(3), m.group(2)) if m.group(1) else m.group(4, 5, 6)
            prev = self.previous
            moved = prev is None or not pk.packing_unchanged(prev.state, st)
            claim("previous", self._where(item, now) and not self._where(item, meant) and moved)
        elif m := re.match(rf"The previous instruction did not work: the ({_I}) fell out of the gripper", s):
            claim("previous", self._where(m.group(1), "on the table") and self._failed() is not False)
        elif s == "It now lies on the table.":
            pass  # continues the sentence before, checked there
        elif m := re.match(
            rf"(?:The previous instruction did not work: the ({_I}) (?:is|landed)|The last attempt "
            rf"failed, because the ({_I}) is still) ({_WHERE})",
            s,
        ):
            claim(
                "previous", self._where(m.group(1) or m.group(2), m.group(3)) and self._failed() is not False
            )
        elif m := re.match(r"Already packed where the goal wants them: (.+)\.", s):
            claim("done", all(i in task.targets and task.packed(st, i) for i in _listed(m.group(1), ITEMS)))
        elif m := re.match(r"Still to do: (.+)\.", s):
            for part in m.group(1).split(";"):
                if n := re.fullmatch(rf"the ({_I}) to the ({_TR}) tray", part.strip()):
                    item, tray = n.groups()
                    claim("todo", task.targets.get(item) == tray and not task.packed(st, item))
        elif m := re.match(r"The (.+) must end up out of every tray\.", s):
            claim(
                "clutter",
                all(i in task.clutter and st.tray_of(i) is not None for i in _listed(m.group(1), ITEMS)),
            )
        elif m := re.match(
            r"(?:Since (.+), the next step moves the|So (.+); I will move the) (" + _I + r")(?: next)?\.", s
        ):
            out += self._why(m.group(1) or m.group(2), m.group(3), s)
        return out

    def _why(self, why: str, item: str, s: str) -> list[Claim]:
        """The reason a move is made: every role the expert gives, checked, and a reason for a
        non-goal item."""
        st, task, out = self.state, self.task, []
        claim = lambda kind, ok: out.append(Claim(kind, s, bool(ok)))
        if m := re.match(rf"the ({_I}) does not belong in any tray", why):
            claim("role", m.group(1) in task.clutter)
        elif m := re.match(rf"the ({_I}) has tipped over", why):
            claim("role", st.items[m.group(1)].tilt > pk.UPRIGHT_TOLERANCE)
        elif m := re.match(rf"the ({_I}) still has to go into the ({_TR}) tray", why):
            claim("role", task.targets.get(m.group(1)) == m.group(2) and st.tray_of(m.group(1)) is None)
        elif m := re.match(rf"the ({_I}) belongs in the ({_TR}) tray, not the ({_TR}) one", why):
            claim("role", task.targets.get(m.group(1)) == m.group(2) and st.tray_of(m.group(1)) == m.group(3))
        elif m := re.match(
            rf"the ({_I}) stands in the hand's way (?:down to the ({_I})|when it sets the ({_I}) down "
            rf"in the ({_TR}) tray)",
            why,
        ):
            blocker, picked, placed, tray = m.groups()
            claim(
                "role",
                blocker in (pk.hand_blockers(picked, st) if picked else pk.place_blockers(placed, tray, st)),
            )
            if n := re.search(rf"belongs in the ({_TR}) tray anyway", why):
                claim("role", task.targets.get(m.group(1)) == n.group(1))
        elif m := re.match(
            rf"the ({_TR}) tray is too full for the ({_I}), and the ({_I}) does not belong there", why
        ):
            tray, entering, other = m.groups()
            claim("role", not pk.has_room(entering, tray, st) and task.targets.get(other) != tray)
        elif re.match(rf"the direct move of the ({_I}) was refused here", why):
            claim("role", self.previous is not None and self._failed() is not False)
        goal = item in task.targets or item in task.clutter
        out.append(
            Claim(
                "reason",
                s,
                goal
                or bool(
                    re.search(
                        rf"the {re.escape(item)} stands in the hand's way|"
                        rf"the {re.escape(item)} does not belong there",
                        why,
                    )
                ),
            )
        )
        return out


# ------------------------------------------------------------------------------------ Language Table
_B = _alternation(BLOCKS)


class _Fixed:
    """A stand-in generator whose every draw is ``k``: enumerates the experts' wording choices."""

    def __init__(self, k: int):
        self.k = k

    def integers(self, n: int) -> int:
        return min(self.k, n - 1)


def _wordings(fn, *args) -> set[str]:
    return {fn(*args, _Fixed(k)) for k in range(3)}


class BoardChecker:
    """Claims of a Language Table expert trace (see ``r3.reasoning.expert``)."""

    def __init__(self, state, task, previous: Previous | None):
        self.state, self.task, self.previous = state, task, previous
        self.plan = {b: np.array(t, float) for b, t in task.plan(state).items()}
        self.choice = lt.Choice(None, None, self.plan, None, False, False)

    def check(self, reasoning: str) -> list[Claim]:
        out, subject = [], None
        given_reasons = set()
        targeted = []
        for s in sentences(reasoning):
            claims, subject = self._sentence(s, subject, given_reasons, targeted)
            out += claims
        for block in targeted:
            if block not in self.task.blocks:
                out.append(Claim("reason", f"the {block} has a planned spot", block in given_reasons))
        return out

    def _xy(self, block: str) -> np.ndarray:
        return self.state.xy(block)

    def _sentence(self, s: str, subject, reasons: set, targeted: list):
        st, out = self.state, []
        claim = lambda kind, ok: out.append(Claim(kind, s, bool(ok)))
        remaining = (
            rf"The ({_B}) still has to travel about (\d+) cm (.+?), ending up (.+)\.$",
            rf"For the ({_B}), the distance left is about (\d+) cm: it should go (.+?) to end up (.+)\.$",
            rf"The ({_B}) is about (\d+) cm from its spot; it should end up (.+), so it has to go (.+)\.$",
        )
        for k, pattern in enumerate(remaining):
            if m := re.match(pattern, s):
                block, cm = m.group(1), int(m.group(2))
                heading, spot = (m.group(4), m.group(3)) if k == 2 else (m.group(3), m.group(4))
                targeted.append(block)
                target = self.plan.get(block)
                if target is None:
                    claim("distance", False)
                    return out, block
                gap = target - self._xy(block)
                claim("distance", cm == lt._cm(float(np.linalg.norm(gap))) and heading == lt.heading(gap))
                claim("spot", spot in _wordings(lt.landmark, target, st, set(self.plan)))
                return out, block
        if m := re.match(rf"The ({_B}) (?:is not part of the goal|stands where the goal wants no block)", s):
            block = m.group(1)
            reasons.add(block)
            claim("reason", lt.why_it_moves(block, self.choice, st, self.task) == s[0].lower() + s[1:-1])
            return out, block
        if "the block whose nudge" in s or " already where the arrangement needs " in s:
            pass  # the fallback's choice, or done (below): no position
        elif m := re.fullmatch(rf"(?:The ({_B}) (?:is|sits) |I can see the ({_B}) )(.+)\.", s):
            block = m.group(1) or m.group(2)
            claim("position", m.group(3) in _wordings(lt.where, self._xy(block)))
            return out, block
        if m := re.fullmatch(r"The pusher is (.+)\.", s):
            claim("position", m.group(1) in _wordings(lt.where, np.array(st.pusher)))
            return out, subject
        if subject is not None and (m := re.fullmatch(rf"It is (.+) the ({_B})\.", s)):
            claim("relation", m.group(1) == lt.relation(self._xy(subject), self._xy(m.group(2))))
            return out, subject
        if subject is not None and (
            m := re.fullmatch(rf"Its closest neighbour is the ({_B}); it sits (.+) that block\.", s)
        ):
            other, p = m.group(1), self._xy(subject)
            nearest = min((o for o in BLOCKS if o != subject), key=lambda o: np.linalg.norm(self._xy(o) - p))
            claim("relation", other == nearest and m.group(2) == lt.relation(p, self._xy(other)))
            return out, subject
        if m := re.search(
            rf"(?:worked: the ({_B}) now looks settled|the ({_B}) ended up in a usable place)", s
        ):
            claim("previous", (m.group(1) or m.group(2)) not in self.plan)
        elif m := re.search(
            rf"(?:the ({_B}) still needs more work|the ({_B}) is not in its final place yet)", s
        ):
            claim("previous", (m.group(1) or m.group(2)) in self.plan)
        elif m := re.match(
            r"(.+) (?:is|are) already where the arrangement needs (?:it|them)\.", s
        ) or re.match(r"Nothing has to change for (.+)\.", s):
            claim(
                "done", all(b in self.task.blocks and b not in self.plan for b in _listed(m.group(1), BLOCKS))
            )
        elif s in (
            "None of the goal blocks is in its final place yet.",
            "So far no goal block is where it has to end up.",
        ):
            claim("done", all(b in self.plan for b in self.task.blocks))
        elif s.startswith(("In the layout I am aiming for, ", "The plan for the shape: ", "As for roles, ")):
            blocks = dict(st.blocks)
            for b, (x, y) in self.plan.items():
                blocks[b] = (float(x), float(y), blocks[b][2])
            roles = self.task.roles(type(st)(blocks, st.pusher))
            said = {r: b for b, r in re.findall(rf"the ({_B}) (?:takes )?the ([a-z ]+?) position", s)}
            claim("roles", said == roles)
        return out, None


def check_episode(suite: str, steps: Sequence[tuple[str, str, str | None, bytes]], env) -> list[Claim]:
    """The claims of every step of one episode, ``(reasoning, instruction, error or None, snapshot)`` in
    step order; ``env`` (the suite's simulator) restores each snapshot to read its state and task."""
    out: list[Claim] = []
    previous = None
    for reasoning, instruction, error, snapshot in steps:
        env.restore(snapshot)
        state = env.state()
        out += check_step(suite, reasoning, state, env.task_instance, previous)
        previous = Previous(instruction, error, state)
    return out
