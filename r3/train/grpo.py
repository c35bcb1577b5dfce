"""Stage II single-step RL on TRL's GRPOTrainer (R^3 section 3.3, Table 9, Dr. GRPO by default).

For a recorded state the model samples ``num_generations`` responses; each is scored by the
named reward terms of :mod:`r3.rewards` (rubric judge on the parsed instruction against the
expert's, length penalty), which TRL logs one by one as ``rewards/<term>/mean``. A zero-weight
observer, :class:`ResponseStats`, logs the response length in words, the fraction of valid
responses and the fraction that repeat the previous step's instruction.
"""

from __future__ import annotations

from pathlib import Path

from r3.reasoning.backends.transformers_backend import template_kwargs
from r3.reasoning.parsing import ParsedResponse, parse_response
from r3.rewards.functions import (
    JudgeReward,
    LengthPenaltyReward,
    OutcomeReward,
    ProgressReward,
    RewardComposer,
    completion_text,
)
from r3.rewards.judge import RuleJudge
from r3.train.args import grpo_arguments, lora_config, world_size
from r3.train.checkpoint import (
    freeze_vision_tower,
    load_model,
    prompt_on_every_checkpoint,
    resolve_device,
    save_final,
    start_run,
)
from r3.train.config import RLConfig
from r3.train.rows import RL_COLUMNS, load_history_file, open_dataset, prompt_settings, rl_rows, with_history


class ResponseStats:
    """Reward-function-shaped observer: returns 0.0 for every sample (it runs with weight 0) and
    reports batch statistics through TRL's ``log_metric`` hook, the public route for them.

    >>> ResponseStats()(["Reasoning: x. Instruction: touch the red moon"], suite=["language_table"],
    ...                 previous_instruction=["touch the red moon"])
    [0.0]
    """

    def __init__(self, name: str = "response_stats", mode: str = "reason"):
        self.__name__, self.mode = name, mode

    def __call__(self, completions, suite=None, previous_instruction=None, log_metric=None, **kwargs):
        n = len(completions)
        suites = suite or ["language_table"] * n
        previous = previous_instruction or [""] * n
        words, valid, repeated = 0, 0, 0
        for completion, s, prev in zip(completions, suites, previous):
            text = completion_text(completion)
            words += len(text.split())
            parsed = parse_response(text, s, self.mode)
            if isinstance(parsed, ParsedResponse):
                valid += 1
                repeated += int(parsed.instruction_text == _canonical(prev, s))
        if log_metric is not None and n:
            log_metric("response/words", words / n)
            log_metric("response/valid_fraction", valid / n)
            log_metric("response/repeated_instruction_fraction", repeated / n)
        return [0.0] * n


def _canonical(instruction: str, suite: str) -> str | None:
    if not instruction:
        return None
    parsed = parse_response(f"Instruction: {instruction}", suite, mode="instruction_only")
    return parsed.instruction_text if isinstance(parsed, ParsedResponse) else None


def instruction_reward_terms(cfg: RLConfig) -> RewardComposer:
    """The configured subset of R^3's ``R = R_acc + R_len`` terms, the graded outcome and the
    simulated task progress, with the config's weights; the judge, the outcome and the progress
    share one simulator and its rollouts."""
    judge = RuleJudge()
    terms = {
        "judge": JudgeReward(judge),
        "length": LengthPenaltyReward(cfg.length_target_words),
        "outcome": OutcomeReward(judge),
        "progress": ProgressReward(judge),
    }
    return RewardComposer({k: terms[k] for k in cfg.rewards}, cfg.rewards)


def prepare_rl(cfg: RLConfig, rewards: RewardComposer | None = None):
    """Everything that can fail without a model. Returns (TRL rows, reward functions,
    ``trl.GRPOConfig`` keywords, the checkpoint's :class:`PromptSettings`)."""
    _, cuda = resolve_device(cfg.device)
    history = load_history_file(cfg.history_file) if cfg.history_file else {}
    table = with_history(open_dataset(cfg.dataset, cfg.splits, RL_COLUMNS, cfg.max_rows), history)
    prompt = prompt_settings(table["history_kind"], cfg.mode, cfg.thinking, cfg)
    rewards = rewards or instruction_reward_terms(cfg)
    funcs = [*rewards.trl_reward_funcs(), ResponseStats(mode=cfg.mode)]
    arguments = grpo_arguments(cfg, world_size(), cuda, [*rewards.trl_reward_weights(), 0.0])
    return rl_rows(table, prompt), funcs, arguments, prompt


def run_rl(cfg: RLConfig, rewards: RewardComposer | None = None) -> Path:
    """Train and save the final checkpoint to ``cfg.output_dir``/final; returns its path.

    ``rewards`` replaces the configured terms (tests use a toy term that a tiny model can learn).
    """
    return train_grpo(cfg, *prepare_rl(cfg, rewards))


def constrain_rollouts(model, processor, rows) -> None:
    """Stage II samples its instructions under the grammar constraint the checkpoint answers with
    (``constrained_decoding``), for the one suite of ``rows``."""
    from r3.reasoning.constrained import InstructionConstraint, constrain_generate

    suites = sorted({row["suite"] for row in rows})
    if len(suites) != 1:
        raise ValueError(f"constrained_decoding: Stage II rows of one suite expected, got {suites}")
    eos = model.generation_config.eos_token_id
    constrain_generate(model, InstructionConstraint(processor.tokenizer, suites[0], eos))


def train_grpo(cfg: RLConfig, rows, funcs, arguments: dict, prompt) -> Path:
    """TRL's GRPOTrainer on ``rows`` with the reward functions ``funcs`` (single-step or turn-level
    rows alike, as :func:`prepare_rl` or :func:`r3.train.multiturn.prepare_turn_rl` made them); the
    final checkpoint, its record naming the interface. A reward function that holds a
    simulator pool (``.simulator``) has it closed afterwards, however training ends."""
    from trl import GRPOConfig, GRPOTrainer

    resume = start_run(cfg)  # before the model loads: another run's checkpoints are refused
    processor, model = load_model(cfg.model)
    arguments = {**arguments, "chat_template_kwargs": template_kwargs(processor, cfg.thinking)}
    if cfg.freeze_vision:
        freeze_vision_tower(model)
    if prompt.constrained and cfg.interface == "instruction":
        constrain_rollouts(model, processor, rows)
    trainer = GRPOTrainer(
        model=model,
        args=GRPOConfig(**arguments),
        train_dataset=rows,
        processing_class=processor,
        reward_funcs=funcs,
        peft_config=lora_config(cfg.lora),
        callbacks=[prompt_on_every_checkpoint(prompt)],
    )
    try:
        trainer.train(resume_from_checkpoint=resume)
    finally:
        for fn in funcs:
            if hasattr(fn, "simulator"):
                fn.simulator.close()
    record = {
        "stage": "rl",
        "interface": cfg.interface,
        "base_model": cfg.model,
        "dataset": cfg.dataset,
        "rows": len(rows),
        "log_history": trainer.state.log_history,
    }
    merge = cfg.lora is not None and cfg.lora.merge
    return save_final(trainer, processor, cfg.model, Path(cfg.output_dir) / "final", record, merge, prompt)
