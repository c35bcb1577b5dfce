"""The grocery-packing suite (R^3's workcell): its record, pointing at the existing code.

The cell lives in r3.sim.packing (env), r3.tasks.packing (tasks, workcell), r3.packing_episode
(cell, episode), its grammar in r3.instructions.packing, its expert in r3.reasoning.packing_expert.
The hooks import them when called, so the registry loads no simulator.
"""

from __future__ import annotations

from r3.suites import Suite


def _prompt(inp) -> str:
    from r3.reasoning.prompts import packing_text

    return packing_text(inp)


def _judge(candidate: str, reference: str, snapshot):
    from r3.rewards.judge import exact_tiers

    return exact_tiers(candidate, reference, snapshot)


def _claim_checker(state, task, previous):
    from r3.reasoning.claims import PackingChecker

    return PackingChecker(state, task, previous)


def _unchanged(a, b) -> bool:
    from r3.reasoning.packing_expert import packing_unchanged

    return packing_unchanged(a, b)


def _canonical_instructions() -> tuple[str, ...]:
    from r3.reasoning.constrained import packing_instructions

    return packing_instructions()


def _eval_tasks() -> tuple[str, ...]:
    from r3.tasks.packing.tasks import HELD_OUT

    return tuple(HELD_OUT)


def _make_env(**kwargs):
    from r3.sim.packing.env import PackingEnv

    return PackingEnv(**kwargs)


SUITE = Suite(
    name="packing",
    title="packing",
    tasks_module="r3.tasks.packing.tasks",
    grammar_module="r3.instructions.packing",
    interfaces=("instruction", "semantic", "tools", "plan"),
    default_history="instruction",
    collect_split="train",
    collect_interface="semantic",
    # one base view plus zero, one or two wrist views
    views={1: ("base",), 2: ("base", "wrist"), 3: ("base", "left wrist", "right wrist")},
    workcell=True,
    grounding_choice=True,
    # R^3's 5 environment seeds x 10 rollouts; 15 instructions (r3.packing_episode)
    eval_protocol={"scenes": 5, "trials": 10, "max_steps": 15},
    eval_tasks=_eval_tasks,
    prompt=_prompt,
    canonical_instructions=_canonical_instructions,
    judge=_judge,
    claim_checker=_claim_checker,
    unchanged=_unchanged,
    make_env=_make_env,
)
