"""r3.graph.shared_memory: the Fast DDS segments of dead processes are removed, nothing else is."""

from __future__ import annotations

import fcntl
import os
import time

from r3.graph.shared_memory import stale_segments, sweep

OLD = time.time() - 3600


def segment(root, name: str, size: int = 4096, age_s: float = 3600.0):
    """A segment file with ``size`` bytes written and its lock file, both ``age_s`` old."""
    (root / name).write_bytes(b"\1" * size)
    (root / f"{name}_el").write_bytes(b"")
    for path in (root / name, root / f"{name}_el"):
        os.utime(path, (time.time() - age_s, time.time() - age_s))


def test_a_segment_nobody_holds_is_removed_with_its_lock_file(tmp_path):
    segment(tmp_path, "fastdds_0123abcd", size=8192)
    swept = sweep(tmp_path)
    assert swept.removed == ["fastdds_0123abcd"]
    assert swept.bytes_freed >= 8192
    assert list(tmp_path.iterdir()) == []
    assert "removed 1 Fast DDS shared-memory segments" in str(swept)


def test_held_young_and_port_files_are_left_alone(tmp_path):
    segment(tmp_path, "fastdds_00000001")  # held below: its process lives
    segment(tmp_path, "fastdds_00000002", age_s=1.0)  # just made: its owner may not hold it yet
    segment(tmp_path, "fastdds_port7411")  # a port ring: Fast DDS checks those itself
    (tmp_path / "sem.fastdds_port7411_mutex").write_bytes(b"")
    (tmp_path / "other_el").write_bytes(b"")
    os.utime(tmp_path / "other_el", (OLD, OLD))
    before = sorted(p.name for p in tmp_path.iterdir())
    fd = os.open(tmp_path / "fastdds_00000001_el", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert stale_segments(tmp_path) == []
        assert sweep(tmp_path).removed == []
    finally:
        os.close(fd)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    # Once its process is gone (its lock released), the held one goes.
    assert sweep(tmp_path).removed == ["fastdds_00000001"]
