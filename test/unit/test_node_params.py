"""The node parameter schemas: what a spec accepts and refuses, that graph.yaml holds valid overrides
only, that the README's tables are the generated ones, and that nodes declare nothing outside them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from r3.graph import names
from r3.graph.description import load_profile, profile_names
from r3.graph.interfaces import NODE_INTERFACES
from r3.graph.node_params import NODE_PARAMETERS, with_tables
from r3.graph.params import NodeParameters, ParameterSpec, ordered

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("spec", "value", "reason"),
    [
        (ParameterSpec("n", "int", 3, "A count.", range=(1, 10)), 11, "n: 11 is outside [1, 10]"),
        (ParameterSpec("n", "int", 3, "A count.", range=(1, 10)), True, "expected a int"),
        (ParameterSpec("t", "float", 1.0, "A time.", range=(0.0, 5.0)), 2, "expected a float"),
        (ParameterSpec("t", "float", 1.0, "A time.", range=(0.0, 5.0)), -0.5, "outside [0.0, 5.0]"),
        (ParameterSpec("m", "str", "a", "A mode.", choices=("a", "b")), "c", "'c' is not one of a, b"),
        (ParameterSpec("xyz", "float[]", [0.0] * 3, "A point.", length=3), [0.0, 1.0], "expected 3 items"),
        (ParameterSpec("xyz", "float[]", [0.0] * 3, "A point.", length=3), [0.0, 1, 2.0], "every item"),
        (ParameterSpec("names", "str[]", [""], "Names."), "soup can", "expected a list of str"),
        (ParameterSpec("on", "bool", False, "A switch."), 1, "expected a bool"),
    ],
)
def test_a_spec_refuses_an_invalid_value_with_its_reason(spec, value, reason):
    assert reason in spec.check(value)


@pytest.mark.parametrize(
    ("spec", "value"),
    [
        (ParameterSpec("n", "int", 3, "A count.", range=(1, 10)), 10),
        (ParameterSpec("t", "float", 1.0, "A time.", range=(0.0, 5.0)), 0.0),
        (ParameterSpec("m", "str", "a", "A mode.", choices=("a", "b")), "b"),
        (ParameterSpec("xyz", "float[]", [0.0] * 3, "A point.", length=3), (1.0, 2.0, 3.0)),
        (ParameterSpec("names", "str[]", [""], "Names."), ["soup can", "sugar box"]),
    ],
)
def test_a_spec_accepts_a_valid_value(spec, value):
    assert spec.check(value) is None


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"name": "n", "type": "int", "default": 3, "description": ""}, "no description"),
        ({"name": "n", "type": "int", "default": 3, "description": "A count."}, "needs a range"),
        ({"name": "n", "type": "int", "default": 30, "description": "A count.", "range": (1, 10)}, "default"),
        ({"name": "s", "type": "str", "default": "a", "description": "S.", "range": (1, 2)}, "only a number"),
        ({"name": "n", "type": "uint8", "default": 3, "description": "A count."}, "is not one of"),
    ],
)
def test_a_spec_that_cannot_describe_its_values_is_refused(kwargs, why):
    with pytest.raises(ValueError, match=why):
        ParameterSpec(**kwargs)


def test_a_parameter_declared_twice_is_refused():
    spec = ParameterSpec("on", "bool", False, "A switch.")
    with pytest.raises(ValueError, match="declared twice"):
        NodeParameters("n", (spec, spec))


def test_the_part_choices_are_the_registries_names():
    from r3.lowlevel import GROUNDINGS
    from r3.perception.segmenters import SEGMENTERS

    assert GROUNDINGS.names() == ("sim", "perception")
    assert NODE_PARAMETERS["r3_packing_sim_node"]["grounding"].choices == GROUNDINGS.names()
    assert NODE_PARAMETERS["r3_perception_node"]["backend"].choices == SEGMENTERS.names()
    assert SEGMENTERS.names()[:3] == ("sim", "sam2", "owlv2+sam2")


def test_every_r3_node_has_a_schema():
    assert set(NODE_PARAMETERS) == set(NODE_INTERFACES)


def test_every_number_has_a_range_and_every_parameter_a_description():
    for schema in NODE_PARAMETERS.values():
        for spec in schema.parameters:
            assert spec.description, (schema.node, spec.name)
            assert spec.type not in ("int", "float") or spec.range is not None, (schema.node, spec.name)


def test_no_wait_or_age_bound_can_be_set_to_refuse_everything():
    """Found by a hostile client: ``recorder_timeout_s`` took 0.0, and then every episode ended in
    "did not start recording within 0.0 s"; ``max_frame_age_s`` took 0.0, which the perception
    pipeline refuses only when the node starts. A timeout or a maximum age must be positive."""
    bounds = [
        (schema.node, spec.name, spec.range[0])
        for schema in NODE_PARAMETERS.values()
        for spec in schema.parameters
        if spec.name.endswith(("_timeout_s", "_age_s"))
    ]
    assert ("r3_reasoner_node", "recorder_timeout_s", 0.1) in bounds
    assert [b for b in bounds if b[2] <= 0] == []
    reasoner = {spec.name: spec for spec in NODE_PARAMETERS["r3_reasoner_node"].parameters}
    assert "recorder_timeout_s: 0.0 is outside [0.1, 3600.0]" in reasoner["recorder_timeout_s"].check(0.0)


def test_no_watchdog_timeout_is_shorter_than_two_heartbeats():
    """Found by a hostile client: the reasoner took ``heartbeat_timeout_s`` 0.1 while an episode ran,
    below the 0.25 s between two beats, and the episode ended in "/r3_recorder_node stopped
    responding (no heartbeat for 0.1 s)"; an arm node took ``client_timeout_s`` 0.05 at launch. A node
    that beats on time is silent for a whole period between two beats."""
    watched = {"heartbeat_timeout_s", "client_timeout_s", "reasoner_timeout_s"}
    watchdogs = [
        (schema.node, spec)
        for schema in NODE_PARAMETERS.values()
        for spec in schema.parameters
        if spec.name in watched
    ]
    assert {spec.name for _, spec in watchdogs} == watched
    for node, spec in watchdogs:
        assert spec.range[0] >= 2 * names.HEARTBEAT_PERIOD_S, (node, spec.name)
        assert "is outside" in spec.check(names.HEARTBEAT_PERIOD_S), (node, spec.name)
    reasoner = {spec.name: spec for spec in NODE_PARAMETERS["r3_reasoner_node"].parameters}
    assert reasoner["heartbeat_timeout_s"].check(0.1) == "heartbeat_timeout_s: 0.1 is outside [0.5, 3600.0]"


def test_the_lowlevel_nodes_state_wait_outlasts_the_simulators_command_deadline():
    """A stopped instruction ends once its last command is answered or ``state_timeout_s`` is past;
    with 0.01..1.0 s it could end while the simulator still took that command (commit 05ea595's
    guarantee rests on the wait outlasting the deadline)."""
    spec = NODE_PARAMETERS["r3_lowlevel_node"]["state_timeout_s"]
    deadline = names.PUSHER_COMMAND_DEADLINE_S
    assert spec.range[0] > deadline and spec.check(spec.range[0]) is None
    assert spec.check(deadline) == f"state_timeout_s: {deadline} is outside [{spec.range[0]}, 600.0]"
    assert f"command deadline ({deadline} s)" in spec.description


def _r3_members():
    for profile in profile_names():
        for member in load_profile(profile).members:
            if member.is_r3_node:
                yield profile, member


@pytest.mark.parametrize(("profile", "member"), list(_r3_members()), ids=lambda x: getattr(x, "name", x))
def test_every_value_in_the_graph_description_is_a_declared_parameter_with_a_valid_value(profile, member):
    assert NODE_PARAMETERS[member.executable].problems(member.parameters) == []


@pytest.mark.parametrize(("profile", "member"), list(_r3_members()), ids=lambda x: getattr(x, "name", x))
def test_the_graph_description_holds_overrides_only(profile, member):
    schema = NODE_PARAMETERS[member.executable]
    assert [name for name, value in member.parameters.items() if value == schema[name].default] == []


def test_an_unknown_or_invalid_override_is_named():
    problems = NODE_PARAMETERS["r3_reasoner_node"].problems(
        {"histroy": "none", "history": "all", "wrist_camera": 1}
    )
    assert problems == [
        "r3_reasoner_node declares no parameter 'histroy'",
        "r3_reasoner_node: history: 'all' is not one of response, instruction, none",
        "r3_reasoner_node: wrist_camera: expected a bool, got 1 (int)",
    ]


def test_a_value_that_breaks_a_rule_with_the_others_is_named_with_both_values():
    perception = NODE_PARAMETERS["r3_perception_node"]
    assert perception.problems({"min_depth_m": 5.0}) == [
        "r3_perception_node: min_depth_m must be below max_depth_m (min_depth_m = 5.0, max_depth_m = 3.0)"
    ]
    assert perception.problems({"min_depth_m": 5.0, "max_depth_m": 8.0}) == []  # together, they hold
    execution = NODE_PARAMETERS["r3_execution_node"]
    assert execution.problems({"workspace_low": [0.15, 0.6, 0.005]}) == [
        (
            "r3_execution_node: workspace_low must be below workspace_high "
            "(workspace_low = [0.15, 0.6, 0.005], workspace_high = [0.85, 0.55, 0.75])"
        )
    ]


@pytest.mark.parametrize("name", ["", "r3_lowlevel_node", "/a b", "/1x", "/r3_lowlevel_node/", "/é", "/x;rm"])
def test_a_watched_node_must_be_a_fully_qualified_node_name(name):
    assert NODE_PARAMETERS["r3_reasoner_node"].problems({"lowlevel_node": name}), name


@pytest.mark.parametrize("parameter", ["lowlevel_node", "sim_node", "recorder_node"])
def test_a_watched_node_name_is_at_most_255_characters(parameter):
    """Found by a hostile user: `lowlevel_node` of 5,000 characters was taken while running, and every
    later episode waited its whole startup timeout and ended with a 10,000-character reason."""
    reasoner = NODE_PARAMETERS["r3_reasoner_node"]
    assert reasoner.problems({parameter: "/" + "a" * 254}) == []
    assert reasoner.problems({parameter: "/a" * 2500}) == [
        f"r3_reasoner_node: {parameter}: 5000 characters; a name has at most 255"
    ]


@pytest.mark.parametrize(
    ("node", "overrides", "problem"),
    [
        (
            "r3_sim_node",
            {"camera_frame": "camera\nevil"},
            "camera_frame: 'camera\\nevil' holds the control character U+000A at 6",
        ),
        (
            "r3_realsense_node",
            {"frame_id": "cam\x1b[31m"},
            "frame_id: 'cam\\x1b[31m' holds the control character U+001B at 3",
        ),
        (
            "r3_perception_node",
            {"query": ["red block", "blue\u200bcube"]},
            "query[1]: 'blue\\u200bcube' holds the control character U+200B at 4",
        ),
        (
            "r3_recorder_node",
            {"topics": ["/camera\t/image"]},
            "topics[0]: '/camera\\t/image' holds the control character U+0009 at 7",
        ),
        (
            "r3_recorder_node",
            {"output_dir": "runs/\u2028bags"},
            "output_dir: 'runs/\\u2028bags' holds the control character U+2028 at 5",
        ),
        ("r3_recorder_node", {"output_dir": "runs/" + "b" * 256}, "is 256 bytes long; at most 255"),
        ("r3_perception_node", {"sam2_checkpoint": "x" * 300 + ".pt"}, "is 303 bytes long; at most 255"),
    ],
)
def test_a_string_parameter_holds_no_control_character_and_a_path_follows_the_path_rule(
    node, overrides, problem
):
    """A frame id, topic, query or path with a newline, ESC or an invisible character was a valid value
    at launch and while running, though the commands' own options refuse it (r3.files.path_problem):
    every log line, record and message that shows it would break or hide it."""
    problems = NODE_PARAMETERS[node].problems(overrides)
    assert len(problems) == 1 and problem in problems[0], problems


def test_an_empty_path_parameter_means_none_and_an_ordinary_one_is_taken():
    perception = NODE_PARAMETERS["r3_perception_node"]
    assert perception.problems({"sam2_checkpoint": "", "detector": "models/owlv2 large"}) == []
    assert NODE_PARAMETERS["r3_recorder_node"].problems({"output_dir": "/data/bags/é"}) == []


def test_the_recorder_may_be_none_or_a_node_name():
    reasoner = NODE_PARAMETERS["r3_reasoner_node"]
    assert reasoner.problems({"recorder_node": ""}) == []
    assert reasoner.problems({"recorder_node": "/ns/r3_recorder_node"}) == []
    assert reasoner.problems({"recorder_node": "recorder"})


def test_a_schema_whose_rule_names_an_undeclared_parameter_or_whose_defaults_break_it_is_refused():
    low = ParameterSpec("low", "float", 2.0, "Low.", range=(0.0, 9.0))
    high = ParameterSpec("high", "float", 1.0, "High.", range=(0.0, 9.0))
    with pytest.raises(ValueError, match="undeclared"):
        NodeParameters("n", (low,), rules=(ordered("low", "high"),))
    with pytest.raises(ValueError, match="defaults: low must be below high"):
        NodeParameters("n", (low, high), rules=(ordered("low", "high"),))


def test_the_readme_tables_are_generated_from_the_schemas():
    readme = (ROOT / "README.md").read_text()
    assert with_tables(readme) == readme, "run: python -m r3.graph.node_params --readme README.md"


def test_nodes_declare_parameters_only_through_their_schema():
    """One way to declare a parameter: r3_ros.params.declare_parameters, from the node's schema."""
    helpers = [f for f in sorted((ROOT / "r3_ros").glob("*.py")) if f.name != "params.py"]
    for main in sorted(ROOT.glob("r3_*_node/main.py")) + helpers:
        text = main.read_text()
        assert not re.search(r"\.declare_parameters?\(|\.get_parameter\(", text), main.relative_to(ROOT)
        if main.parent.name.endswith("_node"):
            node = main.parent.name
            assert f'declare_parameters(self, NODE_PARAMETERS["{node}"])' in text, node
