"""Node parameters over DDS: every parameter of every node is described (description, range or
choices, read-only) as its schema says, and an invalid value is refused with a reason, at launch and
while the node runs. The nodes run as processes under the supervisor, as `r3 launch` starts them;
r3_execution_node with the moveit_py stand-in, r3_realsense_node in this process on the RealSense
SDK's software device (no camera here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fake_packages import fake_distribution
from suites.toy import entry_point_env

from r3.graph.description import Member, Profile
from r3.graph.node_params import NODE_PARAMETERS
from r3.graph.params import NodeParameters, ParameterSpec
from r3.graph.supervisor import Supervisor

pytestmark = pytest.mark.ros
STAND_INS = Path(__file__).parent / "stand_ins"
#: Declared and described by rclpy itself on every node (read-only).
RCLPY_OWN = {"start_type_description_service"}
#: Started as processes; the parameters let each start without its hardware or peers.
PROCESS_NODES = {
    "r3_sim_node": {},
    "r3_lowlevel_node": {},
    "r3_reasoner_node": {},
    "r3_recorder_node": {},
    "r3_packing_sim_node": {},
    "r3_perception_node": {"backend": "sim"},
    "r3_execution_node": {},
    "r3_suite_sim_node": {"suite": "toy_line"},  # the toy suite of test/suites, through its entry point
}
#: A package with a segmenter and a policy that say they were built, and with what (``built.json``).
RECORDING_PARTS = """
import json
from pathlib import Path

from r3.perception.segmenters import SimSegmenter


def say_built(what):
    written = Path(__file__).with_name("built.tmp")
    written.write_text(json.dumps(what))
    written.replace(written.with_suffix(".json"))


class RecordingSegmenter(SimSegmenter):
    @classmethod
    def from_options(cls, options):
        say_built({k: options[k] for k in ("backend", "device", "sam2_image_size", "detector")})
        return cls()


class RecordingPolicy:
    def __init__(self):
        say_built({})
"""


def invalid_value(spec: ParameterSpec):
    """A value of the right type that the schema refuses (a read-only parameter refuses every change);
    None where every value of the type is valid."""
    if spec.range is not None:
        return spec.range[1] + (1 if spec.type == "int" else 1.0)
    if spec.choices:
        return "not-" + spec.choices[0]
    if spec.length is not None:
        return [0.0] * (spec.length + 1)
    if spec.read_only and spec.type in ("str", "bool"):  # any change of a read-only one is refused
        return not spec.default if spec.type == "bool" else f"{spec.default}-changed"
    return None


@pytest.fixture
def ros():
    import rclpy

    rclpy.init()
    yield rclpy
    rclpy.try_shutdown()


def _wait(call, *args, timeout_s: float = 30.0, resend_s: float = 5.0):
    """The answer to ``call(*args)`` (a parameter service call, idempotent), sent again every ``resend_s``:
    a request sent just after discovery can lose its response when the server has not yet matched the
    client's response reader (Fast DDS waits 100 ms for it, which a loaded machine can exceed)."""
    deadline = time.monotonic() + timeout_s
    while True:
        future, resend_at = call(*args), time.monotonic() + resend_s
        while not future.done() and time.monotonic() < min(resend_at, deadline):
            time.sleep(0.01)
        if future.done():
            return future.result()
        assert time.monotonic() < deadline, f"no answer within {timeout_s} s"


def test_declare_parameters_describes_refuses_and_keeps_values_current(ros):
    """The adapter on one node in this process: descriptors from the schema, a refusal with the schema's
    reason, a value set while running seen through the returned mapping, read-only kept at launch."""
    from rclpy.exceptions import InvalidParameterValueException
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from r3_ros.params import declare_parameters

    schema = NodeParameters(
        "probe",
        (
            ParameterSpec("rate_hz", "float", 10.0, "How often.", range=(0.5, 100.0), read_only=False),
            ParameterSpec("mode", "str", "a", "Which way.", choices=("a", "b"), read_only=False),
            ParameterSpec("size", "int", 4, "How many.", range=(1, 8)),
        ),
    )
    node = Node("params_probe")
    try:
        values = declare_parameters(node, schema)
        assert dict(values) == {"rate_hz": 10.0, "mode": "a", "size": 4}
        rate, mode, size = node.describe_parameters(["rate_hz", "mode", "size"])
        assert (rate.description, rate.read_only) == ("How often.", False)
        assert (rate.floating_point_range[0].from_value, rate.floating_point_range[0].to_value) == (
            0.5,
            100.0,
        )
        assert mode.additional_constraints == "one of a, b" and size.read_only
        assert (size.integer_range[0].from_value, size.integer_range[0].to_value) == (1, 8)

        refused = node.set_parameters(
            [Parameter("mode", value="c"), Parameter("rate_hz", value=500.0), Parameter("size", value=5)]
        )
        assert [r.successful for r in refused] == [False, False, False]
        assert refused[0].reason == "mode: 'c' is not one of a, b"
        assert "out of range" in refused[1].reason and "read-only" in refused[2].reason
        assert dict(values) == {"rate_hz": 10.0, "mode": "a", "size": 4}  # nothing moved

        assert all(
            r.successful
            for r in node.set_parameters([Parameter("mode", value="b"), Parameter("rate_hz", value=20.0)])
        )
        assert (values["mode"], values["rate_hz"]) == ("b", 20.0)
    finally:
        node.destroy_node()

    for bad, why in (("mode", "'c' is not one of a, b"), ("size", "out of range")):
        value = {"mode": "c", "size": 9}[bad]
        node = Node("params_probe", parameter_overrides=[Parameter(bad, value=value)])
        try:
            with pytest.raises(InvalidParameterValueException, match=why):
                declare_parameters(node, schema)
        finally:
            node.destroy_node()


def test_a_value_that_would_break_a_rule_is_refused_while_running_and_at_launch(ros):
    """A rule between two parameters is checked against the other's current value: alone, a minimum
    above the maximum is refused and nothing moves; both set in one call, consistent, are taken."""
    from rclpy.exceptions import InvalidParameterValueException
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from r3.graph.params import ordered
    from r3_ros.params import declare_parameters

    number = {"type": "float", "range": (0.0, 100.0), "read_only": False}
    schema = NodeParameters(
        "probe",
        (
            ParameterSpec("low_m", default=0.1, description="Low.", **number),
            ParameterSpec("high_m", default=3.0, description="High.", **number),
        ),
        rules=(ordered("low_m", "high_m"),),
    )
    node = Node("rules_probe")
    try:
        values = declare_parameters(node, schema)
        refused = node.set_parameters([Parameter("low_m", value=5.0)])[0]
        assert not refused.successful
        assert refused.reason == "low_m must be below high_m (low_m = 5.0, high_m = 3.0)"
        assert dict(values) == {"low_m": 0.1, "high_m": 3.0}
        taken = node.set_parameters_atomically(
            [Parameter("low_m", value=5.0), Parameter("high_m", value=8.0)]
        )
        assert taken.successful and dict(values) == {"low_m": 5.0, "high_m": 8.0}
    finally:
        node.destroy_node()
    node = Node("rules_probe", parameter_overrides=[Parameter("high_m", value=0.05)])
    try:
        with pytest.raises(InvalidParameterValueException, match="low_m must be below high_m"):
            declare_parameters(node, schema)
    finally:
        node.destroy_node()


def test_a_parameter_no_r3_node_declares_is_refused_naming_it(ros):
    """``ros2 param set /r3_reasoner_node nonexistent 1`` was refused with "Invalid access to
    undeclared parameter(s): []": rclpy's check spends its generator of names in ``any()`` before it
    lists them."""
    from rclpy.exceptions import ParameterNotDeclaredException
    from rclpy.parameter import Parameter

    from r3_ros.node import R3Node

    node = R3Node("undeclared_probe")
    try:
        with pytest.raises(
            ParameterNotDeclaredException, match=r"undeclared parameter\(s\): \['nonexistent'\]"
        ):
            node.set_parameters_atomically(
                [Parameter("nonexistent", value=1), Parameter("use_sim_time", value=True)]
            )
        assert node.get_parameter("use_sim_time").value is False  # nothing of the call was taken
    finally:
        node.destroy_node()


def launch_refused(node: str, parameter: str, env: dict) -> str:
    """Starts ``node`` alone with ``parameter`` (NAME:=VALUE); asserts that it ends at launch with one
    ``fatal:`` line, and returns its stderr."""
    done = subprocess.run(
        [sys.executable, "-m", f"{node}.main", "--ros-args", "-p", parameter],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1 and "fatal: " in done.stderr, done.stderr
    return done.stderr


def test_an_invalid_value_at_launch_ends_the_node_with_its_reason(ros_env):
    assert "policy: 'learned' is not one of scripted" in launch_refused(
        "r3_lowlevel_node", "policy:=learned", ros_env
    )


def test_a_state_timeout_within_the_simulators_command_deadline_is_refused_at_launch(ros, ros_env):
    """r3_lowlevel_node took ``state_timeout_s`` 0.01..1.0, within which a stopped instruction could
    end while the simulator still took its last command. It is refused when the node starts and by
    ``r3 launch --set``; while the node runs it is read-only, so no change is taken then either."""
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from r3.graph.names import PUSHER_COMMAND_DEADLINE_S
    from r3.graph.node_params import STATE_TIMEOUT_MIN_S
    from r3_ros.params import declare_parameters

    err = launch_refused("r3_lowlevel_node", f"state_timeout_s:={PUSHER_COMMAND_DEADLINE_S}", ros_env)
    assert f"state_timeout_s out of range Min: {STATE_TIMEOUT_MIN_S}" in err, err
    why = f"state_timeout_s: {PUSHER_COMMAND_DEADLINE_S} is outside [{STATE_TIMEOUT_MIN_S}, 600.0]"
    done = subprocess.run(
        [sys.executable, "-m", "r3.cli", "launch", "--check"]
        + ["--set", f"r3_lowlevel_node.state_timeout_s={PUSHER_COMMAND_DEADLINE_S}"],
        env=ros_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2 and why in done.stderr and "Traceback" not in done.stderr, done.stderr
    node = Node("state_timeout_probe")
    try:
        values = declare_parameters(node, NODE_PARAMETERS["r3_lowlevel_node"])
        refused = node.set_parameters([Parameter("state_timeout_s", value=PUSHER_COMMAND_DEADLINE_S)])[0]
        assert not refused.successful and "read-only" in refused.reason, refused.reason
        assert values["state_timeout_s"] == 2.0
    finally:
        node.destroy_node()


#: A package whose parts are each chosen by a node's parameter and each wrong: ``broken`` fails to
#: import, ``three`` loads no part of its kind (3), ``unbound`` does not take the arguments r3 calls it with,
#: ``half`` builds what is not of its kind (a policy without ``act``, a segmenter that is 3).
WRONG_PARTS = """
THREE = 3


class NeedsAnArm:
    def __init__(self, arm):
        pass


def takes_nothing():
    pass


class NoAct:
    def reset(self, instruction, state, rng):
        pass


def three(options):
    return 3
"""


def install_wrong_parts(folder: Path, env: dict) -> dict:
    """``env`` with a package ``wrong_parts`` installed that gives a wrong policy, segmenter, backend
    and grounding under the names ``broken``, ``three`` and ``unbound``, and a policy and segmenter
    under ``half``."""
    lines = {
        "r3.policies": "unbound = wrong_parts:NeedsAnArm\nhalf = wrong_parts:NoAct",
        "r3.segmenters": "unbound = wrong_parts:takes_nothing\nhalf = wrong_parts:three",
        "r3.backends": "unbound = wrong_parts:NeedsAnArm",
        "r3.groundings": "unbound = wrong_parts:takes_nothing",
    }
    for group, line in lines.items():
        plural = group.removeprefix("r3.")
        entries = f"broken = no_such_module:Part\nthree = wrong_parts:THREE\n{line}"
        fake_distribution(folder / plural, group, entries, "wrong_parts", WRONG_PARTS, f"wrong_{plural}")
    paths = [str(folder / group.removeprefix("r3.")) for group in lines]
    return {**env, "PYTHONPATH": os.pathsep.join([*paths, env.get("PYTHONPATH", "")])}


#: plural of a part's kind -> its kind's name in a refusal.
KINDS = {"policies": "policy", "segmenters": "segmenter", "backends": "backend", "groundings": "grounding"}


@pytest.mark.parametrize(
    ("node", "parameter", "plural", "target", "why"),
    [
        (
            "r3_lowlevel_node",
            "policy:=broken",
            "policies",
            "no_such_module:Part",
            "cannot be imported: ModuleNotFoundError: No module named 'no_such_module'",
        ),
        (
            "r3_lowlevel_node",
            "policy:=unbound",
            "policies",
            "wrong_parts:NeedsAnArm",
            "'NeedsAnArm' cannot be called with no arguments: missing a required argument: 'arm'",
        ),
        (
            "r3_lowlevel_node",
            "policy:=half",
            "policies",
            "wrong_parts:NoAct",
            "builds <wrong_parts.NoAct object at 0x",
        ),
        (
            "r3_sim_node",
            "controller:=three",
            "policies",
            "wrong_parts:THREE",
            "loads 3, which is not callable",
        ),
        (
            "r3_perception_node",
            "backend:=unbound",
            "segmenters",
            "wrong_parts:takes_nothing",
            "'takes_nothing' cannot be called with 1 positional argument: too many positional arguments",
        ),
        (
            "r3_perception_node",
            "backend:=half",
            "segmenters",
            "wrong_parts:three",
            "builds 3, which has no text_queries, has no reads_sim_instances, has no refuse_labels",
        ),
        (
            "r3_reasoner_node",
            "backend:=three",
            "backends",
            "wrong_parts:THREE",
            "loads 3, which has no from_spec, has no SPEC_OPTIONS",
        ),
        (
            "r3_packing_sim_node",
            "grounding:=unbound",
            "groundings",
            "wrong_parts:takes_nothing",
            "'takes_nothing' cannot be called with 2 positional arguments: too many positional arguments",
        ),
        ("r3_execution_node", "executor:=broken", "", "", "executor: 'broken' is not one of moveit"),
    ],
)
def test_a_node_refuses_a_wrong_part_of_an_installed_package_at_launch_in_one_line(
    node, parameter, plural, target, why, ros_env, tmp_path
):
    """A part its parameter chose that fails to import, is of the wrong kind or cannot be called so
    ends the node at start-up with one line naming the part, its package and why (a part that could
    not be called so ended in a TypeError naming neither). r3_execution_node takes no package's
    executor: its parameter's choices are r3's own."""
    err = launch_refused(node, parameter, install_wrong_parts(tmp_path, ros_env))
    (fatal,) = [line for line in err.splitlines() if line.startswith("fatal: ")]
    if plural:
        name = parameter.partition(":=")[2]
        origin = f"r3.{plural} entry point {target!r} of package 'wrong_{plural}'"
        why = f"{KINDS[plural]} {name!r} ({origin}): {why}"
    assert why in fatal and "Traceback" not in err, err


def test_r3_launch_says_why_a_node_refused_its_part(private_ros_env, tmp_path):
    """`r3 launch` said only "r3_lowlevel_node exited with code 1; see LOG"; the reason was in the log."""
    env = install_wrong_parts(tmp_path / "site", private_ros_env())
    done = subprocess.run(
        [sys.executable, "-m", "r3.cli", "launch", "--set", "r3_lowlevel_node.policy=unbound"]
        + ["--logs", str(tmp_path / "logs")],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    out = done.stdout + done.stderr
    said = (
        "[r3 launch] r3_lowlevel_node exited with code 1: policy 'unbound' (r3.policies entry point "
        "'wrong_parts:NeedsAnArm' of package 'wrong_policies'): 'NeedsAnArm' cannot be called with no "
        "arguments: missing a required argument: 'arm'; see "
    )
    assert done.returncode == 1 and said in out and "Traceback" not in out, out


@pytest.mark.parametrize("where", ["a file", "beneath a file", "a name too long"])
def test_a_recorder_that_cannot_write_its_bag_folder_ends_at_launch_with_the_reason(where, ros_env, tmp_path):
    """Found by a hostile user: with output_dir a file, the recorder started, said it was idle, and
    every episode then failed after 5 s with "did not start recording", the cause only in its log."""
    (tmp_path / "notes.txt").write_text("mine")
    output_dir, says = {
        "a file": (tmp_path / "notes.txt", "is a file, not a folder"),
        "beneath a file": (tmp_path / "notes.txt" / "bags", "no folder can be made under"),
        "a name too long": (tmp_path / ("b" * 300), "is 300 bytes long; at most 255"),  # the path rule
    }[where]
    err = launch_refused("r3_recorder_node", f"output_dir:={output_dir}", ros_env)
    assert "fatal: " in err and "output_dir: " in err and says in err, err
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    ("node", "group", "parameter", "target", "more", "built"),
    [
        (
            "r3_perception_node",
            "r3.segmenters",
            "backend",
            "RecordingSegmenter.from_options",
            ["-p", "device:=cuda:5", "-p", "sam2_image_size:=512"],
            {"backend": "recording", "device": "cuda:5", "sam2_image_size": 512, "detector": ""},
        ),
        ("r3_lowlevel_node", "r3.policies", "policy", "RecordingPolicy", [], {}),
    ],
)
def test_a_part_of_an_installed_package_is_chosen_by_the_nodes_parameter(
    node, group, parameter, target, more, built, ros_env, tmp_path
):
    """The node builds the part its parameter names through the registry, an entry point's as a built-in
    one, and a segmenter gets the node's parameters as its options."""
    entry = f"recording = recording_parts:{target}"
    fake_distribution(tmp_path, group, entry, "recording_parts", RECORDING_PARTS)
    env = {**ros_env, "PYTHONPATH": os.pathsep.join([str(tmp_path), ros_env.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", f"{node}.main", "--ros-args", "-p", f"{parameter}:=recording", *more]
    with open(tmp_path / "node.log", "w") as log:
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    said, deadline = tmp_path / "built.json", time.monotonic() + 120
    try:
        while not said.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert said.exists(), (tmp_path / "node.log").read_text()[-2000:]
        assert json.loads(said.read_text()) == built
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()


@pytest.fixture
def graph(ros_env, tmp_path):
    members = [Member(name, "r3", name, params) for name, params in PROCESS_NODES.items()]
    path = os.pathsep.join([str(STAND_INS), ros_env.get("PYTHONPATH", "")])
    env = {**ros_env, **entry_point_env(tmp_path / "site", path)}
    with Supervisor(Profile("parameters", "", members), tmp_path / "logs", env=env) as supervisor:
        yield supervisor, tmp_path / "logs"


@pytest.fixture
def realsense_node(ros):
    pytest.importorskip("pyrealsense2", reason="needs pyrealsense2")
    from test_perception_node import software_realsense

    from r3.perception.realsense import RealSenseCamera
    from r3_realsense_node.main import RealSenseNode

    _, syncer, depth_sensor, device = software_realsense(64, 48)
    node = RealSenseNode(RealSenseCamera(syncer, depth_sensor))
    yield node
    node.shutdown()
    node.destroy_node()
    del device


@pytest.mark.slow
def test_every_parameter_of_every_node_is_described_and_an_invalid_value_refused(graph, realsense_node):
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from rclpy.parameter_client import AsyncParameterClient

    from r3_ros.executor import QueueAwareExecutor

    supervisor, logs = graph
    assert set(PROCESS_NODES) | {realsense_node.get_name()} == set(NODE_PARAMETERS)
    probe = Node("parameters_test_client")
    executor = QueueAwareExecutor()
    executor.add_node(probe)
    executor.add_node(realsense_node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        for name, schema in NODE_PARAMETERS.items():
            client = AsyncParameterClient(probe, f"/{name}")
            if not client.wait_for_services(timeout_sec=120):
                log = logs / f"{name}.log"
                pytest.fail(
                    f"{name} offers no parameter services: {supervisor.poll()}; "
                    f"{log.read_text()[-2000:] if log.exists() else ''}"
                )
            listed = set(_wait(client.list_parameters).result.names)
            assert listed == {spec.name for spec in schema.parameters} | RCLPY_OWN, name
            described = dict(
                zip(sorted(listed), _wait(client.describe_parameters, sorted(listed)).descriptors)
            )
            assert all(d.description for d in described.values()), name
            for spec in schema.parameters:
                d = described[spec.name]
                assert (d.description, d.read_only, d.additional_constraints) == (
                    spec.description,
                    spec.read_only,
                    spec.constraints,
                ), (name, spec.name)
                ranges = [(r.from_value, r.to_value) for r in [*d.integer_range, *d.floating_point_range]]
                assert ranges == ([spec.range] if spec.range else []), (name, spec.name)

            invalid = {s.name: invalid_value(s) for s in schema.parameters if invalid_value(s) is not None}
            before = _wait(client.get_parameters, list(invalid)).values
            results = _wait(
                client.set_parameters, [Parameter(k, value=v) for k, v in invalid.items()]
            ).results
            assert len(results) == len(invalid) > 0, name
            for (param, value), result in zip(invalid.items(), results):
                spec = schema[param]
                why = "read-only" if spec.read_only else ("out of range" if spec.range else "is not one of")
                assert not result.successful and why in result.reason, (name, param, value, result.reason)
            assert _wait(client.get_parameters, list(invalid)).values == before, name  # nothing moved

        reasoner = AsyncParameterClient(probe, "/r3_reasoner_node")
        assert _wait(reasoner.set_parameters, [Parameter("max_episode_s", value=120.0)]).results[0].successful
        assert _wait(reasoner.get_parameters, ["max_episode_s"]).values[0].double_value == 120.0
        assert supervisor.poll() is None  # every refusal left the node serving
    finally:
        executor.shutdown()
        probe.destroy_node()
