"""Shared-memory segments Fast DDS left in /dev/shm when their process died without closing them.

Fast DDS's shared-memory transport keeps each participant's segment in a file under /dev/shm,
``fastdds_<id>``, with a companion ``fastdds_<id>_el`` on which the owning process holds an flock
for as long as it lives. A process that is killed (kill -9, a crash, a stop that had to end in
SIGKILL) never removes its segment; no other process reopens it (every participant draws a new id),
so it stays, with the memory written into it, until the machine reboots: a day of kill tests left
2,144 such files here, when r3's processes still took shared memory (16 MiB segments; since
2026-12-07 they take UDP only, ``config/fastdds.xml``, but other ROS processes on the machine do).
Fast DDS's own ``fastdds shm clean`` removes them, but the pip wheels do not ship it, so r3 sweeps
them itself before it starts a graph (``r3.graph.supervisor``) and ``r3 doctor`` counts them.

Only participant segments are swept. Port rings (``fastdds_port<N>``) are shared by every process
listening on that port and are reused: Fast DDS checks those for a dead owner itself.
"""

from __future__ import annotations

import fcntl
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

SHM_ROOT = Path("/dev/shm")
#: A lock file younger than this is left alone: its process may not hold the lock yet.
MIN_AGE_S = 10.0
_SEGMENT_LOCK = re.compile(r"fastdds_[0-9a-f]+_el")


@dataclass
class Sweep:
    """What :func:`sweep` removed: segment names and the memory their files held."""

    removed: list[str] = field(default_factory=list)
    bytes_freed: int = 0

    def __str__(self) -> str:
        return (
            f"removed {len(self.removed)} Fast DDS shared-memory segments left by processes that died "
            f"({self.bytes_freed / 2**20:.0f} MiB)"
        )


def _held(lock: Path) -> bool:
    """Some process holds ``lock`` (or it cannot be checked: then it counts as held)."""
    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def stale_segments(root: Path = SHM_ROOT, min_age_s: float = MIN_AGE_S) -> list[Path]:
    """The lock files of segments whose owner is gone: older than ``min_age_s`` and held by nobody."""
    now = time.time()
    stale = []
    for lock in sorted(root.glob("fastdds_*_el")):
        if not _SEGMENT_LOCK.fullmatch(lock.name):
            continue
        try:
            if now - lock.stat().st_mtime < min_age_s:
                continue
        except OSError:  # removed meanwhile
            continue
        if not _held(lock):
            stale.append(lock)
    return stale


def sweep(root: Path = SHM_ROOT, min_age_s: float = MIN_AGE_S) -> Sweep:
    """Remove every stale segment and its lock file; what could not be removed (another user's
    file, one removed meanwhile) is skipped."""
    result = Sweep()
    for lock in stale_segments(root, min_age_s):
        segment = lock.with_name(lock.name.removesuffix("_el"))
        for path in (segment, lock):
            try:
                size = path.stat().st_blocks * 512  # the memory it holds, not its sparse length
                path.unlink()
            except OSError:
                continue
            result.bytes_freed += size
        result.removed.append(segment.name)
    return result
