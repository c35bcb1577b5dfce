"""Camera messages from anyone on the domain: r3's conversions read padded rows, round-trip what r3
publishes, and refuse a message whose size, step and data disagree with the reason (before, numpy's
reshape error, or an empty image for a 0 x 0 message)."""

from __future__ import annotations

import numpy as np
import pytest
from builtin_interfaces.msg import Time
from sensor_msgs.msg import Image

from r3_ros.conversions import depth_to_msg, image_to_msg, msg_to_depth, msg_to_image, msg_to_instances


def test_what_r3_publishes_comes_back_and_padded_rows_are_read():
    rgb = np.random.default_rng(0).integers(0, 256, (4, 5, 3), dtype=np.uint8)
    assert np.array_equal(msg_to_image(image_to_msg(rgb, Time(), "camera")), rgb)
    padded = Image(height=4, width=5, encoding="rgb8", step=16)
    padded.data = np.concatenate([rgb.reshape(4, 15), np.zeros((4, 1), np.uint8)], axis=1).tobytes()
    assert np.array_equal(msg_to_image(padded), rgb)
    depth = np.full((3, 2), 0.5, np.float32)
    assert np.allclose(msg_to_depth(depth_to_msg(depth, Time(), "camera")), depth)


@pytest.mark.parametrize(
    "fields, why",
    [
        ({"height": 0, "width": 0, "step": 0, "data": b""}, "image of 0 x 0 pixels: both must be at least 1"),
        ({"step": 10}, "image step 10 is shorter than a row of 5 pixels \\(15 bytes\\)"),
        ({"data": bytes(59)}, "image data holds 59 bytes; its height x step is 60"),
        ({"height": 100_000, "data": bytes(60)}, "its height x step is 1500000"),
        ({"encoding": "rgb8\x1b" + "x" * 1000}, "unsupported image encoding"),
    ],
)
def test_a_message_whose_size_step_and_data_disagree_is_refused_with_the_reason(fields, why):
    msg = Image(**{"height": 4, "width": 5, "encoding": "rgb8", "step": 15, "data": bytes(60), **fields})
    with pytest.raises(ValueError, match=why):
        msg_to_image(msg)


def test_depth_and_instance_images_are_checked_by_the_same_rule():
    with pytest.raises(ValueError, match="image data holds 39 bytes; its height x step is 40"):
        msg_to_depth(Image(height=4, width=5, encoding="16UC1", step=10, data=bytes(39)))
    with pytest.raises(ValueError, match="image step 8 is shorter than a row of 5 pixels \\(20 bytes\\)"):
        msg_to_instances(Image(height=4, width=5, encoding="32SC1", step=8, data=bytes(32)))
