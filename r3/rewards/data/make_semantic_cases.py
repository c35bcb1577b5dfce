"""Build the simulator cases of ``judge_cases.jsonl``: real board states, labelled from geometry.

Each scene starts from a layout sampled by ``LanguageTableEnv.reset(seed)``; two blocks are then
placed so that two differently worded instructions ask for the same end state (e.g. the blue
cube sits 0.14 m right of the red moon, so "push the red moon into the blue cube" and "move the
red moon right" both end with the moon about 0.10 m to the right). The other six blocks keep
their sampled poses; a layout is rejected when one of them lies in the way. The board settles for
two control steps and is saved with ``env.snapshot()`` as ``snapshots/<scene>.npz``.

Labels come from the rubric and the instruction meanings (distances of the default low-level
policy: a push "in a direction" goes 0.10 m, "slightly" 0.04 m, "beside" a block ends 0.065 m from
it), never from running the judge, so the agreement figures measure the judge. Every scene also
gets a pair that must not match (reverse roles, another block, another distance).

Run ``python r3/rewards/data/make_semantic_cases.py`` from the repository root: it rewrites the
``semantic/`` rows of the JSONL file and the snapshot folder, and keeps every other row.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from r3.sim.language_table.env import LanguageTableEnv
from r3.tasks.language_table.board import BLOCKS, DIRECTIONS, LOCATIONS, BoardState

HERE = Path(__file__).parent
CASES = HERE / "judge_cases.jsonl"
SNAPSHOTS = HERE / "snapshots"
#: Block centres stay this far inside the board edge.
BOUNDS = np.array([0.24, 0.15])
#: Unrelated blocks must keep this distance from the moved block's path and the placed blocks.
CLEARANCE = 0.09
#: Meanings of the instruction forms used below (metres).
DIRECTION_PUSH, SLIGHT_PUSH, SIDE_GAP, INTO_GAP, SEPARATE_GAP = 0.10, 0.04, 0.065, 0.04, 0.10
OPPOSITE = {"up": "down", "down": "up", "left": "right", "right": "left"}
SIDE_WORD = {"up": "top", "down": "bottom", "left": "left", "right": "right"}


def _segment_distance(a, b, p) -> float:
    ab = b - a
    t = float(np.clip(np.dot(p - a, ab) / max(np.dot(ab, ab), 1e-12), 0.0, 1.0))
    return float(np.linalg.norm(a + t * ab - p))


def _unit(d: str) -> np.ndarray:
    return np.array(DIRECTIONS[d])


def scene_into(rng, x, y, d):
    """Y sits DIRECTION_PUSH + INTO_GAP along d from X: "push X into Y" = "move X d"."""
    start = rng.uniform(-BOUNDS, BOUNDS)
    end = start + DIRECTION_PUSH * _unit(d)
    other = end + INTO_GAP * _unit(d)
    pairs = [
        (f"push the {x} into the {y}", f"move the {x} {d}", 0.25, "into_vs_direction"),
        (f"push the {y} into the {x}", f"push the {x} into the {y}", 0.0, "reverse_into"),
    ]
    return {x: start, y: other}, (start, end), pairs


def scene_location(rng, x, y, d):
    """X sits DIRECTION_PUSH before a named place: "move X to <place>" = "move X d"."""
    place = list(LOCATIONS)[rng.integers(len(LOCATIONS))]
    end = np.array(LOCATIONS[place])
    start = end - DIRECTION_PUSH * _unit(d)
    pairs = [
        (f"move the {x} to the {place}", f"move the {x} {d}", 0.25, "location_vs_direction"),
        (f"move the {x} {d} slightly", f"move the {x} to the {place}", 0.0, "slight_vs_full"),
    ]
    return {x: start}, (start, end), pairs


def scene_side(rng, x, y, d):
    """X ends beside Y after a push along d: "move X to the <side> side of Y" = "move X d"."""
    side = [s for s in OPPOSITE if s not in (d, OPPOSITE[d])][rng.integers(2)]
    other = rng.uniform(-BOUNDS, BOUNDS)
    end = other + SIDE_GAP * _unit(side)
    start = end - DIRECTION_PUSH * _unit(d)
    pairs = [
        (
            f"move the {x} to the {SIDE_WORD[side]} side of the {y}",
            f"move the {x} {d}",
            0.25,
            "side_vs_direction",
        ),
        (f"move the {y} {d}", f"move the {x} {d}", 0.0, "other_block"),
    ]
    return {x: start, y: other}, (start, end), pairs


def scene_separate(rng, x, y, d):
    """Y touches X on the side opposite d: "separate X from Y" = "move X d slightly"."""
    start = rng.uniform(-BOUNDS, BOUNDS)
    other = start - (SEPARATE_GAP - SLIGHT_PUSH) * _unit(d)
    end = start + SLIGHT_PUSH * _unit(d)
    pairs = [
        (f"separate the {x} from the {y}", f"move the {x} {d} a bit", 0.25, "separate_vs_direction"),
        (f"separate the {y} from the {x}", f"separate the {x} from the {y}", 0.0, "reverse_separate"),
    ]
    return {x: start, y: other}, (start, end), pairs


def scene_location_side(rng, x, y, d):
    """Y sits SIDE_GAP from a place: "move X to <place>" = "move X to the <side> side of Y"."""
    place = list(LOCATIONS)[rng.integers(len(LOCATIONS))]
    end = np.array(LOCATIONS[place])
    other = end - SIDE_GAP * _unit(d)
    side = d
    approach = [s for s in OPPOSITE if s not in (d, OPPOSITE[d])][rng.integers(2)]
    start = end - DIRECTION_PUSH * _unit(approach)
    pairs = [
        (
            f"move the {x} to the {place}",
            f"move the {x} to the {SIDE_WORD[side]} side of the {y}",
            0.25,
            "location_vs_side",
        ),
        (
            f"move the {x} to the {SIDE_WORD[OPPOSITE[side]]} side of the {y}",
            f"move the {x} to the {SIDE_WORD[side]} side of the {y}",
            0.0,
            "opposite_side",
        ),
    ]
    return {x: start, y: other}, (start, end), pairs


def scene_location_into(rng, x, y, d):
    """Y sits INTO_GAP past a place on X's path: "push X into Y" = "move X to <place>"."""
    place = list(LOCATIONS)[rng.integers(len(LOCATIONS))]
    end = np.array(LOCATIONS[place])
    start = end - DIRECTION_PUSH * _unit(d)
    other = end + INTO_GAP * _unit(d)
    pairs = [
        (f"push the {x} into the {y}", f"move the {x} to the {place}", 0.25, "location_vs_into"),
        (f"touch the {x}", f"move the {x} to the {place}", 0.0, "touch_moves_nothing"),
    ]
    return {x: start, y: other}, (start, end), pairs


def scene_slight_into(rng, x, y, d):
    """Y sits SLIGHT_PUSH + INTO_GAP along d: "push X into Y" = "move X d slightly"."""
    start = rng.uniform(-BOUNDS, BOUNDS)
    end = start + SLIGHT_PUSH * _unit(d)
    other = end + INTO_GAP * _unit(d)
    pairs = [
        (f"slide the {x} into the {y}", f"move the {x} slightly {d}", 0.25, "slight_into_vs_direction"),
        (f"move the {x} {d}", f"push the {x} into the {y}", 0.0, "full_push_into_near_block"),
    ]
    return {x: start, y: other}, (start, end), pairs


def scene_loose_into(rng, x, y, d):
    """Y a little farther than one push along d. Like the rubric's own example ("push the blue moon
    into the red cube" = "move the blue moon left" when the cube is to its left), a reader counts
    them as the same outcome although "d" stops about 0.05 m short: an ambiguous case on purpose.
    A diagonal push next to it does not match."""
    start = rng.uniform(-BOUNDS, BOUNDS)
    end = start + (DIRECTION_PUSH + 0.05) * _unit(d)
    other = end + INTO_GAP * _unit(d)
    diagonal = f"{d} and left" if d in ("up", "down") else f"up and {d}"
    pairs = [
        (f"push the {x} into the {y}", f"move the {x} {d}", 0.25, "loose_into_vs_direction"),
        (f"move the {x} {diagonal}", f"move the {x} {d}", 0.0, "diagonal_vs_straight"),
    ]
    return {x: start, y: other}, (start, end), pairs


FAMILIES = [
    (scene_into, list(DIRECTIONS)),
    (scene_location, list(DIRECTIONS)),
    (scene_side, list(OPPOSITE)),
    (scene_separate, list(OPPOSITE)),
    (scene_location_side, list(OPPOSITE)),
    (scene_location_into, list(OPPOSITE)),
    (scene_slight_into, list(OPPOSITE)),
    (scene_loose_into, list(OPPOSITE)),
]


def _fits(layout, placed, path, pusher) -> bool:
    """Placed blocks inside the board, and no unrelated block (or the pusher) in their way."""
    if any(np.any(np.abs(p) > BOUNDS) for p in placed.values()) or np.any(np.abs(path[1]) > BOUNDS):
        return False
    for name, (bx, by, _) in layout.items():
        if name in placed:
            continue
        p = np.array([bx, by])
        if (
            _segment_distance(*path, p) < CLEARANCE
            or min(np.linalg.norm(p - q) for q in placed.values()) < CLEARANCE
        ):
            return False
    return all(np.linalg.norm(np.array(pusher) - q) > CLEARANCE for q in placed.values())


def build(env: LanguageTableEnv, scenes_per_direction: int = 1, seed: int = 0) -> list[dict]:
    SNAPSHOTS.mkdir(exist_ok=True)
    rng = np.random.default_rng(seed)
    rows, scene = [], 0
    for family, directions in FAMILIES:
        for d in directions:
            for _ in range(scenes_per_direction):
                for attempt in range(500):
                    env.reset(seed=int(rng.integers(1 << 31)))
                    state = env.state()
                    x, y = (BLOCKS[i] for i in rng.choice(len(BLOCKS), 2, replace=False))
                    placed, path, pairs = family(rng, x, y, d)
                    if _fits(state.blocks, placed, path, state.pusher):
                        break
                else:
                    raise RuntimeError(f"no layout fits {family.__name__} {d}")
                blocks = dict(state.blocks)
                for name, p in placed.items():
                    blocks[name] = (float(p[0]), float(p[1]), blocks[name][2])
                env.set_state(BoardState(blocks, state.pusher))
                for _ in range(2):
                    env.step(np.zeros(2))
                name = f"snapshots/{scene:03d}_{family.__name__.removeprefix('scene_')}.npz"
                (HERE / name).write_bytes(env.snapshot())
                for cand, ref, score, kind in pairs:
                    rows.append(
                        {
                            "candidate": cand,
                            "reference": ref,
                            "human_score": score,
                            "suite": "language_table",
                            "category": f"semantic/{kind}",
                            "snapshot": name,
                        }
                    )
                scene += 1
    return rows


def main() -> None:
    keep = [
        line
        for line in CASES.read_text().splitlines()
        if line.strip() and not json.loads(line)["category"].startswith("semantic/")
    ]
    for old in SNAPSHOTS.glob("*.npz"):
        old.unlink()
    env = LanguageTableEnv(task=None, render_mode=None)
    rows = build(env)
    CASES.write_text("\n".join(keep + [json.dumps(r) for r in rows]) + "\n")
    print(
        f"{len(rows)} simulator cases over {len(list(SNAPSHOTS.glob('*.npz')))} scenes; "
        f"{len(keep)} other cases kept"
    )


if __name__ == "__main__":
    main()
