"""The one worker pool: same results in process and on spawned workers, per-worker state, errors."""

from __future__ import annotations

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
