"""Our configs -> TRL/transformers arguments. Every value that reaches TRL is set here.

:func:`sft_arguments` and :func:`grpo_arguments` return plain keyword dicts for ``trl.SFTConfig``
and ``trl.GRPOConfig`` (tests read them without building a trainer). The global batch is split
over GPUs by gradient accumulation: ``global = per_device x world_size x accumulation``.
"""

from __future__ import annotations

import os

from r3.train.config import ConfigError, LoraSettings, RLConfig, SFTConfig, _Common


def world_size() -> int:
    """Processes in this run, as accelerate / torchrun export it."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_first_process() -> bool:
    """Whether this is the run's first process (rank 0, as accelerate / torchrun export it)."""
    return int(os.environ.get("RANK", "0")) == 0


def accumulation(global_batch: int, per_device: int, world: int, what: str) -> int:
    """Gradient accumulation steps that make ``global_batch``; names the misfit otherwise."""
    if global_batch % (per_device * world):
        raise ConfigError(
            f"{what}={global_batch} is not a multiple of per_device_train_batch_size x processes "
            f"= {per_device} x {world}"
        )
    return global_batch // (per_device * world)


def _common(cfg: _Common, cuda: bool) -> dict:
    bf16 = cfg.precision == "bf16" or (cfg.precision == "auto" and cuda)
    return {
        "output_dir": cfg.output_dir,
        "learning_rate": cfg.learning_rate,
        "num_train_epochs": cfg.num_train_epochs,
        "max_steps": cfg.max_steps,
        "lr_scheduler_type": cfg.lr_scheduler_type,
        "warmup_steps": cfg.warmup_ratio,  # transformers 5: a float in [0, 1) is a ratio of all steps
        "weight_decay": cfg.weight_decay,
        "per_device_train_batch_size": cfg.per_device_train_batch_size,
        "gradient_checkpointing": cfg.gradient_checkpointing,
        "bf16": bf16,
        "use_cpu": not cuda,
        "seed": cfg.seed,
        "logging_steps": cfg.logging_steps,
        "save_strategy": "steps",
        "save_steps": cfg.save_steps,
        "save_total_limit": cfg.save_total_limit,
        "report_to": integrations(cfg.report_to),
    }


def integrations(names: list[str]) -> list[str] | str:
    """``report_to`` as the trainer takes it ("none" for none), each name one transformers knows and
    finds installed here: a misspelt or missing one passed ``--check`` and ended the run in a traceback
    once its output folder was made."""
    if not names:
        return "none"
    if names in (["all"], ["none"]):  # transformers' words for every installed one and for none
        return list(names)
    from transformers.integrations import get_available_reporting_integrations
    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK

    installed = get_available_reporting_integrations()
    for name in names:
        if name not in INTEGRATION_TO_CALLBACK:
            known = ", ".join([*sorted(INTEGRATION_TO_CALLBACK), "all", "none"])
            raise ConfigError(f"report_to: {name!r} is no integration transformers knows: {known}")
        if name not in installed:
            raise ConfigError(
                f"report_to: {name!r} is not installed here (installed: {', '.join(installed) or 'none'})"
            )
    return list(names)


def sft_arguments(cfg: SFTConfig, world: int, cuda: bool) -> dict:
    """``trl.SFTConfig`` keywords: Table 8 values, loss on the completion only."""
    return {
        **_common(cfg, cuda),
        "gradient_accumulation_steps": accumulation(
            cfg.global_batch_size, cfg.per_device_train_batch_size, world, "global_batch_size"
        ),
        "completion_only_loss": True,
        "max_length": cfg.max_length,
        # Keep chat_template_kwargs: the VLM collator renders each row with it.
        "remove_unused_columns": False,
    }


def grpo_arguments(cfg: RLConfig, world: int, cuda: bool, reward_weights: list[float]) -> dict:
    """``trl.GRPOConfig`` keywords: Table 9 with Dr. GRPO (or GSPO with sequence-level ratios).

    One optimizer step per generation batch of ``prompts_per_step x num_generations``
    completions, so updates stay on-policy unless ``num_iterations`` > 1.
    """
    completions = cfg.prompts_per_step * cfg.num_generations
    args = {
        **_common(cfg, cuda),
        "gradient_accumulation_steps": accumulation(
            completions, cfg.per_device_train_batch_size, world, "prompts_per_step x num_generations"
        ),
        "num_generations": cfg.num_generations,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "max_completion_length": cfg.max_completion_length,
        "loss_type": cfg.loss_type,
        "scale_rewards": cfg.scale_rewards,
        "beta": cfg.beta,
        "epsilon": cfg.epsilon,
        "epsilon_high": cfg.epsilon_high,
        "importance_sampling_level": cfg.importance_sampling_level,
        "num_iterations": cfg.num_iterations,
        "mask_truncated_completions": cfg.mask_truncated_completions,
        "reward_weights": reward_weights,
        "chat_template_kwargs": {"enable_thinking": cfg.thinking},
        "log_completions": False,
        "use_vllm": cfg.use_vllm,
    }
    if cfg.use_vllm:
        args.update(
            vllm_mode=cfg.vllm_mode,
            vllm_gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
            vllm_tensor_parallel_size=cfg.vllm_tensor_parallel_size,
        )
        if cfg.vllm_mode == "server":
            args["vllm_server_base_url"] = cfg.vllm_server_base_url
    return args


def lora_config(lora: LoraSettings | None):
    """A ``peft.LoraConfig`` for the trainer's ``peft_config``, or None for a full fine-tune."""
    if lora is None:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        task_type="CAUSAL_LM",
    )
