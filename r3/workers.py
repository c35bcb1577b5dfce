"""One worker pool for every fan-out in r3: local processes, or Ray actors given an address.

Each worker builds its own state once (``init(*initargs)``: a simulator, a judge, a reasoner
backend) and then runs ``fn(state, job)`` for the jobs it is handed; results come back in job
order (:meth:`WorkerPool.map`) or as they finish (:meth:`WorkerPool.imap_unordered`). Local
workers are *spawned*, never forked: the parent may hold MuJoCo GL contexts, torch threads or
rclpy, none of which survive a fork. ``workers <= 1`` runs everything in this process, with the
same code path, so a single-worker run is exactly what a worker does. No more workers start than
jobs were handed at once, and closing the pool closes each worker's state (its ``close()``, when
it has one: a reasoner backend holds a model or a server).

>>> with WorkerPool(1, dict) as pool:
...     pool.map(_echo, [1, 2, 3])
[(1, 1), (2, 2), (3, 3)]
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Self

from r3.files import bounded_repr

_STATE: Any = None
#: Local worker processes at most, per CPU: each holds a whole simulator (and maybe a model), and
#: beyond this they only take turns on the CPUs; a Ray cluster (``ray_address``) brings its own.
LOCAL_WORKERS_PER_CPU = 4


#: What ``ray_address`` may be: a private instance, the running cluster, or a cluster's address.
RAY_ADDRESS = re.compile(r"local|auto|(ray://)?[A-Za-z0-9.-]+:[0-9]{1,5}")


def check_ray_address(ray_address: str | None) -> None:
    """A ValueError unless ``ray_address`` is None or one :data:`RAY_ADDRESS` allows."""
    if ray_address is not None and not (isinstance(ray_address, str) and RAY_ADDRESS.fullmatch(ray_address)):
        raise ValueError(
            f"Ray address {bounded_repr(ray_address, 80)}: expected local, auto, HOST:PORT or ray://HOST:PORT"
        )


def check_workers(workers, ray_address: str | None = None) -> int:
    """``workers`` if a pool may start that many, where ``ray_address`` says; a ValueError saying why
    not."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise ValueError(f"workers must be an integer >= 0, got {workers!r}")
    check_ray_address(ray_address)
    cpus = os.cpu_count() or 1
    if ray_address is None and workers > LOCAL_WORKERS_PER_CPU * cpus:
        raise ValueError(
            f"{workers} local worker processes on {cpus} CPUs: at most {LOCAL_WORKERS_PER_CPU * cpus} "
            "(a Ray cluster runs more)"
        )
    return workers


def _echo(state: dict, job):
    """A job function for the docstring and tests: remembers how often it saw each job."""
    state[job] = state.get(job, 0) + 1
    return job, state[job] * job


def _close_state(state) -> None:
    close = getattr(state, "close", None)
    if close is not None:
        close()


_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In a child process: the kernel sends it SIGTERM when its parent dies (a killed command left
    its pool's workers, or a graph's nodes, running for good). Linux's rule: the parent is the
    thread that started the child, so a pool's workers are started from the thread that lives on."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _local_init(parent: int, init: Callable, initargs: tuple) -> None:
    from multiprocessing.util import Finalize

    die_with_parent()
    if os.getppid() != parent:  # the parent died before the line above: no signal will come
        os._exit(1)
    global _STATE
    _STATE = init(*initargs)
    Finalize(None, _close_state, (_STATE,), exitpriority=10)  # when the pool shuts this worker down


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

    def close(self) -> None:
        _close_state(self.state)


class WorkerPool:
    """``workers`` copies of ``init(*initargs)``; jobs are ``fn(state, job)`` with top-level ``fn``.

    ``ray_address``: None for local processes, ``"local"`` for a private Ray instance of
    ``workers`` CPUs, or a running cluster (``"auto"``, ``HOST:PORT``, ``ray://HOST:10001``), each
    actor one CPU. A Ray instance the pool started is shut down when it closes; one already running
    is left as it was. Ray actors get this process's ``MUJOCO_GL`` (a cluster node's own
    environment may lack it), as spawned processes do by inheritance.
    """

    def __init__(self, workers: int, init: Callable, initargs: tuple = (), ray_address: str | None = None):
        check_workers(workers, ray_address)
        self.workers, self.init, self.initargs, self.ray_address = workers, init, initargs, ray_address
        self._state = None
        self._executor = None
        self._actors: list | None = None
        self._started_ray = False

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(cancel_futures=True)
            self._executor = None
        if self._state is not None:
            _close_state(self._state)
            self._state = None
        if self._actors is not None:
            import ray

            try:
                ray.get([actor.close.remote() for actor in self._actors])
            finally:
                for actor in self._actors:
                    ray.kill(actor)
                self._actors = None
        if self._started_ray:
            import ray

            ray.shutdown()
            self._started_ray = False

    @property
    def parallel(self) -> bool:
        return self.workers > 1 or self.ray_address is not None

    def _local_state(self):
        if self._state is None:
            self._state = self.init(*self.initargs)
        return self._state

    def _start(self, jobs: int) -> None:
        """Start the workers ``jobs`` jobs need: up to ``workers``, never more than ``jobs``."""
        if self.ray_address is not None:
            import ray

            if not ray.is_initialized():
                ray.init(
                    address=self.ray_address,
                    num_cpus=max(1, self.workers) if self.ray_address == "local" else None,
                    include_dashboard=False,
                    log_to_driver=False,
                )
                self._started_ray = True
            host = ray.remote(num_cpus=1)(_Host).options(
                runtime_env={"env_vars": {"MUJOCO_GL": os.environ.get("MUJOCO_GL", "osmesa")}}
            )
            self._actors = self._actors or []
            while len(self._actors) < min(max(1, self.workers), jobs):
                self._actors.append(host.remote(self.init, self.initargs))
        elif self.ray_address is None and self._executor is None:
            from concurrent.futures import ProcessPoolExecutor  # spawns a process per job, up to workers
            from multiprocessing import get_context

            self._executor = ProcessPoolExecutor(
                self.workers,
                mp_context=get_context("spawn"),
                initializer=_local_init,
                initargs=(os.getpid(), self.init, self.initargs),
            )

    # -- work ------------------------------------------------------------------------------------
    def imap_unordered(self, fn: Callable, jobs: Iterable) -> Iterator[tuple[int, Any]]:
        """``(index, result)`` pairs as jobs finish; an exception in a job is raised here."""
        jobs = list(jobs)
        if not jobs:
            return
        if not self.parallel or len(jobs) == 1:
            state = self._local_state()
            for i, job in enumerate(jobs):
                yield i, fn(state, job)
            return
        self._start(len(jobs))
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
