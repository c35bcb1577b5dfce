"""`--overwrite` stopped at any moment while the new output goes in leaves the earlier output or the new
one, whole: never a folder with the mark and some of each. Found by reading :func:`replaced_output`
for the crash sweep: it removed the earlier entries one by one and then moved the new ones in one by
one, so Ctrl-C (or a kill) in between left a marked dataset without its rows or images, and the new
one was deleted with its staging folder."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from r3.files import OUTPUT_MARK, replaced_output

WRITES = ("data", "images", "r3_dataset.json")


def _contents(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def _write(folder: Path, version: str) -> None:
    for name in ("data/rows.parquet", "images/0.png", "images/1.png", "r3_dataset.json"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(f"{version} {name}")


def _overwrite_stopped_at(out: Path, stop_at: int, monkeypatch) -> tuple[dict, dict, int]:
    """An earlier output at ``out``, then an --overwrite stopped by Ctrl-C at its ``stop_at``-th file
    operation: the earlier and the new contents, and how many file operations it made."""
    with replaced_output(out, WRITES, overwrite=False, what="dataset") as staging:
        _write(staging, "old")
    old = _contents(out)
    calls = 0

    def stopped(real):
        def call(*args, **kwargs):
            nonlocal calls
            calls += 1
            if calls == stop_at:
                raise KeyboardInterrupt  # Ctrl-C at this file operation
            return real(*args, **kwargs)

        return call

    try:
        with replaced_output(out, WRITES, overwrite=True, what="dataset") as staging:
            _write(staging, "new")
            new = {**_contents(staging), OUTPUT_MARK: old[OUTPUT_MARK]}
            for owner, name in ((shutil, "rmtree"), (os, "rename"), (os, "replace"), (os, "unlink")):
                monkeypatch.setattr(owner, name, stopped(getattr(owner, name)))
            for name in ("rename", "replace", "unlink", "rmdir"):
                monkeypatch.setattr(Path, name, stopped(getattr(Path, name)))
    except KeyboardInterrupt:
        pass
    monkeypatch.undo()
    return old, new, calls


def test_an_overwrite_stopped_at_any_file_operation_keeps_one_whole_output(tmp_path, monkeypatch):
    """Stopped at each file operation of the move-in in turn, up to one past the last (not stopped)."""
    stop_at = 0
    while True:
        stop_at += 1
        out = tmp_path / str(stop_at) / "ds"
        old, new, calls = _overwrite_stopped_at(out, stop_at, monkeypatch)
        assert _contents(out) in (old, new), f"stopped at file operation {stop_at}"
        if calls < stop_at:  # ran to its end
            assert _contents(out) == new
            break
    assert stop_at > 1


def test_an_overwrite_where_no_swap_in_one_step_is_had_moves_in_the_new_output(tmp_path, monkeypatch):
    """A filesystem without renameat2's exchange (NFS) takes the two renames instead; the output
    folder keeps the permissions a folder made there gets, not the private ones of its staging."""
    import r3.files

    out = tmp_path / "ds"
    with replaced_output(out, WRITES, overwrite=False, what="dataset") as staging:
        _write(staging, "old")
    mode = out.stat().st_mode
    monkeypatch.setattr(r3.files, "_RENAME_EXCHANGE", 1 << 30)  # a flag no kernel knows: EINVAL
    with replaced_output(out, WRITES, overwrite=True, what="dataset") as staging:
        _write(staging, "new")
    assert {name: text.split()[0] for name, text in _contents(out).items() if name != OUTPUT_MARK} == {
        name: "new" for name in ("data/rows.parquet", "images/0.png", "images/1.png", "r3_dataset.json")
    }
    assert out.stat().st_mode == mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]
