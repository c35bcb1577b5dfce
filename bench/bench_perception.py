"""Speed of perception: geometry per frame, SAM 2 on CPU, and GroundPoint over DDS.

    python bench/bench_perception.py [--passes 3] [--sam2-size 1024] [--skip-node] [--smoke] [--json PATH]

Reports, each as min/median/max over ``passes`` (a pass's value is the median of its calls):
back-projection + object statistics for one 640x480 tabletop frame with five objects
(target: under 5 ms), a full-frame back-projection for scale, SAM 2 tiny's image embedding and
per-prompt time on CPU (random weights: the time is the architecture's, not the checkpoint's), and
the round-trip latency of GroundPoint against a running r3_perception_node with the sam2 backend,
and one look of the packing policy on perception (render the 320x240 base camera's colour, depth and
instance mask, segment, measure every item) plus the state it builds from that look.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "osmesa")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, no install

import numpy as np
from common import COUNT, Report, integer, parser

from r3.perception.geometry import backproject, valid_depth
from r3.perception.grounding import GroundingConfig, measure
from r3.perception.pipeline import ANY_LABEL, LABEL_MISMATCH, NO_FRAME, OUTSIDE_IMAGE, STALE_FRAME, Perception
from r3.perception.segmenters import make_segmenter
from r3.sim.tabletop import TabletopScene
from r3.workers import die_with_parent

#: GroundPoint refusals that come before the segmenter runs (random SAM 2 weights may still find no
#: object at the point, which is answered after segmenting and so times the whole path).
BEFORE_SEGMENTATION = frozenset({NO_FRAME, STALE_FRAME, OUTSIDE_IMAGE, LABEL_MISMATCH})


def timed(fn, n: int, passes: int) -> list[float]:
    """Per pass, the median milliseconds of ``n`` calls (after one warm-up call)."""
    fn()
    medians = []
    for _ in range(passes):
        times = []
        for _ in range(n):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        medians.append(float(np.median(times)) * 1e3)
    return medians


def geometry_ms(frame, n: int, passes: int) -> tuple[list[float], list[float], list[float]]:
    """(valid depth + 3D statistics of the five masks, the same with the sim segmenter's masks
    made from the instance image, full-frame back-projection), in ms."""
    segmenter = make_segmenter("sim")
    segmenter.set_frame(frame)
    segments = segmenter.segment_labels(list(frame.instance_names.values()))
    config = GroundingConfig()

    def stats():
        valid = valid_depth(frame.depth_m, frame.camera)
        return [measure(frame, s, i + 1, config, valid) for i, s in enumerate(segments)]

    perception = Perception(segmenter)
    perception.set_query(list(frame.instance_names.values()))
    with_masks = timed(lambda: perception.process(frame), n, passes)
    rows, cols = np.mgrid[0 : frame.camera.height, 0 : frame.camera.width]

    def full():
        ok = valid_depth(frame.depth_m, frame.camera)
        backproject(
            cols[ok].astype(float), rows[ok].astype(float), frame.depth_m[ok].astype(float), frame.camera
        )

    return timed(stats, n, passes), with_masks, timed(full, max(1, n // 2), passes)


def sam2_ms(frame, size: int, n: int, passes: int) -> tuple[list[float], list[float]]:
    from r3.perception.sam2_backend import Sam2Config, Sam2Prompter

    prompter = Sam2Prompter(Sam2Config(image_size=size))
    embed = timed(lambda: prompter.set_image(frame.rgb), max(1, n // 25), passes)
    prompt = timed(lambda: prompter.predict(np.array([[320, 240]]), np.array([1])), max(1, n // 5), passes)
    return embed, prompt


def ground_point_ms(frame, size: int, calls: int, passes: int) -> list[float]:
    import rclpy
    from rclpy.node import Node
    from sensor_msgs.msg import CameraInfo, Image

    from r3.graph import names
    from r3_msgs.msg import DetectedObjects
    from r3_msgs.srv import GroundPoint
    from r3_ros.conversions import camera_info_msg, depth_to_msg, image_to_msg

    env = dict(
        os.environ,
        ROS_DOMAIN_ID=os.environ.get("ROS_DOMAIN_ID", str(1 + os.getpid() % 100)),
        ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
    )
    os.environ.update(env)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "r3_perception_node.main",
            "--ros-args",
            "-p",
            "backend:=sam2",
            "-p",
            f"sam2_image_size:={size}",
            "-p",
            "max_frame_age_s:=600.0",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=die_with_parent,  # noqa: PLW1509  (a benchmark killed must not leave its node serving)
    )
    rclpy.init()
    node = Node("bench_perception_client")
    try:
        pubs = [
            node.create_publisher(t, n, 5)
            for t, n in (
                (Image, names.CAMERA_IMAGE),
                (Image, names.CAMERA_DEPTH),
                (CameraInfo, names.CAMERA_INFO),
            )
        ]
        processed = []
        node.create_subscription(DetectedObjects, names.DETECTED_OBJECTS, processed.append, 5)
        client = node.create_client(GroundPoint, names.GROUND_POINT)
        if not client.wait_for_service(timeout_sec=120):
            raise RuntimeError("r3_perception_node did not come up")
        deadline = time.monotonic() + 300
        while not processed and time.monotonic() < deadline:  # publish until one frame is processed
            stamp, fid = node.get_clock().now().to_msg(), "camera_color_optical_frame"
            pubs[2].publish(
                camera_info_msg(frame.camera.k, frame.camera.width, frame.camera.height, stamp, fid)
            )
            pubs[0].publish(image_to_msg(frame.rgb, stamp, fid))
            pubs[1].publish(depth_to_msg(frame.depth_m, stamp, fid))
            rclpy.spin_once(node, timeout_sec=0.5)

        def call():
            # Any label: the node then prompts SAM 2 at the point (a named label that is not in the
            # query is refused before segmentation, which would time the refusal instead).
            future = client.call_async(GroundPoint.Request(label=ANY_LABEL, u=450.0, v=600.0, purpose="pick"))
            rclpy.spin_until_future_complete(node, future, timeout_sec=60)
            if not future.done():
                raise RuntimeError("GroundPoint did not answer within 60 s")
            answer = future.result()
            if not answer.ok and answer.reason.split(":")[0] in BEFORE_SEGMENTATION:
                raise RuntimeError(f"GroundPoint refused before segmenting: {answer.reason}")

        return timed(call, calls, passes)  # the warm-up call warms up the service path
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
        proc.terminate()
        proc.wait(timeout=20)


def packing_look_ms(n: int, passes: int) -> tuple[list[float], list[float]]:
    """(one fresh look: render + perception, the perceived state built from it), ms, task 8's layout."""
    from r3.lowlevel.perceived import LocalPerception, PerceivedScene
    from r3.sim.packing.env import PackingEnv

    env = PackingEnv()
    env.reset(seed=0, options={"task": "8"})
    source = LocalPerception(env)
    scene = PerceivedScene(source)

    def look():  # as after a motion: the frame must be taken again, not served from the last look
        return source._frames(again=True)

    look_ms = timed(look, max(1, n // 2), passes)
    state_ms = timed(scene.state, n, passes)
    env.close()
    return look_ms, state_ms


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--passes", type=COUNT, default=3, help="passes per figure (default: %(default)s)")
    p.add_argument(
        "--calls",
        type=COUNT,
        default=50,
        help="calls per pass of the fast figures; the slow ones make fewer (default: %(default)s)",
    )
    p.add_argument(
        "--sam2-size", type=integer(64, 4096), default=1024, help="SAM 2 input side (1024 = released models)"
    )
    p.add_argument("--skip-node", action="store_true", help="skip the GroundPoint round trip over DDS")
    args = p.parse_args()
    if args.smoke:
        args.passes, args.calls, args.sam2_size = 1, 2, 256
    report = Report("perception", vars(args))
    scene = TabletopScene(640, 480)
    frame = scene.render()
    stats, with_masks, full = geometry_ms(frame, args.calls, args.passes)
    report.add("back-projection + 3D stats, 640x480, 5 objects (target < 5)", stats, "ms")
    report.add("the same with sim masks from the instance image", with_masks, "ms")
    report.add("full-frame back-projection, 640x480", full, "ms")
    embed, prompt = sam2_ms(frame, args.sam2_size, args.calls, args.passes)
    report.add(f"SAM 2 tiny embedding ({args.sam2_size} px input), CPU", embed, "ms", note="random weights")
    report.add("SAM 2 tiny point prompt, CPU", prompt, "ms")
    if not args.skip_node:
        report.add(
            "GroundPoint round trip over DDS (target <= 20)",
            ground_point_ms(frame, args.sam2_size, max(1, args.calls // 2), args.passes),
            "ms",
            note=f"sam2 backend, {args.sam2_size} px",
        )
    scene.close()
    look, state = packing_look_ms(args.calls, args.passes)
    report.add("packing policy look (render 320x240 RGB-D + masks, perceive)", look, "ms")
    report.add("perceived packing state from that look", state, "ms")
    report.finish(args.json)


if __name__ == "__main__":
    main()
