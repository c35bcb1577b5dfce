"""The toy suite's task, env and loop adapter: a marker at 0 must reach cell ``goal_cell``."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from r3.episode_loop import Execution, StepDecision, StepView

from . import SUITE


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


class LineEnv:
    """The number line: ``state()`` is the marker's cell, ``step(+1 or -1)`` moves it."""

    def __init__(self, **_):
        self.position, self.task_instance = 0, None

    def reset(self, *, seed: int, options: dict) -> None:
        self.position, self.task_instance = 0, get_task(options["task"]).sample(seed)

    def state(self) -> int:
        return self.position

    def step(self, move: int) -> None:
        self.position += move

    def snapshot(self) -> bytes:
        return json.dumps({"position": self.position}).encode()


@dataclass
class LineSuite:
    """The number line's part of :func:`r3.episode_loop.run_loop`: one tiny image, one cell a step."""

    env: LineEnv
    render: bool = False

    def view(self, step: int) -> StepView:
        instance = self.env.task_instance
        return StepView(SUITE.name, instance.goal, [np.zeros((4, 4, 3), np.uint8)], instance.note, None, 0)

    def snapshot(self) -> bytes:
        return self.env.snapshot()

    def execute(self, decision: StepDecision, step: int) -> Execution:
        self.env.step(decision.decision.parsed.instruction)
        return Execution(control_steps=1)

    def progress(self) -> float:
        return self.env.task_instance.progress(self.env.state())

    def final_image(self) -> None:
        return None
