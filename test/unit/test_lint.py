"""ruff finds nothing in the repository, with pyproject's settings (the 110-character line limit
included), and the formatter would change nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_ruff_check_finds_nothing():
    done = ruff("check", "--output-format", "concise")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr


def test_ruff_format_would_change_nothing():
    done = ruff("format", "--check")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr
