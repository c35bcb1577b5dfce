"""Run every benchmark in this folder, one after the other, and merge their figures into one file.

    python bench/run_all.py                 # all, into runs/bench/<timestamp>.json
    python bench/run_all.py graph eval      # only bench_graph.py and bench_eval.py
    python bench/run_all.py --smoke         # every benchmark at its smallest sizes
    python bench/run_all.py --out DIR       # records under DIR/<timestamp>/, merged into DIR/<timestamp>.json

Each benchmark writes its record into the run's folder (``R3_BENCH_JSON``); the merged file holds
them all, with the load before and after the whole run. ``bench/compare.py A.json B.json`` prints
the ratios of two runs.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import load


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", help="benchmarks to run (bench_NAME.py); all when none")
    p.add_argument("--smoke", action="store_true", help="pass --smoke to every benchmark")
    p.add_argument(
        "--out", default="runs/bench", help="where the run's folder and merged file go (default: %(default)s)"
    )
    args = p.parse_args(argv)
    scripts = sorted(HERE.glob("bench_*.py"))
    if args.names:
        unknown = set(args.names) - {s.stem.removeprefix("bench_") for s in scripts}
        if unknown:
            p.error(f"no benchmark named {', '.join(sorted(unknown))}")
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in args.names]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    stamp += (
        next(f"-{k}" for k in range(1, 100) if not (Path(args.out) / f"{stamp}-{k}").exists())
        if (Path(args.out) / stamp).exists()
        else ""
    )
    folder = Path(args.out) / stamp
    folder.mkdir(parents=True)
    env = dict(os.environ, R3_BENCH_JSON=str(folder))
    before, failed = load(), []
    for script in scripts:
        print(f"==> {script.name}", flush=True)
        start = time.perf_counter()
        command = [sys.executable, str(script)] + (["--smoke"] if args.smoke else [])
        if subprocess.run(command, env=env, check=False).returncode:
            failed.append(script.name)
        print(f"    ({time.perf_counter() - start:.0f} s)\n", flush=True)
    records = {}
    for path in sorted(folder.glob("*.json")):
        record = json.loads(path.read_text())
        records[record["bench"]] = record
    merged = Path(args.out) / f"{stamp}.json"
    merged.write_text(
        json.dumps(
            {
                "started": stamp,
                "smoke": args.smoke,
                "load_before": before,
                "load_after": load(),
                "benches": records,
            },
            indent=1,
        )
    )
    print(f"figures of {len(records)} benchmarks: {merged}")
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
