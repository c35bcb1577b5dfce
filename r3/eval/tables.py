"""Per-task tables of an evaluation (Markdown, CSV) and the per-task comparison of two evaluations.

Percentages with their 95% interval in percentage points: ``± h`` (its half-width) where the
interval is as far from the estimate on both sides, else its ends ``[low, high]``
(:func:`r3.eval.metrics.interval_text`; :mod:`r3.eval.metrics` for the methods). The last row
pools all episodes of the table's tasks.
Where every episode has ERR's penalty (packing), the no-penalty rate (NPR) and the strict success
rate (SSR: success with no penalty) join success (SR) and progress (PG).

>>> recs = [{"task": "V", "success": s, "progress": p, "decision_steps": 2, "reasoning_words": 10.0}
...         for s, p in [(True, 1.0), (False, 0.5)]]
>>> row = task_rows(recs, ["V"])[0]
>>> row.task, row.n, row.success.value, row.progress.value
('V', 2, 0.5, 0.75)
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass

from r3.eval import metrics
from r3.eval.runner import completed, split_of

MEAN = "mean"


@dataclass(frozen=True)
class TaskRow:
    """One task's (or the pooled mean's) results."""

    task: str
    split: str
    n: int
    skipped: int
    success: metrics.Estimate
    progress: metrics.Estimate
    mean_steps: float
    mean_reasoning_words: float
    no_penalty: metrics.Estimate | None = None
    strict_success: metrics.Estimate | None = None


def _row(task: str, split: str, records: list[dict], skipped: int) -> TaskRow:
    n, err = len(records), metrics.err_metrics(records)
    return TaskRow(
        task,
        split,
        n,
        skipped,
        metrics.rate(r["success"] for r in records),
        metrics.mean(r["progress"] for r in records),
        sum(r["decision_steps"] for r in records) / n if n else float("nan"),
        sum(r["reasoning_words"] for r in records) / n if n else float("nan"),
        *(err.get(k) for k in ("NPR", "SSR")),
    )


def task_rows(records: Sequence[dict], tasks: Sequence[str]) -> list[TaskRow]:
    """One row per task in ``tasks`` order, then the pooled mean row (when more than one task)."""
    ran = completed(records)
    rows = [
        _row(
            t,
            split_of(t),
            [r for r in ran if r["task"] == t],
            sum(1 for r in records if r["task"] == t and "skipped" in r),
        )
        for t in tasks
    ]
    if len(tasks) > 1:
        chosen = [r for r in ran if r["task"] in tasks]
        rows.append(_row(MEAN, "", chosen, sum(row.skipped for row in rows)))
    return rows


def _pct(e: metrics.Estimate) -> str:
    """The estimate in percent with its interval (:func:`r3.eval.metrics.interval_text`); ``-`` over
    no episode, ``(n=1)`` for a mean of one (no interval)."""
    if not e.n:
        return "-"
    if math.isnan(e.half_width):
        return f"{100 * e.value:.1f} (n=1)"
    return metrics.interval_text(e.value, e.low, e.high)


def markdown(rows: Sequence[TaskRow]) -> str:
    """The per-task table as Markdown: success and progress in % with their 95% intervals."""
    penalties = all(r.no_penalty is not None for r in rows if r.n)
    extra = " no-penalty % | strict success % |" if penalties else ""
    lines = [
        "| task | split | episodes | success % | progress % | mean steps | mean reasoning words |" + extra,
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |" + (" ---: | ---: |" if penalties else ""),
    ]
    for r in rows:
        name = f"**{r.task}**" if r.task == MEAN else r.task
        err = (
            (f" {_pct(r.no_penalty)} | {_pct(r.strict_success)} |" if r.n else " - | - |")
            if penalties
            else ""
        )
        means = f"{r.mean_steps:.1f} | {r.mean_reasoning_words:.1f}" if r.n else "- | -"
        lines.append(
            f"| {name} | {r.split} | {r.n} | {_pct(r.success)} | {_pct(r.progress)} | {means} |" + err
        )
    skipped = sum(r.skipped for r in rows if r.task != MEAN)
    if skipped:
        lines += [
            "",
            f"{skipped} episode(s) skipped: their layout left nothing to do (listed in episodes.jsonl).",
        ]
    return "\n".join(lines)


CSV_FIELDS = (
    "task",
    "split",
    "episodes",
    "skipped",
    "success",
    "success_low",
    "success_high",
    "progress",
    "progress_low",
    "progress_high",
    "mean_steps",
    "mean_reasoning_words",
    "no_penalty",
    "no_penalty_low",
    "no_penalty_high",
    "strict_success",
    "strict_success_low",
    "strict_success_high",
)


def to_csv(rows: Sequence[TaskRow]) -> str:
    """The per-task table as CSV, rates and interval ends as fractions."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for r in rows:
        w.writerow(
            [
                r.task,
                r.split,
                r.n,
                r.skipped,
                *_ends(r.success),
                *_ends(r.progress),
                *([f"{r.mean_steps:.4f}", f"{r.mean_reasoning_words:.4f}"] if r.n else ["", ""]),
                *_ends(r.no_penalty),
                *_ends(r.strict_success),
            ]
        )
    return buf.getvalue()


def _ends(e: metrics.Estimate | None) -> list[str]:
    """An estimate's value and interval ends; empty cells for none or one over no episode (whose
    rate is NaN and whose Wilson interval, all of [0, 1], says nothing)."""
    if e is None or not e.n:
        return ["", "", ""]
    return [f"{v:.6f}" if math.isfinite(v) else "" for v in (e.value, e.low, e.high)]


# ------------------------------------------------------------------------------------ compare
@dataclass(frozen=True)
class CompareRow:
    """B minus A on one task (or pooled): success and progress differences with their intervals."""

    task: str
    a: TaskRow
    b: TaskRow
    success_delta: metrics.Estimate
    progress_delta: metrics.Estimate | None


def compare_rows(
    records_a: Sequence[dict], records_b: Sequence[dict], tasks: Sequence[str]
) -> list[CompareRow]:
    """Per-task B - A for the ``tasks`` both evaluations ran, then the pooled row."""
    ran_a, ran_b = completed(records_a), completed(records_b)
    rows_a, rows_b = task_rows(records_a, tasks), task_rows(records_b, tasks)
    out = []
    for ra, rb in zip(rows_a, rows_b):
        names = set(tasks) if ra.task == MEAN else {ra.task}
        a, b = [r for r in ran_a if r["task"] in names], [r for r in ran_b if r["task"] in names]
        if not a or not b:
            continue
        sd = metrics.rate_difference([r["success"] for r in a], [r["success"] for r in b])
        pd = (
            metrics.mean_difference([r["progress"] for r in a], [r["progress"] for r in b])
            if len(a) > 1 and len(b) > 1
            else None
        )
        out.append(CompareRow(ra.task, ra, rb, sd, pd))
    return out


def _delta(e: metrics.Estimate | None) -> str:
    if e is None:
        return "-"
    if e.low == e.high:  # no spread on either side: no interval (and never significant)
        text = f"{100 * e.value:+.1f} (no spread)"
    else:
        text = metrics.interval_text(e.value, e.low, e.high, signed=True)
    if not e.significant:
        return text
    return f"**{text}** {'▲' if e.value > 0 else '▼'}"


def compare_markdown(rows: Sequence[CompareRow], name_a: str, name_b: str) -> str:
    """R^3's Δ column: B - A in percentage points, "Δ ± h" or, where the 95% interval is lopsided, "Δ [low,
    high]"; bold with ▲/▼ where the interval excludes 0 (:attr:`r3.eval.metrics.Estimate.significant`)."""
    lines = [
        f"| task | {name_a} success % | {name_b} success % | Δ success | Δ progress |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        name = f"**{r.task}**" if r.task == MEAN else r.task
        lines.append(
            f"| {name} | {_pct(r.a.success)} | {_pct(r.b.success)} | {_delta(r.success_delta)} "
            f"| {_delta(r.progress_delta)} |"
        )
    return "\n".join(lines)


COMPARE_CSV_FIELDS = (
    "task",
    "success_a",
    "success_b",
    "success_delta",
    "success_delta_low",
    "success_delta_high",
    "success_significant",
    "progress_delta",
    "progress_delta_low",
    "progress_delta_high",
    "progress_significant",
)


def compare_csv(rows: Sequence[CompareRow]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COMPARE_CSV_FIELDS)
    for r in rows:
        p = r.progress_delta
        w.writerow(
            [
                r.task,
                f"{r.a.success.value:.6f}",
                f"{r.b.success.value:.6f}",
                *_ends(r.success_delta),
                r.success_delta.significant,
                *_ends(p),
                "" if p is None else p.significant,
            ]
        )
    return buf.getvalue()
