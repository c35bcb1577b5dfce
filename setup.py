"""r3 as an ament_python package: the core library, the node packages and the `r3` command."""

import os
from glob import glob

from setuptools import find_packages, setup
from setuptools.command.develop import develop
from setuptools.command.install_scripts import install_scripts

PACKAGE = "r3"

# Each node folder r3_<name>_node/ is a Python package with a main(); it gets a console script
# of the same name, which is also the executable name launch files use.
NODE_PACKAGES = sorted(p for p in find_packages() if p.startswith("r3_") and p.endswith("_node"))


def share_tree(folder: str) -> list[tuple[str, list[str]]]:
    """data_files entries that install ``folder`` and its sub-folders under share/r3/."""
    files = sorted(p for p in glob(f"{folder}/**/*", recursive=True) if os.path.isfile(p))
    folders = sorted({os.path.dirname(p) for p in files})
    return [(f"share/{PACKAGE}/{d}", [p for p in files if os.path.dirname(p) == d]) for d in folders]


def command_on_path_too(command_class, scripts_dir_attribute: str):
    """``command_class`` writing the `r3` script to <prefix>/bin as well as to <prefix>/lib/r3.

    setup.cfg sends every script to lib/r3, where `ros2 run` looks for node executables; a shell
    finds commands on PATH, which a colcon workspace's setup script extends with <prefix>/bin.
    Pip (wheels, editable installs) writes scripts itself, to the environment's bin, and never
    calls this.
    """

    class Command(command_class):
        def write_script(self, script_name, contents, *args):
            super().write_script(script_name, contents, *args)
            scripts_dir = getattr(self, scripts_dir_attribute)
            lib, package = os.path.split(scripts_dir)
            if script_name != PACKAGE or package != PACKAGE or os.path.basename(lib) != "lib":
                return
            setattr(self, scripts_dir_attribute, os.path.join(os.path.dirname(lib), "bin"))
            try:
                super().write_script(script_name, contents, *args)
            finally:
                setattr(self, scripts_dir_attribute, scripts_dir)

    Command.__name__ = command_class.__name__
    return Command


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*", "bench"]),
    package_data={"r3": ["**/*.yaml", "**/*.jsonl", "**/*.json", "**/*.npz", "**/*.bin"]},
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        ("share/" + PACKAGE + "/launch", glob("launch/*.launch.py")),
        *share_tree(
            "config"
        ),  # graph.yaml (found through the ament index), gazebo/, train/, accelerate/, foxglove/
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="r3 maintainers",
    maintainer_email="maintainers@r3-robotics.org",
    description="Robot reasoners in natural language over ROS 2.",
    license="Apache-2.0",
    cmdclass={  # colcon's two ways of installing: `setup.py install` and, for --symlink-install, `develop`
        "install_scripts": command_on_path_too(install_scripts, "install_dir"),
        "develop": command_on_path_too(develop, "script_dir"),
    },
    entry_points={
        "console_scripts": ["r3 = r3.cli:main"] + [f"{node} = {node}.main:main" for node in NODE_PACKAGES],
    },
)
