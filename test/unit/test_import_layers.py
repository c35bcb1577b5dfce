"""r3's import layers hold: `lint-imports` keeps pyproject's contracts (r3's packages import only the
layers below them, so no package cycle; r3 never imports rclpy, r3_ros or a node package), and it
breaks them when a package imports upwards or the core imports rclpy. The README shows the same layers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
NODE_PACKAGES = sorted(p.parent.name for p in ROOT.glob("r3_*_node/__init__.py"))


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """`lint-imports` on the tree at ``root`` (its own packages first on the path, no cache written)."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())",
            "--no-cache",
        ],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_import_contracts_are_kept():
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr
    assert "2 kept, 0 broken" in done.stdout


def test_every_node_package_is_forbidden_to_the_core():
    (forbidden,) = (c for c in CONTRACTS["contracts"] if c["type"] == "forbidden")
    assert NODE_PACKAGES and set(NODE_PACKAGES) <= set(forbidden["forbidden_modules"])
    assert {"rclpy", "r3_ros"} <= set(forbidden["forbidden_modules"])
    assert set(NODE_PACKAGES) <= set(CONTRACTS["root_packages"])


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # tasks is below episode: this import would close a cycle through the episode loop.
        ("r3/tasks/__init__.py", "import r3.episode", "r3.tasks is not allowed to import r3.episode"),
        # a lazy import counts as much as a module-level one
        ("r3/perception/camera.py", "def f():\n    import r3.sim.offscreen", "r3.perception is not allowed"),
        ("r3/seeds.py", "import rclpy", "r3 is not allowed to import rclpy"),
        ("r3/graph/names.py", "from r3_ros import qos", "r3 is not allowed to import r3_ros"),
    ],
)
def test_an_upward_or_ros_import_breaks_a_contract(tmp_path, module, line, broken):
    tree = tmp_path / "tree"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("r3", "r3_ros", *NODE_PACKAGES):
        shutil.copytree(ROOT / package, tree / package, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", tree)
    assert lint_imports(tree).returncode == 0  # the copy itself keeps the contracts
    with open(tree / module, "a") as f:
        f.write(f"\n{line}\n")
    done = lint_imports(tree)
    assert done.returncode != 0
    assert broken in done.stdout, done.stdout[-6000:]


def test_the_readme_shows_the_contracts_layers():
    readme = (ROOT / "README.md").read_text()
    block = readme.split("Imports go one way.", 1)[1].split("```\n", 2)[1]
    (layers,) = (c["layers"] for c in CONTRACTS["contracts"] if c["type"] == "layers")
    assert block.splitlines() == layers
