"""The Language Table suite (R^3's pushing board): its record, pointing at the existing code.

The board lives in r3.sim.language_table (env) and r3.tasks.language_table (tasks, checkers), its
grammar in r3.instructions.language_table, its expert in r3.reasoning.expert. The hooks import
them when called, so the registry loads no simulator.
"""

from __future__ import annotations

from r3.suites import Suite, lazy


def _eval_tasks() -> tuple[str, ...]:
    from r3.tasks.language_table.tasks import TASKS

    return tuple(TASKS)


SUITE = Suite(
    name="language_table",
    title="Language Table",
    tasks_module="r3.tasks.language_table.tasks",
    grammar_module="r3.instructions.language_table",
    interfaces=("instruction",),
    default_history="response",
    collect_split="T_M",
    collect_interface="instruction",
    run_task="V",
    compact_prompt=True,
    vlm_judged=True,
    outcome_simulated=True,
    eval_tasks=_eval_tasks,
    eval_protocol={"scenes": 64, "trials": 16, "max_steps": 20},
    prompt=lazy("r3.reasoning.prompts:language_table_text"),
    canonical_instructions=lazy("r3.reasoning.constrained:language_table_instructions"),
    judge=lazy("r3.rewards.judge:grammar_tiers"),
    claim_checker=lazy("r3.reasoning.claims:BoardChecker"),
    unchanged=lazy("r3.reasoning.claims:board_unchanged"),
    make_env=lazy("r3.sim.language_table.env:LanguageTableEnv"),
)
