"""ZAP's data engine, second half: prefix-tree search for successes on goals the policy fails.

Every decision of an episode is a node: the snapshot taken at that turn and the turns before it (the
agent's context). ZAP replays a node's actions from the task's start; the packing env restores
snapshots exactly, so a node is resumed by restoring its snapshot and handing the earlier turns to
the decision loop (:func:`r3.episode_loop.run_loop` with ``earlier``), which rebuilds the history
and refusal count the policy had there.

Expanding a node asks one *proposer* for the answer at that turn instead of the policy (the expert,
or the policy itself sampled again), then lets the policy continue to the end of the episode: one
branch, one leaf. The branch's own turns become new nodes. The frontier is best-first: the node with
the highest dense reward (ERR's progress check, :func:`r3.rewards.turn.turn_progress`) and, among
equals, the fewest expansions and the deepest prefix first; a branch the safety guard aborted is
pruned (its nodes are not kept). The search stops at the first successful branch or after
``max_leaves`` branches (ZAP: about 1,000 per task).
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field

from r3.episode_loop import Decider, Trajectory, TrajectoryStep, run_loop
from r3.reasoning.backends.base import ReasonerBackend
from r3.rewards.turn import turn_progress

#: ZAP's leaves per task, at most.
MAX_LEAVES = 1000


class AtStep(ReasonerBackend):
    """The policy, except that the proposer answers at decision ``step``."""

    def __init__(self, policy: ReasonerBackend, proposer: ReasonerBackend, step: int):
        self.policy, self.proposer, self.step = policy, proposer, step
        self.model_id = policy.model_id

    def _at(self, inp) -> ReasonerBackend:
        return self.proposer if inp.step == self.step else self.policy

    def prompt_input(self, inp):
        return self._at(inp).prompt_input(inp)

    def _generate(self, *args):
        raise AssertionError("AtStep delegates whole decisions")

    def decide(self, inp, budget, on_text=None):
        return self._at(inp).decide(inp, budget, on_text)


@dataclass
class Branch:
    """One expansion: the node's depth, which proposer answered there, and how the episode ended."""

    step: int
    proposer: int
    success: bool
    progress: float
    aborted: str


@dataclass
class SearchResult:
    start: Trajectory  # the policy's own episode from the start state
    found: Trajectory | None  # the first successful branch (None: none within the budget)
    branches: list[Branch] = field(default_factory=list)

    @property
    def leaves(self) -> int:
        return len(self.branches)


def prefix_tree_search(
    task: str,
    seed: int,
    policy: ReasonerBackend,
    proposers: list[ReasonerBackend],
    *,
    cell=None,
    history: str = "instruction",
    max_steps: int | None = None,
    max_leaves: int = MAX_LEAVES,
) -> SearchResult:
    """Run ``policy`` on ``task`` from ``seed``; if it fails, branch from the prefixes of its episode
    (and of the branches after it) with each of ``proposers`` until a branch succeeds."""
    from r3.packing_episode import PackingCell, SemanticPackingSuite, run_packing_episode

    if not proposers:
        raise ValueError("prefix_tree_search needs at least one proposer")
    cell = cell or PackingCell.build()
    start = run_packing_episode(
        task,
        seed,
        policy,
        cell=cell,
        max_steps=max_steps,
        history=history,
        render=False,
        interface="semantic",
    )
    result = SearchResult(start, start if start.success else None)
    if start.success:
        return result
    order = itertools.count()
    frontier: list = []

    def push(steps: list[TrajectoryStep], first: int) -> None:
        for j in range(first, len(steps)):
            cell.restore(steps[j].snapshot)
            progress = turn_progress(cell.env.task_instance, cell.env.state())
            # heapq pops the smallest: highest progress, fewest expansions, deepest prefix first.
            heapq.heappush(frontier, (-progress, 0, -j, next(order), steps[:j], steps[j].snapshot))

    push(start.steps, 0)
    while frontier and result.leaves < max_leaves:
        neg_progress, expanded, neg_depth, _, prefix, snapshot = heapq.heappop(frontier)
        if expanded + 1 < len(proposers):
            heapq.heappush(frontier, (neg_progress, expanded + 1, neg_depth, next(order), prefix, snapshot))
        step = len(prefix)
        cell.restore(snapshot)
        suite = SemanticPackingSuite(cell, False, seed, 0, max_steps)
        decider = Decider(AtStep(policy, proposers[expanded], step), history=history)
        branch = run_loop(suite, decider, task, seed, suite.max_steps, earlier=prefix)
        result.branches.append(Branch(step, expanded, branch.success, branch.progress, branch.aborted))
        if branch.success:
            result.found = branch
            break
        if not branch.aborted:
            push(branch.steps, step + 1)
    return result
