"""A bag writer killed with SIGKILL at any moment leaves a bag that repairs to every complete message.

Each case runs the writer in a child process (this file, run as a script) that kills itself: after a
given message, inside the OS write of a message (part of its bytes on disk, as when the kill lands
mid-syscall), or at a random time from a timer. The parent then repairs the bag and reads it back with
`rosbags`, comparing topics, timestamps and CDR bytes with what the child wrote.
"""

from __future__ import annotations

import builtins
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from mcap.writer import Writer as McapWriter
from rosbags.rosbag2 import Reader

from r3.data import bags
from r3.data.bags import (
    COMPLETE,
    EPISODE_FILE,
    INCOMPLETE,
    STOPPED_RECORDING,
    STREAM_FILE,
    BagBusyError,
    BagRepairError,
    EpisodeBagWriter,
    EpisodeInfo,
    bag_damage,
    complete_episode_info,
    read_episode_info,
    read_messages,
    repair_bag,
    status_reason,
)
from r3.data.bagtypes import typestore
from r3.data.cli import bag_main

IMAGE, JOINTS = "sensor_msgs/msg/Image", "sensor_msgs/msg/JointState"
COUNT = 60  # every fifth message is a 320x240 rgb8 image
T0 = 1_700_000_000_000_000_000


def messages(count: int = COUNT) -> list[tuple[str, str, int, bytes]]:
    """(topic, msgtype, timestamp_ns, cdr): small joint states and 320x240 images, the same every call."""
    store, rng = typestore(), np.random.default_rng(7)
    t = store.types
    out = []
    for i in range(count):
        stamp = t["builtin_interfaces/msg/Time"](sec=i, nanosec=0)
        header = t["std_msgs/msg/Header"](stamp=stamp, frame_id="camera")
        if i % 5 == 0:
            msg = t[IMAGE](
                header=header,
                height=240,
                width=320,
                encoding="rgb8",
                is_bigendian=0,
                step=960,
                data=rng.integers(0, 256, 320 * 240 * 3, dtype=np.uint8),
            )
            out.append(("/camera/image", IMAGE, T0 + i * 1000, bytes(store.serialize_cdr(msg, IMAGE))))
        else:
            msg = t[JOINTS](
                header=header,
                name=["x", "y"],
                position=rng.normal(size=2),
                velocity=np.zeros(0),
                effort=np.zeros(0),
            )
            out.append(("/joint_states", JOINTS, T0 + i * 1000, bytes(store.serialize_cdr(msg, JOINTS))))
    return out


class _KillingFile:
    """The stream file, armed to put ``fraction`` of the next write on disk and then SIGKILL the process."""

    def __init__(self, f):
        self.f, self.fraction = f, None

    def write(self, data) -> int:
        if self.fraction is not None:
            self.f.write(bytes(data)[: int(len(data) * self.fraction)])
            self.f.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return self.f.write(data)

    def __getattr__(self, name):
        return getattr(self.f, name)


def child(root: str, mode: str, at: float) -> None:
    """Write messages() into root/episode and die: mode after (after message ``at``), inside (during the
    write of message int(at), fraction at % 1 of it on disk) or timer (``at`` seconds in, writing on)."""
    files: list[_KillingFile] = []
    bags.open = lambda *a, **k: files.append(_KillingFile(builtins.open(*a, **k))) or files[-1]  # noqa: SIM115
    writer = EpisodeBagWriter(root, EpisodeInfo(episode_id="episode", task="T"))
    if mode == "timer":
        threading.Timer(at, os.kill, (os.getpid(), signal.SIGKILL)).start()
    for i, (topic, msgtype, stamp, cdr) in enumerate(messages() * (1000 if mode == "timer" else 1)):
        if mode == "inside" and i == int(at):
            files[0].fraction = at % 1
        writer.write(topic, msgtype, stamp + (i // COUNT) * COUNT * 1000, cdr)
        print(i, flush=True)  # this message's write has returned
        if mode == "timer":
            time.sleep(0.001)  # a recorder's pace, not a disk benchmark
        if mode == "after" and i == at:
            os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("the child was meant to be killed")


def run_child(tmp_path: Path, mode: str, at: float) -> tuple[Path, int]:
    """Run the child to its death; (bag, how many writes returned)."""
    proc = subprocess.run(
        [sys.executable, __file__, str(tmp_path), mode, repr(at)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    return tmp_path / "episode", len(proc.stdout.split())


def bag_contents(bag: Path) -> list[tuple[str, str, int, bytes]]:
    with Reader(bag) as reader:
        return [(c.topic, c.msgtype, t, bytes(raw)) for c, t, raw in reader.messages()]


@pytest.mark.parametrize(
    "mode,at",
    [
        ("inside", 0.0),  # killed in the first write: no message on disk
        ("after", 0),  # right after the first message (an image)
        ("inside", 3.5),  # half a joint state on disk
        ("inside", 10.5),  # half an image
        ("inside", 25.999),  # all of an image but its last bytes
        ("after", 27),
        ("inside", 59.3),  # in the last message
    ],
)
def test_killed_writer_repairs_to_every_complete_message(tmp_path, mode, at):
    bag, returned = run_child(tmp_path, mode, at)
    assert (bag / STREAM_FILE).is_file() and not (bag / "metadata.yaml").exists()
    stream = (bag / STREAM_FILE).read_bytes()
    report = repair_bag(bag)
    expected = messages()[:returned]
    assert report.repaired and report.messages == returned
    torn = mode == "inside" and at % 1 > 0
    assert (report.dropped_bytes > 0) == torn
    assert bag_contents(bag) == expected
    # Nothing left of the standard bag the writer was building when it died; of the stream, only a
    # torn one, kept as it was beside the bag (the readers take no notice of it).
    kept = [f"{STREAM_FILE}.torn"] if torn else []
    assert sorted(p.name for p in bag.iterdir()) == sorted(
        [f"{bag.name}.mcap", "metadata.yaml", EPISODE_FILE, *kept]
    )
    assert report.kept == (bag / f"{STREAM_FILE}.torn" if torn else None)
    if torn:
        assert report.kept.read_bytes() == stream and bag_damage(bag) is None
    info = read_episode_info(bag)
    assert info.status == INCOMPLETE and info.task == "T" and info.message_count == returned
    reason = f"{STOPPED_RECORDING}; repaired from {returned} complete messages"
    if torn:
        reason += f"; {report.dropped_bytes} bytes not converted (a torn record at byte "
    assert info.reason.startswith(reason) and (f"are kept in {STREAM_FILE}.torn" in info.reason) == torn


def test_kill_at_a_random_time_while_writing(tmp_path):
    bag, returned = run_child(tmp_path, "timer", 0.5)
    assert returned > COUNT  # the child was killed while writing, not before
    got = [(topic, cdr) for topic, _, _, cdr in bag_contents_after_read(bag)]
    # The write that was under way when the kill came may have reached the disk whole.
    assert returned <= len(got) <= returned + 1
    assert got == [(topic, cdr) for topic, _, _, cdr in (messages() * 1000)[: len(got)]]


def bag_contents_after_read(bag: Path) -> list[tuple[str, str, int, bytes]]:
    """The readers repair a bag whose writer died on first read."""
    assert sum(1 for _ in read_messages(bag, {"/camera/image"})) > 0
    return bag_contents(bag)


def test_closed_bag_is_standard_and_repair_leaves_it_alone(tmp_path, capsys):
    writer = EpisodeBagWriter(tmp_path, EpisodeInfo(episode_id="closed"))
    for message in messages():
        writer.write(*message)
    bag = writer.close(success=True, progress=1.0, steps=3, reason="success")
    assert sorted(p.name for p in bag.iterdir()) == ["closed.mcap", "metadata.yaml", "r3_episode.yaml"]
    assert bag_contents(bag) == messages()
    from mcap.reader import make_reader

    with open(bag / "closed.mcap", "rb") as f:
        reader = make_reader(f)
        assert reader.get_summary().statistics.chunk_count >= 1
        assert [(c.topic, m.log_time, m.data) for _, c, m in reader.iter_messages()] == [
            (topic, stamp, cdr) for topic, _, stamp, cdr in messages()
        ]
    info = read_episode_info(bag)
    assert (info.status, info.reason, info.message_count) == (COMPLETE, "success", COUNT)

    before = {p.name: p.stat().st_mtime_ns for p in bag.iterdir()}
    report = repair_bag(bag)
    assert not report.repaired and "nothing to repair" in report.reason
    assert bag_main(["repair", str(tmp_path)]) == 0
    assert "nothing to repair" in capsys.readouterr().out
    assert {p.name: p.stat().st_mtime_ns for p in bag.iterdir()} == before


def test_reading_a_topic_the_bag_does_not_hold_reads_nothing(tmp_path):
    """rosbags reads every connection when given none: asked for a topic no message was recorded on,
    the reader used to return all the others."""
    writer = EpisodeBagWriter(tmp_path, EpisodeInfo(episode_id="closed"))
    for message in messages():
        writer.write(*message)
    bag = writer.close(success=True, progress=1.0, steps=3, reason="success")
    assert list(read_messages(bag, {"/not/recorded"})) == []
    assert len(list(read_messages(bag))) == COUNT


def test_cli_repairs_once(tmp_path, capsys):
    bag, returned = run_child(tmp_path, "inside", 10.5)
    assert bag_main(["repair", str(bag)]) == 0
    out = capsys.readouterr().out
    assert f"{returned} complete messages kept; marked incomplete ({STOPPED_RECORDING})" in out
    assert bag_main(["repair", str(bag)]) == 0
    assert "nothing to repair" in capsys.readouterr().out
    assert len(bag_contents(bag)) == returned


def test_an_incomplete_bag_whose_recorder_left_no_reason_says_why(tmp_path):
    """Found by killing a writer while it closed its bag, after metadata.yaml and before r3_episode.yaml:
    `r3 dataset build` and `export-lerobot` skipped it as "episode is incomplete (never closed)", though
    it was closed, and `r3 run` printed "incomplete: " with nothing after. A bag still being recorded
    was "never closed" too. Each now says what its files show (``status_reason``)."""
    writer = EpisodeBagWriter(tmp_path, EpisodeInfo(episode_id="live"))
    writer.write(*messages(1)[0])
    with pytest.raises(ValueError, match=r"incomplete \(not closed yet: a live process holds its recording"):
        complete_episode_info(writer.path)
    opened = (writer.path / EPISODE_FILE).read_text()  # as the writer left it at the start
    bag = writer.close(success=True, progress=1.0, steps=3, reason="success")
    (bag / EPISODE_FILE).write_text(opened)  # a writer killed between metadata.yaml and the sidecar
    info = read_episode_info(bag)
    assert (info.status, info.reason) == (INCOMPLETE, "")
    why = status_reason(bag, info)
    assert why.startswith("the recorder stopped while closing the bag: its messages are whole"), why
    with pytest.raises(ValueError, match=r"incomplete \(the recorder stopped while closing the bag"):
        complete_episode_info(bag)
    own = EpisodeInfo(episode_id="live", reason="a new episode started before this one ended")
    assert status_reason(bag, own) == own.reason  # the writer's own reason is never replaced


def test_the_sidecar_a_killed_recorder_left_says_why_before_any_repair(tmp_path, killed):
    bag = shutil.copytree(killed, tmp_path / killed.name)
    info = EpisodeInfo(**yaml.safe_load((bag / EPISODE_FILE).read_text()))
    assert (info.status, info.reason) == (INCOMPLETE, "")  # as the killed writer left it
    assert status_reason(bag, info) == f"{STOPPED_RECORDING}; `r3 bag repair` makes it readable"


def test_a_bag_another_repair_holds_is_refused_naming_that_it_may_be_a_repair(tmp_path):
    """Found by the crash sweep: of two `r3 bag repair` on one torn bag, the second was told the bag
    "is still being recorded by a live process" while the first was repairing it."""
    import fcntl

    bag, _ = run_child(tmp_path, "inside", 10.5)
    with open(bag / STREAM_FILE, "rb") as repairing:  # as the first repair holds it
        fcntl.flock(repairing.fileno(), fcntl.LOCK_EX)
        with pytest.raises(BagBusyError, match="or another repair of the bag"):
            repair_bag(bag)


def test_a_bag_being_recorded_is_not_repaired_under_its_writer(tmp_path):
    writer = EpisodeBagWriter(tmp_path, EpisodeInfo(episode_id="live"))
    writer.write(*messages(1)[0])
    with pytest.raises(BagBusyError, match="in use by a live process .*a recorder still recording"):
        repair_bag(writer.path)
    with pytest.raises(BagBusyError):
        next(read_messages(writer.path))
    assert read_episode_info(writer.path).status == INCOMPLETE
    assert (writer.path / STREAM_FILE).is_file()
    writer.close(success=False, progress=0.0, steps=0, reason="stopped", complete=False)
    assert len(bag_contents(writer.path)) == 1 and read_episode_info(writer.path).reason == "stopped"


def test_a_folder_that_is_no_bag_is_refused(tmp_path, capsys):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "r3_episode.yaml").write_text("episode_id: x\n")
    assert bag_main(["repair", str(tmp_path / "x")]) == 1
    assert "neither recording.mcap nor metadata.yaml" in capsys.readouterr().err


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> Path:
    """A bag whose writer was killed right after writing all of messages(): copy it, then damage it."""
    bag, returned = run_child(tmp_path_factory.mktemp("killed"), "after", COUNT - 1)
    assert returned == COUNT
    return bag


def folder_state(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}


def test_a_stream_that_is_not_r3s_is_refused_and_left_alone(tmp_path, killed, capsys):
    """Random bytes, or an MCAP file that r3's recorder did not write, under the stream's name used to
    be "repaired" into an empty bag, the file deleted."""
    foreign = tmp_path / "foreign.mcap"
    with open(foreign, "wb") as f:
        writer = McapWriter(f)
        writer.start(profile="", library="someone else")
        writer.finish()
    cases = {
        "random": np.random.default_rng(1).bytes(3000),
        "foreign": foreign.read_bytes(),  # MCAP, but not profile ros2 / library r3
        "text": b"not a bag at all\n",
    }
    for name, data in cases.items():
        bag = tmp_path / name
        bag.mkdir()
        (bag / STREAM_FILE).write_bytes(data)
        shutil.copy(killed / EPISODE_FILE, bag / EPISODE_FILE)
        before = folder_state(bag)
        with pytest.raises(BagRepairError, match="is not a recording stream r3 wrote"):
            repair_bag(bag)
        with pytest.raises(BagRepairError):  # the readers refuse it the same way
            next(read_messages(bag))
        assert bag_main(["repair", str(bag)]) == 1
        err = capsys.readouterr().err
        assert "is not a recording stream r3 wrote" in err and "left as it was" in err
        assert "Traceback" not in err
        assert folder_state(bag) == before, name


def test_a_stream_cut_before_its_first_message_is_repaired_and_kept(tmp_path, killed, capsys):
    """A real stream cut inside its first message (an image): the header and schemas say r3 wrote it,
    so it is a torn recording with nothing complete, not garbage; the stream is kept as it was."""
    bag = tmp_path / "episode"
    shutil.copytree(killed, bag)
    (bag / f"{bag.name}.mcap.new").unlink()
    with open(bag / STREAM_FILE, "r+b") as f:
        f.truncate(100_000)
    stream = (bag / STREAM_FILE).read_bytes()
    assert bag_main(["repair", str(bag)]) == 0
    kept = bag / f"{STREAM_FILE}.torn"
    assert kept.is_file() and kept.read_bytes() == stream
    out = capsys.readouterr().out
    assert "0 complete messages kept" in out and f"the stream as it was is kept as {kept}" in out
    assert bag_damage(bag) is None and bag_contents(bag) == [] and list(read_messages(bag)) == []
    info = read_episode_info(bag)
    assert info.status == INCOMPLETE and info.message_count == 0 and kept.name in info.reason
    report = repair_bag(bag)
    assert not report.repaired and "nothing to repair" in report.reason and kept.read_bytes() == stream


def test_messages_of_a_torn_chunk_are_kept(tmp_path):
    """A bag's own MCAP file (chunked) cut short under the stream's name: the complete messages
    inside its torn chunk are kept, not only those of whole records of the file."""
    writer = EpisodeBagWriter(tmp_path, EpisodeInfo(episode_id="closed", task="T"))
    for message in messages():
        writer.write(*message)
    closed = writer.close(success=True, progress=1.0, steps=3, reason="success")
    data = (closed / "closed.mcap").read_bytes()
    for name, cut, count in (("torn", 300_000, 5), ("whole", len(data), COUNT)):
        bag = tmp_path / name  # messages 0-4 end before byte 300000, message 5 (an image) runs past it
        bag.mkdir()
        (bag / STREAM_FILE).write_bytes(data[:cut])
        report = repair_bag(bag)
        assert report.messages == count and bag_contents(bag) == messages()[:count]
        torn = name == "torn"
        assert (report.kept is not None) == torn and (report.dropped_bytes > 0) == torn
        assert read_episode_info(bag).episode_id == name
    assert (tmp_path / "torn" / f"{STREAM_FILE}.torn").read_bytes() == data[:300_000]


@pytest.mark.parametrize("episode_id", ["../../x", "a/b", "..", "a\x01b", "", 5])
def test_a_sidecar_episode_id_that_is_no_plain_name_is_not_carried(tmp_path, killed, capsys, episode_id):
    bag = tmp_path / "episode"
    shutil.copytree(killed, bag)
    sidecar = yaml.safe_load((bag / EPISODE_FILE).read_text())
    (bag / EPISODE_FILE).write_text(yaml.safe_dump({**sidecar, "episode_id": episode_id}))
    assert bag_main(["repair", str(bag)]) == 0
    assert read_episode_info(bag).episode_id == "episode"
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["custom_data"]["r3.episode_id"] == "episode"
    assert bag_contents(bag) == messages()
    out = capsys.readouterr().out
    assert f"{COUNT} complete messages kept" in out and "the folder's name, 'episode', is used instead" in out


def test_no_plain_episode_id_at_all_is_refused(tmp_path, killed, capsys):
    bag = tmp_path / "an episode"  # neither the sidecar's id nor the folder's name is a plain name
    shutil.copytree(killed, bag)
    (bag / EPISODE_FILE).write_text("episode_id: ../../x\n")
    before = folder_state(bag)
    assert bag_main(["repair", str(bag)]) == 1
    err = capsys.readouterr().err
    assert "no plain episode id" in err and "'../../x'" in err and "Traceback" not in err
    assert folder_state(bag) == before


@pytest.mark.parametrize("stray", ["an empty file", "another episode's stream"])
def test_a_stream_beside_a_closed_bag_is_set_aside_never_rebuilt_from(tmp_path, killed, capsys, stray):
    """Found by a hostile user: ``touch recording.mcap`` in a closed bag's folder (or another
    episode's stream put there) made `r3 bag repair`, and every reader on first read, delete the
    closed bag and rebuild it from that stream: the episode was lost."""
    writer = EpisodeBagWriter(tmp_path, EpisodeInfo(episode_id="closed", task="T"))
    for message in messages():
        writer.write(*message)
    bag = writer.close(success=True, progress=1.0, steps=3, reason="success")
    data = b"" if stray == "an empty file" else (killed / STREAM_FILE).read_bytes()[:300_000]
    (bag / STREAM_FILE).write_bytes(data)
    closed = {p.name: p.read_bytes() for p in bag.iterdir() if p.name != STREAM_FILE}
    assert bag_main(["repair", str(bag)]) == 0
    out = capsys.readouterr().out
    set_aside = bag / f"{STREAM_FILE}.stray"
    assert "a closed bag, left as it was" in out and f"set aside as {set_aside}" in out
    assert {p.name: p.read_bytes() for p in bag.iterdir() if p != set_aside} == closed
    assert set_aside.read_bytes() == data
    # The readers (dataset build, export, collect's resume check) do the same on first read.
    (bag / STREAM_FILE).write_bytes(data)
    info = read_episode_info(bag)
    assert (info.status, info.reason, info.message_count) == (COMPLETE, "success", COUNT)
    assert bag_contents(bag) == messages() and (bag / f"{STREAM_FILE}.stray.2").read_bytes() == data


@pytest.mark.parametrize(
    "key, value, says",
    [
        ("duration", {"nanoseconds": "x"}, "duration.nanoseconds is 'x', no int"),
        ("topics_with_message_count", None, "no topics_with_message_count"),
        ("version", 99, "version 99, where r3 reads rosbag2's versions 1 to 9"),
        ("storage_identifier", "sqlite3", "storage_identifier 'sqlite3', where r3's bags are 'mcap'"),
        (
            "relative_file_paths",
            ["../x/closed.mcap"],
            "relative_file_paths ['../x/closed.mcap'] names no file of the bag's folder",
        ),
        (  # rosbags read each message twice: a dataset of the bag had every row twice
            "relative_file_paths",
            ["closed.mcap", "closed.mcap"],
            "relative_file_paths names 'closed.mcap' more than once",
        ),
    ],
)
def test_a_closed_bag_whose_metadata_readers_cannot_take_is_named_unreadable(
    tmp_path, capsys, key, value, says
):
    """Found by a hostile user: ``duration: x`` in a closed bag's metadata.yaml stopped its readers
    with a TypeError naming neither the file nor the key, and for a missing topics key, version 99
    or sqlite3 storage, `r3 bag repair` said "nothing to repair" while every reader refused the bag."""
    from r3.data.build import read_episode

    writer = EpisodeBagWriter(tmp_path, EpisodeInfo(episode_id="closed", task="T"))
    writer.write(*messages(1)[0])
    bag = writer.close(success=True, progress=1.0, steps=1, reason="success")
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())
    info = meta["rosbag2_bagfile_information"]
    info.pop(key) if value is None else info.update({key: value})
    (bag / "metadata.yaml").write_text(yaml.safe_dump(meta))
    before = folder_state(bag)
    refusal = f"{bag} is a closed bag that cannot be read: metadata.yaml: {says}"
    for read in (lambda: next(read_messages(bag)), lambda: read_episode(bag)):
        with pytest.raises(ValueError) as err:
            read()
        assert str(err.value) == refusal
    assert bag_damage(bag) == f"metadata.yaml: {says}"  # so `r3 collect` records the episode again
    assert bag_main(["repair", str(bag)]) == 1
    err = capsys.readouterr().err
    assert f"is a closed bag whose files are damaged (metadata.yaml: {says})" in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert folder_state(bag) == before


def alias_bomb(levels: int = 10) -> list:
    """A list nested ``levels`` deep, 9 items a level, all one object: YAML writes it in 2 kB with
    anchors and aliases, and its repr has 9**levels items (3.5 billion, tens of gigabytes, at 10)."""
    bomb = ["x"] * 9
    for _ in range(levels - 1):
        bomb = [bomb] * 9
    return bomb


@pytest.mark.parametrize("field", ["task", "episode_id"])
def test_a_sidecar_of_nested_aliases_is_refused_without_expanding_them(tmp_path, killed, capsys, field):
    """Found by a hostile user: a 739-byte r3_episode.yaml of nested YAML aliases took gigabytes and
    seconds to refuse, its refusal building the value's whole repr before cutting it to 60 characters."""
    bag = tmp_path / "episode"
    shutil.copytree(killed, bag)
    sidecar = yaml.safe_load((bag / EPISODE_FILE).read_text())
    (bag / EPISODE_FILE).write_text(yaml.safe_dump({**sidecar, field: alias_bomb()}))
    assert (bag / EPISODE_FILE).stat().st_size < 3000
    shown = "[[[[...], [...], [...], [...], [...], [...], ...],"
    if field == "task":  # refused, the folder left as it was
        before = folder_state(bag)
        assert bag_main(["repair", str(bag)]) == 1
        err = capsys.readouterr().err
        assert f"r3_episode.yaml is not an episode record: task={shown}" in err and "is no str" in err
        assert len(err.splitlines()) == 1 and "Traceback" not in err
        assert folder_state(bag) == before
        with pytest.raises(ValueError, match="is no str"):
            read_episode_info(bag)
    else:  # the folder's name in its place, as for any episode id that is no plain name
        assert bag_main(["repair", str(bag)]) == 0
        out = capsys.readouterr().out
        assert f"episode id {shown}" in out and "is no string" in out and len(out.splitlines()) == 1
        assert read_episode_info(bag).episode_id == "episode"


@pytest.mark.parametrize("fifo", ["closed.mcap", "metadata.yaml", EPISODE_FILE])
def test_a_bag_file_that_is_a_fifo_is_named_not_read(tmp_path, capsys, fifo, ends_within):
    """Found by a hostile user: a FIFO as a bag's storage file, metadata.yaml or r3_episode.yaml
    made `r3 dataset build` hang forever, and `r3 bag repair` on the FIFO storage file too."""
    from r3.data.build import read_episode

    writer = EpisodeBagWriter(tmp_path, EpisodeInfo(episode_id="closed", task="T"))
    writer.write(*messages(1)[0])
    bag = writer.close(success=True, progress=1.0, steps=1, reason="success")
    (bag / fifo).unlink()
    os.mkfifo(bag / fifo)
    with ends_within(20):
        with pytest.raises(ValueError, match="not a regular file"):
            read_episode(bag)
        if fifo != EPISODE_FILE:
            assert "not a regular file" in bag_damage(bag)
            assert bag_main(["repair", str(bag)]) == 1
            err = capsys.readouterr().err
            assert "not a regular file" in err and len(err.splitlines()) == 1, err


def test_a_stray_stream_that_cannot_be_moved_is_left_in_place_and_the_bag_read(tmp_path, capsys, monkeypatch):
    """Found by a hostile user: a closed bag with a stray recording.mcap beside it, on a read-only
    filesystem, could not be read: each reader tried to set the stray aside and failed with
    "Read-only file system". The readers read the bag; `r3 bag repair` says the stray stays."""
    import errno

    writer = EpisodeBagWriter(tmp_path, EpisodeInfo(episode_id="closed", task="T"))
    for message in messages():
        writer.write(*message)
    bag = writer.close(success=True, progress=1.0, steps=3, reason="success")
    (bag / STREAM_FILE).write_bytes(b"")

    def read_only(*_):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(os, "rename", read_only)
    before = folder_state(bag)
    info = read_episode_info(bag)
    assert (info.status, info.message_count) == (COMPLETE, COUNT)
    assert bag_contents_after_read(bag) == messages()
    assert bag_main(["repair", str(bag)]) == 0
    out = capsys.readouterr().out
    assert "could not be set aside (Read-only file system): left in place" in out
    assert folder_state(bag) == before


if __name__ == "__main__":
    child(sys.argv[1], sys.argv[2], float(sys.argv[3]))
