"""One rosbag2 bag per episode, written with `mcap` (MCAP's own library) and read with `rosbags` (no
rosbag2 or rclpy needed).

On-disk layout of an episode::

    <root>/<episode_id>/            a rosbag2 bag (MCAP storage, metadata.yaml)
        r3_episode.yaml             written at the start (status: incomplete) and rewritten at the end
        recording.mcap              while recording only: every message as it arrived (see below)
        <episode_id>.mcap.new       while recording only: the standard bag, built as messages come
        <episode_id>.mcap           on close, the above with its summary: chunked and indexed, as
                                    rosbag2 writes it
        metadata.yaml               written on close, last (rosbag2's version 9); custom_data holds the
                                    outcome

Crash tolerance. While an episode is recorded, each message is appended to ``recording.mcap``, an
unchunked MCAP stream (ros2 profile, the message definitions as schemas), and handed to the OS
before ``write`` returns. A process killed at any moment (SIGKILL included) therefore leaves every
message it finished writing on disk, and at most one torn record at the end. The standard bag is
built beside it as the messages come, so that close only writes its summary and metadata.yaml (an
episode's result waits for the close: 2 ms for a Language Table episode's 250 messages, where
converting the stream at close took 13 ms, and 27 ms with rosbags' writer), then deletes the
stream; :func:`repair_bag` converts the stream of a bag whose writer died instead, keeping the
complete records and marking the episode incomplete. The readers here repair such
a bag on first read. Nothing is fsynced, so a power loss or kernel crash may lose what the OS had not
yet written back; that is a different failure from a killed process and is not covered.

The writer holds an exclusive ``flock`` on the stream while the bag is open; the kernel drops it when
the process dies, so "the stream is locked" means "a live writer (or repair) owns this bag".
"""

from __future__ import annotations

import fcntl
import functools
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml
from mcap.exceptions import EndOfFile
from mcap.records import Channel, Message, Schema
from mcap.stream_reader import StreamReader
from mcap.writer import CompressionType
from mcap.writer import Writer as McapWriter
from rosbags.rosbag2 import Reader

from r3.data.bagtypes import typestore

EPISODE_FILE = "r3_episode.yaml"
STREAM_FILE = "recording.mcap"
METADATA_FILE = "metadata.yaml"
COMPLETE = "complete"
INCOMPLETE = "incomplete"
HASH_KEY = "type_description_hash"  # channel metadata: the rihs01 hash rosbag2 keeps per topic
QOS_KEY = "offered_qos_profiles"  # channel metadata: the publishers' QoS, as rosbag2 writes it
ROSBAG2_VERSION = 9  # of metadata.yaml
MCAP_MAGIC = b"\x89MCAP0\r\n"  # an MCAP file's first and last bytes
#: An episode id names a folder under the bag root: one plain component, never a path.
BAG_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


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


@dataclass
class RepairReport:
    """What :func:`repair_bag` did: ``repaired`` False means the bag needed nothing (see ``reason``)."""

    path: Path
    repaired: bool
    messages: int = 0
    dropped_bytes: int = 0  # the torn or unreadable tail of the stream, not in the repaired bag
    reason: str = ""


class BagBusyError(RuntimeError):
    """The bag's stream is locked: a live process is still recording (or repairing) it."""


class BagRepairError(ValueError):
    """The folder cannot be repaired (it is not a bag r3 wrote)."""


def check_bag_name(episode_id: str) -> str:
    """``episode_id`` if it is a plain folder name (letters, digits, ``_.-``, at most 128, no leading
    dot), else ValueError: an episode id from the network must never reach outside the bag root."""
    if not BAG_NAME.fullmatch(episode_id):
        raise ValueError(
            f"episode id {episode_id[:80]!r} is not a plain folder name "
            f"(letters, digits, '_', '.', '-'; at most 128; no leading '.' or '-')"
        )
    return episode_id


#: libyaml's emitter where PyYAML has it: the pure-Python one took a third of a bag's close.
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _write_yaml_atomically(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.dump(data, Dumper=_DUMPER, sort_keys=False))
    os.replace(tmp, path)


@functools.cache
def type_definition(msgtype: str) -> tuple[bytes, str]:
    """``msgtype``'s definition text and RIHS01 hash, as a bag's schema and metadata give them: the
    same in every bag, and 0.15 ms to generate, for each topic of each episode the recorder opens."""
    store = typestore()
    return store.generate_msgdef(msgtype, ros_version=2)[0].encode(), store.hash_rihs01(msgtype)


class EpisodeBagWriter:
    """Writes one episode: CDR-serialised messages by topic, then the outcome on close."""

    def __init__(self, root: str | Path, info: EpisodeInfo):
        self.info = info
        self.path = Path(root) / check_bag_name(info.episode_id)
        if self.path.exists():
            raise FileExistsError(f"episode bag {self.path} already exists")
        self.path.mkdir(parents=True)
        self._store = typestore()
        # Locked before it has its name, so no reader ever finds it unlocked while this writer lives.
        tmp = self.path / f"{STREAM_FILE}.new"
        self._file = open(tmp, "xb")  # noqa: SIM115 - held open, and locked, until close()
        fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.replace(tmp, self.path / STREAM_FILE)
        self._stream = McapWriter(self._file, compression=CompressionType.NONE, use_chunking=False)
        self._stream.start(profile="ros2", library="r3")
        self._file.flush()
        self._schemas: dict[str, int] = {}
        self._channels: dict[str, int] = {}
        self._bag = _IndexedBag(self.path)  # the standard bag, built as the stream grows
        _write_yaml_atomically(self.path / EPISODE_FILE, asdict(info))

    def write(self, topic: str, msgtype: str, timestamp_ns: int, cdr: bytes) -> None:
        """Append one serialised message; ``msgtype`` is the full name, e.g. sensor_msgs/msg/Image.

        The message is with the OS when this returns: it survives the process being killed.
        """
        channel = self._channels.get(topic)
        if channel is None:
            channel = self._channels[topic] = self._add_channel(topic, msgtype)
        data, stamp = bytes(cdr), int(timestamp_ns)
        self._stream.add_message(channel, stamp, data, stamp)
        self._file.flush()
        self._bag.write(topic, stamp, data, stamp)
        self.info.message_count += 1

    def _add_channel(self, topic: str, msgtype: str) -> int:
        msgdef, type_hash = type_definition(msgtype)
        schema = self._schemas.get(msgtype)
        if schema is None:
            schema = self._schemas[msgtype] = self._stream.register_schema(msgtype, "ros2msg", msgdef)
        self._bag.add_topic(topic, msgtype, "ros2msg", msgdef, "cdr", type_hash)
        return self._stream.register_channel(topic, "cdr", schema, {HASH_KEY: type_hash})

    @property
    def size_bytes(self) -> int:
        """How much of the bag is written so far."""
        return self._file.tell()

    def write_message(self, topic: str, msgtype: str, timestamp_ns: int, message) -> None:
        """Append a rosbags message object (serialised here)."""
        self.write(topic, msgtype, timestamp_ns, self._store.serialize_cdr(message, msgtype))

    def close(
        self, *, success: bool, progress: float, steps: int, reason: str, complete: bool = True
    ) -> Path:
        """Finish the bag and record the outcome; ``complete=False`` keeps it marked incomplete."""
        self.info.success, self.info.progress, self.info.steps, self.info.reason = (
            success,
            progress,
            steps,
            reason,
        )
        self.info.status = COMPLETE if complete else INCOMPLETE
        self._file.flush()
        self._bag.finish(self.info)  # the bag whole, metadata.yaml last: only then is the stream dropped
        (self.path / STREAM_FILE).unlink()
        _write_yaml_atomically(self.path / EPISODE_FILE, asdict(self.info))
        self._file.close()  # releases the lock; the stream is gone by now
        return self.path


def _convert_stream(bag: Path, info: EpisodeInfo, *, repair: bool = False) -> tuple[int, int]:
    """Stream -> standard bag, then delete the stream and write ``info``; (messages, bytes dropped).
    A bag whose writer died is made this way (its writer builds the standard bag as it goes).

    ``repair`` marks the episode incomplete, with a reason that says how many messages were saved.

    Safe to interrupt and run again: the stream stays until the bag is whole (metadata.yaml is
    moved in last), and leftovers of an interrupted run are cleared first.
    """
    stream = bag / STREAM_FILE
    (bag / METADATA_FILE).unlink(missing_ok=True)
    shutil.rmtree(bag / bag.name, ignore_errors=True)  # where earlier versions staged the bag
    indexed = _IndexedBag(bag)
    with open(stream, "rb") as f:
        good_bytes = _copy_complete_records(f, indexed)
        dropped = os.fstat(f.fileno()).st_size - good_bytes
    info.message_count = sum(t.count for t in indexed.topics)
    if repair:
        info.status = INCOMPLETE
        info.reason = (
            f"recorder stopped before the episode ended; repaired from {info.message_count} complete messages"
        )
    indexed.finish(info)
    stream.unlink()
    _write_yaml_atomically(bag / EPISODE_FILE, asdict(info))
    return info.message_count, dropped


@dataclass
class _Topic:
    """One topic of a bag being converted: what rosbag2's metadata.yaml says of it."""

    name: str
    msgtype: str
    serialization_format: str
    type_hash: str
    count: int = 0
    first_ns: int = 0
    last_ns: int = 0

    def add(self, log_time_ns: int) -> None:
        self.first_ns = log_time_ns if not self.count else min(self.first_ns, log_time_ns)
        self.last_ns = max(self.last_ns, log_time_ns)
        self.count += 1


def _rosbag2_metadata(storage: str, topics: list[_Topic], info: EpisodeInfo) -> dict:
    """metadata.yaml of a one-file MCAP bag (rosbag2's format, version 9); the episode's outcome in
    ``custom_data``."""
    held = [t for t in topics if t.count]
    start = min((t.first_ns for t in held), default=0)
    duration = max((t.last_ns for t in held), default=start) - start
    count = sum(t.count for t in topics)
    return {
        "rosbag2_bagfile_information": {
            "version": ROSBAG2_VERSION,
            "storage_identifier": "mcap",
            "relative_file_paths": [storage],
            "duration": {"nanoseconds": duration},
            "starting_time": {"nanoseconds_since_epoch": start},
            "message_count": count,
            "topics_with_message_count": [
                {
                    "topic_metadata": {
                        "name": t.name,
                        "type": t.msgtype,
                        "serialization_format": t.serialization_format,
                        "offered_qos_profiles": [],
                        "type_description_hash": t.type_hash,
                    },
                    "message_count": t.count,
                }
                for t in topics
            ],
            "compression_format": "",
            "compression_mode": "",
            "files": [
                {
                    "path": storage,
                    "starting_time": {"nanoseconds_since_epoch": start},
                    "duration": {"nanoseconds": duration},
                    "message_count": count,
                }
            ],
            "custom_data": {f"r3.{key}": str(value) for key, value in asdict(info).items()},
            "ros_distro": os.environ.get("ROS_DISTRO", ""),
        }
    }


class _IndexedBag:
    """A bag's MCAP file as rosbag2 writes it (chunked and indexed), built message by message under a
    staging name, and the topics its metadata.yaml lists. :meth:`finish` puts both in place."""

    def __init__(self, bag: Path):
        self.bag, self.storage = bag, bag / f"{bag.name}.mcap"
        self.staging = self.storage.with_name(f"{self.storage.name}.new")
        self.storage.unlink(missing_ok=True)
        self._file = open(self.staging, "wb")  # noqa: SIM115 - until finish()
        self._writer = McapWriter(self._file, compression=CompressionType.NONE)
        self._writer.start(profile="ros2", library="r3")
        self._schemas: dict[str, int] = {}  # message type -> schema id
        self._channels: dict[str, tuple[int, _Topic]] = {}  # topic -> channel id, its figures
        self.topics: list[_Topic] = []

    def add_topic(
        self, topic: str, msgtype: str, encoding: str, msgdef: bytes, serialization: str, type_hash: str
    ) -> None:
        schema = self._schemas.get(msgtype)
        if schema is None:
            schema = self._schemas[msgtype] = self._writer.register_schema(msgtype, encoding, msgdef)
        # rosbag2's channel metadata: the publishers' QoS (none recorded) and the type's hash.
        metadata = {QOS_KEY: "[]", HASH_KEY: type_hash}
        channel = self._writer.register_channel(topic, serialization, schema, metadata)
        self.topics.append(_Topic(topic, msgtype, serialization, type_hash))
        self._channels[topic] = (channel, self.topics[-1])

    def write(
        self, topic: str, log_time_ns: int, data: bytes, publish_time_ns: int, sequence: int = 0
    ) -> None:
        channel, figures = self._channels[topic]
        self._writer.add_message(channel, log_time_ns, data, publish_time_ns, sequence)
        figures.add(log_time_ns)

    def finish(self, info: EpisodeInfo) -> None:
        """The file's summary, then the file and metadata.yaml (last) under their names."""
        self._writer.finish()
        self._file.close()
        os.replace(self.staging, self.storage)
        _write_yaml_atomically(
            self.bag / METADATA_FILE, _rosbag2_metadata(self.storage.name, self.topics, info)
        )


class _ExactReader:
    """A file for StreamReader where a short read is the end of the stream, so a torn record at the
    tail is never returned (StreamReader itself would hand out a truncated message)."""

    def __init__(self, f):
        self.f, self.offset = f, 0

    def read(self, n: int) -> bytes:
        data = self.f.read(n)
        if len(data) < n:
            raise EndOfFile()
        self.offset += n
        return data


def _copy_complete_records(f, bag: _IndexedBag) -> int:
    """Every complete message of the stream ``f`` into ``bag``; the bytes of complete records."""
    src = _ExactReader(f)
    records = StreamReader(src, skip_magic=False).records
    schemas: dict[int, Schema] = {}
    topics: dict[int, str] = {}
    good = 0
    while True:
        try:
            record = next(records)
        except Exception:  # noqa: BLE001 - the end, or a torn or unparsable tail: stop there either way
            break
        if isinstance(record, Schema):
            schemas[record.id] = record
        elif isinstance(record, Channel):
            schema = schemas[record.schema_id]
            type_hash = record.metadata[HASH_KEY]
            bag.add_topic(
                record.topic, schema.name, schema.encoding, schema.data, record.message_encoding, type_hash
            )
            topics[record.id] = record.topic
        elif isinstance(record, Message):
            bag.write(
                topics[record.channel_id], record.log_time, record.data, record.publish_time, record.sequence
            )
        good = src.offset
    return good


def repair_bag(bag: str | Path) -> RepairReport:
    """Make a bag whose writer died a standard, readable bag marked incomplete; idempotent.

    Keeps every complete message of the recording stream, in order, and drops the torn tail.
    Returns ``repaired=False`` with the reason when the bag is already whole; raises
    :class:`BagBusyError` while a live process still records it and :class:`BagRepairError` when
    the folder is no r3 bag.
    """
    bag = Path(bag)
    stream = bag / STREAM_FILE
    if not stream.is_file():
        if (bag / METADATA_FILE).is_file():
            if damage := bag_damage(bag):
                raise BagRepairError(
                    f"{bag} is a closed bag whose files are damaged ({damage}): nothing to rebuild it "
                    "from; record the episode again"
                )
            return RepairReport(
                bag,
                False,
                reason="a closed rosbag2 bag (metadata.yaml, no recording stream): nothing to repair",
            )
        raise BagRepairError(
            f"{bag} is not a bag r3 recorded: it has neither {STREAM_FILE} nor {METADATA_FILE}"
        )
    with open(stream, "rb") as lock:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BagBusyError(
                f"{bag} is still being recorded by a live process (it holds {STREAM_FILE}); "
                "read it once the episode is closed"
            ) from None
        if not stream.exists():  # another process finished it between our open and our lock
            return RepairReport(bag, False, reason="closed or repaired by another process: nothing to repair")
        info = _read_info_file(bag) if (bag / EPISODE_FILE).is_file() else EpisodeInfo(episode_id=bag.name)
        count, dropped = _convert_stream(bag, info, repair=True)
    return RepairReport(bag, True, count, dropped)


def _read_info_file(bag: Path) -> EpisodeInfo:
    """The sidecar as written; a ValueError naming the file when it is not one."""
    file = bag / EPISODE_FILE
    try:
        fields = yaml.safe_load(file.read_text())
        return EpisodeInfo(**fields)
    except (yaml.YAMLError, UnicodeDecodeError, TypeError) as exc:
        raise ValueError(f"{file} is not an episode record: {str(exc).splitlines()[0]}") from None


def bag_damage(bag: str | Path) -> str | None:
    """What is wrong with the files of a closed bag, or None when they are whole: its metadata.yaml
    is readable and names storage files that exist and end with MCAP's closing magic, which a file cut
    short or overwritten lacks. (A bag still recording, or left by a killed writer, has its stream
    file instead; :func:`repair_bag` looks after those.)"""
    bag = Path(bag)
    try:
        meta = yaml.safe_load((bag / METADATA_FILE).read_text())
        files = meta["rosbag2_bagfile_information"]["relative_file_paths"]
    except FileNotFoundError:
        return f"no {METADATA_FILE}"
    except (OSError, UnicodeDecodeError, yaml.YAMLError, TypeError, KeyError) as exc:
        return f"{METADATA_FILE} unreadable ({type(exc).__name__})"
    if not isinstance(files, list) or not files:
        return f"{METADATA_FILE} names no storage file"
    for name in files:
        path = bag / str(name)
        try:
            with open(path, "rb") as f:
                if f.seek(0, os.SEEK_END) < 2 * len(MCAP_MAGIC):
                    return f"{name} is cut short"
                f.seek(-len(MCAP_MAGIC), os.SEEK_END)
                if f.read() != MCAP_MAGIC:
                    return f"{name} is cut short or damaged (no closing MCAP magic)"
        except OSError as exc:
            return f"{name}: {exc.strerror or exc}"
    return None


def read_episode_info(bag: str | Path) -> EpisodeInfo:
    """The episode's sidecar; a bag whose writer died is repaired first (one still recording is not)."""
    bag = Path(bag)
    if (bag / STREAM_FILE).is_file():
        try:
            repair_bag(bag)
        except BagBusyError:
            pass  # still recording: the sidecar rightly says incomplete
    return _read_info_file(bag)


def read_messages(bag: str | Path, topics: set[str] | None = None) -> Iterator[tuple[str, str, int, object]]:
    """(topic, msgtype, timestamp_ns, message) for every message of ``topics`` (default all), in time order.

    A bag whose writer died is repaired first; one still being recorded raises :class:`BagBusyError`.
    """
    bag = Path(bag)
    if (bag / STREAM_FILE).is_file():
        repair_bag(bag)
    store = typestore()
    with Reader(bag) as reader:
        conns = [c for c in reader.connections if topics is None or c.topic in topics]
        if not conns:  # rosbags reads every connection when given none
            return
        for conn, timestamp, raw in reader.messages(connections=conns):
            yield conn.topic, conn.msgtype, timestamp, store.deserialize_cdr(raw, conn.msgtype)
