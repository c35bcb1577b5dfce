"""Declare a node's parameters from its schema (``r3.graph.node_params``), the one way every r3 node
does: each with a ParameterDescriptor (description, range or choices, read-only), so that
``ros2 param describe`` explains it, and a set-parameters callback that refuses an invalid value with
the schema's reason, as it does a value that would break one of the schema's rules with the other
parameters' current values (``min_depth_m`` above ``max_depth_m``). A value given at launch passes the
same check; an invalid one ends the node with one ``fatal:`` line (r3_ros.spin)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    ParameterType,
    SetParametersResult,
)
from rclpy.node import Node

from r3.graph.params import NodeParameters, ParameterSpec

#: The ROS type of each schema type.
ROS_TYPES = {
    "bool": ParameterType.PARAMETER_BOOL,
    "int": ParameterType.PARAMETER_INTEGER,
    "float": ParameterType.PARAMETER_DOUBLE,
    "str": ParameterType.PARAMETER_STRING,
    "float[]": ParameterType.PARAMETER_DOUBLE_ARRAY,
    "str[]": ParameterType.PARAMETER_STRING_ARRAY,
}


def descriptor(spec: ParameterSpec) -> ParameterDescriptor:
    d = ParameterDescriptor(
        type=ROS_TYPES[spec.type],
        description=spec.description,
        additional_constraints=spec.constraints,
        read_only=spec.read_only,
    )
    if spec.type == "int":
        d.integer_range = [IntegerRange(from_value=spec.range[0], to_value=spec.range[1], step=1)]
    elif spec.type == "float":
        d.floating_point_range = [
            FloatingPointRange(from_value=float(spec.range[0]), to_value=float(spec.range[1]), step=0.0)
        ]
    return d


def declare_parameters(node: Node, schema: NodeParameters) -> Mapping[str, object]:
    """Declare ``schema`` on ``node``; its values by name, kept current: a parameter that is not
    read-only and is set while the node runs is seen at its next read."""
    values: dict[str, object] = {}

    def check(parameters) -> SetParametersResult:
        for p in parameters:
            reason = schema[p.name].check(p.value) if p.name in schema else None
            if reason:
                return SetParametersResult(successful=False, reason=reason)
        together = schema.defaults | values | {p.name: p.value for p in parameters if p.name in schema}
        if reason := schema.broken_rule(together):
            return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    def remember(parameters) -> None:
        values.update({p.name: p.value for p in parameters if p.name in schema})

    node.add_on_set_parameters_callback(check)
    node.add_post_set_parameters_callback(remember)
    for spec in schema.parameters:
        if node.has_parameter(spec.name):  # declared by rclpy itself (use_sim_time)
            node.set_descriptor(spec.name, descriptor(spec))
        else:
            node.declare_parameter(spec.name, spec.default, descriptor(spec))
        values[spec.name] = node.get_parameter(spec.name).value
    return MappingProxyType(values)
