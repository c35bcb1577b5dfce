"""Segmenter backends behind one interface, chosen by name (:data:`SEGMENTERS`): ``sim``, ``sam2``,
``owlv2+sam2``, and those of the ``r3.segmenters`` entry points. Every one is built the same way, from
one mapping of options (:func:`make_segmenter`), so the perception node has no branch per backend and a
segmenter of an entry point gets the same options as the built-in ones.

A segmenter sees one frame at a time (:meth:`Segmenter.set_frame` does the per-frame work, such as
SAM 2's image embedding, once) and then answers prompts on it: the object under an image point,
the object inside a box, and, where it understands text (``sim`` by ground-truth name,
``owlv2+sam2`` through an open-vocabulary detector), the objects matching a list of names.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from r3.perception.camera import RGBDFrame
from r3.perception.geometry import mask_box
from r3.plugins import Registry, built_as, having


@dataclass
class Segment:
    """One object mask in the current frame: boolean HxW ``mask``, ``score`` in [0, 1]."""

    label: str
    mask: np.ndarray
    score: float

    @functools.cached_property
    def box(self) -> tuple[int, int, int, int] | None:
        return mask_box(self.mask)


class Segmenter(ABC):
    #: True when :meth:`segment_labels` can find objects by name; the others follow an object
    #: from a point (a GroundPoint call) by box prompts, frame to frame.
    text_queries: bool = False
    #: True when :meth:`set_frame` needs frames with the simulator's instance masks (``RGBDFrame.instances``).
    reads_sim_instances: bool = False

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> Segmenter:
        """The segmenter ``options`` ask for (the :data:`SEGMENTERS` factory); one without options
        ignores them."""
        return cls()

    def refuse_labels(self, labels: list[str]) -> str:
        """Why these names cannot be served ("" when they can)."""
        return ""

    @abstractmethod
    def set_frame(self, frame: RGBDFrame) -> None:
        """Take the frame that the next prompts refer to (per-frame work happens here, once)."""

    @abstractmethod
    def segment_point(self, col: int, row: int, label: str) -> Segment | None:
        """The object under pixel (col, row), or None where there is none."""

    def segment_box(self, box: tuple[int, int, int, int], label: str) -> Segment | None:
        """The object inside an xyxy pixel box; only prompt-driven backends implement it."""
        raise NotImplementedError(f"{type(self).__name__} takes no box prompts")

    def segment_labels(self, labels: list[str]) -> list[Segment]:
        """All objects matching ``labels`` (only backends with ``text_queries``)."""
        raise NotImplementedError(f"{type(self).__name__} cannot find objects by name")


#: name -> "module:factory"; ``factory(options)`` builds the segmenter (imported only when chosen), where
#: ``options`` are named as the perception node's parameters (``device``, ``sam2_checkpoint``, ...,
#: :mod:`r3.graph.node_params`): each factory reads those it needs, its defaults standing for missing ones.
#: What a factory builds has every member of a :class:`Segmenter` (the perception pipeline calls them).
SEGMENTERS = Registry(
    "segmenter",
    {
        "sim": "r3.perception.segmenters:SimSegmenter.from_options",
        "sam2": "r3.perception.sam2_backend:Sam2Segmenter.from_options",
        "owlv2+sam2": "r3.perception.owlv2:Owlv2Sam2Segmenter.from_options",
    },
    check=having("__call__"),
    built=built_as(Segmenter),
)


class SimSegmenter(Segmenter):
    """Simulator instance masks, named as the simulator names them (ground truth, for sim only)."""

    text_queries = True
    reads_sim_instances = True

    def __init__(self):
        self._ids: np.ndarray | None = None
        self._names: dict[int, str] = {}

    def set_frame(self, frame: RGBDFrame) -> None:
        if frame.instances is None or frame.instance_names is None:
            raise ValueError("the sim segmenter needs frames with simulator instance masks")
        self._ids, self._names = frame.instances, frame.instance_names

    def refuse_labels(self, labels: list[str]) -> str:
        return ""  # unknown names simply find nothing: the simulator's object set changes per task

    def segment_point(self, col: int, row: int, label: str) -> Segment | None:
        instance = int(self._ids[row, col])
        if instance not in self._names:
            return None
        return Segment(self._names[instance], self._ids == instance, 1.0)

    def segment_labels(self, labels: list[str]) -> list[Segment]:
        by_name = {name: i for i, name in self._names.items()}
        out = []
        for label in labels:
            if label in by_name:
                mask = self._ids == by_name[label]
                if mask.any():
                    out.append(Segment(label, mask, 1.0))
        return out


def make_segmenter(backend: str, options: Mapping[str, object] = MappingProxyType({})) -> Segmenter:
    """Build a backend by name from ``options`` (the perception node passes all its parameters); it
    ignores the options it does not read and refuses a value it cannot use, with the reason (an
    ``owlv2+sam2`` without ``detector``).

    >>> type(make_segmenter("sim", {"device": "cpu"})).__name__
    'SimSegmenter'
    """
    return SEGMENTERS.build(backend, options)
