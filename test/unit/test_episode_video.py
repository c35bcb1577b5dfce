"""Episode videos show the push: `r3 sim demo` films every control step at 10 fps, about 640 px wide.

A 20-instruction episode (the green star pushed left and right, recorded answers replayed; the
V task never completes, so all 20 run) is filmed as MP4 (imageio-ffmpeg's encoder) and as GIF;
the frames are decoded and counted, and the camera picture must change from frame to frame at
10 or more frames per second of video.
"""

from __future__ import annotations

import itertools
import json

import imageio.v3 as iio
import numpy as np
import pytest

from r3.cli import main as r3_main
from r3.data.video import VIDEO_WIDTH, caption_frame, default_format

INSTRUCTIONS = 20
#: A pixel counts as changed beyond this (0-255; H.264 compression noise stays well below).
CHANGED_LEVEL = 40


def decoded(path) -> tuple[list[np.ndarray], float]:
    """The video's frames and its frames per second."""
    if path.suffix == ".gif":
        frames = list(iio.imread(path, index=None))
        return frames, 1000.0 / iio.immeta(path)["duration"]
    return list(iio.imiter(path, plugin="FFMPEG")), iio.immeta(path, plugin="FFMPEG")["fps"]


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    path = tmp_path_factory.mktemp("answers") / "answers.jsonl"
    sides = ["left", "right"] * (INSTRUCTIONS // 2)
    path.write_text(
        "".join(
            json.dumps({"text": f"Reasoning: push it back.\nInstruction: move the green star {s} slightly"})
            + "\n"
            for s in sides
        )
    )
    return path


@pytest.mark.slow
@pytest.mark.parametrize("video", ["mp4", "gif"])
def test_a_20_instruction_episode_video_has_10_fps_of_motion(video, answers, tmp_path, capsys):
    if video == "mp4" and default_format() != "mp4":
        pytest.skip("no H.264 encoder (imageio-ffmpeg) installed")
    out = tmp_path / video
    assert (
        r3_main(
            [
                "sim",
                "demo",
                "--task",
                "V",
                "--seed",
                "3",
                "--backend",
                f"replay:{answers}",
                "--max-steps",
                str(INSTRUCTIONS),
                "--video",
                video,
                "--out",
                str(out),
            ]
        )
        == 0
    )
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["steps"]) == INSTRUCTIONS
    frames, fps = decoded(out / f"episode.{video}")
    assert fps >= 10
    assert frames[0].shape[1] in range(VIDEO_WIDTH, VIDEO_WIDTH + 16)  # 640 px (MP4 pads to 16-pixel blocks)
    picture = frames[0].shape[0] * 3 // 4  # the camera, above the caption band
    moving = sum(
        int(
            np.sum(np.abs(b[:picture].astype(int) - a[:picture].astype(int)).max(axis=-1) > CHANGED_LEVEL)
            > 20
        )
        for a, b in itertools.pairwise(frames)
    )
    seconds = (len(frames) - 1) / fps  # from the first frame to the last
    assert moving / seconds >= 10, f"{moving} moving frames in {seconds:.1f} s"
    assert len(frames) >= summary["control_steps"]  # every control step is filmed


def test_captions_name_the_step_and_the_instruction_under_a_640_px_picture():
    frame = np.zeros((240, 320, 3), np.uint8)
    captioned = caption_frame(frame, "step 3: move the blue cube to the left side of the green star")
    assert captioned.shape[1] == VIDEO_WIDTH and captioned.shape[0] > 480
    assert captioned[480:].max() > 200  # the caption's text is drawn in the band under the picture


@pytest.mark.parametrize("suffix", [".mp4", ".gif"])
def test_a_tall_camera_image_is_scaled_to_fit_the_video(suffix, tmp_path):
    """Found by a hostile user: `r3 sim demo --width 16 --height 4096` (sizes it accepts) scaled each
    frame to 640 x 163,888: ffmpeg refused it (a BrokenPipe traceback), the GIF writer took 8.6 GB and
    ended in an OverflowError."""
    from r3.data.video import VIDEO_MAX_HEIGHT, write_episode_video

    frames = [np.full((4096, 16, 3), 90 * i, np.uint8) for i in range(3)]
    path = write_episode_video(frames, ["step 0", "step 1", "end"], tmp_path / f"episode{suffix}")
    written = iio.imread(path)
    assert len(written) == 3 and written[0].shape[1] in range(VIDEO_WIDTH, VIDEO_WIDTH + 16)
    assert VIDEO_MAX_HEIGHT < written[0].shape[0] < VIDEO_MAX_HEIGHT + 100  # the picture and its caption


@pytest.mark.parametrize("suffix", [".mp4", ".gif"])
def test_frames_of_different_sizes_make_one_video(suffix, tmp_path):
    """Found by a hostile sweep: a camera that changes its size mid-episode (a bag of 320 x 240 then
    400 x 100 frames) gave no video ("all input arrays must have the same shape"); each frame is
    scaled to the video's width and the shorter ones padded under their caption."""
    from r3.data.video import write_episode_video

    frames = [np.full((240, 320, 3), 100, np.uint8), np.full((100, 400, 3), 200, np.uint8)]
    path = write_episode_video(frames, ["step 0", "end"], tmp_path / f"episode{suffix}")
    written = decoded(path)[0]
    assert len(written) == 2 and written[0].shape == written[1].shape
    assert written[0].shape[1] in range(VIDEO_WIDTH, VIDEO_WIDTH + 16)
    assert abs(int(written[1][80, 320, 0]) - 200) < 10  # the second picture, scaled into the same frame


@pytest.mark.parametrize(
    "frame",
    [np.zeros((0, 0, 3), np.uint8), np.zeros((240, 320), np.uint8), np.zeros((240, 320, 3))],
    ids=["empty", "grey", "float"],
)
def test_a_frame_that_is_no_rgb_image_is_refused_in_one_line(frame, tmp_path):
    """Found by a hostile sweep: a 0 x 0 camera image (a bag's empty Image message) ended `r3 run`'s
    video in a ZeroDivisionError traceback; a float image in a PIL TypeError."""
    from r3.data.video import write_episode_video

    good = np.zeros((240, 320, 3), np.uint8)
    with pytest.raises(ValueError, match=r"^frame 1 is no RGB image \(8-bit height x width x 3 or 4\)"):
        write_episode_video([good, frame], ["step 0", "end"], tmp_path / "episode.gif")


@pytest.mark.slow
def test_a_bag_with_a_frame_every_other_control_step_gives_a_moving_video(answers, tmp_path):
    """What `r3 run` does with the graph's bag (its simulator films every other control step)."""
    from r3.data.bags import read_messages
    from r3.data.episode_bag import record_episode
    from r3.data.video import episode_video_from_bag
    from r3.graph import names
    from r3.reasoning import make_backend
    from r3.sim.language_table.env import LanguageTableEnv

    backend = make_backend(f"replay:{answers}")
    backend.load()
    bag = record_episode(
        "V",
        3,
        backend,
        LanguageTableEnv(width=320, height=240),
        "V-video",
        tmp_path,
        max_steps=4,
        frame_every=2,
    )
    frames, fps = decoded(episode_video_from_bag(bag, tmp_path / "V-video.gif"))
    assert fps >= 10 and frames[0].shape[1] == VIDEO_WIDTH
    control_steps = sum(1 for _ in read_messages(bag, {names.PUSHER_COMMAND}))  # one command per step
    assert control_steps > 10 and len(frames) >= control_steps // 2
