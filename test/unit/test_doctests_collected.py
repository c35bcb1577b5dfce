"""Every module of r3/ and r3_ros/ with a doctest example has its doctests collected by pytest (no
import error at collection, e.g. from a heavy optional dependency imported at module level)."""

from __future__ import annotations

import doctest
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_pytest_collects_the_doctests_of_every_module_that_has_them():
    with_examples = {
        str(f.relative_to(ROOT))
        for package in ("r3", "r3_ros")
        for f in (ROOT / package).rglob("*.py")
        if doctest.DocTestParser().get_examples(f.read_text())
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "r3", "r3_ros"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr
    collected = {line.split("::")[0] for line in done.stdout.splitlines() if "::" in line}
    assert collected == with_examples
