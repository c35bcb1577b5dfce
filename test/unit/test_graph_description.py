"""The graph description: profiles load, validate, and are wired; the launch file maps them faithfully."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest
import transforms3d
import yaml

from r3.graph import names
from r3.graph.cli import launch_main, parse_overrides
from r3.graph.description import (
    DEFAULT_GRAPH,
    load_profile,
    outside_requirements,
    profile_names,
    read_ros_gz_bridge_config,
    unmatched_subscriptions,
)
from r3.graph.supervisor import Supervisor, ros_arguments
from r3.tasks.packing.workcell import ITEM_SPECS

ROOT = Path(__file__).resolve().parents[2]
VENDOR_PROFILES = ("gazebo", "isaac")
#: ros_gz_bridge's documented topic mappings (ros_gz_bridge README) for the types r3 bridges.
ROS_GZ_MAPPINGS = {
    ("rosgraph_msgs/msg/Clock", "gz.msgs.Clock"),
    ("sensor_msgs/msg/Image", "gz.msgs.Image"),
    ("sensor_msgs/msg/CameraInfo", "gz.msgs.CameraInfo"),
    ("sensor_msgs/msg/JointState", "gz.msgs.Model"),
    ("geometry_msgs/msg/Twist", "gz.msgs.Twist"),
    ("geometry_msgs/msg/Vector3", "gz.msgs.Vector3d"),
    ("tf2_msgs/msg/TFMessage", "gz.msgs.Pose_V"),
    ("geometry_msgs/msg/PoseArray", "gz.msgs.Pose_V"),
}


def test_the_vendor_profiles_are_described():
    assert set(VENDOR_PROFILES) <= set(profile_names())


@pytest.mark.parametrize("name", profile_names())
def test_every_profile_is_wired(name):
    """Every topic a member subscribes to (after remappings, /clock under use_sim_time) is published by
    a member of the same profile; every service and action called is served."""
    assert unmatched_subscriptions(load_profile(name)) == []


def _graph_with(tmp_path, profile: str, edit) -> Path:
    """A copy of config/graph.yaml (and its bridge file) with ``edit`` applied to one profile's members."""
    data = yaml.safe_load(DEFAULT_GRAPH.read_text())
    members = data["profiles"][profile]["members"]
    data["profiles"][profile]["members"] = edit(members) or members
    (tmp_path / "gazebo").mkdir(exist_ok=True)
    (tmp_path / "gazebo" / "bridge.yaml").write_text(
        (DEFAULT_GRAPH.parent / "gazebo" / "bridge.yaml").read_text()
    )
    path = tmp_path / "graph.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("profile", VENDOR_PROFILES)
def test_a_vendor_profile_without_its_scene_adapter_is_caught(tmp_path, profile):
    """The scene adapter is the honest statement of what a vendor bridge lacks: drop it and the
    check names the privileged state and the reset service, and who needs them."""
    path = _graph_with(tmp_path, profile, lambda ms: [m for m in ms if m["name"] != "scene_adapter"])
    problems = unmatched_subscriptions(load_profile(profile, path))
    assert "r3_lowlevel_node subscribes to /sim/privileged/state, which no member publishes" in problems
    assert "r3_reasoner_node subscribes to /sim/privileged/state, which no member publishes" in problems
    assert "r3_recorder_node subscribes to /sim/privileged/state, which no member publishes" in problems
    assert "r3_reasoner_node calls service /sim/reset_scene, which no member serves" in problems


@pytest.mark.parametrize("name", profile_names())
def test_a_profile_without_the_recorder_its_reasoner_waits_for_is_caught(tmp_path, name):
    """The reasoner waits for its recorder_node before every episode (it never runs one unrecorded):
    a profile that drops the recorder must say so (recorder_node '') or the check names it."""
    path = _graph_with(tmp_path, name, lambda ms: [m for m in ms if m["name"] != "r3_recorder_node"])
    problems = unmatched_subscriptions(load_profile(name, path))
    named = "r3_reasoner_node.recorder_node is /r3_recorder_node, which is no member of the profile"
    assert named in problems
    unset = {"r3_reasoner_node": {"recorder_node": ""}}
    assert unmatched_subscriptions(load_profile(name, path, overrides=unset)) == []


def test_a_bridge_file_without_the_clock_is_caught(tmp_path):
    path = _graph_with(tmp_path, "gazebo", lambda ms: None)
    bridge = tmp_path / "gazebo" / "bridge.yaml"
    entries = [e for e in yaml.safe_load(bridge.read_text()) if e["ros_topic_name"] != "/clock"]
    bridge.write_text(yaml.safe_dump(entries))
    problems = unmatched_subscriptions(load_profile("gazebo", path))
    assert problems == ["r3_reasoner_node subscribes to /clock, which no member publishes"]


def test_clock_counts_only_under_use_sim_time(tmp_path):
    def without_sim_time(members):
        for m in members:
            (m.get("parameters") or {}).pop("use_sim_time", None)

    path = _graph_with(tmp_path, "gazebo", without_sim_time)
    profile = load_profile("gazebo", path)
    assert all(names.CLOCK not in m.interface.subscribes for m in profile.members)
    assert unmatched_subscriptions(profile) == []
    # ... and an override turns it back on, with the clock then required.
    profile = load_profile("gazebo", path, {"r3_reasoner_node": {"use_sim_time": True}})
    assert profile.member("r3_reasoner_node").interface.subscribes[names.CLOCK] == "rosgraph_msgs/msg/Clock"


def test_the_gazebo_command_needs_its_relay(tmp_path):
    path = _graph_with(tmp_path, "gazebo", lambda ms: [m for m in ms if m["name"] != "pusher_command_relay"])
    assert unmatched_subscriptions(load_profile("gazebo", path)) == [
        "gz_bridge subscribes to /pusher/cmd_vel, which no member publishes"
    ]


def test_a_type_mismatch_is_caught(tmp_path):
    """Bridging the pusher command straight from the low-level node would need Vector3Stamped in Gazebo."""

    def relay_declares_twist_input(members):
        relay = next(m for m in members if m["name"] == "pusher_command_relay")
        relay["subscribes"] = {"/pusher/command": "geometry_msgs/msg/Twist"}

    path = _graph_with(tmp_path, "gazebo", relay_declares_twist_input)
    assert unmatched_subscriptions(load_profile("gazebo", path)) == [
        (
            "pusher_command_relay subscribes to /pusher/command as geometry_msgs/msg/Twist, "
            "but r3_lowlevel_node publishes it as geometry_msgs/msg/Vector3Stamped"
        )
    ]


@pytest.mark.parametrize("profile", VENDOR_PROFILES)
def test_vendor_profiles_keep_the_r3_nodes_and_drop_the_r3_simulator(profile):
    vendor, mujoco = load_profile(profile), load_profile("sim_language_table")
    r3_nodes = {m.executable for m in vendor.members if m.is_r3_node}
    assert r3_nodes == {"r3_lowlevel_node", "r3_reasoner_node", "r3_recorder_node"}
    assert r3_nodes < {m.executable for m in mujoco.members}
    reasoner = vendor.member("r3_reasoner_node")
    assert not reasoner.parameters["backend"].startswith("expert")  # no privileged planner on a vendor sim
    assert reasoner.parameters["sim_node"] == "/scene_adapter"
    adapter = vendor.member("scene_adapter")
    assert not adapter.start and names.PRIVILEGED_STATE in adapter.interface.publishes
    assert adapter.interface.services == [names.RESET_SCENE]
    assert any(
        line.startswith("scene_adapter (not started by r3) must publish /sim/privileged/state")
        for line in outside_requirements(vendor)
    )


def test_the_gazebo_bridge_file():
    """The bridge file is in ros_gz_bridge's format, uses only its documented type mappings, gives the
    r3 names, and is the file the bridge process is started with."""
    path = DEFAULT_GRAPH.parent / "gazebo" / "bridge.yaml"
    entries = yaml.safe_load(path.read_text())
    assert {(e["ros_type_name"], e["gz_type_name"]) for e in entries} <= ROS_GZ_MAPPINGS
    assert all(
        set(e)
        <= {
            "ros_topic_name",
            "gz_topic_name",
            "ros_type_name",
            "gz_type_name",
            "direction",
            "lazy",
            "subscriber_queue",
            "publisher_queue",
        }
        for e in entries
    )
    publishes, subscribes = read_ros_gz_bridge_config(path)
    assert {names.CAMERA_IMAGE, names.CAMERA_INFO, names.JOINT_STATES, names.CLOCK} <= set(publishes)
    assert subscribes == {"/pusher/cmd_vel": "geometry_msgs/msg/Twist"}
    bridge = load_profile("gazebo").member("gz_bridge")
    assert bridge.parameters["config_file"] == str(path.resolve())
    assert bridge.interface.publishes == publishes and bridge.interface.subscribes == subscribes


def test_isaac_topics_are_declared_under_isaac_names_and_renamed():
    isaac = load_profile("isaac").member("isaac_sim")
    assert isaac.remappings == {"/rgb": names.CAMERA_IMAGE, "/camera_info": names.CAMERA_INFO}
    assert set(isaac.interface.publishes) == {
        names.CAMERA_IMAGE,
        names.CAMERA_INFO,
        names.JOINT_STATES,
        names.CLOCK,
    }
    assert isaac.interface.subscribes == {names.PUSHER_COMMAND: "geometry_msgs/msg/Vector3Stamped"}


def test_r3_launch_check(capsys):
    assert launch_main(["isaac", "--check"]) == 0
    out = capsys.readouterr().out
    assert (
        "isaac_sim (not started by r3) must publish /camera/camera/color/image_raw (renamed from /rgb)" in out
    )
    assert "profile isaac: wired" in out


def test_r3_launch_check_of_a_vendor_profile_needs_no_vendor_executable(monkeypatch, capsys):
    """README: `r3 launch gazebo --check` prints the wiring check on a machine without ros_gz; it was
    refused with "executable 'parameter_bridge' (ros_gz_bridge) is not on PATH", as a start would be."""
    monkeypatch.setattr("r3.graph.supervisor.shutil.which", lambda name: None)
    monkeypatch.setattr("r3.graph.cli.Supervisor", lambda *a: pytest.fail("started a graph"))
    assert launch_main(["gazebo", "--check"]) == 0
    out = capsys.readouterr().out
    assert "expects: scene_adapter (not started by r3) must publish /sim/privileged/state" in out
    assert "[r3 launch] profile gazebo: wired" in out


def test_r3_launch_check_fails_on_an_unwired_profile(tmp_path, capsys):
    path = _graph_with(tmp_path, "isaac", lambda ms: [m for m in ms if m["name"] != "isaac_sim"])
    assert launch_main(["isaac", "--check", "--graph", str(path)]) == 1
    out = capsys.readouterr().out
    assert (
        "not wired: r3_reasoner_node subscribes to /camera/camera/color/image_raw, which no member publishes"
        in out
    )


def test_a_profile_whose_executable_is_not_installed_is_refused_in_one_line(monkeypatch, capsys):
    """Found by a hostile user: `r3 launch gazebo` and `r3 run --profile gazebo` on a machine without
    ros_gz ended in a FileNotFoundError traceback from the supervisor."""
    monkeypatch.setattr("r3.graph.supervisor.shutil.which", lambda name: None)
    monkeypatch.setattr("r3.graph.cli.Supervisor", lambda *a: pytest.fail("started a graph"))
    with pytest.raises(SystemExit) as exit_:
        launch_main(["gazebo"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "Traceback" not in err
    assert "gz_bridge: executable 'parameter_bridge' (ros_gz_bridge) is not on PATH" in err, err


def test_a_command_lines_integer_for_a_double_parameter_becomes_a_double():
    """`--set r3_sim_node.camera_rate_hz=0` once started a simulator that exited "expecting DOUBLE"."""
    profile = load_profile("sim_language_table", overrides={"r3_sim_node": {"camera_rate_hz": 0}})
    rate = profile.member("r3_sim_node").parameters["camera_rate_hz"]
    assert rate == 0.0 and type(rate) is float


@pytest.mark.parametrize(
    "setting, reason",
    [
        ("r3_sim_node.camera_rate_hz=-1", "camera_rate_hz: -1.0 is outside [0.0, 1000.0]"),
        ("r3_sim_node.camera_rate_hz=fast", "expected a float, got 'fast'"),
        ("r3_sim_node.no_such_parameter=1", "r3_sim_node declares no parameter 'no_such_parameter'"),
        ("no_such_member.x=1", "has no member 'no_such_member'"),
        ("r3_recorder_node.topics=[/a", "--set 'r3_recorder_node.topics=[/a': a list is written [a, b]"),
        ("r3_recorder_node.topics=[/a, 3]", "topics: every item must be a str, got ['/a', 3]"),
    ],
)
def test_r3_launch_refuses_a_bad_setting_before_starting_anything(monkeypatch, capsys, setting, reason):
    monkeypatch.setattr("r3.graph.cli.Supervisor", lambda *a: pytest.fail("started a graph"))
    with pytest.raises(SystemExit) as exit_:
        launch_main(["sim_language_table", "--set", setting])
    assert exit_.value.code == 2
    assert reason in capsys.readouterr().err


def test_r3_launch_sets_an_array_parameter_from_a_yaml_list():
    """`--set r3_recorder_node.topics=[...]` was refused: every value was an int, a float, a bool or a
    string, so no list parameter could be set from the command line."""
    overrides = parse_overrides(["r3_recorder_node.topics=[/r3/reasoner/outcomes, /joint_states]"])
    profile = load_profile("sim_language_table_controller", overrides=overrides)
    topics = profile.member("r3_recorder_node").parameters["topics"]
    assert topics == ["/r3/reasoner/outcomes", "/joint_states"]


def test_members_r3_does_not_start_are_not_started(tmp_path, monkeypatch):
    """The supervisor starts the bridge and the relay with their arguments, never Isaac Sim or the adapter."""
    started = []

    class FakePopen:
        def __init__(self, cmd, **kwargs):
            started.append(cmd)
            self.pid = 0

        def poll(self):
            return 0

    monkeypatch.setattr("r3.graph.supervisor.subprocess.Popen", FakePopen)
    monkeypatch.setattr("r3.graph.supervisor.shutil.which", lambda exe: f"/opt/ros/bin/{exe}")
    profile = load_profile("gazebo")
    Supervisor(profile, tmp_path, echo=lambda _: None).start()
    assert len(started) == len(profile.members) - 1  # all but scene_adapter
    relay = next(cmd for cmd in started if cmd[0] == "/opt/ros/bin/relay_field")
    assert relay[1:6] == profile.member("pusher_command_relay").arguments
    assert relay[6:9] == ["--ros-args", "-r", "__node:=pusher_command_relay"]
    isaac = load_profile("isaac")
    started.clear()
    Supervisor(isaac, tmp_path, echo=lambda _: None).start()
    assert len(started) == 3 and not any("isaac" in " ".join(cmd) for cmd in started)


def test_an_unwired_profile_is_reported(tmp_path):
    graph = {"profiles": {"p": {"members": [{"name": "r3_lowlevel_node", "node": "r3_lowlevel_node"}]}}}
    path = tmp_path / "graph.yaml"
    path.write_text(yaml.safe_dump(graph))
    problems = unmatched_subscriptions(load_profile("p", path))
    assert "r3_lowlevel_node subscribes to /sim/privileged/state, which no member publishes" in problems


def test_remappings_move_the_interface(tmp_path):
    graph = {
        "profiles": {
            "p": {
                "members": [
                    {
                        "name": "sim",
                        "node": "r3_sim_node",
                        "remappings": {"/camera/camera/color/image_raw": "/cam/rgb"},
                    }
                ]
            }
        }
    }
    path = tmp_path / "graph.yaml"
    path.write_text(yaml.safe_dump(graph))
    member = load_profile("p", path).member("sim")
    assert "/cam/rgb" in member.interface.publishes
    assert "/camera/camera/color/image_raw" not in member.interface.publishes


@pytest.mark.parametrize(
    "member, error",
    [
        ({"name": "x", "node": "r3_nonexistent_node"}, "unknown r3 node"),
        ({"name": "x", "node": "r3_sim_node", "paramters": {}}, "unknown keys ['paramters']"),
        ({"name": "x", "package": "foo"}, "give either 'node'"),
    ],
)
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
    path.write_text(
        yaml.safe_dump(
            [
                {
                    "ros_topic_name": "/clock",
                    "gz_topic_name": "/clock",
                    "ros_type_name": "rosgraph_msgs/msg/Clock",
                    "gz_type_name": "gz.msgs.Clock",
                    "direction": "GZ_TO_ROS",
                },
                {
                    "ros_topic_name": "cmd",
                    "gz_topic_name": "/cmd",
                    "ros_type_name": "geometry_msgs/Twist",
                    "gz_type_name": "gz.msgs.Twist",
                    "direction": "ROS_TO_GZ",
                },
            ]
        )
    )
    assert read_ros_gz_bridge_config(path) == (
        {"/clock": "rosgraph_msgs/msg/Clock"},
        {"/cmd": "geometry_msgs/msg/Twist"},
    )


def test_ros_arguments_carry_name_parameters_and_remappings(tmp_path):
    member = load_profile("sim_language_table").member("r3_sim_node")
    member.remappings = {"/a": "/b"}
    args = ros_arguments(member, tmp_path / "p.yaml")
    assert args == [
        "--ros-args",
        "-r",
        "__node:=r3_sim_node",
        "--params-file",
        str(tmp_path / "p.yaml"),
        "-r",
        "/a:=/b",
    ]


def load_launch_file(monkeypatch, profile_name: str, running: tuple[str, ...] = ()):
    """r3.launch.py with stand-ins for launch and launch_ros that record what it asks for, and r3
    nodes named ``running`` beating on the domain (the probe not asked: none by default)."""

    class Recorder:
        def __init__(self, *args, **kwargs):
            self.args, self.kwargs = args, kwargs

    class Config(Recorder):
        def perform(self, context):
            return {"profile": profile_name, "graph": str(ROOT / "config" / "graph.yaml")}[self.args[0]]

    fake = {
        "launch": types.SimpleNamespace(LaunchDescription=Recorder),
        "launch.actions": types.SimpleNamespace(
            DeclareLaunchArgument=Recorder, OpaqueFunction=Recorder, Shutdown=Recorder, TimerAction=Recorder
        ),
        "launch.substitutions": types.SimpleNamespace(LaunchConfiguration=Config),
        "launch_ros.actions": types.SimpleNamespace(Node=Recorder),
    }
    for name, module in fake.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr("r3.graph.cli.already_running", lambda profile: list(running))
    spec = importlib.util.spec_from_file_location("r3_launch", ROOT / "launch" / "r3.launch.py")
    launch_file = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launch_file)
    return launch_file


def test_the_launch_file_reports_its_sweep_on_stderr(monkeypatch, tmp_path, capsys):
    """Whatever the launch file says goes to stderr: a tool that reads a launch's stdout (the
    colcon probe reads JSON) broke whenever a dead process had left a segment to sweep."""
    from r3.graph import shared_memory

    (tmp_path / "fastdds_0badc0de").write_bytes(b"\1" * 4096)
    (tmp_path / "fastdds_0badc0de_el").write_bytes(b"")
    for path in tmp_path.iterdir():
        os.utime(path, (time.time() - 3600, time.time() - 3600))
    real_sweep = shared_memory.sweep
    monkeypatch.setattr(shared_memory, "sweep", lambda: real_sweep(tmp_path))
    load_launch_file(monkeypatch, "sim_language_table").member_nodes(context=None)
    out, err = capsys.readouterr()
    assert out == "" and "removed 1 Fast DDS shared-memory segment" in err
    assert not (tmp_path / "fastdds_0badc0de").exists()


def test_the_launch_file_refuses_to_start_beside_a_graph_of_the_same_names(monkeypatch):
    """As `r3 launch` does: `ros2 launch r3 r3.launch.py` beside a running graph started a second one
    on the domain, which answered every goal beside the first. The launch system prints an action's
    exception and ends with return code 1."""
    launch_file = load_launch_file(monkeypatch, "sim_language_table", running=("r3_sim_node",))
    with pytest.raises(RuntimeError, match=r"/r3_sim_node is already running on ROS domain \S+: a second"):
        launch_file.member_nodes(context=None)


@pytest.mark.parametrize("profile_name", ["sim_language_table", "gazebo", "isaac"])
def test_launch_file_maps_every_member(monkeypatch, profile_name):
    """launch_ros is not installable here: these stand-ins record what the launch file asks for.
    They check our mapping (names, arguments, parameters, remappings, shutdown policy), not launch_ros."""
    launch_file = load_launch_file(monkeypatch, profile_name)
    description = launch_file.generate_launch_description()
    declared = [a.args[0] for a in description.args[0] if a.args and a.args[0] in ("profile", "graph")]
    assert declared == ["profile", "graph"]
    nodes = launch_file.member_nodes(context=None)
    profile = load_profile(profile_name)
    started = [m for m in profile.members if m.start]  # Isaac Sim and the scene adapter are the user's
    assert [n.kwargs["name"] for n in nodes] == [m.name for m in started]
    for node, member in zip(nodes, started):
        assert node.kwargs["executable"] == member.executable and node.kwargs["package"] == member.package
        assert node.kwargs["arguments"] == member.arguments
        assert node.kwargs["parameters"] == [member.parameters]
        assert node.kwargs["remappings"] == list(member.remappings.items())
        exits = node.kwargs["additional_env"]["R3_MEMBER_EXITS"]
        (timer,) = node.kwargs["on_exit"](
            types.SimpleNamespace(returncode=-9), None
        )  # killed: recorded, then
        (shutdown,) = timer.kwargs["actions"]  # the launch shuts down after the grace
        assert "exited" in shutdown.kwargs["reason"] and timer.kwargs["period"] > 0
        assert Path(exits).read_text().splitlines()[-1] == f"{member.name} was killed by SIGKILL"
    if profile_name == "gazebo":
        bridge = nodes[0].kwargs
        assert (bridge["package"], bridge["executable"]) == ("ros_gz_bridge", "parameter_bridge")
        assert bridge["parameters"] == [{"config_file": str(ROOT / "config" / "gazebo" / "bridge.yaml")}]


def test_sim_packing_perception_sees_with_the_simulators_camera():
    """The perception node's extrinsics in sim_packing are the packing base camera's pose."""
    from r3.sim.packing.env import PackingEnv

    member = next(m for m in load_profile("sim_packing").members if m.name == "r3_perception_node")
    reasoner = load_profile("sim_packing").member("r3_reasoner_node")
    assert reasoner.parameters["base_from_camera"] == member.parameters["base_from_camera"]
    x, y, z, qx, qy, qz, qw = member.parameters["base_from_camera"]
    rot = transforms3d.quaternions.quat2mat([qw, qx, qy, qz])
    env = PackingEnv()
    env.reset(seed=0)
    truth = env.camera_extrinsics("base")
    env.close()
    assert np.allclose(truth[:3, 3], (x, y, z), atol=1e-6) and np.allclose(truth[:3, :3], rot, atol=1e-6)
    packing = next(m for m in load_profile("sim_packing").members if m.name == "r3_packing_sim_node")
    assert packing.parameters["grounding"] == "perception"
    assert set(member.parameters["query"]) == set(ITEM_SPECS)
