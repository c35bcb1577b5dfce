"""r3_msgs type definitions for `rosbags`, read from the interface files themselves.

Bags are written and read without rosbag2 or rclpy: the message definitions come from the same
`.msg` / `.srv` / `.action` files that r3_msgs is built from, so the bag schema can never drift
from the interfaces. Services contribute ``<Name>_Request`` / ``<Name>_Response`` and actions
``<Name>_Goal`` / ``<Name>_Result`` / ``<Name>_Feedback``, the names rosidl generates.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

PACKAGE = "r3_msgs"
_PARTS = {"msg": ("",), "srv": ("_Request", "_Response"), "action": ("_Goal", "_Result", "_Feedback")}


def interface_dir() -> Path:
    """Folder holding msg/, srv/ and action/ of r3_msgs.

    A source checkout uses its own ``msg/`` folder; an installed package (colcon or the setup
    script's prefix) is found through AMENT_PREFIX_PATH.
    """
    checkout = Path(__file__).resolve().parents[2] / "msg"
    if (checkout / "package.xml").is_file():
        return checkout
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        share = Path(prefix) / "share" / PACKAGE
        if (share / "msg").is_dir():
            return share
    raise FileNotFoundError(
        f"cannot find the {PACKAGE} interface files: no msg/ folder next to the r3 package and no "
        f"share/{PACKAGE} under AMENT_PREFIX_PATH"
    )


def interface_definitions(root: Path | None = None) -> dict[str, str]:
    """Full type name -> message definition text, for every message type r3_msgs defines."""
    root = interface_dir() if root is None else root
    definitions: dict[str, str] = {}
    for kind, suffixes in _PARTS.items():
        for path in sorted((root / kind).glob(f"*.{kind}")):
            sections = _split_sections(path.read_text())
            if len(sections) != len(suffixes):
                raise ValueError(f"{path}: expected {len(suffixes)} sections separated by '---'")
            for suffix, text in zip(suffixes, sections):
                definitions[f"{PACKAGE}/{kind}/{path.stem}{suffix}"] = text
    return definitions


def _split_sections(text: str) -> list[str]:
    sections, current = [], []
    for line in text.splitlines():
        if line.strip() == "---":
            sections.append("\n".join(current))
            current = []
        else:
            current.append(line)
    sections.append("\n".join(current))
    return sections


@functools.cache
def typestore() -> Typestore:
    """The ROS 2 Kilted standard types plus every r3_msgs type."""
    return _store_with(())


def bag_typestore(connections) -> Typestore:
    """The store to read a bag's ``connections`` (rosbags') with: :func:`typestore`, except for each
    r3_msgs type the bag holds as an older definition wrote it (its RIHS01 hash differs: a field
    added since, such as ReasonerStep's ``finish_reason``), which is read with the bag's own
    definition. A bag is read as it was written; the current one would misread it."""
    older = {
        c.msgtype: c.msgdef.data
        for c in connections
        if c.msgtype.startswith(f"{PACKAGE}/") and c.digest and c.digest != _current_hash(c.msgtype)
    }
    return _store_with(tuple(sorted(older.items()))) if older else typestore()


@functools.cache
def _current_hash(msgtype: str) -> str:
    """RIHS01 of ``msgtype`` as r3_msgs defines it now (2 ms a bag when computed each time)."""
    return typestore().hash_rihs01(msgtype)


@functools.lru_cache(maxsize=8)
def _store_with(older: tuple[tuple[str, str], ...]) -> Typestore:
    """The Kilted types, r3_msgs' from the interface files, and ``older`` (type, full definition as a
    bag holds it, its dependencies included) in place of those."""
    store = get_typestore(Stores.ROS2_KILTED)
    replaced = dict(older)
    types = {}
    for name, text in interface_definitions().items():
        if name not in replaced:
            # rosbags files service parts under ".../srv/msg/..."; keep the names rosidl generates.
            (definition,) = get_types_from_msg(text, name).values()
            types[name] = definition
    for name, text in older:
        types.update(get_types_from_msg(text, name))
    store.register(types)
    return store
