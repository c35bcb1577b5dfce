"""The ``owlv2+sam2`` backend: OWLv2 (transformers) finds boxes for text queries, SAM 2 masks them.

OWLv2 pads the image to a square at the bottom and right before resizing, so its normalised boxes
are relative to the padded side ``max(height, width)``. Detections per name go through greedy
non-maximum suppression; each surviving box is a SAM 2 box prompt. Point prompts (grounding) go to
SAM 2 directly, as in the ``sam2`` backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

import numpy as np

from r3.perception.sam2_backend import Sam2Config, Sam2Segmenter
from r3.perception.segmenters import Segment


@dataclass
class Owlv2Sam2Config:
    """``detector``: a local folder with an OWLv2 model and processor (``save_pretrained`` layout);
    nothing is downloaded."""

    detector: str = ""
    score_threshold: float = 0.2
    nms_iou: float = 0.3
    max_per_label: int = 4
    device: str = "cpu"
    sam2: Sam2Config = field(default_factory=Sam2Config)

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> Owlv2Sam2Config:
        """The config of a segmenter's options (the perception node's parameters): the detector's
        fields by their names (``detector``, ``device``, ...), SAM 2's as :meth:`Sam2Config.from_options`
        reads them; missing ones keep their defaults."""
        given = {f.name: options[f.name] for f in fields(cls) if f.name != "sam2" and f.name in options}
        return cls(**given, sam2=Sam2Config.from_options(options))

    def __post_init__(self):
        if not self.detector:
            raise ValueError("owlv2+sam2 needs `detector`: a local folder with an OWLv2 model and processor")
        if not 0.0 <= self.score_threshold <= 1.0 or not 0.0 < self.nms_iou <= 1.0 or self.max_per_label < 1:
            raise ValueError(
                f"bad detector limits: score_threshold={self.score_threshold}, nms_iou={self.nms_iou}, "
                f"max_per_label={self.max_per_label}"
            )


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of one xyxy box ``a`` against each row of ``b``."""
    ix = np.clip(np.minimum(a[2], b[:, 2]) - np.maximum(a[0], b[:, 0]), 0, None)
    iy = np.clip(np.minimum(a[3], b[:, 3]) - np.maximum(a[1], b[:, 1]), 0, None)
    inter = ix * iy
    area_a, area_b = (a[2] - a[0]) * (a[3] - a[1]), (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / np.maximum(area_a + area_b - inter, 1e-9)


def nms(boxes: np.ndarray, scores: np.ndarray, iou: float, limit: int) -> list[int]:
    order, keep = list(np.argsort(-scores)), []
    while order and len(keep) < limit:
        best = order.pop(0)
        keep.append(best)
        order = [i for i in order if box_iou(boxes[best], boxes[i : i + 1])[0] <= iou]
    return keep


class Owlv2Detector:
    def __init__(self, folder: str, device: str = "cpu"):
        from transformers import Owlv2ForObjectDetection, Owlv2Processor

        self.processor = Owlv2Processor.from_pretrained(folder, local_files_only=True)
        self.model = Owlv2ForObjectDetection.from_pretrained(folder, local_files_only=True).to(device).eval()
        self.device = device

    def detect(self, rgb: np.ndarray, labels: list[str]) -> list[tuple[int, float, np.ndarray]]:
        """(label index, score, xyxy pixel box) for every box whose best label scores at all."""
        import torch

        inputs = self.processor(
            text=[labels], images=rgb, padding=True, truncation=True, return_tensors="pt"
        ).to(self.device)
        with torch.inference_mode():
            out = self.model(**inputs)
        scores = out.logits[0].sigmoid().cpu().numpy()  # patches x labels
        cxcywh = out.pred_boxes[0].cpu().numpy() * max(rgb.shape[:2])
        xyxy = np.concatenate([cxcywh[:, :2] - cxcywh[:, 2:] / 2, cxcywh[:, :2] + cxcywh[:, 2:] / 2], axis=1)
        xyxy = np.clip(xyxy, 0, [rgb.shape[1] - 1, rgb.shape[0] - 1] * 2)
        best = scores.argmax(axis=1)
        return [(int(best[i]), float(scores[i, best[i]]), xyxy[i]) for i in range(len(best))]


class Owlv2Sam2Segmenter(Sam2Segmenter):
    text_queries = True
    config_class = Owlv2Sam2Config

    def __init__(self, config: Owlv2Sam2Config):
        super().__init__(config.sam2)
        self.owl_config = config
        self.detector = Owlv2Detector(config.detector, config.device)
        self._rgb: np.ndarray | None = None

    def set_frame(self, frame) -> None:
        super().set_frame(frame)
        self._rgb = frame.rgb

    def segment_labels(self, labels: list[str]) -> list[Segment]:
        c = self.owl_config
        found = [d for d in self.detector.detect(self._rgb, labels) if d[1] >= c.score_threshold]
        out = []
        for index, label in enumerate(labels):
            mine = [d for d in found if d[0] == index]
            if not mine:
                continue
            boxes, scores = np.stack([d[2] for d in mine]), np.array([d[1] for d in mine])
            for i in nms(boxes, scores, c.nms_iou, c.max_per_label):
                box = tuple(int(np.rint(v)) for v in boxes[i])
                segment = self.segment_box(box, label)
                if segment is not None:
                    out.append(Segment(label, segment.mask, float(scores[i]) * segment.score))
        return out
