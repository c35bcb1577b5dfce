"""Run inside a sourced colcon workspace: what a user's shell now finds, printed as one JSON line.

Evaluates the installed launch file (its default arguments and the nodes it would start, over the
real launch/launch_ros or the stand-ins in stand_ins/), finds `r3` on PATH and the node executables
where `ros2 run` looks for them (<prefix of r3 in the ament index>/lib/r3).
"""

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path


def share_of(package: str) -> Path | None:
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix and (Path(prefix) / "share/ament_index/resource_index/packages" / package).is_file():
            return Path(prefix) / "share" / package
    return None


def launch_file_result(path: Path) -> dict:
    from launch import LaunchContext

    spec = importlib.util.spec_from_file_location("r3_launch", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    context, nodes = LaunchContext(), []
    for entity in module.generate_launch_description().entities:
        nodes += entity.execute(context) or []
    return {
        "arguments": dict(context.launch_configurations),
        "nodes": [[n.node_package, n.node_executable] for n in nodes],
    }


def main() -> None:
    share = share_of("r3")
    prefix = share.parents[1] if share else None
    executables = sorted(p.name for p in (prefix / "lib" / "r3").iterdir()) if prefix else []
    print(
        json.dumps(
            {
                "r3_share": str(share) if share else None,
                "r3_on_path": shutil.which("r3"),
                "lib_r3": {name: os.access(prefix / "lib" / "r3" / name, os.X_OK) for name in executables},
                "launch": launch_file_result(share / "launch" / "r3.launch.py") if share else None,
                "r3_module": __import__("r3").__file__,
                "r3_msgs_module": __import__("r3_msgs").__file__,
                "python": sys.executable,
            }
        )
    )


if __name__ == "__main__":
    main()
