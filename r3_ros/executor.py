"""The executor every r3 node spins: rclpy's MultiThreadedExecutor without its busy loop.

rclpy's multi-threaded executor (before 10.0.4, ros2/rclpy#1452) yields again, on every wait, each
task that has been handed to its thread pool but not yet started, and hands it over again. While a
task waits for a worker, the spinning thread therefore resubmits it in a tight loop that holds the GIL,
which keeps the workers from starting it: on a loaded 2-core machine a whole node went deaf for 1-2 s
(r3_sim_node's 10 ms timer stopped, a pusher command waited past its deadline and was refused, the
instruction failed with "the simulator stopped publishing state"). Here a task is handed to the pool
once; while it waits for a worker, the spinning thread waits for it to start instead of spinning.

Callbacks in an :class:`InlineCallbackGroup` (short ones that only store a message, write it to a bag
or publish a heartbeat) run in the spinning thread itself, as rclpy's single-threaded executor runs
every callback: a hand-off to the pool costs a queue, a worker's wake-up and a GIL switch per message,
which on the lock-step loop (a state per 0.1 s control step) is more than the callback.

A future's done callbacks are tasks of the executor's next round in rclpy, and in a multi-threaded
executor each goes to the pool; :func:`at_once` marks those that run at once instead, in the thread
that completes the future: a waiting thread's wake-up (``r3_ros.services.Completion``) and rclpy's
sending of an action result that is ready. Each is one call that never blocks; the round and the
hand-off delayed every service answer and action result by 1-2 ms on each side.
"""

from __future__ import annotations

import concurrent.futures
import functools
import heapq
import threading
import time
from collections.abc import Callable, Iterable

from rclpy._rclpy_pybind11 import InvalidHandle
from rclpy.action.server import ActionServer
from rclpy.callback_groups import CallbackGroup, MutuallyExclusiveCallbackGroup
from rclpy.executors import (
    ConditionReachedException,
    ExternalShutdownException,
    MultiThreadedExecutor,
    ShutdownException,
    TimeoutException,
)
from rclpy.subscription import Subscription
from rclpy.task import Task

#: How long the spinning thread waits for a queued task to start before it looks at the graph again.
START_WAIT_S = 0.05
#: rclpy's done callback that sends an action's result once its goal has one (None where this
#: rclpy has no such method: its results then go through the executor, as rclpy sends them).
_SEND_RESULT = getattr(ActionServer, "_send_result_response", None)


def at_once(callback: Callable) -> Callable:
    """Marks a future's done callback that :class:`QueueAwareExecutor` runs when the future completes,
    in that thread: one call that never blocks."""
    callback.r3_at_once = True
    return callback


def runs_at_once(callback) -> bool:
    """Whether ``callback`` is a done callback :func:`at_once` marks, or rclpy's result sender."""
    if isinstance(callback, functools.partial):
        return _SEND_RESULT is not None and getattr(callback.func, "__func__", None) is _SEND_RESULT
    return getattr(callback, "r3_at_once", False)


def run_task(task: Task) -> None:
    """Run or resume ``task``. A failure because something it used was destroyed under it
    (``InvalidHandle``: its node torn down while it still ran in the pool; the executor's guard
    condition, which rclpy's ``shutdown()`` destroys before the pool has run the callbacks queued to
    it; the entity of an at-once done callback) is marked as seen: a spin that still runs raises it
    from the task as before, but a task nobody looks at again (the spin had ended) is dropped
    without rclpy printing "The following exception was never retrieved" when it is collected."""
    task()
    if isinstance(task._exception, InvalidHandle):  # rclpy offers no look that leaves it unseen
        task.exception()


class InlineCallbackGroup(MutuallyExclusiveCallbackGroup):
    """Callbacks that never block (no waits, no sleeps, no service calls): :class:`QueueAwareExecutor`
    runs them in its spinning thread, with no hand-off to its pool."""


class PolledCallbackGroup(CallbackGroup):
    """Subscriptions the node takes messages from itself, in batches (:func:`deliver_pending`),
    instead of an executor waking once per message. An executor leaves an entity out of its wait
    set while its group says it cannot run, and this group never says it can: a recorder that takes
    every message of a graph would otherwise wake hundreds of times per decision step, each wake-up
    costing a wait set rebuilt in Python."""

    def can_execute(self, entity) -> bool:
        return False

    def beginning_execution(self, entity) -> bool:
        return False

    def ending_execution(self, entity) -> None:
        pass


def deliver_pending(subscriptions: Iterable) -> None:
    """Runs each subscription's callback on every message queued for it now, as an executor would
    (``callback(message)``, or ``callback(message, info)`` where it takes the info): each topic's in
    the order DDS delivered them, the topics interleaved by reception time (a large message's
    reception stamp can be earlier than the one before it: its first fragment came first)."""
    queues = []
    for subscription in subscriptions:
        taken = []
        with subscription.handle:
            take = subscription.handle.take_message
            while (message_info := take(subscription.msg_type, subscription.raw)) is not None:
                taken.append((message_info[1]["received_timestamp"], subscription, message_info))
        queues.append(taken)
    for _, subscription, (message, info) in heapq.merge(*queues, key=lambda t: t[0]):
        if subscription._callback_type is Subscription.CallbackType.WithMessageInfo:
            subscription.callback(message, info)
        else:
            subscription.callback(message)


class QueueAwareExecutor(MultiThreadedExecutor):
    def __init__(self, num_threads: int | None = None, **kwargs):
        super().__init__(num_threads, **kwargs)
        self._queued: set = set()
        self._running: set[concurrent.futures.Future] = set()  # the pool's callbacks not yet returned
        self._started = threading.Condition()
        #: How many times a task went to the pool (regression figure: once per run of the task).
        self.submissions = 0
        #: How many callbacks ran in the spinning thread (InlineCallbackGroup).
        self.inline_runs = 0

    def create_task(self, callback, *args, **kwargs) -> Task:
        """A task of the next round, or one run now (:func:`at_once`)."""
        if not runs_at_once(callback):
            return super().create_task(callback, *args, **kwargs)
        task = Task(callback, args, kwargs, executor=self)
        run_task(task)
        return task

    def _run(self, task) -> None:
        with self._started:
            self._queued.discard(task)
            self._started.notify_all()
        run_task(task)

    def _returned(self, running: concurrent.futures.Future) -> None:
        with self._started:
            self._running.discard(running)

    def wind_down(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the callbacks running in the pool to return (after the spin
        ended: a goal or an episode winding down once the context shut down); whether they all did.
        The node must outlive them: one destroyed under them fails at its next call."""
        with self._started:
            running = set(self._running)
        _, not_done = concurrent.futures.wait(running, timeout=timeout_s)
        return not not_done

    def _spin_once_impl(self, timeout_sec=None, wait_condition=lambda: False) -> None:
        try:
            task, entity, _ = self.wait_for_ready_callbacks(timeout_sec, None, wait_condition)
        except (ExternalShutdownException, ShutdownException, TimeoutException, ConditionReachedException):
            return
        if isinstance(getattr(entity, "callback_group", None), InlineCallbackGroup):
            self.inline_runs += 1
            task()
            task.result()  # a callback's exception ends the spin, as in rclpy
            return
        with self._started:
            if task in self._queued:  # yielded again while it waits for a worker: wait, do not resubmit
                self._started.wait_for(lambda: task not in self._queued, timeout=START_WAIT_S)
                return
            self._queued.add(task)
        self.submissions += 1
        running = self._executor.submit(self._run, task)
        with self._started:
            self._running.add(running)
        running.add_done_callback(self._returned)
        if task not in self._futures:
            self._futures.append(task)
        for done in [f for f in self._futures if f.done()]:
            self._futures.remove(done)
            done.result()  # a callback's exception ends the spin, as in rclpy


def wake_source(entity) -> str:
    """What woke an executor, in words: a topic, a service, a timer's period, an action's kind."""
    if entity is None:
        return "a resumed task"
    for attribute in ("topic_name", "srv_name"):
        if name := getattr(entity, attribute, None):
            return name
    if (period := getattr(entity, "timer_period_ns", None)) is not None:
        return f"timer {period / 1e9:g} s"
    return type(entity).__name__


def count_wakes(executor, ledger) -> None:
    """Record each wake-up of ``executor`` in ``ledger`` (``r3.profiling.WakeLedger``): its source and
    the CPU time the wait took in the spinning thread (the wait set rebuilt, waited on and read; a
    blocked wait costs none)."""
    wait = executor.wait_for_ready_callbacks

    def counted(*args, **kwargs):
        started = time.thread_time()
        ready = wait(*args, **kwargs)
        ledger.record(wake_source(ready[1]), time.thread_time() - started)
        return ready

    executor.wait_for_ready_callbacks = counted
