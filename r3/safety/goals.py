"""Goal validation: every field of a goal is checked before anything acts on it or writes a file.

A goal arrives from anyone on the DDS domain. Its fields are refused here, with the reason, before
a bag folder, a reset or a motion exists; the episode id (and so the bag's folder name) is built
only from validated parts (:func:`episode_id`), and the recorder still refuses an id that is not a
plain folder name (:func:`r3.data.bags.check_bag_name`).
"""

from __future__ import annotations

import re
import time
import uuid

from r3.files import is_control
from r3.suites import DEFAULT_SUITE, get_suite, suite_names

#: How a reasoner's answers can act (each suite says which act on it, ``r3.suites.Suite.interfaces``):
#: one instruction for the suite's low-level policy (R^3), one semantic action call (ERR), one
#: pose-tool call (ZAP) or one plan of semantic action calls (RoboGPT-R1) on the packing workcell;
#: what one answer is under each, for every --help and parameter description.
INTERFACE_ANSWERS: dict[str, str] = {
    "instruction": "one instruction for the suite's low-level policy (R^3)",
    "semantic": "one semantic action call (ERR)",
    "tools": "one pose-tool call (ZAP)",
    "plan": "one plan of semantic action calls (RoboGPT-R1)",
}


def interfaces_help() -> str:
    """The interfaces and what one answer is under each, as --help text."""
    return "; ".join(f"{name}: {answer}" for name, answer in INTERFACE_ANSWERS.items())


#: numpy's and gymnasium's generators take non-negative seeds; int64 bounds the top.
MAX_SEED = 2**63 - 1
#: The largest value of a uint32 message field (RunTask's and FollowInstruction's ``max_steps``).
UINT32_MAX = 2**32 - 1
#: The largest value of an int32 message field (RunTask's ``reasoning_budget``).
INT32_MAX = 2**31 - 1
#: A goal is a sentence or two (the longest of any task's goals is under 300 characters); it goes
#: into every prompt and the bag's metadata, so a megabyte of it is refused, not carried.
MAX_GOAL_CHARS = 2_000
#: One answer to carry out: an instruction, or one semantic or tool call with its arguments.
MAX_INSTRUCTION_CHARS = 4_096


class GoalRefused(ValueError):
    """A goal field that cannot be served; the message says which and why."""


def check_seed(seed: int, what: str = "seed") -> int:
    if not 0 <= int(seed) <= MAX_SEED:
        raise GoalRefused(f"{what} must be in 0..{MAX_SEED}, got {seed}")
    return int(seed)


def check_text(text: str, what: str, limit: int) -> str:
    """``text`` if it is at most ``limit`` characters with no control character but tab and newline
    (a NUL, a terminal escape, a bidirectional override would reach prompts, logs, the live view and
    the bag's metadata), else GoalRefused naming the first offender."""
    if len(text) > limit:
        raise GoalRefused(f"{what} is {len(text):,} characters long; at most {limit:,}")
    for i, char in enumerate(text):
        if is_control(char):
            raise GoalRefused(f"{what} holds the control character U+{ord(char):04X} at {i}")
    return text


def check_suite(suite: str) -> str:
    """The suite ("" means the default suite, ``r3.suites.DEFAULT_SUITE``)."""
    try:
        return get_suite(suite or DEFAULT_SUITE).name
    except ValueError as exc:
        raise GoalRefused(str(exc)) from None


def check_interface(interface: str, suite: str, served: tuple[str, ...] | None = None) -> str:
    """The interface ("" means instruction), if it acts on ``suite`` and is one of ``served`` (the
    interfaces a low-level node carries out; default all)."""
    interface = interface or "instruction"
    if interface not in INTERFACE_ANSWERS or (served is not None and interface not in served):
        known = ", ".join(served if served is not None else INTERFACE_ANSWERS)
        raise GoalRefused(f"interface {interface[:80]!r} is not served here (served: {known})")
    acted_on = [name for name in suite_names() if interface in get_suite(name).interfaces]
    if suite not in acted_on:
        raise GoalRefused(f"interface {interface!r} acts on {', '.join(acted_on)}, not {suite!r}")
    return interface


def check_instruction_goal(
    goal, served_suite: str, served: tuple[str, ...], takes_budget: bool = True
) -> str:
    """The interface of a FollowInstruction ``goal`` for a node that carries out ``served`` answers
    on ``served_suite``, or GoalRefused. An empty suite is the default suite. ``takes_budget`` False:
    the node's instructions run to their own end, so a goal that gives ``max_steps`` is refused, not
    ignored (a budget of one control step once ran a whole pick and place)."""
    if (goal.suite or DEFAULT_SUITE) != served_suite:
        raise GoalRefused(f"suite {goal.suite[:80]!r} is not served here ({served_suite})")
    if goal.max_steps and not takes_budget:
        raise GoalRefused(
            f"max_steps {goal.max_steps} cannot be kept: {served_suite} instructions run to their own "
            "end here (send 0)"
        )
    check_seed(goal.seed)
    check_text(goal.instruction, "the instruction", MAX_INSTRUCTION_CHARS)
    return check_interface(goal.interface, served_suite, served=served)


def canonical_task(suite: str, task: str) -> str:
    """The registry's name of ``task`` in ``suite`` (e.g. packing "task4" -> "4")."""
    tasks = get_suite(check_suite(suite)).tasks()
    try:
        spec = tasks.get_task(task)
    except KeyError:
        raise GoalRefused(f"unknown {suite} task {task[:80]!r} (known: {', '.join(tasks.TASKS)})") from None
    return next(name for name, known in tasks.TASKS.items() if known is spec)


def check_run_task(goal) -> tuple[str, str]:
    """(suite, canonical task) of a RunTask ``goal``, or GoalRefused."""
    suite = check_suite(goal.suite)
    task = canonical_task(suite, goal.task)
    check_seed(goal.seed)
    if goal.reasoning_budget < -1:
        raise GoalRefused(
            f"reasoning_budget must be -1 (unlimited), 0 or positive, got {goal.reasoning_budget}"
        )
    check_text(goal.goal, "the goal", MAX_GOAL_CHARS)
    if goal.goal and not goal.goal.strip():
        raise GoalRefused("the goal is blank: leave it empty for the task's own goal")
    return suite, task


def episode_id(task: str, seed: int) -> str:
    """A unique episode id (the bag's folder name) from a canonical task and a checked seed."""
    safe_task = re.sub(r"[^A-Za-z0-9_]", "_", task)
    return f"{safe_task}-s{seed}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
