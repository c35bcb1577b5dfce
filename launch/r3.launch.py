"""Start an r3 graph profile with launch_ros, from the same description `r3 launch` reads.

    ros2 launch r3 r3.launch.py profile:=sim_language_table
    ros2 launch r3 r3.launch.py profile:=sim_language_table graph:=/path/to/graph.yaml
    # with `gz sim` running a world that fits config/gazebo/bridge.yaml:
    ros2 launch r3 r3.launch.py profile:=gazebo

Each member becomes a launch_ros Node with its arguments, parameters and remappings, external
executables (ros_gz_bridge's parameter_bridge, topic_tools) as well. Members with `start: false`
(Isaac Sim, a scene adapter you write) are not started here. As with `r3 launch`, the graph is one
unit: when any member exits, the exit is written to the member-exits file every member finds through
``R3_MEMBER_EXITS`` (the reasoner ends its episode with an error result naming the member at once),
and ``EXIT_GRACE_S`` later the whole launch shuts down, with the member named in the reason.
Shared-memory segments that killed processes left in /dev/shm are removed first, as `r3 launch`
does (``r3.graph.shared_memory``), and, as `r3 launch` does, the launch refuses to start beside r3
nodes of the same names that beat on its ROS domain (a second graph would answer every goal beside
the first; the probe listens up to 3 s). Headless by design (no GUI members), so launch tests can include
this file as it is.
"""

import os
import sys
import tempfile

from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown, TimerAction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from r3.graph import shared_memory
from r3.graph.cli import already_running, another_graph
from r3.graph.description import DEFAULT_GRAPH, load_profile
from r3.graph.supervisor import MEMBER_EXITS_ENV, Exit, record_exit

#: How long the graph outlives a member's exit: the reasoner's error result reaches its client first.
EXIT_GRACE_S = 1.0


def on_member_exit(name: str, exits_file: str):
    """``on_exit`` of member ``name``: record the exit, then shut the launch down after the grace."""

    def handle(event, _context):
        record_exit(exits_file, Exit(name, event.returncode))
        return [
            TimerAction(
                period=EXIT_GRACE_S,
                actions=[Shutdown(reason=f"{name} exited; the r3 graph stops as one unit")],
            )
        ]

    return handle


def member_nodes(context, *args, **kwargs):
    profile = load_profile(
        LaunchConfiguration("profile").perform(context), LaunchConfiguration("graph").perform(context)
    )
    if found := already_running(profile):
        # As `r3 launch` refuses: the launch system prints the reason and ends with return code 1.
        raise RuntimeError(another_graph(found))
    fd, exits_file = tempfile.mkstemp(prefix="r3-member-exits-")
    os.close(fd)
    if (swept := shared_memory.sweep()).removed:  # stderr: a launch's stdout may be a tool's data
        print(f"[r3.launch.py] {swept}", file=sys.stderr, flush=True)
    return [
        Node(
            package=member.package,
            executable=member.executable,
            name=member.name,
            arguments=member.arguments,
            parameters=[member.parameters],
            remappings=list(member.remappings.items()),
            output="screen",
            additional_env={MEMBER_EXITS_ENV: exits_file},
            on_exit=on_member_exit(member.name, exits_file),
        )
        for member in profile.started  # not the members with `start: false`: the user starts those
    ]


def generate_launch_description():
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                "profile",
                default_value="sim_language_table",
                description="profile of the graph description to start, e.g. sim_language_table",
            ),
            DeclareLaunchArgument(
                "graph",
                default_value=str(DEFAULT_GRAPH),
                description="graph description YAML (default: the r3 package's config/graph.yaml)",
            ),
            OpaqueFunction(function=member_nodes),
        ]
    )
