"""Episode videos that show the push: a frame at every control step (or every other), at least
10 frames per second, scaled to about 640 px wide, each captioned with the decision step and the
instruction being executed. MP4 (H.264) when an encoder is installed (imageio-ffmpeg ships one),
GIF otherwise: :func:`default_format`.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import imageio.v3 as iio
import numpy as np
from PIL import Image, ImageDraw, ImageFont

#: Playback rate: one control step (0.1 s of simulated time) per frame is real time.
VIDEO_FPS = 10.0
#: What ``r3 sim demo`` and ``r3 packing demo`` write into their ``--out`` (an earlier demo's are replaced).
DEMO_FILES = ("episode.gif", "episode.mp4", "summary.json")
#: Width of every frame (the simulator renders 320 px; the reasoner sees that), and the height its image
#: is scaled to at most: a tall camera image is scaled to fit, not to a frame thousands of pixels high
#: (16 x 4096 became 640 x 163,888, which ffmpeg refused and a GIF could not hold).
VIDEO_WIDTH, VIDEO_MAX_HEIGHT = 640, 720
CAPTION_LINES = 2
FONT_SIZE = 16
#: Grey level of the caption band (and of the padding under a frame shorter than the video's tallest).
BAND = 20


def default_format() -> str:
    """ "mp4" when imageio-ffmpeg's ffmpeg binary is there, else "gif"."""
    try:
        import imageio_ffmpeg

        imageio_ffmpeg.get_ffmpeg_exe()
    except (ImportError, RuntimeError):
        return "gif"
    return "mp4"


def caption_frame(frame: np.ndarray, caption: str, width: int = VIDEO_WIDTH) -> np.ndarray:
    """The frame scaled to ``width`` (at most VIDEO_MAX_HEIGHT high, then narrower, on a frame that
    is still ``width`` wide) with a dark band of up to CAPTION_LINES wrapped lines under it."""
    image = Image.fromarray(np.ascontiguousarray(frame[..., :3]))
    scale = min(width / image.width, VIDEO_MAX_HEIGHT / image.height)
    height = max(1, round(image.height * scale))
    image = image.resize((max(1, round(image.width * scale)), height), Image.Resampling.BILINEAR)
    font = ImageFont.load_default(size=FONT_SIZE)
    line_height = FONT_SIZE + 4
    lines = textwrap.wrap(caption, max(20, int(width / (0.55 * FONT_SIZE))))[:CAPTION_LINES] or [""]
    band = line_height * CAPTION_LINES + 8
    canvas = Image.new("RGB", (width, height + band), (BAND,) * 3)
    canvas.paste(image, (0, 0))
    draw = ImageDraw.Draw(canvas)
    for i, line in enumerate(lines):
        draw.text((6, height + 4 + i * line_height), line, fill=(240, 240, 240), font=font)
    return np.asarray(canvas)


def write_episode_video(
    frames: list[np.ndarray], captions: list[str], path: str | Path, fps: float = VIDEO_FPS
) -> Path:
    """Write captioned frames to ``path``; the suffix (.gif or .mp4) picks the format. Frames may differ
    in size (a camera reconfigured mid-episode): each is scaled to the video's width, and the shorter
    ones are padded at the bottom in the caption band's colour."""
    if len(frames) != len(captions):
        raise ValueError(f"{len(frames)} frames but {len(captions)} captions")
    if not frames:
        raise ValueError("an episode video needs at least one frame")
    for i, frame in enumerate(frames):
        shape = getattr(frame, "shape", ())
        if len(shape) != 3 or shape[2] not in (3, 4) or 0 in shape[:2] or frame.dtype != np.uint8:
            raise ValueError(
                f"frame {i} is no RGB image (8-bit height x width x 3 or 4): shape {shape}, "
                f"{getattr(frame, 'dtype', type(frame).__name__)}"
            )
    path = Path(path)
    if path.suffix not in (".gif", ".mp4"):
        raise ValueError(f"unsupported video format {path.suffix!r}: use .gif or .mp4")
    path.parent.mkdir(parents=True, exist_ok=True)
    images = [caption_frame(f, c) for f, c in zip(frames, captions)]
    tallest = max(im.shape[0] for im in images)
    images = [np.pad(im, ((0, tallest - im.shape[0]), (0, 0), (0, 0)), constant_values=BAND) for im in images]
    if path.suffix == ".gif":  # made in memory: a writer that fails on a full disk leaves no open file
        path.write_bytes(iio.imwrite("<bytes>", images, extension=".gif", duration=1000.0 / fps, loop=0))
    else:
        # H.264 encoders work on 16-pixel macro blocks; pad rather than let the writer rescale.
        h, w = images[0].shape[:2]
        padded = [np.pad(im, ((0, -h % 16), (0, -w % 16), (0, 0))) for im in images]
        iio.imwrite(path, padded, fps=fps, codec="libx264")
    return path


def episode_video_from_bag(bag: str | Path, path: str | Path, fps: float = VIDEO_FPS) -> Path:
    """Video of a recorded episode: every camera frame, captioned with the instruction in force.

    A frame is captioned with the instruction decided on it (same stamp) or, between decisions,
    with the instruction being executed; the last frame says how the episode ended. The graph's
    simulator publishes a frame every other control step (``camera_rate_hz`` in graph.yaml) and
    one at each decision point.
    """
    from r3.data.bags import read_episode_info, read_messages, status_reason
    from r3.graph import names

    frames, stamps, decisions = [], [], []
    for topic, _, _, msg in read_messages(bag, {names.CAMERA_IMAGE, names.REASONER_STEPS}):
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        if topic == names.CAMERA_IMAGE:
            rgb = np.frombuffer(msg.data.tobytes(), np.uint8).reshape(msg.height, msg.step)[
                :, : msg.width * 3
            ]
            frames.append(rgb.reshape(msg.height, msg.width, 3))
            stamps.append(stamp)
        else:
            text = msg.instruction if msg.valid else f"refused: {msg.error}"
            decisions.append((stamp, f"step {msg.step}: {text}"))
    if not frames:
        raise ValueError(f"{bag} holds no camera images")
    captions = []
    for stamp in stamps:
        current = [text for t, text in decisions if t <= stamp]
        captions.append(current[-1] if current else "")
    info = read_episode_info(bag)
    captions[-1] = (
        f"end: {'success' if info.success else 'no success'} ({status_reason(bag, info)}), "
        f"progress {info.progress:.0%}"
    )
    return write_episode_video(frames, captions, path, fps)


def write_cut_short_demo(out: str | Path, task: str, seed: int, steps, error: Exception) -> Path:
    """Write the ``summary.json`` of a demo its reasoner ended with ``error`` after ``steps`` into
    ``out`` (replacing an earlier demo's files, as a whole demo does), with the error as its outcome:
    the steps taken are not lost with it. Says where it went; its path."""
    import json

    from r3.episode_loop import cut_short_summary
    from r3.files import replaced_output

    summary = cut_short_summary(task, seed, steps, f"error: reasoner backend: {error}")
    with replaced_output(out, DEMO_FILES, overwrite=True, what="demo") as staging:
        (staging / "summary.json").write_text(json.dumps(summary, indent=2))
    path = Path(out) / "summary.json"
    print(f"summary of the {len(steps)} steps before the error: {path}", flush=True)
    return path
