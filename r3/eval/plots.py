"""Bar chart of per-task success with 95% interval whiskers (PNG, headless matplotlib)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from r3.eval.tables import MEAN, TaskRow
from r3.files import save_figure

#: Bar colour per split (the pooled mean in grey).
SPLIT_COLOURS = {"T_M": "#4C72B0", "T_R": "#DD8452", "T_O": "#55A868", "": "#8C8C8C"}
#: Bar colour of any other split (packing's held-out goals).
OTHER_SPLIT_COLOUR = "#8172B3"
#: What marks a row with no episode where its bar would be.
NO_EPISODES = "no episodes"


def success_chart(rows: Sequence[TaskRow], path: Path, title: str) -> Path:
    """Write the success rate of every row as a bar, whiskers at the Wilson interval's ends (which hold
    the rate, so the whiskers never go negative at 0 % or 100 %); a row with no episode (every scene
    skipped) is marked "no episodes" where its bar would be, not left out nor drawn as 0 %."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    values = [100 * r.success.value if r.n else 0.0 for r in rows]
    errors = [
        [100 * (r.success.value - r.success.low) if r.n else 0.0 for r in rows],
        [100 * (r.success.high - r.success.value) if r.n else 0.0 for r in rows],
    ]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.6 * len(rows) + 1.5), 3.6), dpi=120)
    ax.bar(
        range(len(rows)),
        values,
        yerr=errors,
        capsize=3,
        color=[SPLIT_COLOURS.get(r.split, OTHER_SPLIT_COLOUR) for r in rows],
    )
    for k, r in enumerate(rows):
        if not r.n:
            ax.text(k, 2, NO_EPISODES, rotation=90, ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(rows)), [r.task for r in rows], rotation=45, ha="right")
    ax.set_ylim(0, 120)  # headroom for the legend above 100 %
    ax.set_yticks(range(0, 101, 20))
    ax.set_ylabel("success % (95% CI)")
    ax.set_title(title, fontsize=9)
    splits = list(dict.fromkeys(r.split for r in rows))  # every split drawn, packing's "held-out" too
    legend = [Patch(color=SPLIT_COLOURS.get(s, OTHER_SPLIT_COLOUR), label=s or MEAN) for s in splits]
    ax.legend(handles=legend, fontsize=7, loc="upper right", ncol=len(legend))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path)
    return path
