"""Rubric judge throughput: rule tier, single simulator-tier judgments, and Stage II batches.

    python bench/bench_judge.py [--passes 3] [--workers 2] [--awake] [--smoke] [--json PATH]

- rule tier: text pairs without a snapshot, one core;
- simulator tier, cold: one judgment at a time with the outcome cache cleared before each, so
  every judgment pays two rollouts (the worst case), one core;
- Stage II batch: what GRPO asks of the judge per optimiser step, 32 prompts x 12 responses,
  judged with ``JudgeReward`` as TRL calls it (one call per batch), on 1 and on ``--workers``
  simulator workers, with a cold cache per batch. Prompts are the labelled cases' recorded
  snapshots with their reference instructions. Responses come in two mixes, both printed:
  ``sampled``: 12 random valid instructions per prompt (every one likely needs two rollouts'
  worth of work: the worst case for a batch); ``policy-like``: 4 paraphrases of the reference (what
  a mid-trained model samples most), 4 instructions on the reference's block and 4 random valid
  instructions.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

os.environ.update({k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
os.environ.setdefault("MUJOCO_GL", "osmesa")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from common import COUNT, Report, parser, positive

from r3.instructions import language_table as lt
from r3.rewards import JudgeReward, OutcomeSimulator, RuleJudge
from r3.rewards.agreement import load_cases
from r3.tasks.language_table.board import BLOCKS

PROMPTS, RESPONSES = 32, 12
BLOCK_TYPES = ("block_to_location", "block_direction", "block_to_side")


def _on_block(instr: lt.Instruction, block: str) -> lt.Instruction:
    """``instr`` about ``block`` (another reference block where it named ``block`` already)."""
    other = instr.other if instr.other != block else next(b for b in BLOCKS if b != block)
    return dataclasses.replace(instr, block=block, other=other if instr.other else None)


def _rate(fn, items, seconds: float) -> float:
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for item in items:
            fn(item)
        done += len(items)
    return done / (time.perf_counter() - start)


def stage2_batch(prompts: list[tuple[bytes, str]], mix: str, rng: np.random.Generator) -> dict:
    """TRL's reward-function columns for one batch: prompts x RESPONSES rows."""
    completions, references, snapshots = [], [], []
    for snapshot, reference in prompts:
        ref = lt.parse(reference)
        for k in range(RESPONSES):
            if mix == "policy-like" and k < 4:
                text = lt.paraphrase(ref, rng)
            elif mix == "policy-like" and k < 8 and ref.block is not None:
                text = lt.format_instruction(
                    _on_block(lt.sample_instruction(rng, types=BLOCK_TYPES), ref.block)
                )
            else:
                text = lt.format_instruction(lt.sample_instruction(rng))
            completions.append(f"Reasoning: a candidate.\nInstruction: {text}")
            references.append(reference)
            snapshots.append(snapshot)
    return {"completions": completions, "expert_instruction": references, "snapshot": snapshots}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--passes", type=COUNT, default=3, help="passes per figure (default: %(default)s)")
    p.add_argument(
        "--seconds", type=positive, default=3.0, help="time per rate measurement (default: %(default)s)"
    )
    p.add_argument(
        "--workers", type=COUNT, default=2, help="simulator workers for the batch (default: %(default)s)"
    )
    p.add_argument(
        "--awake",
        action="store_true",
        help="rollouts without MuJoCo's sleeping, as the judge ran before it (default: sleeping)",
    )
    args = p.parse_args()
    if args.smoke:
        args.passes, args.seconds = 1, 0.3
    report = Report("judge", vars(args))
    cases = load_cases()
    text = [c for c in cases if c.snapshot is None]
    sim = [c for c in cases if c.snapshot is not None]
    snapshots = {c.snapshot: c.snapshot.read_bytes() for c in sim}
    judge = RuleJudge(OutcomeSimulator(sleep=not args.awake))
    judge.judge(sim[0].candidate, sim[0].reference, snapshot=snapshots[sim[0].snapshot])  # build the env

    def rule(c):
        judge.judge(c.candidate, c.reference, suite=c.suite)

    def cold(c):
        judge.simulator._cache.clear()
        judge.judge(c.candidate, c.reference, snapshot=snapshots[c.snapshot])

    print(f"{len(text)} text pairs, {len(sim)} simulator pairs over {len(snapshots)} snapshots")
    report.add(
        "rule tier, one core",
        [_rate(rule, text, args.seconds) for _ in range(args.passes)],
        "judgments/s",
        better="higher",
    )
    report.add(
        "simulator tier, cold, one judgment at a time, one core",
        [_rate(cold, sim[:8] if args.smoke else sim, args.seconds) for _ in range(args.passes)],
        "judgments/s",
        better="higher",
        note="two rollouts each",
    )

    by_snapshot = {}
    for c in sim:
        by_snapshot.setdefault(c.snapshot, c.reference)
    prompts = [(snapshots[s], r) for s, r in by_snapshot.items()]
    prompts = (prompts * (PROMPTS // len(prompts) + 1))[: 4 if args.smoke else PROMPTS]
    for mix in ("sampled", "policy-like"):
        for workers in sorted({1, args.workers}):
            simulator = OutcomeSimulator(workers=workers, sleep=not args.awake)
            reward = JudgeReward(RuleJudge(simulator))
            reward(**stage2_batch(prompts[:2], mix, np.random.default_rng(99)))  # start env and workers
            rates, rollouts = [], []
            for k in range(args.passes):
                batch = stage2_batch(prompts, mix, np.random.default_rng(k))
                simulator._cache.clear()
                t = time.perf_counter()
                reward(**batch)
                rates.append(len(batch["completions"]) / (time.perf_counter() - t))
                rollouts.append(len(simulator._cache))
            simulator.close()
            report.add(
                f"Stage II batch {len(prompts)}x{RESPONSES}, {mix}, {workers} worker(s)",
                rates,
                "judgments/s",
                better="higher",
                note=f"{int(np.median(rollouts))} rollouts per batch",
            )
    report.finish(args.json)


if __name__ == "__main__":
    main()
