"""r3 as an ament_python package: the core library, the node packages and the `r3` command."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "r3"

# Each node folder r3_<name>_node/ is a Python package with a main(); it gets a console script
# of the same name, which is also the executable name launch files use.
NODE_PACKAGES = sorted(p for p in find_packages() if p.startswith("r3_") and p.endswith("_node"))

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*", "bench"]),
    package_data={"r3": ["**/*.yaml", "**/*.jsonl", "**/*.json", "**/*.npz", "**/*.bin"]},
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        ("share/" + PACKAGE + "/launch", glob("launch/*.launch.py")),
        ("share/" + PACKAGE + "/config", glob("config/*.yaml")),
        ("share/" + PACKAGE + "/config/gazebo", glob("config/gazebo/*.yaml")),  # graph.yaml's bridge_config
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="r3 maintainers",
    maintainer_email="maintainers@r3-robotics.org",
    description="Robot reasoners in natural language over ROS 2.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": ["r3 = r3.cli:main"]
        + [f"{node} = {node}.main:main" for node in NODE_PACKAGES],
    },
)
