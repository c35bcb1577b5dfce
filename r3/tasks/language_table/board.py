"""The Language Table board: blocks, board frame, named locations and the board state.

Board frame (metres), as seen in the top-down camera image:
    +x points to the right of the image, +y points to the top of the image
    ("up" = away from the camera, as in the R^3 prompts), origin at the board centre.
Every module of the suite (simulator, tasks, grammar, policy, expert) shares this frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: The eight blocks of the R^3 Language Table suite: (colour, shape).
BLOCKS: tuple[str, ...] = (
    "red moon",
    "red pentagon",
    "blue moon",
    "blue cube",
    "green cube",
    "green star",
    "yellow star",
    "yellow pentagon",
)
COLOURS: tuple[str, ...] = ("red", "blue", "green", "yellow")
SHAPES: tuple[str, ...] = ("moon", "pentagon", "cube", "star")

#: Half extents of the usable board area (x, y) in metres.
BOARD_HALF_EXTENTS: tuple[float, float] = (0.30, 0.20)
#: Approximate footprint of a block (circumscribed radius, metres).
BLOCK_RADIUS: float = 0.022
#: Radius of the cylindrical pusher (metres).
PUSHER_RADIUS: float = 0.012

#: Named absolute locations on the board -> (x, y) in the board frame.
#: Corners and edges sit inset from the border so that a block placed there stays on the board.
LOCATIONS: dict[str, tuple[float, float]] = {
    "top left corner": (-0.22, 0.13),
    "top center": (0.0, 0.13),
    "top right corner": (0.22, 0.13),
    "center left": (-0.22, 0.0),
    "center": (0.0, 0.0),
    "center right": (0.22, 0.0),
    "bottom left corner": (-0.22, -0.13),
    "bottom center": (0.0, -0.13),
    "bottom right corner": (0.22, -0.13),
}

#: Unit directions in the board frame; diagonals are normalised.
DIRECTIONS: dict[str, tuple[float, float]] = {
    "up": (0.0, 1.0),
    "down": (0.0, -1.0),
    "left": (-1.0, 0.0),
    "right": (1.0, 0.0),
    "up and left": (-0.70710678, 0.70710678),
    "up and right": (0.70710678, 0.70710678),
    "down and left": (-0.70710678, -0.70710678),
    "down and right": (0.70710678, -0.70710678),
}


#: Where the board's middle column and row end (metres from the centre, x and y): a block further
#: out is left/right of, or above/below, the middle. The expert's words and the grounding
#: pretraining's labels both read positions through :func:`board_region`.
MIDDLE_HALF_WIDTH: tuple[float, float] = (0.06, 0.05)


def board_region(xy) -> tuple[str | None, str | None]:
    """The board third a position lies in along each axis: ("top" | "bottom" | None, "left" |
    "right" | None), None for the middle."""
    x, y = float(xy[0]), float(xy[1])
    mx, my = MIDDLE_HALF_WIDTH
    return ("top" if y > my else "bottom" if y < -my else None), (
        "left" if x < -mx else "right" if x > mx else None
    )


def region_name(xy) -> str:
    """One of nine board regions in two words at most: "top left", "top", "left", "centre"."""
    return " ".join(w for w in board_region(xy) if w) or "centre"


@dataclass
class BoardState:
    """Privileged state of the board: where every block and the pusher are.

    ``blocks`` maps a block name of :data:`BLOCKS` to ``(x, y, yaw)`` in the board frame
    (metres, radians). ``pusher`` is the pusher's ``(x, y)``.
    """

    blocks: dict[str, tuple[float, float, float]]
    pusher: tuple[float, float]
    extra: dict = field(default_factory=dict)

    def xy(self, name: str) -> np.ndarray:
        """Position of one block as a length-2 array."""
        x, y, _ = self.blocks[name]
        return np.array([x, y], dtype=float)

    def positions(self, names=None) -> np.ndarray:
        """Positions of ``names`` (default: all blocks, in :data:`BLOCKS` order) as an (N, 2) array."""
        names = BLOCKS if names is None else names
        return np.array([self.blocks[n][:2] for n in names], dtype=float).reshape(-1, 2)

    def to_dict(self) -> dict:
        return {"blocks": {k: list(v) for k, v in self.blocks.items()}, "pusher": list(self.pusher)}

    @classmethod
    def from_dict(cls, data: dict) -> BoardState:
        return cls(
            blocks={k: tuple(float(c) for c in v) for k, v in data["blocks"].items()},
            pusher=tuple(float(c) for c in data["pusher"]),
        )
