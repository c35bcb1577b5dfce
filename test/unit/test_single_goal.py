"""The single-goal rule of r3's action servers (r3_ros.goals.SingleGoal), with fake goal handles:
a new goal preempts the running one unless the server refuses it, and goals take turns."""

from __future__ import annotations

import contextlib
import math
import threading
from types import SimpleNamespace

from r3_ros.goals import SingleGoal


class FakeHandle:
    def __init__(self, request):
        self.request, self.is_active, self.is_cancel_requested = request, True, False
        self.ended, self.executed = None, threading.Event()

    def execute(self):
        self.executed.set()

    def abort(self):
        self.is_active, self.ended = False, "aborted"

    def succeed(self):
        self.is_active, self.ended = False, "succeeded"


def single_goal():
    node = SimpleNamespace(get_logger=lambda: SimpleNamespace(info=lambda *_: None))
    return SingleGoal(node, refusal=lambda request: "" if request >= 0 else f"seed {request} < 0")


def test_a_goal_the_server_refuses_preempts_nothing_and_a_valid_one_does():
    goals = single_goal()
    running, refused, valid = FakeHandle(3), FakeHandle(-1), FakeHandle(4)
    goals.accept(running)
    goals.accept(refused)
    assert refused.executed.is_set() and running.is_active  # carried out (refused) beside it
    goals.accept(valid)
    assert valid.executed.is_set() and running.ended == "aborted" and valid.is_active


class Turns:
    """Goals carried out on threads, each inside ``SingleGoal.turn``; a held one keeps its turn
    until ``release`` is set. ``order`` lists (goal, had the turn) as each entered."""

    def __init__(self):
        self.goals, self.order = single_goal(), []
        self.started, self.release = threading.Event(), threading.Event()

    def _carry_out(self, handle, hold: bool) -> None:
        with self.goals.turn(handle) as has_turn:
            self.order.append((handle.request, has_turn))
            if hold:
                self.started.set()
                self.release.wait(10)

    def start(self, handle, hold: bool = False) -> threading.Thread:
        thread = threading.Thread(target=self._carry_out, args=(handle, hold))
        thread.start()
        if hold:
            assert self.started.wait(10)
        return thread


def test_a_preempting_goal_waits_for_the_turn_of_the_one_it_preempted():
    turns = Turns()
    first, second = FakeHandle(1), FakeHandle(2)
    turns.goals.accept(first)
    runner = turns.start(first, hold=True)
    turns.goals.accept(second)
    waiter = turns.start(second)
    waiter.join(0.2)
    assert waiter.is_alive() and turns.order == [(1, True)]  # the second waits while the first wraps up
    turns.release.set()
    runner.join(10)
    waiter.join(10)
    assert turns.order == [(1, True), (2, True)]


def test_a_goal_preempted_while_it_waits_for_its_turn_gives_it_up():
    turns = Turns()
    holder, waiting = FakeHandle(1), FakeHandle(2)
    runner = turns.start(holder, hold=True)
    waiter = turns.start(waiting)
    waiting.abort()  # a newer goal took over
    waiter.join(10)
    assert not waiter.is_alive() and turns.order == [(1, True), (2, False)]
    turns.release.set()
    runner.join(10)


def test_a_pose_goal_the_packing_arm_would_refuse_preempts_nothing():
    """Found by a hostile client: a MoveToPose goal with a NaN position (or one outside the
    workspace) sent while a packing instruction ran preempted it, and only then did the executor
    refuse it: bad input stopped good work. The packing simulator now refuses it on arrival with its
    executor's own target checks."""
    from r3.execution.sim import SimExecutor
    from r3.sim.packing.env import PackingEnv
    from r3_msgs.action import MoveToPose
    from r3_packing_sim_node.main import PackingSimNode

    arm = SimExecutor(PackingEnv(width=32, height=24))
    server = SimpleNamespace(base_frame="panda_link0", cell=SimpleNamespace(executor=arm))
    goals = single_goal()
    goals.refusal = lambda goal: PackingSimNode.goal_refusal(server, goal)

    def pose(x: float) -> FakeHandle:
        goal = MoveToPose.Goal(gripper_opening=math.nan)
        goal.target.pose.position.x, goal.target.pose.position.z = x, 0.4
        goal.target.pose.orientation.x, goal.target.pose.orientation.w = 1.0, 0.0  # pointing down
        return FakeHandle(goal)

    running = pose(0.45)
    goals.accept(running)
    for x in (math.nan, math.inf, 5.0):
        refused = pose(x)
        goals.accept(refused)
        assert refused.executed.is_set() and running.is_active, x  # carried out (refused) beside it
        assert goals.refusal(refused.request).startswith("refused: "), x
    valid = pose(0.5)
    goals.accept(valid)
    assert running.ended == "aborted" and valid.is_active


def test_a_packing_goal_stopped_before_it_begins_carries_out_nothing():
    """Found by a hostile client: a tools goal cancelled right after it was accepted still ran its
    call when that call moved no joint (``update_todo``, ``change_query``), so a cancelled goal changed
    the tools' state. The packing simulator now asks its goal's stop once before acting too."""
    from r3_packing_sim_node.main import PackingSimNode

    acted = []
    server = SimpleNamespace(
        goals=single_goal(),
        lock=threading.Lock(),
        freezes=SimpleNamespace(frozen_since=lambda started: 0.0, deadline_s=1.0),
        guard=SimpleNamespace(stop_reason=lambda handle, watch_client: "canceled"),
        get_fully_qualified_name=lambda: "/r3_packing_sim_node",
        publish_settled=lambda: "stamp",
        cell=SimpleNamespace(driven=lambda on_step, stop: contextlib.nullcontext()),
    )
    handle = FakeHandle(1)
    server.goals.accept(handle)
    done = PackingSimNode.drive(server, handle, True, lambda _: True, acted.append, "update_todo")
    assert done == (None, "canceled", "stamp") and acted == []
