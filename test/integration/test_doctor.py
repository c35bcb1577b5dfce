"""`r3 doctor` reports every part and exits 0 on a machine that has the required ones."""

import subprocess
import sys


def test_doctor_reports_every_part_and_exits_zero():
    out = subprocess.run(
        [sys.executable, "-m", "r3.cli", "doctor"], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
    rows = {line.split("  ")[0].strip(): line for line in out.stdout.splitlines()[2:]}
    for part in [
        "rclpy + rmw",
        "r3_msgs",
        "MuJoCo rendering",
        "torch",
        "transformers / TRL",
        "SAM 2",
        "pyrealsense2",
        "moveit_py",
        "launch_ros",
    ]:
        assert part in rows, out.stdout
    assert " ok " in rows["r3_msgs"] and " ok " in rows["rclpy + rmw"]
    # Found by a hostile user: the row read "mujoco 'numpy.ndarray'>])", what PyOpenGL printed at exit.
    import mujoco

    assert f" mujoco {mujoco.__version__}, offscreen rendering" in rows["MuJoCo rendering"], out.stdout
    # launch_ros is never on the pip wheels; it must be reported absent with its reason, not crash.
    assert "absent" in rows["launch_ros"] and "launch_ros" in rows["launch_ros"]


def test_doctor_reports_an_rmw_or_domain_rclpy_cannot_use_in_its_table():
    """Found by a hostile user: with an RMW this rclpy was not built with, rcl ended `r3 doctor` itself
    (exit 102) before any table; with ROS_DOMAIN_ID=300, two Fast DDS lines and no table."""
    import os

    for setting in ({"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}, {"ROS_DOMAIN_ID": "300"}):
        out = subprocess.run(
            [sys.executable, "-m", "r3.cli", "doctor"],
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, **setting},
            check=False,
        )
        assert out.returncode == 1, out.stdout + out.stderr
        rows = {line.split("  ")[0].strip(): line for line in out.stdout.splitlines()[2:]}
        assert "MISSING  RuntimeError: rclpy cannot make a node" in rows["rclpy + rmw"], out.stdout
        assert " ok " in rows["r3_msgs"] and "\x1b" not in out.stdout, out.stdout
