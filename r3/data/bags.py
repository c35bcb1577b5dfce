"""One rosbag2 bag per episode, written and read with `rosbags` (no rosbag2 or rclpy needed).

On-disk layout of an episode::

    <root>/<episode_id>/            a rosbag2 bag (MCAP storage, metadata.yaml)
        <episode_id>_0.mcap
        metadata.yaml               written when the bag is closed; custom_data holds the outcome
        r3_episode.yaml             written at the start (status: incomplete) and rewritten at the end

``r3_episode.yaml`` exists from the first message on, so a bag whose writer died still says what
it is and that it is incomplete.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

import yaml
from rosbags.rosbag2 import Reader, StoragePlugin, Writer

from r3.data.bagtypes import typestore

EPISODE_FILE = "r3_episode.yaml"
COMPLETE = "complete"
INCOMPLETE = "incomplete"


@dataclass
class EpisodeInfo:
    """What an episode bag is about, and how it ended (``status`` incomplete until closed)."""

    episode_id: str
    suite: str = ""
    task: str = ""
    seed: int = 0
    goal: str = ""
    backend: str = ""
    status: str = INCOMPLETE
    success: bool = False
    progress: float = 0.0
    steps: int = 0
    reason: str = ""
    started_unix: float = field(default_factory=time.time)
    message_count: int = 0


def _write_yaml_atomically(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(data, sort_keys=False))
    os.replace(tmp, path)


class EpisodeBagWriter:
    """Writes one episode: CDR-serialised messages by topic, then the outcome on close."""

    def __init__(self, root: str | Path, info: EpisodeInfo):
        self.info = info
        self.path = Path(root) / info.episode_id
        if self.path.exists():
            raise FileExistsError(f"episode bag {self.path} already exists")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._store = typestore()
        self._writer = Writer(self.path, version=9, storage_plugin=StoragePlugin.MCAP)
        self._writer.open()
        self._connections: dict[str, object] = {}
        _write_yaml_atomically(self.path / EPISODE_FILE, asdict(info))

    def write(self, topic: str, msgtype: str, timestamp_ns: int, cdr: bytes) -> None:
        """Append one serialised message; ``msgtype`` is the full name, e.g. sensor_msgs/msg/Image."""
        conn = self._connections.get(topic)
        if conn is None:
            conn = self._writer.add_connection(topic, msgtype, typestore=self._store)
            self._connections[topic] = conn
        self._writer.write(conn, int(timestamp_ns), bytes(cdr))
        self.info.message_count += 1

    def write_message(self, topic: str, msgtype: str, timestamp_ns: int, message) -> None:
        """Append a rosbags message object (serialised here)."""
        self.write(topic, msgtype, timestamp_ns, self._store.serialize_cdr(message, msgtype))

    def close(self, *, success: bool, progress: float, steps: int, reason: str, complete: bool = True) -> Path:
        """Finish the bag and record the outcome; ``complete=False`` keeps it marked incomplete."""
        self.info.success, self.info.progress, self.info.steps, self.info.reason = success, progress, steps, reason
        self.info.status = COMPLETE if complete else INCOMPLETE
        for key, value in asdict(self.info).items():
            self._writer.set_custom_data(f"r3.{key}", str(value))
        self._writer.close()
        _write_yaml_atomically(self.path / EPISODE_FILE, asdict(self.info))
        return self.path


def read_episode_info(bag: str | Path) -> EpisodeInfo:
    return EpisodeInfo(**yaml.safe_load((Path(bag) / EPISODE_FILE).read_text()))


def read_messages(bag: str | Path, topics: set[str] | None = None) -> Iterator[tuple[str, str, int, object]]:
    """(topic, msgtype, timestamp_ns, message) for every message of ``topics`` (default all), in time order."""
    store = typestore()
    with Reader(Path(bag)) as reader:
        conns = [c for c in reader.connections if topics is None or c.topic in topics]
        for conn, timestamp, raw in reader.messages(connections=conns):
            yield conn.topic, conn.msgtype, timestamp, store.deserialize_cdr(raw, conn.msgtype)
