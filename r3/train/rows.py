"""Dataset rows -> TRL rows, with prompts built by :mod:`r3.reasoning.prompts` (as at inference).

A TRL row holds the conversational ``prompt`` (one user turn: an ``{"type": "image"}``
placeholder per image, then the prompt text), ``images`` (the PNGs, decoded lazily by
``datasets``) and, per job:

- SFT: ``completion``, the assistant turn the loss covers: the dataset's ``response``
  ("Reasoning: ... Instruction: ...") in "reason" mode, "Instruction: ..." alone in
  "instruction_only" mode (R^3's imitation baseline); ``chat_template_kwargs``.
- RL: the columns the reward functions read by name (``expert_instruction``, ``suite``,
  ``snapshot``, a file path or None), ``previous_instruction`` for the repeated-instruction
  metric, and ``episode_id`` / ``step``. Repeated steps are already gone: ``r3 dataset build``
  leaves them out of rl datasets (R^3 section 3.3).

The prompt is :func:`r3.reasoning.prompts.build_messages` of the row's :class:`ReasonerInput`
recast by the run's :class:`PromptSettings` (the checkpoint saves them, and the reasoner backend
recasts inference inputs the same way), with the PIL images swapped for placeholders, so training
and inference prompts cannot drift apart.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np

from r3.data import schema as S
from r3.files import bounded_repr, is_kind
from r3.reasoning.parsing import ParsedResponse, parse_response
from r3.reasoning.prompts import (
    ANSWER_HEADERS,
    INSTRUCTION_HEADER,
    REASONING_HEADER,
    PromptSettings,
    ReasonerInput,
    build_messages,
    previous_instruction_text,
)

#: Columns each job reads from the dataset.
PROMPT_COLUMNS = (S.IMAGES, S.GOAL, S.NOTE, S.SUITE, S.HISTORY, S.HISTORY_KIND, S.SPLIT, S.STEP)
SFT_COLUMNS = (*PROMPT_COLUMNS, S.INSTRUCTION, S.RESPONSE)
#: A training row's keywords for the chat template (dropped for a template that reads none).
TEMPLATE_KWARGS = "chat_template_kwargs"
RL_COLUMNS = (*PROMPT_COLUMNS, S.EXPERT_INSTRUCTION, S.SNAPSHOT, S.EPISODE_ID)

_PLACEHOLDER = np.zeros((1, 1, 3), np.uint8)


class DatasetError(ValueError):
    """The dataset cannot feed this job: missing directory, split or column; the message says which."""


def open_dataset(
    path: str | Path, splits: list[str] | None, columns: tuple[str, ...], max_rows: int | None = None
):
    """The rows of the task ``splits`` (all rows for None) of the dataset at ``path``, after
    checking that ``columns`` exist. Image and snapshot paths come back absolute.

    Raises :class:`DatasetError` naming the missing directory, column or split, so a bad config
    fails before any model loads.
    """
    path = Path(path)
    try:
        S.read_manifest(path)
        table = S.load_r3_dataset(path)
    except (ValueError, OSError) as exc:
        raise DatasetError(f"dataset not usable: {exc}") from None
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise DatasetError(f"dataset {path}: missing column(s) {missing}; it has {table.column_names}")
    if splits is not None:
        present = sorted(set(table[S.SPLIT]))
        absent = [s for s in splits if s not in present]
        if absent:
            raise DatasetError(f"dataset {path}: no rows in split(s) {absent}; splits present: {present}")
        table = table.filter(lambda s: s in splits, input_columns=S.SPLIT)
    if len(table) == 0:
        raise DatasetError(f"dataset {path}: no rows")
    table = table.select(range(min(max_rows, len(table)))) if max_rows else table
    _check_files(path, table)
    return table


def _check_files(path: Path, table) -> None:
    """A DatasetError when a row's image or snapshot file is not there: training would read it only
    at that row's step, after the model loaded and the output folder was made."""
    for column in (S.IMAGES, S.SNAPSHOT):
        if column not in table.column_names:
            continue
        files = [f for cell in table[column] for f in ([cell] if isinstance(cell, str) else cell) if f]
        gone = [f for f in files if not os.path.isfile(f)]
        if gone:
            raise DatasetError(
                f"dataset {path}: {len(gone)} of {len(files)} {column} files are not there, e.g. {gone[0]}"
            )


def prompt_settings(kinds, mode: str, thinking: bool, cfg=None) -> PromptSettings:
    """The settings of a run whose rows have history kinds ``kinds``: the one kind besides "none"
    (which marks first steps), or "none" when that is all there is.

    ``cfg`` (a training config) adds its prompt variant, constrained decoding and temperature.

    Raises :class:`DatasetError` when the rows mix kinds: a model trained so could not say how to
    prompt it.
    """
    present = sorted(set(kinds) - {"none"})
    if len(present) > 1:
        raise DatasetError(f"rows mix history kinds {present}; build the dataset with one --history")
    history = present[0] if present else "none"
    if cfg is None:
        return PromptSettings(mode, history, thinking)
    return PromptSettings(
        mode, history, thinking, cfg.prompt_variant, cfg.constrained_decoding, cfg.inference_temperature
    )


def reasoner_input(
    row: dict, prompt: PromptSettings | None = None, images: list | None = None
) -> ReasonerInput:
    """The :class:`ReasonerInput` of one dataset row (placeholder images unless ``images`` given),
    recast by ``prompt`` when given (a first step, history kind "none", then has an empty history of
    the prompt's kind, as at inference)."""
    inp = ReasonerInput(
        suite=row["suite"],
        goal=row["goal"],
        images=images if images is not None else [_PLACEHOLDER] * len(row["images"]),
        note=row["note"] or "",
        history_text=row["history"] or "",
        history=row["history_kind"],
        step=int(row.get("step") or 0),
        interface=row.get("interface") or "instruction",  # turn rows (r3.train.multiturn) carry theirs
    )
    return inp if prompt is None else prompt.apply(inp)


def prompt_messages(row: dict, prompt: PromptSettings | None = None) -> list[dict]:
    """The chat prompt of one row: :func:`build_messages` with image placeholders for TRL."""
    messages = build_messages(reasoner_input(row, prompt))
    for message in messages:
        message["content"] = [
            {"type": "image"} if part["type"] == "image" else part for part in message["content"]
        ]
    return messages


def previous_instruction(row: dict) -> str:
    """The instruction of the previous step as the row's history shows it ("" when none)."""
    text = (row["history"] or "").strip()
    if row["history_kind"] == "instruction":
        return text
    return previous_instruction_text(text, row["suite"]) if row["history_kind"] == "response" else ""


def _snapshot(path: str | None) -> str | None:
    """A row's snapshot file, or None when the step has none (the judge then skips the semantic tier)."""
    return path if path and Path(path).is_file() else None


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def shorten_reasoning(
    response: str, suite: str, sentences: int | None, interface: str = "instruction"
) -> str:
    """``response`` with its reasoning cut to the last ``sentences`` sentences (None: unchanged).

    The result is still "Reasoning: ...\n<the interface's header> ..." with the same answer; a
    response that does not parse as a valid step is returned unchanged.
    """
    if sentences is None:
        return response
    parsed = parse_response(response, suite, interface=interface)
    if not isinstance(parsed, ParsedResponse):
        return response
    kept = _SENTENCE_END.split(parsed.reasoning.strip())[-sentences:]
    return f"{REASONING_HEADER} {' '.join(kept)}\n{ANSWER_HEADERS[interface]} {parsed.instruction_text}"


def sft_target(row: dict, mode: str, reasoning_sentences: int | None = None) -> str:
    """What SFT trains a row's answer to be: the response (shortened by :func:`shorten_reasoning`)
    in "reason" mode, only "Instruction: ..." in "instruction_only" mode."""
    if mode == "instruction_only":
        return f"{INSTRUCTION_HEADER} {row['instruction']}"
    return shorten_reasoning(row["response"], row["suite"], reasoning_sentences)


def sft_rows(
    table, prompt: PromptSettings, reasoning_sentences: int | None = None, reasoning_regions: bool = False
):
    """TRL prompt-completion rows for SFT from dataset rows (``datasets.Dataset``); with
    ``reasoning_regions`` (and a ``snapshot`` column) each reasoning opens with the row's region
    sentence (:func:`r3.train.grounding.goal_region_sentence`)."""
    from datasets import Image, Sequence

    regions = _region_sentences(table) if reasoning_regions and prompt.mode == "reason" else None

    def convert(row, index):
        target = sft_target(row, prompt.mode, reasoning_sentences)
        if regions and regions[index]:
            target = target.replace(REASONING_HEADER, f"{REASONING_HEADER} {regions[index]}", 1)
        return {
            "prompt": prompt_messages(row, prompt),
            "completion": [{"role": "assistant", "content": [{"type": "text", "text": target}]}],
            "images": row["images"],
            TEMPLATE_KWARGS: {"enable_thinking": prompt.thinking},
        }

    out = table.map(convert, with_indices=True, remove_columns=table.column_names)
    return out.cast_column("images", Sequence(Image()))


def _region_sentences(table) -> list[str]:
    """Each row's region sentence ("" for a row whose goal names no Language Table block, as no
    other suite's goal does, or without a snapshot)."""
    from r3.sim.language_table.env import LanguageTableEnv
    from r3.train.grounding import goal_region_sentence

    if S.SNAPSHOT not in table.column_names:
        raise DatasetError("reasoning_regions: the dataset has no snapshot column to read positions from")
    env = LanguageTableEnv(task=None, render_mode=None)
    try:
        return [goal_region_sentence(g, _snapshot(s), env) for g, s in zip(table[S.GOAL], table[S.SNAPSHOT])]
    finally:
        env.close()


def _history_record_problem(record: dict) -> str | None:
    """What in one imputed record is not of its type (an id and history text, a step number, a kind
    a dataset's history may be), or None."""
    if not isinstance(record["episode_id"], str) or not isinstance(record["history"], str):
        return "episode_id and history must be strings"
    if not is_kind(record["step"], int) or record["step"] < 0:
        return f"step={bounded_repr(record['step'], 40)}: expected a whole number >= 0"
    if record["history_kind"] not in S.HISTORY_KINDS:
        return f"history_kind={bounded_repr(record['history_kind'], 40)}: expected one of {S.HISTORY_KINDS}"
    return None


def with_history(table, history: dict[tuple[str, int], dict]):
    """``table`` with the imputed ``history`` / ``history_kind`` of :func:`load_history_file` applied."""

    def overlay(row):
        own = {"history": row["history"], "history_kind": row["history_kind"]}
        return history.get((row["episode_id"], int(row["step"])), own)

    # Imputed over more rows than these (all splits, no max_rows) is fine; over none of them, not.
    if history and not set(history) & set(zip(table["episode_id"], map(int, table["step"]))):
        episode, step = next(iter(history))
        raise DatasetError(
            f"history_file: none of its {len(history)} record(s) names a step of the dataset (the first: "
            f"{episode} step {step}); it was imputed for another dataset"
        )
    return table.map(overlay) if history else table


def rl_rows(table, prompt: PromptSettings):
    """TRL prompt-only rows for GRPO, with the reward functions' columns."""
    from datasets import Image, Sequence

    def convert(row):
        return {
            "prompt": prompt_messages(row, prompt),
            "images": row["images"],
            "expert_instruction": row["expert_instruction"],
            "suite": row["suite"],
            "snapshot": _snapshot(row["snapshot"]),
            "previous_instruction": previous_instruction(row),
            "episode_id": row["episode_id"],
            "step": int(row["step"]),
        }

    out = table.map(convert, remove_columns=table.column_names)
    return out.cast_column("images", Sequence(Image()))


def load_history_file(path: str | Path) -> dict[tuple[str, int], dict]:
    """Imputed previous-step context written by :func:`r3.train.impute.impute_history`."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"history_file not found: {path}")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"history_file {path}: cannot be read ({exc})") from None
    out = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(
                f"{path}:{n}: not JSON ({exc.msg}); expected one record of `r3 train impute` a line"
            ) from None
        if not isinstance(record, dict):
            raise DatasetError(f"{path}:{n}: expected a JSON object, got {type(record).__name__}")
        missing = {"episode_id", "step", "history", "history_kind"} - set(record)
        if missing:
            raise DatasetError(f"{path}:{n}: missing {sorted(missing)}")
        if problem := _history_record_problem(record):
            raise DatasetError(f"{path}:{n}: {problem}")
        if (record["episode_id"], record["step"]) in out:  # which one would the row get?
            raise DatasetError(f"{path}:{n}: a second record of {record['episode_id']} step {record['step']}")
        out[(record["episode_id"], record["step"])] = {
            "history": record["history"],
            "history_kind": record["history_kind"],
        }
    return out
