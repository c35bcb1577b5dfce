"""The Appendix A.2 frame sampling rule and the collection seed scheme."""

from __future__ import annotations

import pytest

from r3.data.frames import FrameSampling, sample_segment_frames
from r3.seeds import (
    EVAL_SEED_BASE,
    MAX_SCENES,
    MAX_TRIALS,
    TASK_ORDER,
    collection_seed,
    is_evaluation_seed,
)

HZ10 = [i / 10 for i in range(200)]


@pytest.mark.parametrize(
    "duration, expected",
    [
        (20.0, [0.0, 0.3, 0.6, 3.6, 7.7, 11.8, 15.9, 18.9]),  # all stages, interior spread over [1.5, 18)
        (6.0, [0.0, 0.3, 0.6, 1.8, 2.8, 3.8, 4.9]),  # interior limited by its 1 s spacing
        (3.0, [0.0, 0.3, 0.6, 1.9]),  # no interior: onset, then pre-end [1, 2)
        (1.2, [0.0]),  # onset window ends where the tail [0.2, 1.2) starts
    ],
)
def test_a2_rule(duration, expected):
    times = [t for t in HZ10 if t < duration]
    assert [times[i] for i in sample_segment_frames(times, duration)] == expected


def test_rule_invariants_hold_for_many_lengths():
    for n in range(1, 200):
        times, duration = HZ10[:n], n / 10
        picked = [times[i] for i in sample_segment_frames(times, duration)]
        assert picked == sorted(set(picked))
        assert all(t < duration - 1.0 for t in picked[1:])  # the tail is never sampled
        assert len(picked) <= 3 + 4 + 1
        if duration > 1.0:
            assert picked[0] == 0.0


def test_rule_validates_itself():
    with pytest.raises(ValueError, match="onset_frames"):
        FrameSampling(onset_frames=-1)
    with pytest.raises(ValueError, match="pre_end_s"):
        FrameSampling(pre_end_s=0.5, tail_s=1.0)


def test_collection_seeds_are_unique_and_below_evaluation_seeds():
    seeds = {
        collection_seed(t, s, r)
        for t in TASK_ORDER
        for s in (0, 1, MAX_SCENES - 1)
        for r in range(MAX_TRIALS)
    }
    assert len(seeds) == len(TASK_ORDER) * 3 * MAX_TRIALS
    assert max(seeds) < EVAL_SEED_BASE and not any(map(is_evaluation_seed, seeds))
    assert is_evaluation_seed(EVAL_SEED_BASE)
    with pytest.raises(ValueError, match="scene"):
        collection_seed("V", MAX_SCENES, 0)
    with pytest.raises(ValueError, match="unknown task"):
        collection_seed("dance", 0, 0)
