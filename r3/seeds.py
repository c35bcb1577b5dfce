"""Every seed rule of r3 in one place: the episode seeds of collection and evaluation, and the seeds
derived from an episode's seed (a trial's noise, the low-level policy's generator at each step).

Episode seeds. Collection seeds are ``task_index * SEEDS_PER_TASK + scene * MAX_TRIALS + trial``,
where ``task_index`` is the task's place in :data:`TASK_ORDER` (every task of every split, so two
tasks never share a seed), ``scene < MAX_SCENES`` and ``trial < MAX_TRIALS``. All of them lie below
:data:`EVAL_SEED_BASE`; evaluation of held-out scenes uses seeds from there up (:func:`scene_seed`).
The simulator draws the layout, the task instance and the policy noise from the seed, so every
collected trial of a scene is its own episode.

Derived seeds. An evaluation trial keeps its scene and redraws the noise (:func:`trial_seed`); the
low-level policy's generator is reseeded at every decision step (:func:`policy_seed`), in process
and through the ROS graph alike.

>>> collection_seed("group", scene=0, trial=0), collection_seed("line", scene=3, trial=1)
(0, 70031)
>>> all(collection_seed(t, MAX_SCENES - 1, MAX_TRIALS - 1) < EVAL_SEED_BASE for t in TASK_ORDER)
True
"""

from __future__ import annotations

import numpy as np

from r3.tasks.language_table.tasks import SPLITS

#: First seed of evaluation episodes; collection never reaches it.
EVAL_SEED_BASE = 1_000_000
#: Every Language Table task, in split order (T_M, T_R, T_O); a task's index fixes its seed block.
TASK_ORDER: tuple[str, ...] = tuple(task for tasks in SPLITS.values() for task in tasks)
SEEDS_PER_TASK = 70_000
MAX_TRIALS = 10
MAX_SCENES = SEEDS_PER_TASK // MAX_TRIALS


def collection_seed(task: str, scene: int, trial: int) -> int:
    """The seed of trial ``trial`` of scene ``scene`` of ``task`` (see the module docstring)."""
    if task not in TASK_ORDER:
        raise ValueError(f"unknown task {task!r}; known: {', '.join(TASK_ORDER)}")
    if not 0 <= scene < MAX_SCENES:
        raise ValueError(f"scene must be in [0, {MAX_SCENES}), got {scene}")
    if not 0 <= trial < MAX_TRIALS:
        raise ValueError(f"trial must be in [0, {MAX_TRIALS}), got {trial}")
    return TASK_ORDER.index(task) * SEEDS_PER_TASK + scene * MAX_TRIALS + trial


def is_evaluation_seed(seed: int) -> bool:
    return seed >= EVAL_SEED_BASE


def packing_collection_seed(scene: int, trial: int) -> int:
    """The seed of trial ``trial`` of scene ``scene`` of the packing training task ("train": goals drawn
    from the seed), below :data:`EVAL_SEED_BASE` like every collection seed.

    >>> packing_collection_seed(3, 1)
    31
    """
    if not 0 <= scene < MAX_SCENES:
        raise ValueError(f"scene must be in [0, {MAX_SCENES}), got {scene}")
    if not 0 <= trial < MAX_TRIALS:
        raise ValueError(f"trial must be in [0, {MAX_TRIALS}), got {trial}")
    return scene * MAX_TRIALS + trial


def scene_seed(scene: int) -> int:
    """Environment seed of held-out scene ``scene`` (0-based).

    >>> scene_seed(0)
    1000000
    """
    if scene < 0:
        raise ValueError(f"scene index must be >= 0, got {scene}")
    return EVAL_SEED_BASE + scene


def trial_seed(scene_seed: int, trial: int) -> int:
    """Seed of the stochastic parts (policy noise, expert wording) of one trial of a scene.

    Trial 0 is the scene seed itself (what the ROS graph's RunTask uses); other trials keep the
    scene and redraw the noise.

    >>> trial_seed(3, 0), trial_seed(3, 1) != trial_seed(3, 2)
    (3, True)
    """
    if trial == 0:
        return int(scene_seed)
    return int(np.random.SeedSequence([int(scene_seed), int(trial)]).generate_state(1)[0])


def policy_seed(episode_seed: int, step: int) -> int:
    """Seed of the low-level policy's generator at one decision step (the ROS graph uses it too).

    >>> policy_seed(3, 0) == policy_seed(3, 0) != policy_seed(3, 1)
    True
    """
    return int(np.random.SeedSequence([int(episode_seed), int(step)]).generate_state(1)[0])
