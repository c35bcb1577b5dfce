"""Dataset statistics: rows per task and split, instruction types (R^3 Figure 6; for a turns dataset,
the call each turn made), reasoning lengths."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from r3.data import schema as S
from r3.files import save_figure

#: Instruction types in the order and with the short names of R^3 Figure 6.
TYPE_NAMES = {
    "block_to_location": "MoveAbs",
    "block_to_side": "MoveRelObj",
    "block_into_block": "PushInto",
    "block_direction": "MoveRel",
    "separate": "Separate",
    "touch": "Touch",
    "arm_to_location": "ArmMoveAbs",
}


def instruction_type(text: str, suite: str = "") -> str:
    """The type of an instruction in its suite's grammar ("Invalid" when it does not parse); Language
    Table's by their Figure 6 names.

    >>> instruction_type("push the green star into the yellow pentagon"), instruction_type("dance")
    ('PushInto', 'Invalid')
    >>> instruction_type("Pack the sugar box into the medium tray.", "packing")
    'pack'
    """
    import importlib

    from r3.instructions.language_table import ParseError
    from r3.suites import DEFAULT_SUITE, get_suite

    parsed = importlib.import_module(get_suite(suite or DEFAULT_SUITE).grammar_module).parse(text)
    return (
        "Invalid" if isinstance(parsed, ParseError) else TYPE_NAMES.get(parsed.type.value, parsed.type.value)
    )


def call_type(interface: str, text: str, valid: bool) -> str:
    """What a turn's answer did: the call's name (a plan counts as one), or "Refused".

    >>> call_type("tools", "move_to(x=0.4, y=0.2, z=0.1)", True), call_type("semantic", "", False)
    ('move_to', 'Refused')
    """
    if not valid:
        return "Refused"
    return "plan" if interface == "plan" else text.split("(", 1)[0]


def dataset_stats(path: str | Path) -> dict:
    """Counts per task and split, instruction-type counts per task, reasoning lengths in words."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = Path(path)
    manifest = S.read_manifest(root)
    table = pa.concat_tables(pq.read_table(f) for f in sorted((root / S.DATA_DIR).glob("*.parquet")))
    rows = table.to_pydict()
    tasks, splits = rows[S.TASK], rows[S.SPLIT]
    types: dict[str, Counter] = {}
    if manifest["kind"] == S.TURNS:
        kinds = map(call_type, rows[S.INTERFACE], rows[S.INSTRUCTION], rows[S.VALID])
    else:
        kinds = map(instruction_type, rows[S.INSTRUCTION], rows[S.SUITE])
    for task, kind in zip(tasks, kinds):
        types.setdefault(task, Counter())[kind] += 1
    episodes: dict[str, set] = {}
    for task, episode in zip(tasks, rows[S.EPISODE_ID]):
        episodes.setdefault(task, set()).add(episode)
    words = [len(r.split()) for r in rows.get(S.REASONING, [])]
    return {
        "kind": manifest["kind"],
        "rows": table.num_rows,
        "rows_per_task": dict(sorted(Counter(tasks).items())),
        "episodes_per_task": {t: len(e) for t, e in sorted(episodes.items())},
        "rows_per_split": dict(sorted(Counter(splits).items())),
        "instruction_types": {t: dict(sorted(c.items())) for t, c in sorted(types.items())},
        "reasoning_words": _summary(words),
        "reasoning_words_all": words,
        "trace_claims": trace_claims(root, rows),
    }


def trace_claims(root: Path, rows: dict) -> dict:
    """How many of the reasoning traces' claims about the scene hold in the recorded state
    (``r3.reasoning.claims``): claims, verified, fraction, and the steps recorded without a simulator
    snapshot (a real arm's), which cannot be checked; {} for a dataset without reasoning.

    Each row's snapshot is restored in its suite's simulator; the step before in the same episode
    gives the previous instruction and state (its low-level result is not in a dataset row).
    """
    if not rows.get(S.REASONING):
        return {}
    from r3.reasoning.claims import Previous, check_step
    from r3.suites import get_suite

    envs: dict = {}
    order = sorted(range(len(rows[S.STEP])), key=lambda i: (rows[S.EPISODE_ID][i], rows[S.STEP][i]))
    checked, previous, episode, unchecked = [], None, None, 0
    for i in order:
        if rows[S.EPISODE_ID][i] != episode:
            previous, episode = None, rows[S.EPISODE_ID][i]
        if not rows[S.SNAPSHOT][i]:
            unchecked, previous = unchecked + 1, None
            continue
        suite = rows[S.SUITE][i]
        if suite not in envs:
            envs[suite] = get_suite(suite).hook("make_env")(render_mode=None)
        env = envs[suite]
        env.restore((root / rows[S.SNAPSHOT][i]).read_bytes())
        state = env.state()
        checked += check_step(suite, rows[S.REASONING][i], state, env.task_instance, previous)
        previous = Previous(rows[S.INSTRUCTION][i], None, state)
    verified = sum(c.verified for c in checked)
    return {
        "claims": len(checked),
        "verified": verified,
        "fraction": verified / len(checked) if checked else 1.0,
        "unchecked_steps": unchecked,
    }


def _summary(values: list[int]) -> dict:
    if not values:
        return {}
    v = np.asarray(values)
    return {
        "count": int(v.size),
        "mean": float(v.mean()),
        "p50": float(np.median(v)),
        "p90": float(np.percentile(v, 90)),
        "max": int(v.max()),
    }


def plot_stats(stats: dict, path: str | Path) -> Path:
    """Rows per task, instruction-type shares per task (as in Figure 6) and reasoning lengths, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    has_reasoning = bool(stats["reasoning_words_all"])
    fig, axes = plt.subplots(1, 3 if has_reasoning else 2, figsize=(15 if has_reasoning else 10, 4))
    tasks = list(stats["rows_per_task"])
    axes[0].bar(tasks, [stats["rows_per_task"][t] for t in tasks], color="#4c72b0")
    axes[0].set(title=f"{stats['kind']} rows per task ({stats['rows']} in all)", ylabel="rows")
    seen = {n for c in stats["instruction_types"].values() for n in c}
    known = [n for n in TYPE_NAMES.values() if n in seen]  # Figure 6's order, then any other suite's
    order = [*known, *sorted(seen - {*known, "Invalid", "Refused"}), "Invalid", "Refused"]
    names = [n for n in order if n in seen]
    bottom = np.zeros(len(tasks))
    for name in names:
        counts = np.array([stats["instruction_types"][t].get(name, 0) for t in tasks], dtype=float)
        share = counts / np.maximum(1, [sum(stats["instruction_types"][t].values()) for t in tasks])
        axes[1].bar(tasks, share, bottom=bottom, label=name)
        bottom += share
    what = "calls" if stats["kind"] == S.TURNS else "instruction types"
    axes[1].set(title=f"{what} per task", ylabel="share of steps", ylim=(0, 1))
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if has_reasoning:
        axes[2].hist(stats["reasoning_words_all"], bins=30, color="#55a868")
        axes[2].set(title="reasoning length", xlabel="words", ylabel="steps")
    for ax in axes[:2]:
        ax.tick_params(axis="x", rotation=45)
    fig.tight_layout()
    path = Path(path)
    if path.is_dir():
        path = path / S.STATS_PLOT
    elif not path.suffix:
        path = path.with_suffix(".png")  # what matplotlib would write for it
    save_figure(fig, path, dpi=100)
    return path
