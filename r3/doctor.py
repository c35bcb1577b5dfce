"""`r3 doctor`: what this machine has, part by part, and why a part is absent.

Every probe runs in isolation and reports instead of raising, so the table is complete even on a
machine that has almost nothing. Exit status 0 unless a required part is missing.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

from r3.files import printable


@dataclass
class Check:
    part: str
    required: bool
    present: bool
    detail: str


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _import(module: str) -> object:
    return importlib.import_module(module)


def _in_child(code: str, what: str, env: dict | None = None) -> str:
    """Run ``code`` in a child Python and return its output; a RuntimeError naming ``what`` and the
    child's last line when it fails. For a part that can end the interpreter instead of raising (a
    broken GL backend aborts it; rcl exits on an RMW it was not built with, or a bad domain id)."""
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"{what}: {last}")
    return out.stdout


def _probe_rclpy() -> str:
    rmw = os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp (default)")
    code = (
        "import rclpy; rclpy.init(args=[]); n = rclpy.create_node('r3_doctor'); n.destroy_node(); "
        "rclpy.shutdown()"
    )
    _in_child(
        code, f"rclpy cannot make a node (rmw {rmw}, ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')})"
    )
    return f"rclpy {_version('ros-rclpy')}, rmw {rmw}, a node was created"


def _probe_r3_msgs() -> str:
    from r3_msgs.action import FollowInstruction, MoveToPose, RunTask  # noqa: F401
    from r3_msgs.msg import DetectedObjects, ReasonerStep  # noqa: F401
    from r3_msgs.srv import GroundPoint, ResetScene, SetPerceptionQuery  # noqa: F401

    return "actions, messages and services import"


def _probe_mujoco() -> str:
    gl = os.environ.get("MUJOCO_GL", "osmesa")
    code = (
        'import mujoco; m = mujoco.MjModel.from_xml_string(\'<mujoco><worldbody><geom size="1"/>'
        "</worldbody></mujoco>'); r = mujoco.Renderer(m, 8, 8); d = mujoco.MjData(m); "
        "r.update_scene(d); r.render(); r.close(); print('mujoco', mujoco.__version__)"
    )
    env = dict(os.environ, MUJOCO_GL=gl, PYOPENGL_PLATFORM=gl if gl != "glfw" else "")
    out = _in_child(code, f"MUJOCO_GL={gl} cannot render", env)
    # The version line, not the last word: a library may print at exit (PyOpenGL's context cleanup).
    version = next((line.split()[1] for line in out.splitlines() if line.startswith("mujoco ")), "?")
    return f"mujoco {version}, offscreen rendering with MUJOCO_GL={gl}"


def _probe_torch() -> str:
    torch = _import("torch")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return f"torch {torch.__version__}, device {device}"


def _probe_transformers() -> str:
    transformers = _import("transformers")
    parts = [f"transformers {transformers.__version__}"]
    for module in ("trl", "peft", "accelerate"):
        try:
            parts.append(f"{module} {_import(module).__version__}")
        except ImportError:
            parts.append(f"{module} absent")
    return ", ".join(parts)


def _probe_module(module: str, dist: str) -> Callable[[], str]:
    def probe() -> str:
        _import(module)
        return f"{dist} {_version(dist)}"

    return probe


PROBES: list[tuple[str, bool, Callable[[], str]]] = [
    ("rclpy + rmw", True, _probe_rclpy),
    ("r3_msgs", True, _probe_r3_msgs),
    ("MuJoCo rendering", True, _probe_mujoco),
    ("rosbags (rosbag2 IO)", True, _probe_module("rosbags", "rosbags")),
    ("torch", False, _probe_torch),
    ("transformers / TRL", False, _probe_transformers),
    ("SAM 2", False, _probe_module("sam2", "sam2")),
    ("pyrealsense2", False, _probe_module("pyrealsense2", "pyrealsense2")),
    ("moveit_py", False, _probe_module("moveit.planning", "moveit_py")),
    ("launch_ros", False, _probe_module("launch_ros", "launch_ros")),
]


def run_checks() -> list[Check]:
    checks = []
    for part, required, probe in PROBES:
        try:
            checks.append(Check(part, required, True, probe()))
        except Exception as exc:  # noqa: BLE001 - a probe reports, whatever went wrong
            reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
            checks.append(Check(part, required, False, reason))
    return checks


def format_table(checks: list[Check]) -> str:
    width = max(len(c.part) for c in checks)
    lines = [f"{'part':<{width}}  status   detail", f"{'-' * width}  -------  ------"]
    for c in checks:
        status = "ok" if c.present else ("MISSING" if c.required else "absent")
        lines.append(f"{c.part:<{width}}  {status:<7}  {printable(c.detail)}")  # DDS logs in colour
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="r3 doctor",
        description="Report which parts r3 can use on this machine. Required parts (rclpy, r3_msgs, "
        "MuJoCo rendering, rosbags) make the exit status 1 when missing; optional parts are "
        "reported as absent with the reason.",
    )
    parser.parse_args(argv)
    checks = run_checks()
    print(format_table(checks))
    return 0 if all(c.present or not c.required for c in checks) else 1
