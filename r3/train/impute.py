"""Reasoning-context imputation for RL data (R^3 section 3.3).

RL rows carry the expert's instructions but no reasoning, yet the prompt shows the previous
step's response. For each row whose history lacks reasoning we sample the mid-trained model on
the *previous* step's prompt, up to ``samples`` times, and keep the first response whose
instruction the rubric scores as a linguistic match (1.0) with that step's expert instruction.
A previous step that is not in the data (the dataset builder drops repeated and invalid
steps) cannot be resampled and takes the fallback. If none matches, the history becomes the bare
previous instruction ("Instruction: ..."), still in the previous-response slot so the prompt keeps
the Stage I format.

Episodes are walked in step order, so an imputed response also feeds the next step's prompt.
The result is a JSONL file of (episode_id, step, history, history_kind, imputed, tried) that
``RLConfig.history_file`` applies on top of the dataset, which stays untouched.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from r3.reasoning.parsing import ParsedResponse, parse_response
from r3.reasoning.prompts import INSTRUCTION_HEADER, ReasonerInput
from r3.rewards.judge import judge_instruction
from r3.train.config import ImputeConfig
from r3.train.rows import RL_COLUMNS, open_dataset, previous_instruction, reasoner_input

Sampler = Callable[[ReasonerInput], str]


def has_reasoning(row: dict) -> bool:
    """Whether the row's history is a full previous response with reasoning."""
    if row["history_kind"] != "response" or not (row["history"] or "").strip():
        return False
    return isinstance(parse_response(row["history"], row["suite"]), ParsedResponse)


def _matches(text: str, expert: str, suite: str) -> bool:
    parsed = parse_response(text, suite)
    if not isinstance(parsed, ParsedResponse):
        return False
    try:
        return judge_instruction(parsed.instruction_text, expert, suite).score == 1.0
    except ValueError:  # the expert instruction is outside the grammar: nothing can match it
        return False


def impute_history(
    rows: list[dict],
    sample: Sampler,
    samples: int,
    load_images: Callable[[dict], list[np.ndarray]],
    on_episode: Callable[[str], None] | None = None,
) -> list[dict]:
    """Imputed history records for the rows (dataset rows as dicts) that need one.

    ``sample`` draws one response for a :class:`ReasonerInput`; ``load_images`` gives a row's images;
    ``on_episode(episode_id)`` follows each episode's last step (the run's progress).
    """
    episodes: dict[str, dict[int, dict]] = defaultdict(dict)
    for row in rows:
        episodes[row["episode_id"]][int(row["step"])] = dict(row)
    records = []
    for episode_id, steps in episodes.items():
        for step in sorted(steps):
            row = steps[step]
            if step == 0 or has_reasoning(row) or row["history_kind"] == "none":
                continue
            expert = previous_instruction(row)
            if not expert:
                continue
            prev = steps.get(step - 1)
            if prev is not None and prev["expert_instruction"] != expert:
                prev = None  # not the step the history describes
            history, tried = None, 0
            if prev is not None:
                inp = reasoner_input(prev, images=load_images(prev))
                while history is None and tried < samples:
                    tried += 1
                    text = sample(inp)
                    history = text if _matches(text, expert, row["suite"]) else None
            record = {
                "episode_id": episode_id,
                "step": step,
                "history": history or f"{INSTRUCTION_HEADER} {expert}",
                "history_kind": "response",
                "imputed": history is not None,
                "tried": tried,
            }
            row.update(history=record["history"], history_kind="response")
            records.append(record)
        if on_episode is not None:
            on_episode(episode_id)
    return records


def run_impute(cfg: ImputeConfig) -> dict:
    """Impute over the dataset with ``cfg.backend`` and write ``cfg.output``; returns counts."""
    import torch
    from PIL import Image
    from tqdm import tqdm

    from r3.reasoning.backends import make_backend

    table = open_dataset(cfg.dataset, cfg.splits, RL_COLUMNS, cfg.max_rows)
    options = {"temperature": cfg.temperature, "max_new_tokens": cfg.max_new_tokens, "seed": None}
    if cfg.backend.startswith("transformers:"):
        options["device"] = cfg.device
    backend = make_backend(cfg.backend, **options)
    backend.load()
    torch.manual_seed(cfg.seed)
    rows = list(table)
    episodes = len({row["episode_id"] for row in rows})
    bar = tqdm(total=episodes, unit="episode", desc="impute", file=sys.stderr)  # hours on a real model
    try:
        records = impute_history(
            rows,
            lambda inp: backend.decide(inp).raw_text,
            cfg.samples,
            lambda row: [np.asarray(Image.open(p).convert("RGB")) for p in row["images"]],
            on_episode=lambda _: bar.update(1),
        )
    finally:
        bar.close()
        backend.close()
    out = Path(cfg.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r) + "\n" for r in records))
    imputed = sum(r["imputed"] for r in records)
    return {
        "rows": len(table),
        "needed": len(records),
        "imputed": imputed,
        "fallback": len(records) - imputed,
    }
