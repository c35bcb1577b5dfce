"""Which frames of an instruction segment become training examples (R^3 Appendix A.2).

A segment is the time one instruction is in force, ``[0, T)`` seconds. The rule oversamples the
onset and the moment before completion and skips the ambiguous transition tail:

- onset ``[0, 1.5 s)``: 3 frames, frame zero first, at least 0.25 s apart (the earliest that fit);
- interior ``[1.5 s, T - 2 s)``: up to 4 frames spread evenly, each at least 1 s from every frame
  already chosen;
- pre-end ``[T - 2 s, T - 1 s)``: 1 frame (the latest that is 0.25 s from the others);
- tail ``[T - 1 s, T)``: never.

Short segments lose the stages that do not fit (the onset also ends where the tail starts).

>>> times = [i / 10 for i in range(60)]       # a 6 s segment at 10 Hz
>>> [times[i] for i in sample_segment_frames(times, 6.0)]
[0.0, 0.3, 0.6, 1.8, 2.8, 3.8, 4.9]
>>> sample_segment_frames([0.0, 0.5], 1.2)    # only the onset fits: 0.5 s is in the tail
[0]
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class FrameSampling:
    """Stage lengths (seconds), frame counts and minimum spacings of the rule; defaults are A.2's."""

    onset_s: float = 1.5
    onset_frames: int = 3
    onset_spacing_s: float = 0.25
    interior_frames: int = 4
    interior_spacing_s: float = 1.0
    pre_end_s: float = 2.0
    pre_end_frames: int = 1
    pre_end_spacing_s: float = 0.25
    tail_s: float = 1.0

    def __post_init__(self):
        for name, value in vars(self).items():
            if value < 0:
                raise ValueError(f"FrameSampling.{name} must be >= 0, got {value}")
        if self.pre_end_s < self.tail_s:
            raise ValueError(f"FrameSampling.pre_end_s ({self.pre_end_s}) must be >= tail_s ({self.tail_s})")


A2_RULE = FrameSampling()


def sample_segment_frames(
    times: Sequence[float], duration: float, rule: FrameSampling = A2_RULE
) -> list[int]:
    """Indices (ascending) of the frames to keep; ``times`` ascending, relative to the segment start."""
    chosen: list[int] = []

    def far(i: int, spacing: float) -> bool:
        return all(abs(times[i] - times[j]) >= spacing - 1e-9 for j in chosen)

    def window(start: float, end: float) -> range:
        return range(bisect.bisect_left(times, start - 1e-9), bisect.bisect_left(times, end - 1e-9))

    tail = duration - rule.tail_s
    onset = window(0.0, min(rule.onset_s, tail))
    for i in onset:
        if len(chosen) == rule.onset_frames:
            break
        if far(i, rule.onset_spacing_s):
            chosen.append(i)
    start, end = rule.onset_s, duration - rule.pre_end_s
    interior = window(start, end)
    if interior and rule.interior_frames:
        width = (end - start) / rule.interior_frames
        for k in range(rule.interior_frames):
            target = start + (k + 0.5) * width
            fits = [i for i in interior if far(i, rule.interior_spacing_s)]
            if fits:
                chosen.append(min(fits, key=lambda i: (abs(times[i] - target), i)))
    picked = 0
    for i in reversed(window(max(0.0, duration - rule.pre_end_s), tail)):
        if picked == rule.pre_end_frames:
            break
        if far(i, rule.pre_end_spacing_s):
            chosen.append(i)
            picked += 1
    return sorted(chosen)
