"""Print each figure of two benchmark runs side by side with their ratio.

    python bench/compare.py A.json B.json

A and B are files ``run_all.py`` merged (or single records a benchmark wrote with ``--json``).
Medians are compared; the ratio is B / A. A figure is marked better or worse by its ``better``
field, and "overlap" where the two runs' min-max ranges overlap (the difference may be noise: read
it beside the two runs' load, printed first).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


class NotARun(ValueError):
    """A path that holds no benchmark run's figures; the message says why."""


def figures(path: Path) -> tuple[dict[tuple[str, str], dict], dict]:
    """{(bench, figure name): figure} and the load of the run in ``path``; :class:`NotARun` for a
    path that is not such a file."""
    if path.is_dir():
        beside = path.with_name(path.name + ".json")
        hint = f" (run_all.py's figures of that run are in {beside})" if beside.is_file() else ""
        raise NotARun(f"{path} is a folder, not a run's JSON file{hint}")
    try:
        data = json.loads(path.read_text())
        benches = data["benches"].values() if "benches" in data else [data]
        out = {(b["bench"], f["name"]): f for b in benches for f in b["figures"]}
        lacking = [name for (_, name), f in out.items() if not _complete(f)]
    except OSError as exc:
        raise NotARun(f"{path}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # not JSON, or not a run's
        raise NotARun(f"{path} is not a benchmark run's JSON ({type(exc).__name__}: {exc})") from None
    if lacking:
        raise NotARun(f"{path}: figure {lacking[0]!r} lacks a median, min, max or unit")
    return out, data.get("load_before", {})


def _complete(figure: dict) -> bool:
    numbers = all(isinstance(figure.get(key), int | float) for key in ("median", "min", "max"))
    return numbers and isinstance(figure.get("unit"), str)


def verdict(a: dict, b: dict) -> str:
    if a["median"] == b["median"]:
        return "same"
    improved = (b["median"] > a["median"]) == (a.get("better", "lower") == "higher")
    overlap = a["min"] <= b["max"] and b["min"] <= a["max"]
    return ("better" if improved else "worse") + (" (overlap)" if overlap else "")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "a", type=Path, help="the baseline run: a JSON file run_all.py wrote (runs/bench/<timestamp>.json)"
    )
    p.add_argument("b", type=Path, help="the run to compare with it; each ratio is B / A")
    args = p.parse_args(argv)
    try:
        fa, load_a = figures(args.a)
        fb, load_b = figures(args.b)
    except NotARun as exc:
        p.error(str(exc))
    for name, load in (("A", load_a), ("B", load_b)):
        if load:
            print(f"{name}: load average {load['1min']:.2f} (1 min) on {load['cores']} cores at the start")
    print(f"{'figure':<72} {'A':>10} {'B':>10} {'B/A':>7}")
    for key in list(fa) + [k for k in fb if k not in fa]:
        label = f"{key[0]}: {key[1]}"[:72]
        if key not in fa or key not in fb:
            side = "B only" if key not in fa else "A only"
            print(f"{label:<72} {side}")
            continue
        a, b = fa[key], fb[key]
        ratio = f"{b['median'] / a['median']:.2f}" if a["median"] else "-"
        print(
            f"{label:<72} {a['median']:>10.4g} {b['median']:>10.4g} {ratio:>7}  {a['unit']}, {verdict(a, b)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
