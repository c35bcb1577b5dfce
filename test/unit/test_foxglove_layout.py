"""The Foxglove layout in config/foxglove/ shows what a recorded episode bag holds."""

from __future__ import annotations

import json
from pathlib import Path

from r3.graph import names
from r3.graph.description import load_profile

LAYOUT = Path(__file__).resolve().parents[2] / "config" / "foxglove" / "r3_episode.json"


def panels(node) -> list[str]:
    """Panel ids of a layout tree (a panel id or {first, second, ...})."""
    return [node] if isinstance(node, str) else panels(node["first"]) + panels(node["second"])


def topics_of(config: dict) -> set[str]:
    paths = [
        config.get("topicPath"),
        config.get("imageMode", {}).get("imageTopic"),
        *(p["value"] for p in config.get("paths", [])),
    ]
    return {path.split(".")[0] for path in paths if path}


def test_every_panel_is_configured_and_shows_a_recorded_topic():
    layout = json.loads(LAYOUT.read_text())
    assert sorted(panels(layout["layout"])) == sorted(layout["configById"])
    recorded = set(load_profile("sim_language_table").member("r3_recorder_node").parameters["topics"])
    shown = set().union(*(topics_of(c) for c in layout["configById"].values()))
    assert shown <= recorded
    assert {names.CAMERA_IMAGE, names.REASONER_STEPS, names.INSTRUCTION_OUTCOMES} <= shown


def test_message_paths_name_fields_the_messages_have():
    layout = json.loads(LAYOUT.read_text())
    fields = {names.REASONER_STEPS: "ReasonerStep", names.INSTRUCTION_OUTCOMES: "InstructionOutcome"}
    msg_dir = Path(__file__).resolve().parents[2] / "msg" / "msg"
    for config in layout["configById"].values():
        for path in [config.get("topicPath"), *(p["value"] for p in config.get("paths", []))]:
            if path and "." in path:
                topic, field = path.split(".", 1)
                definition = (msg_dir / f"{fields[topic]}.msg").read_text()
                assert any(
                    line.split()[1:2] == [field] for line in definition.splitlines() if line.strip()
                ), path
