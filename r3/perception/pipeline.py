"""The perception loop a node drives: take a frame, segment the query, measure, ground points.

ZAP's background perception: :meth:`Perception.process` runs on every frame the node accepts and
returns the query's objects with their 3D statistics; :meth:`Perception.ground_point` answers ERR's
point grounding on the last processed frame, whose per-frame work (SAM 2's embedding) is done.
Backends without text queries (``sam2``) follow the objects that grounding has pointed at: each
later frame re-prompts SAM 2 with the object's previous box.

Grounding checks its label (ERR's ``label_mismatch``): the object at the point must be perceived as
that label, by the backend's own means: text backends (``sim``, ``owlv2+sam2``) must find ``label``
overlapping the object at the point; ``sam2``, which cannot read names, accepts only a label of the
current query. ``ANY_LABEL`` asks for whichever object is there (the mask id then names it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from r3.instructions.text import hidden_character
from r3.perception.camera import RGBDFrame
from r3.perception.geometry import valid_depth
from r3.perception.grounding import PURPOSES, Detection, GroundingConfig, ground, measure, unknown_purpose
from r3.perception.segmenters import Segment, Segmenter

NO_FRAME = "no_frame"
STALE_FRAME = "stale_frame"
OUTSIDE_IMAGE = "point_outside_image"
NO_OBJECT = "no_object_at_point"
LABEL_MISMATCH = "label_mismatch"
ANY_LABEL = "*"
#: Longest label grounding considers; a longer one names nothing.
MAX_LABEL_CHARS = 200
#: Most names one query may hold: a text-prompted segmenter looks for each in every frame.
MAX_QUERY_LABELS = 64
#: Overlap (intersection over union) at which a found object is the one at the point.
SAME_OBJECT_IOU = 0.5


@dataclass
class PerceptionConfig:
    """``max_frame_age_s``: frames (and grounding on them) older than this are refused."""

    grounding: GroundingConfig = field(default_factory=GroundingConfig)
    max_frame_age_s: float = 1.0

    def __post_init__(self):
        if self.max_frame_age_s <= 0:
            raise ValueError(f"max_frame_age_s must be positive, got {self.max_frame_age_s}")


@dataclass
class GroundResult:
    ok: bool
    target: np.ndarray | None = None
    mask_id: int = 0
    reason: str = ""


class Perception:
    def __init__(self, segmenter: Segmenter, config: PerceptionConfig | None = None):
        self.segmenter = segmenter
        self.config = config or PerceptionConfig()
        self.query: list[str] = []
        self.frame: RGBDFrame | None = None
        self.detections: list[Detection] = []
        self._valid: np.ndarray | None = None
        self._tracked: dict[str, tuple[int, int, int, int]] = {}  # label -> last box (prompt backends)
        self.refused = 0  # frames newer than the current one that could not be processed
        self.refusal = ""  # why the last of them could not

    def set_query(self, labels: list[str]) -> str:
        """Replace the names to segment; returns why they were refused ("" when accepted)."""
        labels = [label.strip() for label in labels]
        if any(not label for label in labels):
            return "empty label in the query"
        if len(labels) > MAX_QUERY_LABELS:
            return f"a query of {len(labels):,} names; at most {MAX_QUERY_LABELS}"
        if (longest := max((len(label) for label in labels), default=0)) > MAX_LABEL_CHARS:
            return f"a label of {longest:,} characters in the query; at most {MAX_LABEL_CHARS}"
        if hidden := next(filter(None, map(hidden_character, labels)), ""):  # shows one name, is another
            return f"a label {hidden}"
        reason = self.segmenter.refuse_labels(labels)
        if not reason:
            self.query = list(dict.fromkeys(labels))
        return reason

    def is_fresh(self, stamp_ns: int, now_ns: int) -> bool:
        """Stamped within ``max_frame_age_s`` of this node's clock, before it or after: a frame far
        ahead says the clocks disagree (a node switched to sim time with no /clock reads 0, and
        every frame passed as fresh)."""
        return abs(now_ns - stamp_ns) <= self.config.max_frame_age_s * 1e9

    def refuse_frame(self, why: str) -> None:
        """A frame newer than the current one could not be processed (``why``): grounding, still on
        the current frame, names it until a frame is processed again (a node that skipped every frame
        of a bad shape answered a bare ``stale_frame``, the cause only in its log)."""
        self.refused, self.refusal = self.refused + 1, why

    def _with_refusals(self, reason: str, sep: str) -> str:
        """``reason``, then ``sep`` and "the last N frames were refused: WHY" while frames are."""
        if not self.refused:
            return reason
        frames = "frame was" if self.refused == 1 else f"{self.refused:,} frames were"
        return f"{reason}{sep}the last {frames} refused: {self.refusal}"

    def process(self, frame: RGBDFrame) -> list[Detection]:
        """Segment the query in ``frame`` and measure each object; the frame becomes current."""
        self.segmenter.set_frame(frame)
        self.frame, self._valid = frame, valid_depth(frame.depth_m, frame.camera)
        if self.segmenter.text_queries:
            segments = self.segmenter.segment_labels(self.query) if self.query else []
        else:
            segments = self._follow_tracked()
        self.detections = [
            measure(frame, s, i + 1, self.config.grounding, self._valid) for i, s in enumerate(segments)
        ]
        self.refused, self.refusal = 0, ""
        return self.detections

    def ground_point(self, label: str, u: float, v: float, purpose: str, now_ns: int) -> GroundResult:
        """Ground a 0-1000 image point on the current frame into a 3D target (or a reason)."""
        if self.frame is None:
            return GroundResult(False, reason=self._with_refusals(NO_FRAME, ": "))
        if not self.is_fresh(self.frame.stamp_ns, now_ns):
            age = (now_ns - self.frame.stamp_ns) / 1e9
            when = f"{age:.2f} s old" if age >= 0 else f"stamped {-age:.2f} s ahead of this node's clock"
            stale = f"{STALE_FRAME}: newest frame is {when}"
            return GroundResult(False, reason=self._with_refusals(stale, "; "))
        if purpose not in PURPOSES:
            return GroundResult(False, reason=unknown_purpose(purpose))
        pixel = self.frame.camera.normalised_to_pixel(u, v)
        if pixel is None:
            return GroundResult(False, reason=f"{OUTSIDE_IMAGE}: ({u}, {v}) is not in 0-1000")
        if label != ANY_LABEL and (refusal := self._label_refusal(label)):
            return GroundResult(False, reason=refusal)
        segment = self.segmenter.segment_point(pixel[0], pixel[1], label)
        if segment is None:
            return GroundResult(False, reason=NO_OBJECT)
        if (
            label != ANY_LABEL
            and self.segmenter.text_queries
            and not any(
                _iou(found.mask, segment.mask) > SAME_OBJECT_IOU
                for found in self.segmenter.segment_labels([label])
            )
        ):
            return GroundResult(False, reason=f"{LABEL_MISMATCH}: no {label!r} perceived at ({u}, {v})")
        target, reason = ground(self.frame, segment.mask, purpose, self.config.grounding, self._valid)
        if target is None:
            return GroundResult(False, reason=reason)
        return GroundResult(True, target=target, mask_id=self._register(segment))

    def _label_refusal(self, label: str) -> str:
        """Why ``label`` cannot name an object here, before looking at the point ("" when it may)."""
        if not label.strip():
            return f"{LABEL_MISMATCH}: empty label (use {ANY_LABEL!r} for whichever object is there)"
        if len(label) > MAX_LABEL_CHARS:
            return (
                f"{LABEL_MISMATCH}: a label of {len(label)} characters names nothing "
                f"(at most {MAX_LABEL_CHARS})"
            )
        if not self.segmenter.text_queries and label not in self.query:
            return (
                f"{LABEL_MISMATCH}: {label[:80]!r} is not among the perceived names (the query: {self.query})"
            )
        return ""

    def _register(self, segment: Segment) -> int:
        """The grounded object's mask id in the current frame's detections (added when new)."""
        if not self.segmenter.text_queries:
            self._tracked[segment.label] = segment.box
        for d in self.detections:
            if _iou(d.mask, segment.mask) > SAME_OBJECT_IOU:
                return d.mask_id
        self.detections.append(
            measure(self.frame, segment, len(self.detections) + 1, self.config.grounding, self._valid)
        )
        return self.detections[-1].mask_id

    def _follow_tracked(self) -> list[Segment]:
        out = []
        for label in self.query:
            box = self._tracked.get(label)
            segment = None if box is None else self.segmenter.segment_box(box, label)
            if segment is None:
                self._tracked.pop(label, None)
            else:
                self._tracked[label] = segment.box
                out.append(segment)
        return out


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.logical_and(a, b).sum() / max(np.logical_or(a, b).sum(), 1))
