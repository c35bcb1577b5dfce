"""Judge-versus-human agreement on labelled cases, reported as in R^3 Table 13.

Cases file: JSON Lines, one case per line::

    {"candidate": "...", "reference": "...", "human_score": 0.25,
     "snapshot": "snapshots/xyz.npz",      # optional, relative to the JSONL file
     "suite": "language_table",            # optional
     "category": "semantic/into_vs_direction", "note": "..."}   # optional, for reading

Figures: exact agreement (judge score == human score), Cohen's kappa over the four score
classes (0, 0.25, 0.5, 1) and Pearson's r between the scores. Run as
``python -m r3.rewards.agreement [CASES] [--backend rule|vlm ...]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from r3.rewards.result import SCORE_CLASSES, JudgeResult
from r3.rewards.vlm import DEFAULT_URL, KEY_ENV, JudgeFailure
from r3.suites import DEFAULT_SUITE, get_suite

#: The labelled set shipped with the package.
DEFAULT_CASES = Path(__file__).parent / "data" / "judge_cases.jsonl"


@dataclass(frozen=True)
class Case:
    candidate: str
    reference: str
    human_score: float
    snapshot: Path | None = None
    suite: str = DEFAULT_SUITE
    category: str = ""


def load_cases(path: str | os.PathLike = DEFAULT_CASES) -> list[Case]:
    """Read a cases file; snapshot paths are resolved against the file's folder."""
    path = Path(path)
    cases = []
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        score = float(row["human_score"])
        if score not in SCORE_CLASSES:
            raise ValueError(f"{path}:{lineno}: human_score {score} is not one of {SCORE_CLASSES}")
        snapshot = path.parent / row["snapshot"] if row.get("snapshot") else None
        cases.append(
            Case(
                row["candidate"],
                row["reference"],
                score,
                snapshot,
                row.get("suite", DEFAULT_SUITE),
                row.get("category", ""),
            )
        )
    return cases


def cohen_kappa(a: Sequence[float], b: Sequence[float], classes: Sequence[float] = SCORE_CLASSES) -> float:
    """Cohen's kappa of two raters over ``classes``; 1.0 when both use one class and agree.

    >>> cohen_kappa([0, 0, 1, 1], [0, 0, 1, 0])
    0.5
    """
    n = len(a)
    if n == 0 or n != len(b):
        raise ValueError(f"need two equally long, non-empty rating lists, got {len(a)} and {len(b)}")
    observed = sum(x == y for x, y in zip(a, b)) / n
    expected = sum((list(a).count(c) / n) * (list(b).count(c) / n) for c in classes)
    if expected == 1.0:
        return 1.0
    return (observed - expected) / (1.0 - expected)


def pearson_r(a: Sequence[float], b: Sequence[float]) -> float:
    """Pearson correlation; NaN when either side is constant (the coefficient is undefined).

    >>> round(pearson_r([0, 0.25, 1], [0, 0.5, 1]), 6)
    0.960769
    """
    n = len(a)
    if n < 2 or n != len(b):
        raise ValueError(f"need two equally long rating lists of >= 2 items, got {len(a)} and {len(b)}")
    ma, mb = sum(a) / n, sum(b) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    va, vb = sum((x - ma) ** 2 for x in a), sum((y - mb) ** 2 for y in b)
    return cov / math.sqrt(va * vb) if va > 0 and vb > 0 else math.nan


@dataclass
class AgreementReport:
    """Figures over the judged cases; ``failures`` (VLM gave no verdict) are listed, not scored."""

    n: int
    agree: int
    kappa: float
    pearson: float
    confusion: list[list[int]]  # [human class][judge class], classes in SCORE_CLASSES order
    disagreements: list[tuple[Case, JudgeResult]] = field(default_factory=list)
    failures: list[tuple[Case, str]] = field(default_factory=list)

    @property
    def agreement(self) -> float:
        return self.agree / self.n

    def format(self) -> str:
        head = " ".join(f"{c:>5}" for c in SCORE_CLASSES)
        lines = [
            (
                f"cases {self.n}  agree {self.agree}/{self.n} ({100 * self.agreement:.1f}%)  "
                f"Cohen's kappa {self.kappa:.3f}  Pearson r {self.pearson:.3f}"
            ),
            f"confusion (rows human, columns judge): {head}",
        ]
        lines += [
            f"{'':>38}{c:>5} " + " ".join(f"{v:>5}" for v in row)
            for c, row in zip(SCORE_CLASSES, self.confusion)
        ]
        lines += [
            f"  disagree [{c.category}] human {c.human_score} judge {r.score}: "
            f"{c.candidate!r} vs {c.reference!r}: {r.reason}"
            for c, r in self.disagreements
        ]
        lines += [f"  failed [{c.category}]: {why}" for c, why in self.failures]
        return "\n".join(lines)


def evaluate(cases: Sequence[Case], judge: Callable[[Case], JudgeResult]) -> AgreementReport:
    """Judge every case and compare with the human labels."""
    human, machine, disagreements, failures = [], [], [], []
    confusion = [[0] * len(SCORE_CLASSES) for _ in SCORE_CLASSES]
    for case in cases:
        try:
            result = judge(case)
        except JudgeFailure as err:
            failures.append((case, str(err)))
            continue
        human.append(case.human_score)
        machine.append(result.score)
        confusion[SCORE_CLASSES.index(case.human_score)][SCORE_CLASSES.index(result.score)] += 1
        if result.score != case.human_score:
            disagreements.append((case, result))
    if not human:
        raise RuntimeError(f"no case was judged ({len(failures)} failures)")
    return AgreementReport(
        n=len(human),
        agree=len(human) - len(disagreements),
        kappa=cohen_kappa(human, machine),
        pearson=pearson_r(human, machine),
        confusion=confusion,
        disagreements=disagreements,
        failures=failures,
    )


def rule_backend() -> Callable[[Case], JudgeResult]:
    from r3.rewards.judge import RuleJudge

    judge = RuleJudge()
    return lambda c: judge.judge(c.candidate, c.reference, suite=c.suite, snapshot=c.snapshot)


def vlm_backend(base_url: str, model: str) -> Callable[[Case], JudgeResult]:
    """The VLM judge on every case; snapshots are ignored (it sees no image here)."""
    from r3.rewards.judge import RuleJudge
    from r3.rewards.vlm import VLMJudge

    vlm, rules = VLMJudge(base_url, model, api_key=os.environ.get(KEY_ENV)), RuleJudge()
    return lambda c: (
        vlm.judge(c.candidate, c.reference)
        if get_suite(c.suite).vlm_judged
        else rules.judge(c.candidate, c.reference, suite=c.suite)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="r3-judge-agreement", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "cases",
        nargs="?",
        default=str(DEFAULT_CASES),
        help="labelled cases, JSON Lines (default: the set shipped with r3)",
    )
    parser.add_argument(
        "--backend",
        choices=("rule", "vlm"),
        default="rule",
        help="rule: grammar + simulator judge; vlm: an OpenAI-compatible VLM server",
    )
    parser.add_argument(
        "--vlm-url",
        default=os.environ.get("R3_JUDGE_URL", DEFAULT_URL),
        help=f"base URL of the VLM server, ending in /v1 (default: env R3_JUDGE_URL, else {DEFAULT_URL})",
    )
    parser.add_argument(
        "--vlm-model",
        default=os.environ.get("R3_JUDGE_MODEL"),
        help="served model name for --backend vlm (env R3_JUDGE_MODEL)",
    )
    args = parser.parse_args(argv)
    if args.backend == "vlm" and not args.vlm_model:
        parser.error("--backend vlm needs --vlm-model or R3_JUDGE_MODEL")
    judge = rule_backend() if args.backend == "rule" else vlm_backend(args.vlm_url, args.vlm_model)
    print(evaluate(load_cases(args.cases), judge).format())
    return 0


if __name__ == "__main__":
    sys.exit(main())
