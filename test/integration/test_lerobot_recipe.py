"""docs/datasets.md's LeRobot recipe, run for real where the machine allows it: a second environment
with Python >= 3.12 and LeRobot, then the recipe's load and delete-episodes steps on an r3 export.

The environment is made once and kept (``$R3_LEROBOT_ENV``, default ``~/.cache/r3/lerobot-0.6.1``);
making it downloads LeRobot and torch (about 5.4 GB, 7 minutes here), so a run only makes it when
asked to (``R3_TEST_LEROBOT=1``); otherwise the test runs where the environment already exists and
is skipped, saying so, where it does not. Skipped, saying why, when no Python >= 3.12 runs here or
LeRobot cannot be installed with it.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from r3.data.cli import dataset_main

pytestmark = pytest.mark.slow

LEROBOT = "lerobot[dataset]==0.6.1"  # load and edit; training needs lerobot[training]
REPO = Path(__file__).resolve().parents[2]
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1"}


def _python_312() -> tuple[str | None, list[str]]:
    """The first Python >= 3.12 that runs (PATH, then pyenv's versions, oldest first), and what each
    failed try said."""
    tried, candidates = [], [shutil.which(n) for n in ("python3.12", "python3.13")]
    pyenv = shutil.which("pyenv")
    if pyenv:
        root = subprocess.run([pyenv, "root"], check=False, capture_output=True, text=True).stdout.strip()
        candidates += sorted(glob.glob(f"{root}/versions/3.1[2-9]*/bin/python3"))
    for exe in filter(None, candidates):
        run = subprocess.run(
            [exe, "-c", "import sys, venv; print(sys.version_info >= (3, 12))"],
            check=False,
            capture_output=True,
            text=True,
        )
        if run.stdout.strip() == "True":
            return exe, tried
        tried.append(f"{exe}: {(run.stderr.strip().splitlines() or [run.stdout.strip()])[0]}")
    return None, tried or ["no python3.12 / python3.13 on PATH and no pyenv"]


def _has_lerobot(env: Path) -> bool:
    python = env / "bin" / "python"
    check = "import importlib.metadata as m; print(m.version('lerobot'))"
    return (
        python.is_file()
        and subprocess.run([python, "-c", check], check=False, capture_output=True, text=True).stdout.strip()
        == LEROBOT.split("==")[1]
    )


@pytest.fixture(scope="module")
def lerobot_env() -> Path:
    env = Path(os.environ.get("R3_LEROBOT_ENV", Path.home() / ".cache" / "r3" / "lerobot-0.6.1"))
    if _has_lerobot(env):
        return env
    if os.environ.get("R3_TEST_LEROBOT") != "1":
        pytest.skip(
            f"no LeRobot environment at {env}; set R3_TEST_LEROBOT=1 to make it (about 5.4 GB and "
            "7 minutes of downloads), or R3_LEROBOT_ENV to point at one"
        )
    python, tried = _python_312()
    if python is None:
        pytest.skip("LeRobot needs Python >= 3.12 and none runs here (tried: " + "; ".join(tried) + ")")
    subprocess.run([python, "-m", "venv", "--clear", env], check=True)
    pip = subprocess.run(
        [env / "bin" / "pip", "install", "--quiet", LEROBOT], check=False, capture_output=True, text=True
    )
    if pip.returncode != 0 or not _has_lerobot(env):
        said = (pip.stderr.strip().splitlines() or ["no error printed"])[-1]
        pytest.skip(f"{LEROBOT} is not installable with {python} (pip exit {pip.returncode}: {said})")
    return env


@pytest.fixture(scope="module")
def export(expert_bags, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("recipe") / "r3_pusher"
    assert dataset_main(["export-lerobot", str(expert_bags), "--out", str(out)]) == 0
    return out


def _load(env: Path, root: Path) -> dict:
    run = subprocess.run(
        [env / "bin" / "python", REPO / "scripts" / "lerobot_load.py", root, "--chunk", "20"],
        check=False,
        capture_output=True,
        text=True,
        env=OFFLINE,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_lerobot_loads_the_export_and_deletes_episodes_keeping_the_stats(lerobot_env, export):
    info = json.loads((export / "meta" / "info.json").read_text())
    loaded = _load(lerobot_env, export)
    assert (loaded["frames"], loaded["episodes"]) == (info["total_frames"], info["total_episodes"])

    edited = export.with_name("r3_pusher_edited")
    run = subprocess.run(
        [
            lerobot_env / "bin" / "lerobot-edit-dataset",
            "--repo_id",
            "r3/pusher",
            "--root",
            export,
            "--new_repo_id",
            "r3/pusher_edited",
            "--new_root",
            edited,
            "--operation.type",
            "delete_episodes",
            "--operation.episode_indices",
            "[1]",
        ],
        check=False,
        capture_output=True,
        text=True,
        env=OFFLINE,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    after = _load(lerobot_env, edited)
    assert after["episodes"] == info["total_episodes"] - 1 and after["frames"] < info["total_frames"]
    assert after["stats_with_quantiles"] == sorted(info["features"])  # was {} before the export wrote them
    stats = json.loads((edited / "meta" / "stats.json").read_text())
    assert stats["action"]["count"] == [after["frames"]]
