"""The one worker pool: same results in process and on spawned workers, per-worker state, errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from r3.workers import WorkerPool, _echo


def _fail_on_three(state, job):
    if job == 3:
        raise ValueError("job 3 is bad")
    return job


def test_results_come_back_in_job_order_in_process_and_on_workers():
    jobs = list(range(10))
    with WorkerPool(1, dict) as local, WorkerPool(2, dict) as spawned:
        assert [r[0] for r in local.map(_echo, jobs)] == jobs
        assert [r[0] for r in spawned.map(_echo, jobs)] == jobs


def test_each_worker_keeps_its_own_state_across_jobs():
    # _echo counts how often its worker saw a job: the same job twice in a row on one in-process
    # worker is seen twice by the same state.
    with WorkerPool(0, dict) as pool:
        assert pool.map(_echo, [5, 5, 5]) == [(5, 5), (5, 10), (5, 15)]


def test_a_failing_job_raises_in_the_caller():
    with WorkerPool(2, dict) as pool, pytest.raises(ValueError, match="job 3 is bad"):
        pool.map(_fail_on_three, [1, 2, 3, 4])


@pytest.mark.parametrize("workers", [-1, 1.5, "2"])
def test_bad_worker_counts_are_refused(workers):
    with pytest.raises(ValueError, match="workers must be an integer"):
        WorkerPool(workers, dict)


class _Recorder:
    """A worker state that marks its process in ``folder`` when built (``init-PID``) and closed
    (``close-PID``)."""

    def __init__(self, folder):
        self.folder = folder
        (folder / f"init-{os.getpid()}").touch()

    def close(self):
        (self.folder / f"close-{os.getpid()}").touch()


def _pid(state, job):
    return os.getpid()


def _env(state, name):
    return os.environ.get(name)


def _marks(folder, kind):
    return {int(p.name.split("-")[1]) for p in folder.glob(f"{kind}-*")}


def test_no_jobs_build_no_worker(tmp_path):
    with WorkerPool(1, _Recorder, (tmp_path,)) as pool:
        assert pool.map(_pid, []) == []
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("workers", [1, 2])
def test_closing_the_pool_closes_every_worker_state(tmp_path, workers):
    with WorkerPool(workers, _Recorder, (tmp_path,)) as pool:
        pids = set(pool.map(_pid, range(6)))
    assert _marks(tmp_path, "init") == _marks(tmp_path, "close") >= pids  # a worker may start late, idle


def test_no_more_workers_start_than_jobs(tmp_path):
    with WorkerPool(4, _Recorder, (tmp_path,)) as pool:
        pool.map(_pid, [1, 2])
    assert 1 <= len(_marks(tmp_path, "init")) <= 2


def _die_unless_in(state, parent):
    """A job that kills a spawned worker: os._exit, as a crash or the OOM killer would."""
    if os.getpid() != parent:
        os._exit(3)
    return parent


#: A pool whose spawned workers die in their first job: the map must raise, not wait for good.
DYING_WORKER = """
import os, sys
from concurrent.futures.process import BrokenProcessPool
sys.path.insert(0, {here!r})
from test_workers import _die_unless_in
from r3.workers import WorkerPool
with WorkerPool(2, dict) as pool:
    try:
        pool.map(_die_unless_in, [os.getpid()] * 20)
    except BrokenProcessPool as exc:
        print("broken:", exc)
"""


def test_a_worker_that_dies_fails_the_map_and_holds_up_nothing():
    code = DYING_WORKER.format(here=os.path.dirname(__file__))
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "broken: A process in the process pool was terminated abruptly" in run.stdout, (
        run.stdout + run.stderr
    )


def _sleep(state, seconds):
    time.sleep(seconds)


#: A command's pool, its jobs running for a minute: the test kills this process.
POOL_OWNER = """
import sys
from pathlib import Path
sys.path.insert(0, {here!r})
from test_workers import _Recorder, _sleep
from r3.workers import WorkerPool
with WorkerPool(2, _Recorder, (Path({folder!r}),)) as pool:
    pool.map(_sleep, [60, 60])
"""


def test_the_workers_of_a_killed_process_exit(tmp_path):
    """Found by a hostile user: `r3 collect --workers 2` or `r3 eval --workers 2` killed with SIGKILL
    (a caller's timeout) left both spawned workers running, blocked, for good."""
    code = POOL_OWNER.format(here=os.path.dirname(__file__), folder=str(tmp_path))
    owner = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 60
        while len(_marks(tmp_path, "init")) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        workers = _marks(tmp_path, "init")
        assert len(workers) == 2, "the pool's workers did not start"
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in workers if _alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == []


def _alive(pid: int) -> bool:
    """``pid`` runs (not a zombie left for its new parent to reap)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def ray(monkeypatch):
    """Ray, with this test module importable by its workers (they pickle its functions by name)."""
    ray = pytest.importorskip("ray", reason="needs the ray package for the Ray path")
    here = os.path.dirname(__file__)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    yield ray
    ray.shutdown()


def test_a_private_ray_instance_runs_the_jobs_and_is_shut_down_at_close(ray, tmp_path, monkeypatch):
    # "local" is a new instance even where RAY_ADDRESS names a cluster (here one that is not there).
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    with WorkerPool(2, _Recorder, (tmp_path,), ray_address="local") as pool:
        assert pool.map(_fail_on_three, [5, 4, 2, 1]) == [5, 4, 2, 1]  # in job order
        pids = set(pool.map(_pid, range(5)))
        assert ray.is_initialized() and len(pool._actors) == 2
        with pytest.raises(ValueError, match="job 3 is bad"):
            pool.map(_fail_on_three, [1, 2, 3, 4])
    assert not ray.is_initialized()
    assert _marks(tmp_path, "init") == _marks(tmp_path, "close") == pids and len(pids) == 2


def test_ray_actors_get_this_process_mujoco_gl_and_a_running_ray_is_left_running(ray, monkeypatch):
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    monkeypatch.setenv("MUJOCO_GL", "r3-test-gl")  # after the workers' raylet started without it
    with WorkerPool(4, dict, ray_address="auto") as pool:
        assert pool.map(_env, ["MUJOCO_GL", "MUJOCO_GL"]) == ["r3-test-gl", "r3-test-gl"]
        assert len(pool._actors) == 2  # two jobs: two actors of the four allowed
    assert ray.is_initialized()
