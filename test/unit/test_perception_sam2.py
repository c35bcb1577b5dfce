"""The ``sam2`` and ``owlv2+sam2`` backends with randomly initialised weights on CPU.

The masks are meaningless; what is checked is that every tensor takes its real path (SAM 2's own
config, image embedding, point and box prompts, OWLv2 loaded from a local folder) and that the
results come back in the shapes and types the rest of perception expects. Needs the ``sam2``
package (requirements/source-builds/perception.txt).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sam2", reason="needs the sam2 package (scripts/setup.sh installs it)")

from r3.perception.pipeline import Perception
from r3.perception.segmenters import make_segmenter
from r3.sim.tabletop import TabletopScene

pytestmark = pytest.mark.slow
SMALL = 256  # SAM 2 input side for CPU tests (1024 for real checkpoints)


@pytest.fixture(scope="module")
def small_frame():
    scene = TabletopScene(320, 240)
    yield scene.render(stamp_ns=5)
    scene.close()


def save_tiny_owlv2(folder) -> None:
    """A randomly initialised OWLv2 with a 300-token byte-level CLIP tokenizer, saved as a model folder."""
    import torch
    from transformers import (
        CLIPTokenizer,
        Owlv2Config,
        Owlv2ForObjectDetection,
        Owlv2ImageProcessor,
        Owlv2Processor,
    )

    # CLIP's byte-level alphabet: printable bytes stand for themselves, the rest map past 255.
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    chars = [chr(b) for b in printable] + [chr(256 + i) for i in range(256 - len(printable))]
    vocab = {c: i for i, c in enumerate(chars)}
    vocab.update({c + "</w>": len(chars) + i for i, c in enumerate(chars)})
    vocab.update({"<|startoftext|>": len(vocab), "<|endoftext|>": len(vocab) + 1})
    tokenizer = CLIPTokenizer(vocab=vocab, merges=[])
    tiny = {"hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 2, "num_attention_heads": 4}
    config = Owlv2Config(
        text_config=dict(
            tiny,
            vocab_size=len(vocab),
            max_position_embeddings=16,
            bos_token_id=vocab["<|startoftext|>"],
            eos_token_id=vocab["<|endoftext|>"],
            pad_token_id=vocab["<|endoftext|>"],
        ),
        vision_config=dict(tiny, image_size=64, patch_size=16),
        projection_dim=32,
    )
    torch.manual_seed(0)
    Owlv2ForObjectDetection(config).save_pretrained(folder)
    processor = Owlv2Processor(
        image_processor=Owlv2ImageProcessor(size={"height": 64, "width": 64}), tokenizer=tokenizer
    )
    processor.save_pretrained(folder)


def test_sam2_point_grounding_and_box_following(small_frame):
    perception = Perception(make_segmenter("sam2", {"sam2_image_size": SMALL}))
    assert perception.set_query(["mug"]) == ""
    assert perception.process(small_frame) == []  # nothing pointed at yet
    result = perception.ground_point("mug", 450, 600, "pick", 5)
    assert result.ok or result.reason in ("no_object_at_point", "too_few_valid_depth_pixels")
    if result.ok:
        assert result.target.shape == (3,) and np.isfinite(result.target).all() and result.mask_id >= 1
    # the next frame follows the grounded object by a box prompt
    detections = perception.process(small_frame)
    assert all(d.label == "mug" and d.mask.shape == (240, 320) and 0 <= d.score <= 1 for d in detections)
    assert len(detections) == int(result.ok)


def test_owlv2_sam2_finds_boxes_for_names_and_masks_them(small_frame, tmp_path):
    save_tiny_owlv2(tmp_path / "owlv2")
    segmenter = make_segmenter(
        "owlv2+sam2",
        {
            "detector": str(tmp_path / "owlv2"),
            "score_threshold": 0.0,
            "max_per_label": 2,
            "sam2_image_size": SMALL,
        },
    )
    perception = Perception(segmenter)
    assert perception.set_query(["red box", "blue cylinder"]) == ""
    detections = perception.process(small_frame)
    assert 1 <= len(detections) <= 4
    assert {d.label for d in detections} <= {"red box", "blue cylinder"}
    assert [d.mask_id for d in detections] == list(range(1, len(detections) + 1))
    for d in detections:
        x0, y0, x1, y1 = d.box
        assert 0 <= x0 <= x1 < 320 and 0 <= y0 <= y1 < 240 and 0.0 <= d.score <= 1.0


def test_owlv2_needs_a_local_model_folder():
    with pytest.raises(ValueError, match="detector"):
        make_segmenter("owlv2+sam2")
    with pytest.raises(ValueError, match="unknown segmenter"):
        make_segmenter("sam3")
