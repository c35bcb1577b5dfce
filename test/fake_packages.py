"""A user's installed package, made in a folder: what the ``r3.<kind>s`` entry-point tests install."""

from __future__ import annotations

from pathlib import Path


def fake_distribution(
    folder: Path, group: str, line: str, module: str = "", code: str = "", name: str = "fake_parts"
) -> None:
    """An installed distribution ``name`` in ``folder`` (put it on sys.path) with one entry point of
    ``group``, and its ``module`` written from ``code`` (none when the module lives elsewhere)."""
    dist = folder / f"{name}-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{group}]\n{line}\n")
    if module:
        (folder / f"{module}.py").write_text(code)
