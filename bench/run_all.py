"""Run every benchmark in this folder, one after the other, and print their figures.

    python bench/run_all.py            # all
    python bench/run_all.py graph eval # only bench_graph.py and bench_eval.py
"""

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(names: list[str]) -> int:
    scripts = sorted(HERE.glob("bench_*.py"))
    if names:
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in names]
    failed = []
    for script in scripts:
        print(f"==> {script.name}", flush=True)
        start = time.perf_counter()
        if subprocess.run([sys.executable, str(script)]).returncode != 0:
            failed.append(script.name)
        print(f"    ({time.perf_counter() - start:.0f} s)\n", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
