"""One rosbag2 bag per episode, written with `mcap` (MCAP's own library) and read with `rosbags` (no
rosbag2 or rclpy needed).

On-disk layout of an episode::

    <root>/<episode_id>/            a rosbag2 bag (MCAP storage, metadata.yaml)
        r3_episode.yaml             written at the start (status: incomplete) and rewritten at the end
        recording.mcap              while recording only: every message as it arrived (see below)
        recording.mcap.torn         after a repair that could not read all of the stream: the stream
                                    as the killed writer left it (no reader looks at it)
        recording.mcap.stray        a stream found beside a closed bag, set aside as it was (see
                                    :func:`repair_bag`; no reader looks at it)
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
complete records and marking the episode incomplete (and the stream itself, renamed, when some of
it could not be read; a file that is not such a stream is refused). The readers here repair such
a bag on first read. Nothing is fsynced, so a power loss or kernel crash may lose what the OS had not
yet written back; that is a different failure from a killed process and is not covered.

The writer holds an exclusive ``flock`` on the stream while the bag is open; the kernel drops it when
the process dies, so "the stream is locked" means "a live writer (or repair) owns this bag".
"""

from __future__ import annotations

import fcntl
import functools
import io
import mmap
import os
import re
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import yaml
from mcap.data_stream import ReadDataStream
from mcap.exceptions import EndOfFile
from mcap.opcode import Opcode
from mcap.records import Channel, Chunk, Footer, Message, Schema
from mcap.stream_reader import get_chunk_data_stream
from mcap.writer import CompressionType
from mcap.writer import Writer as McapWriter
from rosbags.rosbag2 import Reader

from r3.data.bagtypes import bag_typestore, typestore
from r3.files import (
    FileRefused,
    bounded_repr,
    folder_problem,
    is_kind,
    read_small_text,
    write_text_atomically,
    yaml_value,
)

EPISODE_FILE = "r3_episode.yaml"
STREAM_FILE = "recording.mcap"
TORN_SUFFIX = ".torn"  # recording.mcap.torn: a stream repair could not read to its end, kept as it was
STRAY_SUFFIX = ".stray"  # recording.mcap.stray: a stream beside a closed bag, which is never rebuilt from it
METADATA_FILE = "metadata.yaml"
COMPLETE = "complete"
INCOMPLETE = "incomplete"
HASH_KEY = "type_description_hash"  # channel metadata: the rihs01 hash rosbag2 keeps per topic
QOS_KEY = "offered_qos_profiles"  # channel metadata: the publishers' QoS, as rosbag2 writes it
ROSBAG2_VERSION = 9  # of metadata.yaml
MCAP_MAGIC = b"\x89MCAP0\r\n"  # an MCAP file's first and last bytes
#: Why a bag is incomplete when its recorder was killed while recording: nobody was left to say so.
STOPPED_RECORDING = "the recorder stopped while recording: no end was written"
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
    reason: str = ""  # repaired: what was not converted and why, and any episode id replaced
    kept: Path | None = None  # where the stream went: some of it was not converted, or a closed bag was there


class BagBusyError(RuntimeError):
    """The bag's stream is locked: a live process is still recording (or repairing) it."""


class BagRepairError(ValueError):
    """The folder cannot be repaired (it is not a bag r3 wrote); it is left as it was."""


def bag_root(output_dir: str) -> Path:
    """``output_dir`` as the folder the bags go into, made now: one the recorder cannot write ends it
    at launch with the reason, not every episode later with "did not start recording". An empty one
    is refused too: it would put the bags in whatever folder the recorder was started from."""
    if not output_dir.strip():
        raise ValueError("output_dir is empty: name the folder the bags go into")
    root = Path(output_dir).expanduser().resolve()
    if problem := folder_problem(root):
        raise ValueError(f"output_dir: {problem}")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a name too long for the filesystem, a full disk
        raise ValueError(f"output_dir: cannot make {root}: {exc.strerror or exc}") from None
    return root


def check_bag_name(episode_id: str) -> str:
    """``episode_id`` if it is a plain folder name (letters, digits, ``_.-``, at most 128, no leading
    dot), else ValueError (TypeError when it is no string at all: a sidecar's id can be anything YAML
    holds): an episode id from the network must never reach outside the bag root."""
    if not isinstance(episode_id, str):
        raise TypeError(f"episode id {bounded_repr(episode_id, 80)} is no string")
    if not BAG_NAME.fullmatch(episode_id):
        raise ValueError(
            f"episode id {bounded_repr(episode_id, 80)} is not a plain folder name "
            f"(letters, digits, '_', '.', '-'; at most 128; no leading '.' or '-')"
        )
    return episode_id


#: libyaml's emitter where PyYAML has it: the pure-Python one took a third of a bag's close.
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _write_yaml_atomically(path: Path, data: dict) -> None:
    write_text_atomically(path, yaml.dump(data, Dumper=_DUMPER, sort_keys=False))


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
        self._set_outcome(success, progress, steps, reason, complete)
        self._file.flush()
        self._bag.finish(self.info)  # the bag whole, metadata.yaml last: only then is the stream dropped
        (self.path / STREAM_FILE).unlink()
        _write_yaml_atomically(self.path / EPISODE_FILE, asdict(self.info))
        self._file.close()  # releases the lock; the stream is gone by now
        return self.path

    def amend(self, *, success: bool, progress: float, steps: int, reason: str, complete: bool) -> Path:
        """After :meth:`close`, a later word on the outcome: metadata.yaml and r3_episode.yaml are
        written again (each whole, in place at once); the messages are not touched."""
        self._set_outcome(success, progress, steps, reason, complete)
        metadata = _rosbag2_metadata(self._bag.storage.name, self._bag.topics, self.info)
        _write_yaml_atomically(self.path / METADATA_FILE, metadata)
        _write_yaml_atomically(self.path / EPISODE_FILE, asdict(self.info))
        return self.path

    def _set_outcome(self, success: bool, progress: float, steps: int, reason: str, complete: bool) -> None:
        self.info.success, self.info.progress, self.info.steps, self.info.reason = (
            success,
            progress,
            steps,
            reason,
        )
        self.info.status = COMPLETE if complete else INCOMPLETE


def _convert_stream(
    bag: Path, info: EpisodeInfo, *, repair: bool = False
) -> tuple[int, int, str, Path | None]:
    """Stream -> standard bag, then write ``info``; (messages, bytes dropped, why, where the stream went).
    A bag whose writer died is made this way (its writer builds the standard bag as it goes).

    A stream converted whole is deleted (None); one with bytes that were not converted is kept beside
    the bag under a name no reader takes (:func:`_free_name`), so that nothing is lost.

    ``repair`` marks the episode incomplete, with a reason that says how many messages were saved.

    Safe to interrupt and run again: the stream stays until the bag is whole (metadata.yaml is
    moved in last), and leftovers of an interrupted run are cleared first.
    """
    stream = bag / STREAM_FILE
    (bag / METADATA_FILE).unlink(missing_ok=True)
    shutil.rmtree(bag / bag.name, ignore_errors=True)  # where earlier versions staged the bag
    indexed = _IndexedBag(bag)
    with open(stream, "rb") as f:
        good_bytes, skipped, why = _copy_complete_records(f, indexed)
        dropped = os.fstat(f.fileno()).st_size - good_bytes + skipped
    info.message_count = sum(t.count for t in indexed.topics)
    kept = _free_name(bag, TORN_SUFFIX) if dropped else None
    if repair:
        info.status = INCOMPLETE
        info.reason = f"{STOPPED_RECORDING}; repaired from {info.message_count} complete messages"
        if kept:
            info.reason += f"; {dropped} bytes not converted ({why}) are kept in {kept.name}"
    indexed.finish(info)
    if kept:  # never lose what could not be converted: the stream stays, under a name no reader takes
        os.rename(stream, kept)
    else:
        stream.unlink()
    _write_yaml_atomically(bag / EPISODE_FILE, asdict(info))
    return info.message_count, dropped, why, kept


def _free_name(bag: Path, suffix: str) -> Path:
    """A name beside the bag for a stream set aside (``suffix``: why), taken by no other file."""
    name, n = bag / f"{STREAM_FILE}{suffix}", 1
    while name.exists() or name.is_symlink():
        n += 1
        name = bag / f"{STREAM_FILE}{suffix}.{n}"
    return name


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

    def msgtype(self, topic: str) -> str | None:
        """The message type of ``topic``, None when the bag has no such topic yet."""
        channel = self._channels.get(topic)
        return channel[1].msgtype if channel else None

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


@functools.cache
def _stream_opening() -> bytes:
    """The first bytes of every stream :class:`EpisodeBagWriter` writes, handed to the OS before any
    message: MCAP's magic and a header record (profile ``ros2``, library ``r3``)."""
    out = io.BytesIO()
    McapWriter(out, compression=CompressionType.NONE, use_chunking=False).start(profile="ros2", library="r3")
    return out.getvalue()


def _not_a_stream(f) -> str:
    """Why the file ``f`` is not a recording stream r3 wrote, or "" when it is one (torn or not).

    Every stream begins with :func:`_stream_opening`, written before any message; a writer killed
    before that write was done leaves a part of it (an empty file at the least). Whatever follows the
    opening is r3's, torn or damaged: the repair keeps what it can read and the stream itself.
    """
    opening = _stream_opening()
    head = f.read(len(opening))
    if head == opening or (len(head) < len(opening) and opening.startswith(head)):
        return ""
    if head[: len(MCAP_MAGIC)] != MCAP_MAGIC[: len(head)]:
        return f"it does not begin with MCAP's magic bytes (it begins {head[:8].hex(' ')})"
    return (
        "it is MCAP, but does not begin with the header r3's recorder writes (profile 'ros2', "
        f"library 'r3'; it begins {head[len(MCAP_MAGIC) :].hex(' ')})"
    )


class _StreamCopy:
    """Copies the records of an MCAP byte buffer into a bag: schemas, channels and messages, those
    inside chunks too. r3's stream is unchunked, but a bag's own MCAP file (chunked, indexed) is read
    the same way, and the complete messages of a torn uncompressed chunk are kept."""

    HEAD = 9  # a record's opcode (1 byte) and length (8)
    #: What r3's stream holds after its header; a chunk holds nothing else either.
    RECORDS = frozenset((Opcode.SCHEMA, Opcode.CHANNEL, Opcode.MESSAGE))
    #: Records of a whole MCAP file that hold nothing a bag keeps (indexes and summaries).
    INDEXES = frozenset(
        (Opcode.MESSAGE_INDEX, Opcode.CHUNK_INDEX, Opcode.STATISTICS, Opcode.SUMMARY_OFFSET, Opcode.DATA_END)
        + (Opcode.ATTACHMENT_INDEX, Opcode.METADATA_INDEX)
    )
    #: Records with data a rosbag2 bag cannot hold: not converted, so counted as dropped.
    UNCONVERTED = frozenset((Opcode.ATTACHMENT, Opcode.METADATA))
    #: What else a whole MCAP file (a bag's own, say) holds outside its chunks.
    FILE_RECORDS = INDEXES | UNCONVERTED | {Opcode.CHUNK, Opcode.FOOTER}

    def __init__(self, bag: _IndexedBag):
        self.bag = bag
        self.schemas: dict[int, Schema] = {}
        self.topics: dict[int, str] = {}  # channel id -> topic
        self.skipped = 0  # bytes of records with data a bag cannot hold (attachments, metadata)

    def walk(self, buf, pos: int, end: int, *, chunk: bool = False) -> tuple[int, str]:
        """Copy the records of ``buf[pos:end]``; (where the records it could read end, why it stopped
        before ``end``: "" when it did not)."""
        records = self.RECORDS if chunk else self.RECORDS | self.FILE_RECORDS
        while pos < end:
            opcode = buf[pos]
            if opcode not in records:  # garbage, or a record r3 never writes: not a torn tail either way
                return pos, f"a record r3 does not write there (opcode {opcode:#04x}) at byte {pos}"
            if end - pos < self.HEAD:
                return pos, f"a torn record at byte {pos}"
            length = int.from_bytes(buf[pos + 1 : pos + self.HEAD], "little")
            body, body_end = pos + self.HEAD, pos + self.HEAD + length
            if opcode == Opcode.CHUNK and not chunk:
                good, why = self.chunk(buf, pos, min(body_end, end), body_end)
                if why:
                    return good, why
            elif body_end > end:
                return pos, f"a torn record at byte {pos}"
            elif opcode == Opcode.FOOTER and not chunk:  # the end of a whole file
                footer = self.parse(Footer, buf[body:body_end], pos)
                why = footer if isinstance(footer, str) else self.closing(buf, body_end, end)
                return (end, "") if not why else (pos, why)
            elif opcode in self.RECORDS:
                if why := self.record(opcode, buf[body:body_end], pos):
                    return pos, why
            elif opcode in self.UNCONVERTED:
                self.skipped += self.HEAD + length
            pos = body_end
        return pos, ""

    def chunk(self, buf, pos: int, end: int, body_end: int) -> tuple[int, str]:
        """The chunk record at ``pos``, whole when ``end == body_end``; (as :meth:`walk`)."""
        at = pos + self.HEAD + 28  # past the start and end times, the uncompressed size and CRC
        if end - at < 4:
            return pos, f"a torn chunk at byte {pos}"
        size = int.from_bytes(buf[at : at + 4], "little")
        records = at + 4 + size + 8  # past the compression's name and the records' length
        if records > end:
            what = "torn" if end < body_end else "unreadable"
            return pos, f"a {what} chunk at byte {pos}"
        compression = bytes(buf[at + 4 : at + 4 + size]).decode(errors="replace")
        if records + int.from_bytes(buf[records - 8 : records], "little") != body_end:
            return pos, f"an unreadable chunk at byte {pos} (its lengths disagree)"
        if not compression:  # the records as they are: those a torn chunk holds whole are kept
            good, why = self.walk(buf, records, end, chunk=True)
            return good, why or ("" if end == body_end else f"a torn chunk at byte {pos}")
        if end != body_end:
            return pos, f"a torn {compression} chunk at byte {pos}"
        try:
            chunk = Chunk.read(ReadDataStream(io.BytesIO(buf[pos + self.HEAD : body_end])))
            data, size = get_chunk_data_stream(chunk, validate_crc=True)
            data = data.read(size)
        except Exception as exc:  # noqa: BLE001 - unknown compression, bad data or CRC: damage here
            return pos, f"an unreadable {compression} chunk at byte {pos} ({type(exc).__name__})"
        _, why = self.walk(data, 0, len(data), chunk=True)
        return (pos, f"{why} of the {compression} chunk at byte {pos}") if why else (body_end, "")

    def closing(self, buf, pos: int, end: int) -> str:
        """Why ``buf[pos:end]`` is not MCAP's closing magic alone; "" when it is."""
        if buf[pos:end] == MCAP_MAGIC:
            return ""
        return f"{end - pos} bytes after the footer at byte {pos} that are not MCAP's closing magic"

    def parse(self, kind, body: bytes, pos: int):
        """``body`` read as a record of ``kind``, or why not (a str)."""
        stream = ReadDataStream(io.BytesIO(body))
        try:
            record = kind.read(stream, len(body)) if kind is Message else kind.read(stream)
        except (EndOfFile, ValueError, OverflowError) as exc:  # struct.error and bad UTF-8 are ValueErrors
            return f"an unreadable {kind.__name__.lower()} record at byte {pos} ({type(exc).__name__})"
        if stream.count != len(body):
            return f"an unreadable {kind.__name__.lower()} record at byte {pos} (its lengths disagree)"
        return record

    def record(self, opcode: int, body: bytes, pos: int) -> str:
        """Copy one schema, channel or message record into the bag; "" or why it could not."""
        kind = {Opcode.SCHEMA: Schema, Opcode.CHANNEL: Channel, Opcode.MESSAGE: Message}[opcode]
        record = self.parse(kind, body, pos)
        if isinstance(record, str):
            return record
        if isinstance(record, Schema):
            self.schemas.setdefault(record.id, record)  # a file's summary repeats them
        elif isinstance(record, Channel):
            if record.id in self.topics:
                return ""
            schema = self.schemas.get(record.schema_id)
            if schema is None or HASH_KEY not in record.metadata:
                what = "no schema the stream defined" if schema is None else f"no {HASH_KEY}"
                return f"a channel record at byte {pos} with {what}"
            known = self.bag.msgtype(record.topic)
            if known is None:
                self.bag.add_topic(
                    record.topic,
                    schema.name,
                    schema.encoding,
                    schema.data,
                    record.message_encoding,
                    record.metadata[HASH_KEY],
                )
            elif known != schema.name:
                return f"a channel record at byte {pos} giving {record.topic} a second type"
            self.topics[record.id] = record.topic
        else:
            topic = self.topics.get(record.channel_id)
            if topic is None:
                return f"a message record at byte {pos} on a channel the stream did not define"
            self.bag.write(topic, record.log_time, record.data, record.publish_time, record.sequence)
        return ""


def _copy_complete_records(f, bag: _IndexedBag) -> tuple[int, int, str]:
    """Every complete message of the stream ``f`` (checked by :func:`_not_a_stream`) into ``bag``, in
    order; (where the records it read end, bytes of records it read but could not keep, why it stopped
    before the end of the file: a torn tail, or damage; "" when it did not)."""
    size = os.fstat(f.fileno()).st_size
    start = len(_stream_opening())
    if size <= start:  # the writer died in its first write: a part of the opening, nothing else
        return size, 0, ""
    copy = _StreamCopy(bag)
    with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        good, why = copy.walk(buf, start, size)
    if copy.skipped:
        skipped = f"{copy.skipped} bytes of attachment or metadata records, which a rosbag2 bag does not hold"
        why = f"{why}; {skipped}" if why else skipped
    return good, copy.skipped, why


def repair_bag(bag: str | Path) -> RepairReport:
    """Make a bag whose writer died a standard, readable bag marked incomplete; idempotent.

    Keeps every complete message of the recording stream, in order, and drops the torn tail; the
    stream itself is then kept beside the bag (``recording.mcap.torn``, see ``RepairReport.kept``)
    rather than deleted, so that nothing repair could not read is lost. Returns ``repaired=False``
    with the reason when the bag is already whole; raises :class:`BagBusyError` while a live process
    still records it and :class:`BagRepairError`, touching nothing, when the folder is no r3 bag: its
    stream is not one r3's recorder wrote, or no plain episode id can be given to it.

    A closed bag whose files are whole is never rebuilt from a stream beside it: its metadata.yaml
    is written last, once its MCAP file is whole, so it already holds every message of its own
    stream (a close or repair killed after that point leaves the stream behind), and a stream that
    is not its own (an empty file, another episode's) must not replace it. Such a stream is set
    aside as it was (``recording.mcap.stray``, see ``RepairReport.kept``) rather than refused: the
    bag stays readable (a refusal would leave an episode r3 closed itself unreadable until someone
    moved the file, and ``r3 collect`` would record it again), and nothing is lost.
    """
    bag = Path(bag)
    stream = bag / STREAM_FILE
    if not stream.is_file():
        if (bag / METADATA_FILE).exists() or (bag / METADATA_FILE).is_symlink():  # named if no file
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
                f"{bag} is in use by a live process that holds its {STREAM_FILE} (a recorder still "
                "recording the episode, or another repair of the bag); read it once that one is done"
            ) from None
        if not stream.exists():  # another process finished it between our open and our lock
            return RepairReport(bag, False, reason="closed or repaired by another process: nothing to repair")
        if (bag / METADATA_FILE).is_file() and bag_damage(bag) is None:
            kept = _free_name(bag, STRAY_SUFFIX)
            try:
                os.rename(stream, kept)
            except OSError as exc:  # a read-only filesystem: the bag reads as it is, the stream stays
                return RepairReport(
                    bag,
                    False,
                    reason=f"a closed bag, left as it was: nothing to repair; the {STREAM_FILE} beside it "
                    f"is no part of it and could not be set aside ({exc.strerror or exc}): left in place",
                )
            return RepairReport(
                bag,
                False,
                reason=f"a closed bag, left as it was: nothing to repair; the {STREAM_FILE} beside it "
                f"is no part of it and was set aside as {kept}",
                kept=kept,
            )
        if why := _not_a_stream(lock):
            raise BagRepairError(
                f"{stream} is not a recording stream r3 wrote: {why}; the folder is left as it was"
            )
        info = _read_info_file(bag) if (bag / EPISODE_FILE).is_file() else EpisodeInfo(episode_id=bag.name)
        notes = [_plain_episode_id(bag, info)]
        count, dropped, why, kept = _convert_stream(bag, info, repair=True)
    if kept:
        notes.insert(0, f"{dropped} bytes not converted ({why}); the stream as it was is kept as {kept}")
    return RepairReport(bag, True, count, dropped, "; ".join(n for n in notes if n), kept)


def _plain_episode_id(bag: Path, info: EpisodeInfo) -> str:
    """Give ``info`` a plain episode id (:func:`check_bag_name`, the recorder's rule) before it is
    written into the repaired bag: its own, else the folder's name; "" or a note saying which was
    replaced. BagRepairError when neither is plain."""
    try:
        check_bag_name(info.episode_id)
        return ""
    except (ValueError, TypeError) as exc:
        why = str(exc)
    if (bag / EPISODE_FILE).is_file():
        try:
            check_bag_name(bag.name)
        except ValueError:
            why = f"{EPISODE_FILE}'s {why}, and neither is the folder's name, {bag.name!r}"
        else:
            info.episode_id = bag.name
            return f"{EPISODE_FILE}'s {why}: the folder's name, {bag.name!r}, is used instead"
    else:
        why = f"no {EPISODE_FILE}, and the folder's name: {why}"
    raise BagRepairError(f"{bag}: no plain episode id to give the repaired bag ({why}); left as it was")


def _read_info_file(bag: Path) -> EpisodeInfo:
    """The sidecar as written; a ValueError naming the file when it is not one."""
    file = bag / EPISODE_FILE
    try:
        values = yaml_value(read_small_text(file))
    except FileRefused as exc:
        raise ValueError(f"{exc}: not an episode record") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ValueError(f"{file} is not an episode record: {str(exc).splitlines()[0]}") from None
    if why := _fields_problem(values):
        raise ValueError(f"{file} is not an episode record: {why}")
    info = EpisodeInfo(**values)
    for name, kind in _INFO_TYPES.items():  # a hand-edited "seed: abc" would fail a reader later, unnamed
        value = getattr(info, name)
        if not is_kind(value, kind):
            raise ValueError(
                f"{file} is not an episode record: {name}={bounded_repr(value)} is no {kind.__name__}"
            )
    return info


def _fields_problem(values) -> str:
    """Why ``values`` (a sidecar as read) are not an episode record's fields, in words ("" when
    they are): Python's own ("argument after ** must be a mapping", "unexpected keyword argument")
    named neither the field nor what was expected."""
    if not isinstance(values, dict):
        return f"it holds {type(values).__name__} {bounded_repr(values)}, not a mapping of fields"
    known = [f.name for f in fields(EpisodeInfo)]
    if unknown := [k for k in values if k not in known]:
        return f"unknown field {bounded_repr(unknown[0])} (an episode record has {', '.join(known)})"
    if "episode_id" not in values:
        return "no episode_id"
    return ""


#: The type of each field of an episode's sidecar but its id, which has a rule of its own
#: (:func:`check_bag_name`; ``r3 bag repair`` puts the folder's name in place of a bad one).
_INFO_TYPES = {
    f.name: {"str": str, "int": int, "float": float, "bool": bool}[f.type]
    for f in fields(EpisodeInfo)
    if f.name != "episode_id"
}


def bag_damage(bag: str | Path) -> str | None:
    """What is wrong with the files of a closed bag, or None when they are whole: its metadata.yaml
    says what readers need as r3 writes it (:func:`_metadata_problem`) and names storage files that
    exist and end with MCAP's closing magic, which a file cut short or overwritten lacks. (A bag
    still recording, or left by a killed writer, has its stream file instead; :func:`repair_bag`
    looks after those.)"""
    bag = Path(bag)
    try:
        meta = yaml_value(read_small_text(bag / METADATA_FILE), _LOADER)
    except FileNotFoundError:
        return f"no {METADATA_FILE}"
    except FileRefused as exc:
        return f"{METADATA_FILE} unreadable ({exc})"
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        return f"{METADATA_FILE} unreadable ({type(exc).__name__})"
    if why := _metadata_problem(meta):
        return f"{METADATA_FILE}: {why}"
    for name in meta["rosbag2_bagfile_information"]["relative_file_paths"]:
        path = bag / name
        try:  # opened without blocking: a FIFO in a storage file's place would hang the open
            with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    return f"{name} is not a regular file"
                if f.seek(0, os.SEEK_END) < 2 * len(MCAP_MAGIC):
                    return f"{name} is cut short"
                f.seek(-len(MCAP_MAGIC), os.SEEK_END)
                if f.read() != MCAP_MAGIC:
                    return f"{name} is cut short or damaged (no closing MCAP magic)"
        except OSError as exc:
            return f"{name}: {exc.strerror or exc}"
    return None


#: libyaml's parser where PyYAML has it: every reader of a closed bag checks its metadata.yaml first.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: The keys of metadata.yaml's rosbag2_bagfile_information that readers take (rosbags' reader, which
#: fails on a missing or mistyped one with an error naming neither the file nor the key: ``duration:
#: x`` gave "can only concatenate str (not "int") to str"), and the type of each; then those of each
#: entry of its topics_with_message_count.
_METADATA_KEYS = {
    "version": int,
    "storage_identifier": str,
    "relative_file_paths": list,
    "duration.nanoseconds": int,
    "starting_time.nanoseconds_since_epoch": int,
    "message_count": int,
    "topics_with_message_count": list,
}
_TOPIC_KEYS = {
    "topic_metadata.name": str,
    "topic_metadata.type": str,
    "topic_metadata.serialization_format": str,
    "message_count": int,
}


def _missing_or_mistyped(mapping: dict, keys: dict[str, type], where: str = "") -> str:
    """The first of ``keys`` (dotted paths) that ``mapping`` lacks or holds with another type; "" if none."""
    for key, kind in keys.items():
        value = mapping
        for part in key.split("."):
            if not isinstance(value, dict) or part not in value:
                return f"no {where}{key}"
            value = value[part]
        if not is_kind(value, kind):
            return f"{where}{key} is {bounded_repr(value)}, no {kind.__name__}"
    return ""


def _metadata_problem(meta: object) -> str:
    """Why a closed bag's metadata.yaml (``meta``, as loaded) is not one its readers can take, or "".

    Only what r3 writes is taken: rosbag2's versions up to r3's, uncompressed MCAP storage files in
    the bag's folder, CDR topics. A metadata.yaml r3 did not write so is not repaired either (the
    storage files may be right and it wrong, or the reverse): the bag is named as unreadable."""
    info = meta.get("rosbag2_bagfile_information") if isinstance(meta, dict) else None
    if not isinstance(info, dict):
        return "no rosbag2_bagfile_information mapping"
    if why := _missing_or_mistyped(info, _METADATA_KEYS):
        return why
    if not 1 <= info["version"] <= ROSBAG2_VERSION:
        return f"version {info['version']}, where r3 reads rosbag2's versions 1 to {ROSBAG2_VERSION}"
    if info["storage_identifier"] != "mcap":
        return f"storage_identifier {bounded_repr(info['storage_identifier'])}, where r3's bags are 'mcap'"
    if str(info.get("compression_mode") or "none").lower() != "none":
        return f"compression_mode {bounded_repr(info['compression_mode'])}, where r3's bags are uncompressed"
    files = info["relative_file_paths"]
    if not files:
        return "relative_file_paths names no storage file"
    if any(not isinstance(name, str) or not name or Path(name).name != name for name in files):
        return f"relative_file_paths {bounded_repr(files)} names no file of the bag's folder"
    if len(set(files)) != len(files):  # rosbags would read that file's messages once for each name
        twice = next(name for name in files if files.count(name) > 1)
        return f"relative_file_paths names {bounded_repr(twice)} more than once"
    if not isinstance(info.get("files", []), list):
        return f"files is {bounded_repr(info['files'])}, no list"
    for i, topic in enumerate(info["topics_with_message_count"]):
        entry = f"topics_with_message_count[{i}]."
        if why := _missing_or_mistyped(topic, _TOPIC_KEYS, entry):
            return why
        if (found := topic["topic_metadata"]["serialization_format"]) != "cdr":
            return f"{entry}topic_metadata.serialization_format {bounded_repr(found)}, where r3 records 'cdr'"
        if not isinstance(topic["topic_metadata"].get("offered_qos_profiles", []), list | str):
            return f"{entry}topic_metadata.offered_qos_profiles is no list"
    return ""


def closed_bag_reader(bag: str | Path) -> Reader:
    """rosbags' reader of the closed bag ``bag`` (to be opened, or used in ``with``); a ValueError in
    one line naming the bag and what is wrong when :func:`bag_damage` finds something, where rosbags
    would fail naming neither, or read another bag's files."""
    bag = Path(bag)
    if damage := bag_damage(bag):
        raise ValueError(f"{bag} is a closed bag that cannot be read: {damage}")
    return Reader(bag)


def read_episode_info(bag: str | Path) -> EpisodeInfo:
    """The episode's sidecar; a bag whose writer died is repaired first (one still recording is not).
    A ValueError when its episode id is no plain name (:func:`check_bag_name`): readers make paths
    of it (a dataset's images), and ``../../x`` in a hostile bag would write outside them."""
    bag = Path(bag)
    if (bag / STREAM_FILE).is_file():
        try:
            repair_bag(bag)
        except BagBusyError:
            pass  # still recording: the sidecar rightly says incomplete
    info = _read_info_file(bag)
    try:
        check_bag_name(info.episode_id)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{bag / EPISODE_FILE} is not an episode record: {exc}") from None
    return info


def status_reason(bag: str | Path, info: EpisodeInfo) -> str:
    """Why the episode of ``bag`` is ``info.status``: the reason its writer gave, or, for an incomplete
    bag that gives none (its recorder was killed before it could write one), what the bag's files
    show. Every reader that names a bag's status says it with this."""
    if info.reason or info.status == COMPLETE:
        return info.reason
    bag = Path(bag)
    if (bag / STREAM_FILE).is_file() and _locked(bag / STREAM_FILE):
        return f"not closed yet: a live process holds its {STREAM_FILE} (its recorder, or a repair)"
    if (bag / METADATA_FILE).is_file():  # close writes metadata.yaml, then the sidecar
        return (
            f"the recorder stopped while closing the bag: its messages are whole, but its outcome "
            f"(in {METADATA_FILE}) never reached {EPISODE_FILE}"
        )
    return f"{STOPPED_RECORDING}; `r3 bag repair` makes it readable"


def _locked(stream: Path) -> bool:
    """Whether a live writer or repair holds ``stream`` (its exclusive ``flock``)."""
    try:
        with open(stream, "rb") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except FileNotFoundError:  # closed or repaired meanwhile
        return False
    return False


def complete_episode_info(bag: str | Path) -> EpisodeInfo:
    """:func:`read_episode_info` of a complete episode; a ValueError saying why otherwise."""
    info = read_episode_info(bag)
    if info.status != COMPLETE:
        raise ValueError(f"episode is {info.status} ({status_reason(bag, info)})")
    return info


def read_messages(bag: str | Path, topics: set[str] | None = None) -> Iterator[tuple[str, str, int, object]]:
    """(topic, msgtype, timestamp_ns, message) for every message of ``topics`` (default all), in time order.

    A bag whose writer died is repaired first; one still being recorded raises :class:`BagBusyError`.
    """
    bag = Path(bag)
    if (bag / STREAM_FILE).is_file():
        repair_bag(bag)
    with closed_bag_reader(bag) as reader:
        store = bag_typestore(reader.connections)
        conns = [c for c in reader.connections if topics is None or c.topic in topics]
        if not conns:  # rosbags reads every connection when given none
            return
        for conn, timestamp, raw in reader.messages(connections=conns):
            yield conn.topic, conn.msgtype, timestamp, store.deserialize_cdr(raw, conn.msgtype)
