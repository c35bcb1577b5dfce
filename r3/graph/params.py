"""Node parameters as data: one declared schema per node, in the spirit of generate_parameter_library.

A :class:`ParameterSpec` says what a parameter is (name, type, default, description), which values
are valid (a closed range for numbers, choices or a pattern for strings, a length for arrays; no
string holds a control character, and one that names a file or folder follows every command's rule
for paths) and whether it can change while the node runs; a :class:`ParameterRule` says what must hold between
parameters of one node (a minimum below its maximum), checked on the values they would have
together. From them come the ROS ParameterDescriptor a node declares (``r3_ros.params``), the refusal
of an invalid value with a reason, the check of the graph description's overrides, and the README's
parameter tables. ROS-free: every check runs without rclpy.

>>> spec = ParameterSpec("rate_hz", "float", 10.0, "How often.", range=(0.5, 100.0))
>>> spec.check(200.0)
'rate_hz: 200.0 is outside [0.5, 100.0]'
>>> spec.check(3) is not None  # ROS types parameters statically: an integer is not a double
True
>>> spec.coerce(3)  # ... so a profile's or a command line's integer becomes one first
3.0
"""

from __future__ import annotations

import array
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from r3.files import one_line_problem, path_problem

#: The parameter types r3 nodes use (ROS bool, integer, double, string, double and string arrays).
TYPES = ("bool", "int", "float", "str", "float[]", "str[]")
_SCALAR = {"bool": (bool,), "int": (int,), "float": (float,), "str": (str,)}
#: The longest value of a patterned (name) parameter: a ROS name has at most 255 characters.
MAX_NAME_CHARS = 255


def _hidden(value) -> str | None:
    """Why a string value cannot be a parameter's (a name, a frame id, a topic or a path is one line of
    every log and message that shows it: :func:`r3.files.one_line_problem`); None for any other value."""
    return one_line_problem(value) if isinstance(value, str) else None


@dataclass(frozen=True)
class ParameterSpec:
    """One parameter of one node. ``read_only``: the node reads it once, at start-up, so it can only be
    given at launch; a parameter the node reads at each use can be set while it runs."""

    name: str
    type: str
    default: object
    description: str
    range: tuple[float, float] | None = None  # numbers: the closed interval of valid values
    choices: tuple[str, ...] = ()  # strings: the valid values
    pattern: str = ""  # strings: a regular expression every valid value matches whole (a name)
    length: int | None = None  # arrays: the number of items
    read_only: bool = True
    path: bool = False  # strings: a file or folder ('' for none), checked as every command's paths are

    def __post_init__(self):
        if self.type not in TYPES:
            raise ValueError(f"{self.name}: type {self.type!r} is not one of {', '.join(TYPES)}")
        if not self.description:
            raise ValueError(f"{self.name}: no description")
        if (self.range is not None) != (self.type in ("int", "float")):
            raise ValueError(f"{self.name}: a number needs a range, and only a number has one")
        if (self.choices or self.pattern or self.path) and self.type != "str":
            raise ValueError(f"{self.name}: only a string parameter has choices, a pattern or a path")
        if self.length is not None and not self.type.endswith("[]"):
            raise ValueError(f"{self.name}: only an array parameter has a length")
        reason = self.check(self.default)
        if reason:
            raise ValueError(f"default: {reason}")

    def coerce(self, value):
        """``value`` as this parameter's ROS type where nothing is lost: an integer for a double (a
        command line's ``0`` for ``0.0``; ROS itself refuses it); anything else unchanged, for
        :meth:`check` to judge."""
        if self.type == "float" and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if self.type == "float[]" and isinstance(value, list | tuple):
            return [float(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
        return value

    def check(self, value) -> str | None:
        """Why ``value`` is not valid for this parameter; None when it is."""
        if self.type.endswith("[]"):
            item_types = _SCALAR[self.type[:-2]]
            if not isinstance(value, list | tuple | array.array):  # rclpy hands double arrays as array.array
                return f"{self.name}: expected a list of {self.type[:-2]}, got {value!r}"
            if not all(isinstance(v, item_types) and not isinstance(v, bool) for v in value):
                return f"{self.name}: every item must be a {self.type[:-2]}, got {list(value)!r}"
            if self.length is not None and len(value) != self.length:
                return f"{self.name}: expected {self.length} items, got {len(value)}"
            return next(
                (f"{self.name}[{i}]: {why}" for i, v in enumerate(value) if (why := _hidden(v))), None
            )
        if not isinstance(value, _SCALAR[self.type]) or (self.type != "bool" and isinstance(value, bool)):
            return f"{self.name}: expected a {self.type}, got {value!r} ({type(value).__name__})"
        if why := _hidden(value):
            return f"{self.name}: {why}"
        if self.path and value and (why := path_problem(value)):
            return f"{self.name}: {why}"
        if self.range is not None and not self.range[0] <= value <= self.range[1]:
            return f"{self.name}: {value!r} is outside [{self.range[0]}, {self.range[1]}]"
        if self.choices and value not in self.choices:
            return f"{self.name}: {value!r} is not {self.constraints}"
        if self.pattern and len(value) > MAX_NAME_CHARS:
            return f"{self.name}: {len(value)} characters; a name has at most {MAX_NAME_CHARS}"
        if self.pattern and not re.fullmatch(self.pattern, value):
            return f"{self.name}: {value[:80]!r} does not match {self.pattern}"
        return None

    @property
    def constraints(self) -> str:
        """The valid values in words (the descriptor's additional_constraints, the README's column)."""
        if self.range is not None:
            return f"{self.range[0]} to {self.range[1]}"
        if self.choices:
            return "one of " + ", ".join(c or "''" for c in self.choices)
        if self.pattern:
            return f"matches {self.pattern}, at most {MAX_NAME_CHARS} characters"
        if self.length is not None:
            return f"{self.length} items"
        if self.path:
            return "a path (or ''): no control character, at most 255 bytes a name"
        return ""


@dataclass(frozen=True)
class ParameterRule:
    """What must hold between parameters of one node: ``holds`` takes their values in ``names``'
    order; ``says`` is the rule in words (the refusal and the README's line)."""

    names: tuple[str, ...]
    holds: Callable[..., bool]
    says: str

    def check(self, values: Mapping[str, object]) -> str | None:
        """Why ``values`` (every parameter's, as they would be together) break this rule; None if not."""
        if self.holds(*(values[n] for n in self.names)):
            return None
        now = ", ".join(f"{n} = {values[n]!r}" for n in self.names)
        return f"{self.says} ({now})"


def ordered(low: str, high: str) -> ParameterRule:
    """``low`` below ``high``: two numbers, or two arrays item by item."""

    def holds(a, b) -> bool:
        return (
            all(x < y for x, y in zip(a, b, strict=True))
            if isinstance(a, list | tuple | array.array)
            else a < b
        )

    return ParameterRule((low, high), holds, f"{low} must be below {high}")


@dataclass(frozen=True)
class NodeParameters:
    """The schema of one node: every parameter it declares, in order, and the rules between them."""

    node: str
    parameters: tuple[ParameterSpec, ...]
    rules: tuple[ParameterRule, ...] = ()

    def __post_init__(self):
        names = [p.name for p in self.parameters]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.node}: a parameter is declared twice in {names}")
        for rule in self.rules:
            if unknown := [n for n in rule.names if n not in names]:
                raise ValueError(f"{self.node}: the rule {rule.says!r} names undeclared {unknown}")
        if reason := self.broken_rule(self.defaults):
            raise ValueError(f"{self.node}: defaults: {reason}")

    @property
    def defaults(self) -> dict[str, object]:
        return {p.name: p.default for p in self.parameters}

    def broken_rule(self, values: Mapping[str, object]) -> str | None:
        """Why ``values`` (every parameter's) break a rule of this node; None when they keep them all."""
        return next((reason for rule in self.rules if (reason := rule.check(values))), None)

    def __contains__(self, name: str) -> bool:
        return any(p.name == name for p in self.parameters)

    def __getitem__(self, name: str) -> ParameterSpec:
        for p in self.parameters:
            if p.name == name:
                return p
        raise KeyError(f"{self.node} declares no parameter {name!r}")

    def problems(self, values: dict) -> list[str]:
        """Why each of ``values`` (name -> value: a profile's overrides) cannot be given; [] if all can."""
        found = []
        for name, value in values.items():
            if name not in self:
                found.append(f"{self.node} declares no parameter {name!r}")
            elif reason := self[name].check(value):
                found.append(f"{self.node}: {reason}")
        if not found and (reason := self.broken_rule(self.defaults | dict(values))):
            found.append(f"{self.node}: {reason}")
        return found

    def markdown(self, omit: tuple[str, ...] = ()) -> str:
        """The node's parameter table (the README's), without the parameters named in ``omit``."""
        rows = [
            f"#### `{self.node}`",
            "",
            "| parameter | type | default | valid values | set while running | description |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for p in (p for p in self.parameters if p.name not in omit):
            valid = p.constraints.replace("|", "\\|") or "any"
            running = "no" if p.read_only else "yes"
            default = json.dumps(p.default)
            rows.append(f"| `{p.name}` | {p.type} | `{default}` | {valid} | {running} | {p.description} |")
        if self.rules:
            rows += ["", "Also: " + "; ".join(r.says for r in self.rules) + "."]
        return "\n".join(rows)
