"""ROS domain ids held by one process at a time, so test runs on one host never share a domain.

A domain is claimed by an exclusive ``flock`` on ``<tmp>/r3-ros-domains/<id>.lock``: the claim lasts
as long as the open file (the pytest process's life, or one test's), the kernel drops it when its
holder dies, and child processes join the domain through ``ROS_DOMAIN_ID``. Every test that needs a
domain besides its session's claims one here instead of adding an offset to the session's id.

A released domain rests for ``REST_S`` before it is claimed again: the DDS participant of a process
that was killed (SIGKILL, as the fault tests do) stays in the other participants' discovery until its
lease expires (Fast DDS: 20 s), so the next test in a just-released domain would still see the last
test's action servers (``r3 eval --via-ros`` refuses to start its graph next to one).
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from pathlib import Path

#: Domain ids tests may claim: 0 is every shell's default, and Fast DDS's ports for ids above 101
#: fall in Linux's ephemeral port range.
DOMAIN_IDS = range(1, 102)
LOCK_DIR = Path(tempfile.gettempdir()) / "r3-ros-domains"
#: Seconds a released domain rests: longer than a dead participant's DDS lease (20 s).
REST_S = 30.0


class DomainClaim:
    """One ROS domain id held by this process until :meth:`release` (or the process's exit)."""

    def __init__(self, ids: range = DOMAIN_IDS, lock_dir: Path = LOCK_DIR):
        """``lock_dir``: another folder of locks only for testing the claims themselves."""
        lock_dir.mkdir(exist_ok=True)
        start = os.getpid()  # different processes start their search at different ids
        for i in range(len(ids)):
            domain = ids[(start + i) % len(ids)]
            lock = open(lock_dir / f"{domain}.lock", "a+")  # noqa: SIM115 - held open while the claim lasts
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.close()
                continue
            lock.seek(0)
            released = lock.read().strip()
            if released and time.time() - float(released) < REST_S:
                lock.close()  # released moments ago: its last holder's participants may linger
                continue
            self.domain, self._lock = domain, lock
            return
        raise RuntimeError(
            f"every ROS domain id in {ids} is held by another process or rests after a release ({lock_dir})"
        )

    def release(self) -> None:
        """End the claim, noting the time, so that the domain rests before its next claim."""
        self._lock.seek(0)
        self._lock.truncate()
        self._lock.write(f"{time.time():.3f}\n")
        self._lock.close()


#: Domains this process's own nodes joined: never released while it runs, since a process's DDS
#: participant outlives ``rclpy.shutdown()`` and keeps announcing its servers (an in-process
#: reasoner's RunTask server looked like a running graph to a later test's ``r3 eval --via-ros``).
HELD_BY_THIS_PROCESS: list[DomainClaim] = []


def claim_for_this_process() -> int:
    """A domain for nodes of this very process, held until the process exits."""
    HELD_BY_THIS_PROCESS.append(DomainClaim())
    return HELD_BY_THIS_PROCESS[-1].domain
