"""The graph description: which nodes a profile runs, with what parameters and remappings.

One YAML file (``config/graph.yaml``) serves every way of starting the graph: ``r3 launch`` here
(processes under :mod:`r3.graph.supervisor`) and ``launch/r3.launch.py`` with launch_ros. Each
member either names an r3 node (``node:``, whose interface is declared in
:mod:`r3.graph.interfaces`) or an external executable (``package:`` + ``executable:``, optional
``arguments:``) that declares what it publishes, subscribes and serves, directly or through a
ros_gz_bridge parameter file (``bridge_config:``, also handed to the bridge as its ``config_file``).
A member with ``start: false`` is a process r3 does not start (a vendor simulator application, or a
part the user writes): its declared interface is what the user must make it offer.

:func:`unmatched_subscriptions` is the one wiring check: every topic a member subscribes to (after
remappings; ``/clock`` for every member with ``use_sim_time``) must be published by a member of the
same profile, every service and action called must be served, and every node an r3 node watches
(its ``*_node`` parameters: the reasoner's low-level, simulator and recorder) must be a member.
``r3 launch --check`` prints it,
with :func:`outside_requirements` (what the members r3 does not start must offer).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from r3.files import read_yaml_mapping
from r3.graph import names
from r3.graph.interfaces import NODE_INTERFACES, NodeInterface, with_controller

PACKAGE = "r3"


def config_dir() -> Path:
    """The r3 package's config/ folder: share/r3/config of the first prefix on AMENT_PREFIX_PATH
    whose ament index holds r3 (a colcon workspace), else the source tree's (a checkout, or the
    setup script's editable install, which registers nothing in the index)."""
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if (
            prefix
            and (Path(prefix) / "share" / "ament_index" / "resource_index" / "packages" / PACKAGE).is_file()
        ):
            return Path(prefix) / "share" / PACKAGE / "config"
    return Path(__file__).resolve().parents[2] / "config"


CONFIG_DIR = config_dir()
DEFAULT_GRAPH = CONFIG_DIR / "graph.yaml"
_MEMBER_KEYS = {
    "name",
    "node",
    "package",
    "executable",
    "arguments",
    "parameters",
    "remappings",
    "publishes",
    "subscribes",
    "services",
    "bridge_config",
    "start",
    "description",
}


@dataclass
class Member:
    """One process of a profile, with its interface after remapping."""

    name: str
    package: str
    executable: str
    parameters: dict = field(default_factory=dict)
    remappings: dict[str, str] = field(default_factory=dict)
    interface: NodeInterface = field(default_factory=NodeInterface)
    is_r3_node: bool = True
    arguments: list[str] = field(default_factory=list)  # command-line arguments before --ros-args
    start: bool = True  # False: started outside r3 (its interface is what the user must provide)
    description: str = ""


@dataclass
class Profile:
    name: str
    description: str
    members: list[Member]

    def member(self, name: str) -> Member:
        for m in self.members:
            if m.name == name:
                return m
        raise KeyError(f"profile {self.name!r} has no member {name!r}")

    @property
    def started(self) -> list[Member]:
        """The members r3 starts (``r3 launch``, the launch file); the others are started by the user."""
        return [m for m in self.members if m.start]


def load_graph(path: str | Path = DEFAULT_GRAPH) -> dict:
    path = Path(path)
    data = read_yaml_mapping(path, "graph description")
    if not isinstance(data.get("profiles"), dict) or not data["profiles"]:
        raise ValueError(f"{path}: expected a mapping with a non-empty 'profiles' mapping")
    for name, profile in data["profiles"].items():
        members = profile.get("members", []) if isinstance(profile, dict) else None
        if not isinstance(members, list) or not all(isinstance(m, dict) for m in members):
            raise ValueError(f"{path}: profile {name!r}: expected a mapping with a list of member mappings")
        named = [m.get("name") for m in members]
        if twice := sorted({str(n) for n in named if named.count(n) > 1}):
            raise ValueError(f"{path}: profile {name!r} names members {twice} more than once")
    return data


def profile_names(path: str | Path = DEFAULT_GRAPH) -> list[str]:
    return list(load_graph(path)["profiles"])


def load_profile(
    name: str, path: str | Path = DEFAULT_GRAPH, overrides: dict[str, dict] | None = None
) -> Profile:
    """Resolve profile ``name``; ``overrides`` maps member name -> parameters that replace the file's."""
    data = load_graph(path)
    if name not in data["profiles"]:
        raise KeyError(f"unknown profile {name!r}; {Path(path).name} defines {sorted(data['profiles'])}")
    raw = data["profiles"][name]
    raw_members = [dict(m) for m in raw.get("members", [])]
    # Overrides go in before the interfaces are derived: use_sim_time, topics and wrist_camera shape them.
    for member_name, params in (overrides or {}).items():
        target = next((m for m in raw_members if m.get("name") == member_name), None)
        if target is None:
            raise KeyError(
                f"profile {name!r} has no member {member_name!r} to set parameters on; members: "
                f"{[m.get('name') for m in raw_members]}"
            )
        target["parameters"] = {**(target.get("parameters") or {}), **params}
    members = [_member(m, name, Path(path).parent) for m in raw_members]
    return Profile(name, raw.get("description", ""), members)


def _member(raw: dict, profile: str, config_dir: Path) -> Member:
    unknown = set(raw) - _MEMBER_KEYS
    where = f"profile {profile!r}, member {raw.get('name', '?')!r}"
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
    if "name" not in raw:
        raise ValueError(f"profile {profile!r}: a member has no name")
    remappings = {str(k): str(v) for k, v in (raw.get("remappings") or {}).items()}
    parameters = dict(raw.get("parameters") or {})
    start = raw.get("start", True)
    if not isinstance(start, bool):
        raise ValueError(f"{where}: 'start' must be true or false, not {start!r}")  # noqa: TRY004 (a file error)
    if "node" in raw:
        if raw["node"] not in NODE_INTERFACES:
            raise ValueError(f"{where}: unknown r3 node {raw['node']!r}; known: {sorted(NODE_INTERFACES)}")
        parameters = _checked_parameters(raw["node"], parameters, where)
        interface = NODE_INTERFACES[raw["node"]]
        if raw["node"] == "r3_sim_node" and parameters.get("controller"):
            interface = with_controller(interface)
        interface = interface.remapped(remappings)
        # The recorder subscribes to whatever its `topics` parameter lists (types found at run time).
        interface.subscribes.update({t: "*" for t in parameters.get("topics", [])})
        # The reasoner also watches the wrist camera where its `wrist_camera` parameter says so (packing).
        if raw["node"] == "r3_reasoner_node" and parameters.get("wrist_camera"):
            interface.subscribes[remappings.get(names.WRIST_IMAGE, names.WRIST_IMAGE)] = (
                "sensor_msgs/msg/Image"
            )
        # A reasoner told its graph has no recorder needs no word of the recorder's bags.
        if raw["node"] == "r3_reasoner_node" and parameters.get("recorder_node", None) == "":
            interface.subscribes.pop(remappings.get(names.RECORDER_BAGS, names.RECORDER_BAGS), None)
        member = Member(
            raw["name"],
            "r3",
            raw["node"],
            parameters,
            remappings,
            interface,
            start=start,
            description=raw.get("description", ""),
        )
    else:
        if ("package" not in raw or "executable" not in raw) and start:
            raise ValueError(
                f"{where}: give either 'node' (an r3 node) or 'package' and 'executable' "
                f"(or 'start: false' for a process r3 does not start)"
            )
        publishes = {_absolute(t): v for t, v in (raw.get("publishes") or {}).items()}
        subscribes = {_absolute(t): v for t, v in (raw.get("subscribes") or {}).items()}
        if "bridge_config" in raw:
            bridge_file = (config_dir / raw["bridge_config"]).resolve()
            bridged_pub, bridged_sub = read_ros_gz_bridge_config(bridge_file)
            publishes.update(bridged_pub)
            subscribes.update(bridged_sub)
            # The file that describes the bridge here is the file the bridge runs with.
            parameters.setdefault("config_file", str(bridge_file))
        interface = NodeInterface(
            publishes=publishes,
            subscribes=subscribes,
            services=[_absolute(s) for s in raw.get("services") or []],
        ).remapped(remappings)
        member = Member(
            raw["name"],
            raw.get("package", ""),
            raw.get("executable", ""),
            parameters,
            remappings,
            interface,
            is_r3_node=False,
            arguments=[str(a) for a in raw.get("arguments") or []],
            start=start,
            description=raw.get("description", ""),
        )
    # A node with use_sim_time takes its time from /clock (rclpy and rclcpp subscribe to it themselves).
    if parameters.get("use_sim_time"):
        member.interface.subscribes[remappings.get(names.CLOCK, names.CLOCK)] = "rosgraph_msgs/msg/Clock"
    return member


def _checked_parameters(node: str, parameters: dict, where: str) -> dict:
    """An r3 node's parameters as it declares them (an integer given for a double becomes one),
    refused here, before anything starts, when the node would refuse them (ValueError, every reason)."""
    from r3.graph.node_params import NODE_PARAMETERS  # node_params imports the reasoning core

    schema = NODE_PARAMETERS[node]
    typed = {k: schema[k].coerce(v) if k in schema else v for k, v in parameters.items()}
    if problems := schema.problems(typed):
        raise ValueError(f"{where}: " + "; ".join(problems))
    return typed


def _absolute(name: str) -> str:
    """Topic names in the description are resolved from the root namespace, as the members start."""
    name = str(name)
    return name if name.startswith("/") else "/" + name


def read_ros_gz_bridge_config(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Topics a ros_gz_bridge parameter file makes the bridge publish (GZ_TO_ROS) and subscribe
    (ROS_TO_GZ)."""
    entries = yaml.safe_load(Path(path).read_text()) or []
    publishes, subscribes = {}, {}
    for entry in entries:
        # ros_topic_name, else topic_name (both sides), else gz_topic_name (then the ROS side has it too)
        topic = entry.get("ros_topic_name") or entry.get("topic_name") or entry["gz_topic_name"]
        msgtype = entry["ros_type_name"]
        if "/msg/" not in msgtype:  # the short form "sensor_msgs/Image" is accepted by the bridge too
            msgtype = msgtype.replace("/", "/msg/", 1)
        direction = entry.get("direction", "BIDIRECTIONAL")
        if direction not in ("GZ_TO_ROS", "ROS_TO_GZ", "BIDIRECTIONAL"):
            raise ValueError(
                f"{path}: {topic}: direction {direction!r} is not GZ_TO_ROS, ROS_TO_GZ or BIDIRECTIONAL"
            )
        if direction in ("GZ_TO_ROS", "BIDIRECTIONAL"):
            publishes[_absolute(topic)] = msgtype
        if direction in ("ROS_TO_GZ", "BIDIRECTIONAL"):
            subscribes[_absolute(topic)] = msgtype
    return publishes, subscribes


def unmatched_subscriptions(profile: Profile) -> list[str]:
    """Every (member, topic) a member subscribes to that no member of the profile publishes (or
    publishes under another type), plus service/action clients without a server. Empty means the
    profile is wired.

    Members r3 does not start (``start: false``) count with their declared interface: that
    interface is a requirement on the user, which :func:`outside_requirements` spells out."""
    published: dict[str, dict[str, str]] = {}  # topic -> publishing member -> type
    for m in profile.members:
        for t, msgtype in m.interface.publishes.items():
            published.setdefault(t, {})[m.name] = msgtype
    served = {s for m in profile.members for s in m.interface.services}
    actions = {a for m in profile.members for a in m.interface.actions}
    problems = []
    for m in profile.members:
        for t, msgtype in m.interface.subscribes.items():
            if t not in published:
                if t in m.interface.optional:
                    continue
                problems.append(f"{m.name} subscribes to {t}, which no member publishes")
                continue
            other = {p: ty for p, ty in published[t].items() if "*" not in (ty, msgtype) and ty != msgtype}
            problems += [
                f"{m.name} subscribes to {t} as {msgtype}, but {p} publishes it as {ty}"
                for p, ty in other.items()
            ]
    problems += [
        f"{m.name} calls service {s}, which no member serves"
        for m in profile.members
        for s in m.interface.service_clients
        if s not in served
    ]
    problems += [
        f"{m.name} sends goals to action {a}, which no member serves"
        for m in profile.members
        for a in m.interface.action_clients
        if a not in actions
    ]
    return problems + unwatched_members(profile)


def unwatched_members(profile: Profile) -> list[str]:
    """Each ``*_node`` parameter of a member (a node it watches or waits for; "" = none) that names no
    member of the profile: the reasoner would wait out its startup timeout on it."""
    from r3.graph.node_params import NODE_PARAMETERS  # node_params imports the reasoning core

    members = {f"/{m.name}" for m in profile.members}
    problems = []
    for m in profile.members:
        schema = NODE_PARAMETERS.get(m.executable) if m.is_r3_node else None
        for spec in schema.parameters if schema else ():
            if not spec.name.endswith("_node") or spec.type != "str":
                continue
            watched = m.parameters.get(spec.name, spec.default)
            if watched and _absolute(watched) not in members:
                problems.append(f"{m.name}.{spec.name} is {watched}, which is no member of the profile")
    return problems


def outside_requirements(profile: Profile) -> list[str]:
    """What the members r3 does not start must offer, one line each, for the user to provide."""
    lines = []
    for m in profile.members:
        if m.start:
            continue
        renamed = {v: k for k, v in m.remappings.items()}
        parts = [
            f"{verb} " + ", ".join(f"{n} (renamed from {renamed[n]})" if n in renamed else n for n in found)
            for verb, found in (
                ("publish", m.interface.publishes),
                ("subscribe", m.interface.subscribes),
                ("serve", m.interface.services),
            )
            if found
        ]
        lines.append(f"{m.name} (not started by r3) must {'; '.join(parts) or 'run'}")
    return lines
