"""The grocery-packing suite (R^3's workcell): its record, pointing at the existing code.

The cell lives in r3.sim.packing (env), r3.tasks.packing (tasks, workcell), r3.packing_episode
(cell, episode), its grammar in r3.instructions.packing, its expert in r3.reasoning.packing_expert.
The hooks import them when called, so the registry loads no simulator.
"""

from __future__ import annotations

from r3.suites import Suite, lazy


def _eval_tasks() -> tuple[str, ...]:
    from r3.tasks.packing.tasks import HELD_OUT

    return tuple(HELD_OUT)


SUITE = Suite(
    name="packing",
    title="packing",
    tasks_module="r3.tasks.packing.tasks",
    grammar_module="r3.instructions.packing",
    interfaces=("instruction", "semantic", "tools", "plan"),
    default_history="instruction",
    collect_split="train",
    collect_interface="semantic",
    run_task="4",
    # one base view plus zero, one or two wrist views
    views={1: ("base",), 2: ("base", "wrist"), 3: ("base", "left wrist", "right wrist")},
    workcell=True,
    grounding_choice=True,
    # R^3's 5 environment seeds x 10 rollouts; 15 instructions (r3.packing_episode)
    eval_protocol={"scenes": 5, "trials": 10, "max_steps": 15},
    eval_tasks=_eval_tasks,
    prompt=lazy("r3.reasoning.prompts:packing_text"),
    canonical_instructions=lazy("r3.reasoning.constrained:packing_instructions"),
    judge=lazy("r3.rewards.judge:packing_tiers"),
    claim_checker=lazy("r3.reasoning.claims:PackingChecker"),
    unchanged=lazy("r3.reasoning.packing_expert:packing_unchanged"),
    make_env=lazy("r3.sim.packing.env:PackingEnv"),
)
