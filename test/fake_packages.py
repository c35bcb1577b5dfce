"""A user's installed package, made in a folder: what the ``r3.<kind>s`` entry-point tests install."""

from __future__ import annotations

from pathlib import Path


def fake_distribution(folder: Path, group: str, line: str, module: str, code: str) -> None:
    """An installed distribution in ``folder`` (put it on sys.path) with one entry point of ``group``."""
    dist = folder / "fake_parts-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-parts\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{group}]\n{line}\n")
    (folder / f"{module}.py").write_text(code)
