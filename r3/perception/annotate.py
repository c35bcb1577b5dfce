"""ZAP's annotated view: each detection's mask tinted and its box drawn with its mask id."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from r3.perception.grounding import Detection

# Distinct, saturated colours; mask id i uses PALETTE[(i - 1) % len(PALETTE)].
PALETTE = np.array(
    [
        (230, 25, 75),
        (60, 180, 75),
        (255, 225, 25),
        (0, 130, 200),
        (245, 130, 48),
        (145, 30, 180),
        (70, 240, 240),
        (240, 50, 230),
        (210, 245, 60),
        (250, 190, 212),
    ],
    dtype=np.float32,
)
MASK_ALPHA = 0.45


def annotate(rgb: np.ndarray, detections: list[Detection]) -> np.ndarray:
    """A copy of ``rgb`` with tinted masks and numbered boxes (HxWx3 uint8)."""
    out = rgb.astype(np.float32)
    for d in detections:
        colour = PALETTE[(d.mask_id - 1) % len(PALETTE)]
        out[d.mask] = (1 - MASK_ALPHA) * out[d.mask] + MASK_ALPHA * colour
    image = Image.fromarray(out.clip(0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(image)
    for d in detections:
        colour = tuple(int(c) for c in PALETTE[(d.mask_id - 1) % len(PALETTE)])
        x0, y0, x1, y1 = d.box
        draw.rectangle((x0, y0, x1, y1), outline=colour, width=2)
        text = str(d.mask_id)
        left, top, right, bottom = draw.textbbox((0, 0), text)
        tx, ty = x0, max(y0 - (bottom - top) - 4, 0)
        draw.rectangle((tx, ty, tx + right - left + 4, ty + bottom - top + 4), fill=colour)
        draw.text((tx + 2 - left, ty + 2 - top), text, fill=(0, 0, 0))
    return np.asarray(image)
