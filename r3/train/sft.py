"""Stage I mid-training on TRL's SFTTrainer: "Reasoning: ... Instruction: ..." given images, goal
and history, loss on the response only. Successful and failed expert episodes alike (R^3 3.2).
``mode: instruction_only`` is R^3's imitation baseline: the same rows, the answer "Instruction: ..."
alone. The checkpoint records how it was prompted (``r3_prompt.json``). A dataset folder written by
:func:`r3.train.mining.mine` (successful multi-turn episodes, prompt-completion rows) trains as it is.
"""

from __future__ import annotations

from pathlib import Path

from r3.data import schema as S
from r3.reasoning.backends.transformers_backend import template_kwargs
from r3.train.args import lora_config, sft_arguments, world_size
from r3.train.checkpoint import (
    freeze_vision_tower,
    load_model,
    prompt_on_every_checkpoint,
    resolve_device,
    save_final,
    start_run,
)
from r3.train.config import SFTConfig
from r3.train.mining import is_mined, load_mined
from r3.train.rows import (
    SFT_COLUMNS,
    TEMPLATE_KWARGS,
    DatasetError,
    open_dataset,
    prompt_settings,
    sft_rows,
)


def prepare_sft(cfg: SFTConfig):
    """Everything that can fail without a model: dataset, columns, split, batch arithmetic.

    Returns (TRL rows, ``trl.SFTConfig`` keywords, the checkpoint's :class:`PromptSettings`).
    """
    _, cuda = resolve_device(cfg.device)
    arguments = sft_arguments(cfg, world_size(), cuda)
    if is_mined(cfg.dataset):  # a mined round of successful multi-turn episodes (r3.train.mining)
        try:
            rows, prompt = load_mined(
                cfg.dataset, cfg.mode, cfg.thinking, cfg.max_rows, cfg.reasoning_sentences
            )
        except ValueError as err:
            raise DatasetError(str(err)) from None
        return rows, arguments, prompt
    table = open_dataset(cfg.dataset, cfg.splits, _columns(cfg), cfg.max_rows)
    prompt = prompt_settings(table["history_kind"], cfg.mode, cfg.thinking, cfg)
    return sft_rows(table, prompt, cfg.reasoning_sentences, cfg.reasoning_regions), arguments, prompt


def _columns(cfg: SFTConfig) -> tuple[str, ...]:
    """The dataset columns Stage I reads (the snapshot too when answers say where blocks are)."""
    return (*SFT_COLUMNS, S.SNAPSHOT) if cfg.reasoning_regions else SFT_COLUMNS


def held_out_rows(cfg: SFTConfig, prompt):
    """The rows of ``cfg.eval_dataset`` prompted as the training rows (None without one)."""
    if cfg.eval_dataset is None:
        return None
    table = open_dataset(cfg.eval_dataset, cfg.splits, _columns(cfg))
    return sft_rows(table, prompt, cfg.reasoning_sentences, cfg.reasoning_regions)


def run_sft(cfg: SFTConfig) -> Path:
    """Train and save the final checkpoint to ``cfg.output_dir``/final; returns its path."""
    rows, arguments, prompt = prepare_sft(cfg)
    return train_sft(cfg, rows, arguments, prompt, held_out_rows(cfg, prompt))


def train_sft(cfg: SFTConfig, rows, arguments: dict, prompt, held_out) -> Path:
    """TRL's SFTTrainer on ``rows`` as :func:`prepare_sft` made them, logging the loss on the
    ``held_out`` rows (:func:`held_out_rows`); the final checkpoint at ``cfg.output_dir``/final."""
    from trl import SFTConfig as TRLSFTConfig
    from trl import SFTTrainer

    if held_out is not None:
        arguments.update(eval_strategy="steps", eval_steps=cfg.eval_steps)
    resume = start_run(cfg)  # before the model loads: another run's checkpoints are refused
    processor, model = load_model(cfg.model)
    if not template_kwargs(processor, prompt.thinking):  # its template reads no enable_thinking
        rows = rows.remove_columns(TEMPLATE_KWARGS)
        held_out = held_out and held_out.remove_columns(TEMPLATE_KWARGS)
    if cfg.freeze_vision:
        freeze_vision_tower(model)
    trainer = SFTTrainer(
        model=model,
        args=TRLSFTConfig(**arguments),
        train_dataset=rows,
        eval_dataset=held_out,
        processing_class=processor,
        peft_config=lora_config(cfg.lora),
        callbacks=[prompt_on_every_checkpoint(prompt)],
    )
    # The held-out loss before the first step (train() starts a fresh log, so it is kept here).
    before = [{**trainer.evaluate(), "step": 0}] if held_out is not None else []
    trainer.train(resume_from_checkpoint=resume)
    info = {
        "stage": "sft",
        "base_model": cfg.model,
        "dataset": cfg.dataset,
        "rows": len(rows),
        "log_history": before + trainer.state.log_history,
    }
    merge = cfg.lora is not None and cfg.lora.merge
    return save_final(trainer, processor, cfg.model, Path(cfg.output_dir) / "final", info, merge, prompt)
