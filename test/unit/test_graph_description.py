"""The graph description: profiles load, validate, and are wired; the launch file maps them faithfully."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest
import yaml

from r3.graph.description import (load_profile, profile_names, read_ros_gz_bridge_config,
                                  unmatched_subscriptions)
from r3.graph.supervisor import ros_arguments

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", profile_names())
def test_every_profile_is_wired(name):
    assert unmatched_subscriptions(load_profile(name)) == []


def test_an_unwired_profile_is_reported(tmp_path):
    graph = {"profiles": {"p": {"members": [{"name": "r3_lowlevel_node", "node": "r3_lowlevel_node"}]}}}
    path = tmp_path / "graph.yaml"
    path.write_text(yaml.safe_dump(graph))
    problems = unmatched_subscriptions(load_profile("p", path))
    assert "r3_lowlevel_node subscribes to /sim/privileged/state, which no member publishes" in problems


def test_remappings_move_the_interface(tmp_path):
    graph = {"profiles": {"p": {"members": [{"name": "sim", "node": "r3_sim_node",
                                             "remappings": {"/camera/camera/color/image_raw": "/cam/rgb"}}]}}}
    path = tmp_path / "graph.yaml"
    path.write_text(yaml.safe_dump(graph))
    member = load_profile("p", path).member("sim")
    assert "/cam/rgb" in member.interface.publishes
    assert "/camera/camera/color/image_raw" not in member.interface.publishes


@pytest.mark.parametrize("member, error", [
    ({"name": "x", "node": "r3_nonexistent_node"}, "unknown r3 node"),
    ({"name": "x", "node": "r3_sim_node", "paramters": {}}, "unknown keys ['paramters']"),
    ({"name": "x", "package": "foo"}, "give either 'node'"),
])
def test_bad_members_name_the_problem(tmp_path, member, error):
    path = tmp_path / "graph.yaml"
    path.write_text(yaml.safe_dump({"profiles": {"p": {"members": [member]}}}))
    with pytest.raises(ValueError, match=error.replace("[", r"\[").replace("]", r"\]")):
        load_profile("p", path)


def test_unknown_profile_lists_the_known_ones():
    with pytest.raises(KeyError, match="sim_language_table"):
        load_profile("no_such_profile")


def test_ros_gz_bridge_directions(tmp_path):
    path = tmp_path / "bridge.yaml"
    path.write_text(yaml.safe_dump([
        {"ros_topic_name": "/clock", "gz_topic_name": "/clock", "ros_type_name": "rosgraph_msgs/msg/Clock",
         "gz_type_name": "gz.msgs.Clock", "direction": "GZ_TO_ROS"},
        {"ros_topic_name": "cmd", "gz_topic_name": "/cmd", "ros_type_name": "geometry_msgs/Twist",
         "gz_type_name": "gz.msgs.Twist", "direction": "ROS_TO_GZ"},
    ]))
    assert read_ros_gz_bridge_config(path) == ({"/clock": "rosgraph_msgs/msg/Clock"},
                                               {"/cmd": "geometry_msgs/msg/Twist"})


def test_ros_arguments_carry_name_parameters_and_remappings(tmp_path):
    member = load_profile("sim_language_table").member("r3_sim_node")
    member.remappings = {"/a": "/b"}
    args = ros_arguments(member, tmp_path / "p.yaml")
    assert args == ["--ros-args", "-r", "__node:=r3_sim_node", "--params-file", str(tmp_path / "p.yaml"),
                    "-r", "/a:=/b"]


def test_launch_file_maps_every_member(monkeypatch):
    """launch_ros is not installable here: these stand-ins record what the launch file asks for.
    They check our mapping (names, parameters, remappings, shutdown policy), not launch_ros."""
    created = []

    class Recorder:
        def __init__(self, *args, **kwargs):
            self.args, self.kwargs = args, kwargs
            created.append(self)

    class Config(Recorder):
        def perform(self, context):
            return {"profile": "sim_language_table", "graph": str(ROOT / "config" / "graph.yaml")}[self.args[0]]

    fake = {
        "launch": types.SimpleNamespace(LaunchDescription=Recorder),
        "launch.actions": types.SimpleNamespace(DeclareLaunchArgument=Recorder, OpaqueFunction=Recorder,
                                                Shutdown=Recorder),
        "launch.substitutions": types.SimpleNamespace(LaunchConfiguration=Config),
        "launch_ros.actions": types.SimpleNamespace(Node=Recorder),
    }
    for name, module in fake.items():
        monkeypatch.setitem(sys.modules, name, module)
    spec = importlib.util.spec_from_file_location("r3_launch", ROOT / "launch" / "r3.launch.py")
    launch_file = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launch_file)
    description = launch_file.generate_launch_description()
    declared = [a.args[0] for a in description.args[0] if a.args and a.args[0] in ("profile", "graph")]
    assert declared == ["profile", "graph"]
    nodes = launch_file.member_nodes(context=None)
    profile = load_profile("sim_language_table")
    assert [n.kwargs["name"] for n in nodes] == [m.name for m in profile.members]
    for node, member in zip(nodes, profile.members):
        assert node.kwargs["executable"] == member.executable and node.kwargs["package"] == "r3"
        assert node.kwargs["parameters"] == [member.parameters]
        assert "exited" in node.kwargs["on_exit"].kwargs["reason"]
