"""Start an r3 graph profile with launch_ros, from the same description `r3 launch` reads.

    ros2 launch r3 r3.launch.py profile:=sim_language_table
    ros2 launch r3 r3.launch.py profile:=sim_language_table graph:=/path/to/graph.yaml
    ros2 launch r3 r3.launch.py profile:=gazebo    # with `gz sim` running a world that fits config/gazebo/bridge.yaml

Each member becomes a launch_ros Node with its arguments, parameters and remappings, external
executables (ros_gz_bridge's parameter_bridge, topic_tools) as well. Members with `start: false`
(Isaac Sim, a scene adapter you write) are not started here. As with `r3 launch`, the graph is one
unit: when any member exits, the whole launch shuts down, with the member named in the reason.
Headless by design (no GUI members), so launch tests can include this file as it is.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from r3.graph.description import DEFAULT_GRAPH, load_profile


def member_nodes(context, *args, **kwargs):
    profile = load_profile(LaunchConfiguration("profile").perform(context),
                           LaunchConfiguration("graph").perform(context))
    return [
        Node(
            package=member.package,
            executable=member.executable,
            name=member.name,
            arguments=member.arguments,
            parameters=[member.parameters],
            remappings=list(member.remappings.items()),
            output="screen",
            on_exit=Shutdown(reason=f"{member.name} exited; the r3 graph stops as one unit"),
        )
        for member in profile.started  # not the members with `start: false`: the user starts those
    ]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("profile", default_value="sim_language_table",
                              description="profile of the graph description to start, e.g. sim_language_table"),
        DeclareLaunchArgument("graph", default_value=str(DEFAULT_GRAPH),
                              description="graph description YAML (default: the r3 package's config/graph.yaml)"),
        OpaqueFunction(function=member_nodes),
    ])
