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


def figures(path: Path) -> tuple[dict[tuple[str, str], dict], dict]:
    """{(bench, figure name): figure} and the load of the run in ``path``."""
    data = json.loads(path.read_text())
    benches = data["benches"].values() if "benches" in data else [data]
    out = {(b["bench"], f["name"]): f for b in benches for f in b["figures"]}
    return out, data.get("load_before", {})


def verdict(a: dict, b: dict) -> str:
    if a["median"] == b["median"]:
        return "same"
    improved = (b["median"] > a["median"]) == (a.get("better", "lower") == "higher")
    overlap = a["min"] <= b["max"] and b["min"] <= a["max"]
    return ("better" if improved else "worse") + (" (overlap)" if overlap else "")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    args = p.parse_args(argv)
    fa, load_a = figures(args.a)
    fb, load_b = figures(args.b)
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
