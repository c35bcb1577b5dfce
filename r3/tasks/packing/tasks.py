"""Packing goals: the 12 held-out goals of R^3 Table 6 and a generator of training goals.

A goal says where each *goal object* must end (its tray), which items are *clutter* (they must end
in no tray) and which goal objects must stay upright. A :class:`PackingTaskSpec` also fixes where
every item starts ("table" or a tray); ``spec.sample(rng)`` draws a concrete layout (free spots on
the table band and in the trays, plus distractor items on the table) and returns a
:class:`PackingTaskInstance`, which judges success and progress (rules below) and round-trips
through ``to_dict`` / ``from_dict``.

Success (R^3 Appendix A.2): every goal object has its centre of mass in its assigned tray and has
been slower than 0.02 m/s for 30 consecutive control steps, is not held, and, when required, is
within 15 degrees of upright; every clutter item is in no tray. Progress = K/N goal objects packed
(the env keeps the maximum over the episode, as R^3 reports it).

Table 6 lists "stages"; we count stages as goal objects, which matches 11 of the 12 rows. Task 4
says 4 stages for 3 named goal objects; we keep N = 3 and say so here rather than invent a fourth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from r3.tasks.packing import placement
from r3.tasks.packing.state import PackingState
from r3.tasks.packing.workcell import ITEMS, TABLE_REGION, TRAY_SPECS, TRAYS

#: Largest tilt from upright (rad) that an orientation constraint allows.
UPRIGHT_TOLERANCE = math.radians(15.0)
#: Distractor items (neither goal nor clutter) put on the table with each held-out goal.
DISTRACTORS = 1
#: Layout draws tried before sampling gives up.
LAYOUT_TRIES = 200


def tray_rect(tray: str) -> placement.Rect:
    t = TRAY_SPECS[tray]
    return (
        (t.centre[0] - t.inner[0] / 2, t.centre[0] + t.inner[0] / 2),
        (t.centre[1] - t.inner[1] / 2, t.centre[1] + t.inner[1] / 2),
    )


@dataclass
class PackingTaskInstance:
    """One concrete goal with its starting layout ``item -> (x, y, yaw)``."""

    name: str
    goal: str
    initial: dict[str, str]
    targets: dict[str, str]
    clutter: tuple[str, ...] = ()
    upright: tuple[str, ...] = ()
    layout: dict[str, tuple[float, float, float]] = field(default_factory=dict)

    @property
    def spec(self) -> PackingTaskSpec:
        return get_task(self.name)

    @property
    def note(self) -> str:
        return "" if not self.upright else f"Keep the {', '.join(self.upright)} upright."

    def packed(self, state: PackingState, item: str) -> bool:
        """Whether goal object ``item`` is stably in its assigned tray (and upright if required)."""
        s = state.items.get(item)
        if s is None or state.held == item or s.tray != self.targets[item] or not s.still:
            return False
        return item not in self.upright or s.tilt <= UPRIGHT_TOLERANCE

    def clutter_cleared(self, state: PackingState) -> bool:
        return all(state.tray_of(c) is None and state.held != c for c in self.clutter)

    def success(self, state: PackingState) -> bool:
        return all(self.packed(state, i) for i in self.targets) and self.clutter_cleared(state)

    def progress(self, state: PackingState) -> float:
        return sum(self.packed(state, i) for i in self.targets) / len(self.targets)

    def penalty(self, state: PackingState) -> float:
        """ERR's penalty check on the final state: what was done that the goal did not ask for. Each
        goal object put into a tray that is not its own costs 1 (still in the tray it started in is
        unfinished work, not a penalty); each object the goal names neither as a target nor as clutter
        costs 0.5 while held and 1 in a tray it did not start in. 0 is clean."""
        cost = sum(
            1.0
            for item, tray in self.targets.items()
            if state.tray_of(item) not in (None, tray, self.initial.get(item))
        )
        for item in state.items:
            if item in self.targets or item in self.clutter:
                continue
            cost += 0.5 if state.held == item else 0.0
            tray = state.tray_of(item)
            cost += 1.0 if tray is not None and tray != self.initial.get(item) else 0.0
        return cost

    def terms(self, state: PackingState) -> dict[str, float]:
        return {
            "packed": float(sum(self.packed(state, i) for i in self.targets)),
            "goal_objects": float(len(self.targets)),
            "clutter_in_trays": float(sum(state.tray_of(c) is not None for c in self.clutter)),
        }

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "goal": self.goal,
            "initial": dict(self.initial),
            "targets": dict(self.targets),
            "clutter": list(self.clutter),
            "upright": list(self.upright),
            "layout": {k: list(v) for k, v in self.layout.items()},
        }

    @classmethod
    def from_dict(cls, data: dict) -> PackingTaskInstance:
        return cls(
            data["name"],
            data["goal"],
            dict(data["initial"]),
            dict(data["targets"]),
            tuple(data["clutter"]),
            tuple(data["upright"]),
            {k: tuple(v) for k, v in data["layout"].items()},
        )


def sample_layout(
    initial: dict[str, str], rng: np.random.Generator
) -> dict[str, tuple[float, float, float]] | None:
    """Random free spots for items starting in trays (first, they are tighter) and on the table."""
    occupied: dict[str, list] = {t: [] for t in (*TRAYS, "table")}
    layout = {}
    order = sorted(initial, key=lambda i: (initial[i] == "table", ITEMS.index(i)))
    for item in order:
        where = initial[item]
        rect = TABLE_REGION if where == "table" else tray_rect(where)
        spot = placement.random_spot(item, rect, occupied[where], rng)
        if spot is None:
            return None
        x, y, yaw = spot
        if where == "table":
            yaw += float(rng.uniform(-0.15, 0.15))  # a little mess on the table
        occupied[where].append(placement.footprint(item, x, y, yaw))
        layout[item] = (x, y, yaw)
    return layout


@dataclass(frozen=True)
class PackingTaskSpec:
    """A fixed goal: where items start, where goal objects must end, clutter, upright constraints."""

    name: str
    goal: str
    initial: dict[str, str]
    targets: dict[str, str]
    clutter: tuple[str, ...] = ()
    upright: tuple[str, ...] = ()
    distractors: int = DISTRACTORS

    def __post_init__(self):
        for item in (*self.initial, *self.targets):
            if item not in ITEMS:
                raise ValueError(f"task {self.name}: unknown item {item!r}")
        for item, where in {**self.initial, **self.targets}.items():
            if where not in (*TRAYS, "table"):
                raise ValueError(f"task {self.name}: {item} at unknown place {where!r}")
        missing = (set(self.targets) | set(self.clutter)) - set(self.initial)
        if missing:
            raise ValueError(f"task {self.name}: no starting place for {sorted(missing)}")

    def sample(self, rng: np.random.Generator) -> PackingTaskInstance:
        spare = [i for i in ITEMS if i not in self.initial]
        for _ in range(LAYOUT_TRIES):
            extra = [spare[k] for k in rng.choice(len(spare), size=self.distractors, replace=False)]
            initial = {**self.initial, **{i: "table" for i in extra}}
            layout = sample_layout(initial, rng)
            if layout is not None:
                return PackingTaskInstance(
                    self.name, self.goal, initial, dict(self.targets), self.clutter, self.upright, layout
                )
        raise RuntimeError(f"task {self.name}: no layout found in {LAYOUT_TRIES} draws")

    def from_dict(self, data: dict) -> PackingTaskInstance:
        return PackingTaskInstance.from_dict(data)


G, F, S, C, P, T = "gelatin box", "foam brick", "sugar box", "cracker box", "soup can", "tuna fish can"

#: R^3 Table 6, goal texts verbatim; starting places chosen so that each goal needs its stages.
HELD_OUT: dict[str, PackingTaskSpec] = {
    s.name: s
    for s in (
        PackingTaskSpec(
            "1",
            "Move the gelatin box from the medium tray to the small tray, then pack the foam brick "
            "into the small tray.",
            {G: "medium", F: "table"},
            {G: "small", F: "small"},
        ),
        PackingTaskSpec(
            "2",
            "Pack the gelatin box and foam brick into the medium tray alongside the sugar box.",
            {S: "medium", G: "table", F: "table"},
            {G: "medium", F: "medium", S: "medium"},
        ),
        PackingTaskSpec(
            "3",
            "Remove the cracker box from the medium tray, then pack the sugar box and foam brick there; "
            "the gelatin box stays in the small tray.",
            {C: "medium", G: "small", S: "table", F: "table"},
            {S: "medium", F: "medium", G: "small"},
            clutter=(C,),
        ),
        PackingTaskSpec(
            "4",
            "Move the gelatin box and foam brick from the medium tray to the small tray, then pack the "
            "sugar box into the medium tray.",
            {G: "medium", F: "medium", S: "table"},
            {G: "small", F: "small", S: "medium"},
        ),
        PackingTaskSpec(
            "5",
            "Redistribute five objects from the large tray: cracker box stays in large; sugar box and "
            "soup can to medium; gelatin box and foam brick to small.",
            {C: "large", S: "large", P: "large", G: "large", F: "large"},
            {C: "large", S: "medium", P: "medium", G: "small", F: "small"},
        ),
        PackingTaskSpec(
            "6",
            "Move the soup can from small to medium, move the gelatin box and foam brick from medium to "
            "small, and pack the sugar box into medium.",
            {P: "small", G: "medium", F: "medium", S: "table"},
            {P: "medium", G: "small", F: "small", S: "medium"},
        ),
        PackingTaskSpec(
            "7",
            "Remove the soup can from the small tray so the gelatin box and foam brick fit.",
            {P: "small", G: "table", F: "table"},
            {G: "small", F: "small"},
            clutter=(P,),
        ),
        PackingTaskSpec(
            "8",
            "Reorganize: gelatin box and foam brick to small, sugar box and soup can to medium, cracker "
            "box to large.",
            {G: "large", F: "medium", S: "large", P: "small", C: "medium"},
            {G: "small", F: "small", S: "medium", P: "medium", C: "large"},
        ),
        PackingTaskSpec(
            "9",
            "Pack gelatin box and foam brick into medium; sugar box and tuna fish can into large.",
            {G: "table", F: "table", S: "table", T: "table"},
            {G: "medium", F: "medium", S: "large", T: "large"},
        ),
        PackingTaskSpec(
            "10",
            "Pack soup can into small (upright), sugar box into medium, cracker box and gelatin box "
            "into large.",
            {P: "table", S: "table", C: "table", G: "table"},
            {P: "small", S: "medium", C: "large", G: "large"},
            upright=(P,),
        ),
        PackingTaskSpec(
            "11",
            "Pack foam brick and sugar box into medium; soup can, tuna fish can, and gelatin box into large.",
            {F: "table", S: "table", P: "table", T: "table", G: "table"},
            {F: "medium", S: "medium", P: "large", T: "large", G: "large"},
        ),
        PackingTaskSpec(
            "12",
            "Pack gelatin box into small (upright), foam brick and sugar box into medium, soup can and "
            "cracker box into large.",
            {G: "table", F: "table", S: "table", P: "table", C: "table"},
            {G: "small", F: "medium", S: "medium", P: "large", C: "large"},
            upright=(G,),
        ),
    )
}


def _names(items: list[str]) -> str:
    items = [f"the {i}" for i in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def compose_goal(initial: dict[str, str], targets: dict[str, str], clutter: tuple[str, ...]) -> str:
    """Goal text for a generated goal: removals first, then moves and packs grouped by tray."""
    parts = []
    for tray in TRAYS:
        removed = [c for c in clutter if initial[c] == tray]
        if removed:
            parts.append(f"remove {_names(removed)} from the {tray} tray")
    for src in (*TRAYS, "table"):
        for dst in TRAYS:
            moved = [i for i, t in targets.items() if t == dst and initial[i] == src and src != dst]
            if not moved:
                continue
            parts.append(
                f"pack {_names(moved)} into the {dst} tray"
                if src == "table"
                else f"move {_names(moved)} from the {src} tray to the {dst} tray"
            )
    kept = [i for i, t in targets.items() if initial[i] == t]
    if kept:
        parts.append(f"keep {_names(kept)} where {'it is' if len(kept) == 1 else 'they are'}")
    text = ", then ".join(parts) if len(parts) <= 2 else "; ".join(parts[:-1]) + "; and " + parts[-1]
    return text[0].upper() + text[1:] + "."


@dataclass(frozen=True)
class GeneratedTaskSpec:
    """Training goals: random pack / remove / transfer mixes over 2-5 goal objects, sometimes clutter.

    ``sample(rng)`` draws the goal itself as well as the layout, so one name ("train") covers the
    whole training distribution; held-out goals (Table 6) are excluded by construction only in the
    sense that a draw equal to one of them is redrawn.
    """

    name: str = "train"
    clutter_prob: float = 0.3
    upright_prob: float = 0.2

    def sample(self, rng: np.random.Generator) -> PackingTaskInstance:
        held = {
            (tuple(sorted(s.initial.items())), tuple(sorted(s.targets.items()))) for s in HELD_OUT.values()
        }
        for _ in range(LAYOUT_TRIES):
            n = int(rng.integers(2, 6))
            chosen = [ITEMS[k] for k in rng.choice(len(ITEMS), size=n, replace=False)]
            initial = {i: ("table" if rng.random() < 0.5 else TRAYS[int(rng.integers(3))]) for i in chosen}
            targets = {i: TRAYS[int(rng.integers(3))] for i in chosen}
            if all(initial[i] == targets[i] for i in chosen):
                continue
            clutter: tuple[str, ...] = ()
            if rng.random() < self.clutter_prob:
                rest = [i for i in ITEMS if i not in chosen]
                c = rest[int(rng.integers(len(rest)))]
                initial[c] = TRAYS[int(rng.integers(3))]
                clutter = (c,)
            upright = (chosen[0],) if rng.random() < self.upright_prob else ()
            key = (tuple(sorted(initial.items())), tuple(sorted(targets.items())))
            if key in held or not _fits(targets):
                continue
            layout = sample_layout(initial, rng)
            if layout is None:
                continue
            goal = compose_goal(initial, targets, clutter)
            if upright:
                goal = goal[:-1] + f", keeping the {upright[0]} upright."
            return PackingTaskInstance(self.name, goal, initial, targets, clutter, upright, layout)
        raise RuntimeError("could not generate a training goal")

    def from_dict(self, data: dict) -> PackingTaskInstance:
        return PackingTaskInstance.from_dict(data)


def _fits(targets: dict[str, str]) -> bool:
    """Whether every tray can hold its assigned goal objects (checked by packing them corner-first)."""
    for tray in TRAYS:
        occupied = []
        for item in sorted(
            (i for i, t in targets.items() if t == tray), key=lambda i: -placement.half_extents(i, 0)[1]
        ):
            spot = placement.corner_spot(item, tray_rect(tray), occupied)
            if spot is None:
                return False
            occupied.append(placement.footprint(item, *spot))
    return True


TASKS: dict[str, PackingTaskSpec | GeneratedTaskSpec] = {**HELD_OUT, "train": GeneratedTaskSpec()}


def get_task(name: str):
    """A task by name: "1" .. "12" (held-out, Table 6; "task4" works too) or "train"."""
    key = str(name).lower().removeprefix("task").strip()
    if key not in TASKS:
        raise KeyError(f"unknown packing task {name!r}; known: {', '.join(TASKS)}")
    return TASKS[key]
