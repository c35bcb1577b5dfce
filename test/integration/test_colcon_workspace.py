"""The README's colcon workspace, built exactly as the README says, in a temporary folder.

The repository is copied to ``WS/src/r3`` and the README's build block (the ``bash`` block after the
``colcon-workspace`` marker) runs line by line in one bash shell in ``WS``. The pip ROS wheels stand
in for ``source /opt/ros/kilted/setup.bash``: this venv's prefix is the underlay (AMENT_PREFIX_PATH,
CMAKE_PREFIX_PATH) and its bin/ leads PATH. After the block, still in that shell, colcon_probe.py
reports what a user now has: `r3` on PATH, the node executables where `ros2 run` looks, and the
installed launch file's resolved graph description (over the launch stand-ins when launch_ros is
not importable, as on the wheels).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from r3.graph.description import load_profile

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent
MARKER = "<!-- colcon-workspace:"

pytestmark = pytest.mark.slow


def readme_build_block() -> list[str]:
    """The command lines of the README's colcon build block."""
    text = (ROOT / "README.md").read_text()
    after = text[text.index(MARKER) :]
    block = re.search(r"```bash\n(.*?)```", after, re.DOTALL).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def option_values(line: str, option: str) -> list[str]:
    words = shlex.split(line)
    values = words[words.index(option) + 1 :]
    return values[: next((i for i, w in enumerate(values) if w.startswith("-")), len(values))]


def copy_checkout(dest: Path) -> None:
    """The repository's files as a clone has them: tracked and untracked-but-not-ignored regular files."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file() and not src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    if shutil.which("colcon", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("colcon is not installed in this environment (requirements/dev.txt)")
    ws = tmp_path_factory.mktemp("r3_ws")
    copy_checkout(ws / "src" / "r3")
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("AMENT_", "COLCON", "CMAKE_", "PYTHONPATH"))
    }
    env.update(
        AMENT_PREFIX_PATH=sys.prefix,
        CMAKE_PREFIX_PATH=sys.prefix,
        COLCON_HOME=str(ws / ".colcon"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    if importlib.util.find_spec("launch_ros") is None:
        env["R3_PROBE_PYTHONPATH"] = str(HERE / "stand_ins")
    script = "\n".join(
        [
            "set -e",
            *readme_build_block(),
            # The probe's own imports (the launch stand-ins) go after what the workspace put on PYTHONPATH.
            (
                f'PYTHONPATH="${{PYTHONPATH}}${{R3_PROBE_PYTHONPATH:+:$R3_PROBE_PYTHONPATH}}" '
                f"python {shlex.quote(str(HERE / 'colcon_probe.py'))} > probe.json"
            ),
            "r3 --help > r3-help.txt",
        ]
    )
    done = subprocess.run(
        ["bash", "-c", script], check=False, cwd=ws, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return ws, json.loads((ws / "probe.json").read_text())


def test_the_readme_gives_rosdep_and_colcon_the_same_paths_and_they_hold_both_packages():
    from catkin_pkg.packages import find_packages

    colcon_line = next(line for line in readme_build_block() if line.startswith("colcon build"))
    base_paths = option_values(colcon_line, "--base-paths")
    assert (
        option_values(
            next(
                line
                for line in (ROOT / "README.md").read_text().splitlines()
                if line.startswith("rosdep install")
            ),
            "--from-paths",
        )
        == base_paths
    )
    # The paths inside the workspace, with this checkout as src/r3.
    found = set()
    for path in base_paths:
        local = ROOT / Path(path).relative_to("src/r3") if path.startswith("src/r3") else ROOT
        found |= {pkg.name for pkg in find_packages(str(local)).values()}
    assert found == {"r3", "r3_msgs"}


def test_both_packages_are_built_and_installed(workspace):
    ws, _ = workspace
    install = ws / "install"
    assert (
        install / "r3_msgs" / "share" / "ament_index" / "resource_index" / "packages" / "r3_msgs"
    ).is_file()
    assert (install / "r3" / "share" / "ament_index" / "resource_index" / "packages" / "r3").is_file()
    config = install / "r3" / "share" / "r3" / "config"
    for rel in ("graph.yaml", "gazebo/bridge.yaml", "train/sft_tiny_cpu.yaml", "accelerate/single_gpu.yaml"):
        assert (config / rel).is_file(), rel


def test_sourcing_puts_r3_on_path_and_the_node_executables_where_ros2_run_looks(workspace):
    ws, probe = workspace
    prefix = ws / "install" / "r3"
    assert probe["r3_share"] == str(prefix / "share" / "r3")
    assert probe["r3_on_path"] == str(prefix / "bin" / "r3")
    assert "usage" in (ws / "r3-help.txt").read_text().lower()
    nodes = sorted(p.name for p in ROOT.glob("r3_*_node") if (p / "main.py").is_file())
    assert {name: probe["lib_r3"].get(name) for name in nodes} == dict.fromkeys(nodes, True)
    # The workspace's r3 and r3_msgs, not the development environment's.
    assert probe["r3_module"].startswith(str(ws)) and probe["r3_msgs_module"].startswith(str(ws))


def test_the_installed_launch_file_resolves_the_graph_from_share(workspace):
    ws, probe = workspace
    share = ws / "install" / "r3" / "share" / "r3"
    assert probe["launch"]["arguments"]["graph"] == str(share / "config" / "graph.yaml")
    assert probe["launch"]["arguments"]["profile"] == "sim_language_table"
    expected = load_profile("sim_language_table", ROOT / "config" / "graph.yaml").started
    assert probe["launch"]["nodes"] == [[m.package, m.executable] for m in expected]
