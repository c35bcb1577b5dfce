"""The toy suite's task and simulator: a marker at 0 must reach cell ``goal_cell``."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from r3.episode_loop import Execution
from r3.instructions.language_table import ParseError

from .grammar import parse

#: The image's width in cells (the marker is drawn in its cell, the goal cell marked below it).
CELLS = 8


@dataclass(frozen=True)
class ReachTask:
    """Reach cell ``goal_cell``; progress is the share of the way covered."""

    goal_cell: int

    @property
    def goal(self) -> str:
        return f"move the marker to cell {self.goal_cell}"

    note = ""

    def success(self, position: int) -> bool:
        return position == self.goal_cell

    def progress(self, position: int) -> float:
        return max(0.0, 1.0 - abs(self.goal_cell - position) / abs(self.goal_cell))

    def to_dict(self) -> dict:
        return {"goal_cell": self.goal_cell}


@dataclass(frozen=True)
class ReachSpec:
    """The task ``reach``: the goal cell is 2 or 3 cells right of the start, by seed."""

    def sample(self, seed: int) -> ReachTask:
        return ReachTask(2 + seed % 2)

    def from_dict(self, d: dict) -> ReachTask:
        return ReachTask(int(d["goal_cell"]))


TASKS = {"reach": ReachSpec()}


def get_task(name: str) -> ReachSpec:
    return TASKS[name]


class LineSim:
    """The number line as an ``r3.episode_loop.SuiteSim``: one cell per instruction."""

    def __init__(self):
        self.position, self.task_instance = 0, None

    def reset(self, task: str, seed: int) -> None:
        self.position, self.task_instance = 0, get_task(task).sample(seed)

    def state(self) -> int:
        return self.position

    def image(self) -> np.ndarray:
        image = np.zeros((8, 8 * CELLS, 3), np.uint8)
        if 0 <= self.position < CELLS:
            image[:4, 8 * self.position : 8 * self.position + 8] = 255
        image[6:, 8 * self.task_instance.goal_cell : 8 * self.task_instance.goal_cell + 8, 1] = 255
        return image

    def follow(self, instruction: str, max_steps: int, seed: int) -> Execution:
        move = parse(instruction)
        if isinstance(move, ParseError):
            return Execution(error=f"parse_error: {move.reason}")
        self.position += move
        return Execution(control_steps=1)

    def snapshot(self) -> bytes:
        return json.dumps({"position": self.position}).encode()
