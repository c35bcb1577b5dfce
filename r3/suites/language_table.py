"""The Language Table suite (R^3's pushing board): its record, pointing at the existing code.

The board lives in r3.sim.language_table (env) and r3.tasks.language_table (tasks, checkers), its
grammar in r3.instructions.language_table, its expert in r3.reasoning.expert. The hooks import
them when called, so the registry loads no simulator.
"""

from __future__ import annotations

from r3.suites import Suite


def _prompt(inp) -> str:
    from r3.reasoning.prompts import language_table_text

    return language_table_text(inp)


def _judge(candidate: str, reference: str, snapshot):
    from r3.rewards.judge import grammar_tiers

    return grammar_tiers(candidate, reference, snapshot)


def _claim_checker(state, task, previous):
    from r3.reasoning.claims import BoardChecker

    return BoardChecker(state, task, previous)


def _unchanged(a, b) -> bool:
    from r3.reasoning.claims import board_unchanged

    return board_unchanged(a, b)


def _canonical_instructions() -> tuple[str, ...]:
    from r3.reasoning.constrained import language_table_instructions

    return language_table_instructions()


def _eval_tasks() -> tuple[str, ...]:
    from r3.tasks.language_table.tasks import TASKS

    return tuple(TASKS)


def _make_env(**kwargs):
    from r3.sim.language_table.env import LanguageTableEnv

    return LanguageTableEnv(**kwargs)


SUITE = Suite(
    name="language_table",
    title="Language Table",
    tasks_module="r3.tasks.language_table.tasks",
    grammar_module="r3.instructions.language_table",
    interfaces=("instruction",),
    default_history="response",
    collect_split="T_M",
    collect_interface="instruction",
    compact_prompt=True,
    vlm_judged=True,
    eval_tasks=_eval_tasks,
    eval_protocol={"scenes": 64, "trials": 16, "max_steps": 20},
    prompt=_prompt,
    canonical_instructions=_canonical_instructions,
    judge=_judge,
    claim_checker=_claim_checker,
    unchanged=_unchanged,
    make_env=_make_env,
)
