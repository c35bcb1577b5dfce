"""One worker pool for every fan-out in r3: local processes, or Ray actors given an address.

Each worker builds its own state once (``init(*initargs)``: a simulator, a judge, a reasoner
backend) and then runs ``fn(state, job)`` for the jobs it is handed; results come back in job
order (:meth:`WorkerPool.map`) or as they finish (:meth:`WorkerPool.imap_unordered`). Local
workers are *spawned*, never forked: the parent may hold MuJoCo GL contexts, torch threads or
rclpy, none of which survive a fork. ``workers <= 1`` runs everything in this process, with the
same code path, so a single-worker run is exactly what a worker does.

>>> with WorkerPool(1, dict) as pool:
...     pool.map(_echo, [1, 2, 3])
[(1, 1), (2, 2), (3, 3)]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Self

_STATE: Any = None


def _echo(state: dict, job):
    """A job function for the docstring and tests: remembers how often it saw each job."""
    state[job] = state.get(job, 0) + 1
    return job, state[job] * job


def _local_init(init: Callable, initargs: tuple) -> None:
    global _STATE
    _STATE = init(*initargs)


def _local_call(fn: Callable, job):
    return fn(_STATE, job)


def _with_index(state, item):
    """Runs ``fn(state, job)`` and returns the job's index with it (Ray's pool keeps no order)."""
    fn, index, job = item
    return index, fn(state, job)


class _Host:
    """A Ray actor's body: the worker state and the calls on it."""

    def __init__(self, init: Callable, initargs: tuple):
        self.state = init(*initargs)

    def call(self, fn: Callable, job):
        return fn(self.state, job)


class WorkerPool:
    """``workers`` copies of ``init(*initargs)``; jobs are ``fn(state, job)`` with top-level ``fn``.

    ``ray_address``: None for local processes, ``"local"`` for a private Ray instance, or the
    address of a running cluster (``ray.init(address=...)``).
    """

    def __init__(self, workers: int, init: Callable, initargs: tuple = (), ray_address: str | None = None):
        if not isinstance(workers, int) or workers < 0:
            raise ValueError(f"workers must be an integer >= 0, got {workers!r}")
        self.workers, self.init, self.initargs, self.ray_address = workers, init, initargs, ray_address
        self._state = None
        self._executor = None
        self._actors = None

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(cancel_futures=True)
            self._executor = None
        if self._actors is not None:
            import ray

            for actor in self._actors:
                ray.kill(actor)
            self._actors = None

    @property
    def parallel(self) -> bool:
        return self.workers > 1 or self.ray_address is not None

    def _local_state(self):
        if self._state is None:
            self._state = self.init(*self.initargs)
        return self._state

    def _start(self) -> None:
        if self.ray_address is not None and self._actors is None:
            import ray

            if not ray.is_initialized():
                local = self.ray_address == "local"
                ray.init(
                    address=None if local else self.ray_address,
                    num_cpus=max(1, self.workers) if local else None,
                    include_dashboard=False,
                    log_to_driver=False,
                )
            host = ray.remote(num_cpus=1)(_Host)
            self._actors = [host.remote(self.init, self.initargs) for _ in range(max(1, self.workers))]
        elif self.ray_address is None and self._executor is None:
            from concurrent.futures import ProcessPoolExecutor
            from multiprocessing import get_context

            self._executor = ProcessPoolExecutor(
                self.workers,
                mp_context=get_context("spawn"),
                initializer=_local_init,
                initargs=(self.init, self.initargs),
            )

    # -- work ------------------------------------------------------------------------------------
    def imap_unordered(self, fn: Callable, jobs: Iterable) -> Iterator[tuple[int, Any]]:
        """``(index, result)`` pairs as jobs finish; an exception in a job is raised here."""
        jobs = list(jobs)
        if not self.parallel or len(jobs) <= 1:
            state = self._local_state()
            for i, job in enumerate(jobs):
                yield i, fn(state, job)
            return
        self._start()
        if self._actors is not None:
            from ray.util import ActorPool

            items = [(fn, i, job) for i, job in enumerate(jobs)]
            yield from ActorPool(self._actors).map_unordered(
                lambda actor, item: actor.call.remote(_with_index, item), items
            )
            return
        from concurrent.futures import as_completed

        futures = {self._executor.submit(_local_call, fn, job): i for i, job in enumerate(jobs)}
        for future in as_completed(futures):
            yield futures[future], future.result()

    def map(self, fn: Callable, jobs: Iterable) -> list:
        """Results in job order."""
        jobs = list(jobs)
        out: list = [None] * len(jobs)
        for i, result in self.imap_unordered(fn, jobs):
            out[i] = result
        return out
