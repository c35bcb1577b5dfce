"""The graph description: which nodes a profile runs, with what parameters and remappings.

One YAML file (``config/graph.yaml``) serves every way of starting the graph: ``r3 launch`` here
(processes under :mod:`r3.graph.supervisor`) and ``launch/r3.launch.py`` with launch_ros. Each
member either names an r3 node (``node:``, whose interface is declared in
:mod:`r3.graph.interfaces`) or an external executable (``package:`` + ``executable:``) that declares
what it publishes and subscribes, directly or through a ros_gz_bridge parameter file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from r3.graph import names
from r3.graph.interfaces import NODE_INTERFACES, NodeInterface

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"
DEFAULT_GRAPH = CONFIG_DIR / "graph.yaml"
_MEMBER_KEYS = {"name", "node", "package", "executable", "parameters", "remappings", "publishes", "subscribes",
                "bridge_config", "description"}


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


def load_graph(path: str | Path = DEFAULT_GRAPH) -> dict:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"graph description {path} does not exist")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data.get("profiles"), dict) or not data["profiles"]:
        raise ValueError(f"{path}: expected a non-empty 'profiles' mapping")
    return data


def profile_names(path: str | Path = DEFAULT_GRAPH) -> list[str]:
    return list(load_graph(path)["profiles"])


def load_profile(name: str, path: str | Path = DEFAULT_GRAPH, overrides: dict[str, dict] | None = None) -> Profile:
    """Resolve profile ``name``; ``overrides`` maps member name -> parameters that replace the file's."""
    data = load_graph(path)
    if name not in data["profiles"]:
        raise KeyError(f"unknown profile {name!r}; {Path(path).name} defines {sorted(data['profiles'])}")
    raw = data["profiles"][name]
    members = [_member(m, name, Path(path).parent) for m in raw.get("members", [])]
    for member_name, params in (overrides or {}).items():
        next(m for m in members if m.name == member_name).parameters.update(params)
    return Profile(name, raw.get("description", ""), members)


def _member(raw: dict, profile: str, config_dir: Path) -> Member:
    unknown = set(raw) - _MEMBER_KEYS
    where = f"profile {profile!r}, member {raw.get('name', '?')!r}"
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
    if "name" not in raw:
        raise ValueError(f"profile {profile!r}: a member has no name")
    remappings = {str(k): str(v) for k, v in (raw.get("remappings") or {}).items()}
    if "node" in raw:
        if raw["node"] not in NODE_INTERFACES:
            raise ValueError(f"{where}: unknown r3 node {raw['node']!r}; known: {sorted(NODE_INTERFACES)}")
        interface = NODE_INTERFACES[raw["node"]].remapped(remappings)
        # The recorder subscribes to whatever its `topics` parameter lists (types found at run time).
        interface.subscribes.update({t: "*" for t in (raw.get("parameters") or {}).get("topics", [])})
        # The reasoner also watches the wrist camera where its `wrist_camera` parameter says so (packing).
        if raw["node"] == "r3_reasoner_node" and (raw.get("parameters") or {}).get("wrist_camera"):
            interface.subscribes[remappings.get(names.WRIST_IMAGE, names.WRIST_IMAGE)] = "sensor_msgs/msg/Image"
        return Member(raw["name"], "r3", raw["node"], dict(raw.get("parameters") or {}), remappings, interface)
    if "package" not in raw or "executable" not in raw:
        raise ValueError(f"{where}: give either 'node' (an r3 node) or 'package' and 'executable'")
    publishes = dict(raw.get("publishes") or {})
    subscribes = dict(raw.get("subscribes") or {})
    if "bridge_config" in raw:
        bridged_pub, bridged_sub = read_ros_gz_bridge_config(config_dir / raw["bridge_config"])
        publishes.update(bridged_pub)
        subscribes.update(bridged_sub)
    interface = NodeInterface(publishes=publishes, subscribes=subscribes).remapped(remappings)
    return Member(raw["name"], raw["package"], raw["executable"], dict(raw.get("parameters") or {}), remappings,
                  interface, is_r3_node=False)


def read_ros_gz_bridge_config(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Topics a ros_gz_bridge parameter file makes the bridge publish (GZ_TO_ROS) and subscribe (ROS_TO_GZ)."""
    entries = yaml.safe_load(Path(path).read_text()) or []
    publishes, subscribes = {}, {}
    for entry in entries:
        topic = entry.get("ros_topic_name") or entry["topic_name"]
        msgtype = entry["ros_type_name"]
        if "/msg/" not in msgtype:  # the short form "sensor_msgs/Image" is accepted by the bridge too
            msgtype = msgtype.replace("/", "/msg/", 1)
        direction = entry.get("direction", "BIDIRECTIONAL")
        if direction in ("GZ_TO_ROS", "BIDIRECTIONAL"):
            publishes[topic if topic.startswith("/") else "/" + topic] = msgtype
        if direction in ("ROS_TO_GZ", "BIDIRECTIONAL"):
            subscribes[topic if topic.startswith("/") else "/" + topic] = msgtype
    return publishes, subscribes


def unmatched_subscriptions(profile: Profile) -> list[str]:
    """Every (member, topic) a member subscribes to that no member of the profile publishes,
    plus action/service clients without a server. Empty means the profile is wired."""
    published = {t for m in profile.members for t in m.interface.publishes}
    served = {s for m in profile.members for s in m.interface.services}
    actions = {a for m in profile.members for a in m.interface.actions}
    problems = [f"{m.name} subscribes to {t}, which no member publishes"
                for m in profile.members for t in m.interface.subscribes if t not in published]
    problems += [f"{m.name} calls service {s}, which no member serves"
                 for m in profile.members for s in m.interface.service_clients if s not in served]
    problems += [f"{m.name} sends goals to action {a}, which no member serves"
                 for m in profile.members for a in m.interface.action_clients if a not in actions]
    return problems
