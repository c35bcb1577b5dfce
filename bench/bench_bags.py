"""Bag write throughput: the crash-tolerant EpisodeBagWriter against a plain `rosbags` Writer.

    python bench/bench_bags.py [--images 400] [--passes 3] [--smoke] [--json PATH]

Writes ``images`` 320x240 rgb8 images, each followed by ten small messages (JointState), as the
recorder does: CDR bytes in, one call per message. The plain rosbags Writer (1 MiB chunks in memory,
metadata.yaml at close) is what EpisodeBagWriter was before it streamed to disk; it is the baseline.
Prints, for each writer over ``passes`` fresh bags: MB/s while recording (the recorder's callbacks),
the close time (EpisodeBagWriter converts its stream into the chunked bag there) and MB/s over both.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, no install

import numpy as np
from common import COUNT, Report, parser
from rosbags.rosbag2 import StoragePlugin, Writer

from r3.data.bags import EpisodeBagWriter, EpisodeInfo
from r3.data.bagtypes import typestore

IMAGE, JOINTS = "sensor_msgs/msg/Image", "sensor_msgs/msg/JointState"


def messages(images: int) -> list[tuple[str, str, bytes]]:
    store, rng = typestore(), np.random.default_rng(0)
    t = store.types
    header = t["std_msgs/msg/Header"](
        stamp=t["builtin_interfaces/msg/Time"](sec=1, nanosec=0), frame_id="camera"
    )
    out = []
    for _ in range(images):
        pixels = rng.integers(0, 256, 320 * 240 * 3, dtype=np.uint8)
        image = t[IMAGE](
            header=header, height=240, width=320, encoding="rgb8", is_bigendian=0, step=960, data=pixels
        )
        out.append(("/camera/image", IMAGE, bytes(store.serialize_cdr(image, IMAGE))))
        for _ in range(10):
            joints = t[JOINTS](
                header=header,
                name=["x", "y"],
                position=rng.normal(size=2),
                velocity=np.zeros(0),
                effort=np.zeros(0),
            )
            out.append(("/joint_states", JOINTS, bytes(store.serialize_cdr(joints, JOINTS))))
    return out


def plain_rosbags(path: Path, msgs) -> tuple[float, float]:
    store, conns = typestore(), {}
    t0 = time.perf_counter()
    writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.open()
    for i, (topic, msgtype, cdr) in enumerate(msgs):
        if topic not in conns:
            conns[topic] = writer.add_connection(topic, msgtype, typestore=store)
        writer.write(conns[topic], i, cdr)
    t1 = time.perf_counter()
    writer.close()
    return t1 - t0, time.perf_counter() - t1


def episode_writer(path: Path, msgs) -> tuple[float, float]:
    t0 = time.perf_counter()
    writer = EpisodeBagWriter(path.parent, EpisodeInfo(episode_id=path.name))
    for i, (topic, msgtype, cdr) in enumerate(msgs):
        writer.write(topic, msgtype, i, cdr)
    t1 = time.perf_counter()
    writer.close(success=True, progress=1.0, steps=1, reason="done")
    return t1 - t0, time.perf_counter() - t1


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--images", type=COUNT, default=400, help="320x240 images to write (default: %(default)s)")
    p.add_argument("--passes", type=COUNT, default=3, help="bags per writer (default: %(default)s)")
    args = p.parse_args()
    if args.smoke:
        args.images, args.passes = 10, 1
    report = Report("bags", vars(args))
    msgs = messages(args.images)
    mb = sum(len(cdr) for _, _, cdr in msgs) / 1e6
    print(f"{len(msgs)} messages, {mb:.1f} MB ({args.images} images of 320x240 rgb8)")
    with tempfile.TemporaryDirectory() as tmp:
        for name, write in [
            ("rosbags Writer (before)", plain_rosbags),
            ("EpisodeBagWriter (streaming)", episode_writer),
        ]:
            runs = [write(Path(tmp) / f"{write.__name__}_{r}", msgs) for r in range(args.passes)]
            report.add(f"{name}, recording", [mb / record for record, _ in runs], "MB/s", better="higher")
            report.add(f"{name}, close", [close * 1e3 for _, close in runs], "ms")
            report.add(
                f"{name}, recording + close",
                [mb / (record + close) for record, close in runs],
                "MB/s",
                better="higher",
            )
    report.finish(args.json)


if __name__ == "__main__":
    main()
