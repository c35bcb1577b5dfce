"""``r3 packing``: in-process packing episodes (no ROS).

``r3 packing demo --task 4 --seed 0`` runs one episode and prints every decision step;
``r3 packing table`` runs the 12 held-out goals of R^3 Table 6 over seeds x rollouts and prints
success rate and progress per goal with 95 % confidence intervals, laid out like R^3 Table 5.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
from pathlib import Path

from r3.packing_episode import GROUNDINGS


def _ci(values: list[float]) -> float:
    """Half width of the normal 95 % interval of the mean (percent points when values are in %)."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return 1.96 * math.sqrt(var / n)


def table_rows(results: dict[str, list[tuple[bool, float]]]) -> list[str]:
    """Markdown rows "| Task k | success ± ci | progress ± ci |" plus the mean row.

    >>> table_rows({"1": [(True, 1.0), (False, 0.5)]})[-1]
    '| Mean | 50.0 ± 98.0 | 75.0 ± 49.0 |'
    """
    rows, all_s, all_p = ["| Task | Success rate (%) | Progress (%) |", "| --- | --- | --- |"], [], []
    for task, runs in results.items():
        s = [100.0 * ok for ok, _ in runs]
        p = [100.0 * prog for _, prog in runs]
        all_s += s
        all_p += p
        rows.append(f"| Task {task} | {sum(s) / len(s):.1f} ± {_ci(s):.1f} | {sum(p) / len(p):.1f} ± {_ci(p):.1f} |")
    rows.append(f"| Mean | {sum(all_s) / len(all_s):.1f} ± {_ci(all_s):.1f} | "
                f"{sum(all_p) / len(all_p):.1f} ± {_ci(all_p):.1f} |")
    return rows


_WORKER: dict = {}


def _init_worker(reasoner: str, grounding: str) -> None:
    from r3.packing_episode import PackingCell
    from r3.reasoning.backends import make_backend

    _WORKER["backend"] = make_backend(reasoner)
    _WORKER["backend"].load()
    _WORKER["cell"] = PackingCell.build(grounding=grounding)


def _run_one(job: tuple[str, int, int]) -> tuple[str, bool, float]:
    from r3.packing_episode import run_packing_episode

    task, seed, rollout = job
    traj = run_packing_episode(task, seed, _WORKER["backend"], cell=_WORKER["cell"], render=False, rollout=rollout)
    return task, bool(traj.success), float(traj.progress)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="r3 packing", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    grounding = argparse.ArgumentParser(add_help=False)
    grounding.add_argument("--grounding", choices=GROUNDINGS, default="sim",
                           help="how the packing skills see the scene: sim (simulator poses) or perception "
                                "(the base camera through r3.perception, and the arm's joints) (default: sim)")
    demo = sub.add_parser("demo", help="one episode, printed step by step", parents=[grounding])
    demo.add_argument("--task", default="4", help='held-out goal "1".."12" or "train" (default: 4)')
    demo.add_argument("--seed", type=int, default=0, help="environment seed: the layout (default: 0)")
    demo.add_argument("--reasoner", default="expert",
                      help="reasoner backend spec, as for r3 run (default: expert, the privileged planner)")
    table = sub.add_parser("table", help="success and progress on the 12 held-out goals", parents=[grounding])
    table.add_argument("--seeds", type=int, default=5, help="environment seeds (layouts) per goal (default: 5)")
    table.add_argument("--rollouts", type=int, default=10,
                       help="rollouts per seed: same layout, other policy noise (default: 10, as R^3)")
    table.add_argument("--tasks", default=",".join(str(i) for i in range(1, 13)),
                       help="comma-separated goals (default: 1,...,12)")
    table.add_argument("--reasoner", default="expert", help="reasoner backend spec (default: expert)")
    table.add_argument("--workers", type=int, default=1, help="episodes run in parallel processes (default: 1)")
    table.add_argument("--out", default=None, help="also write the per-episode results as JSON here")
    args = p.parse_args(argv)

    if args.cmd == "demo":
        from r3.packing_episode import PackingCell, run_packing_episode
        from r3.reasoning.backends import make_backend

        backend = make_backend(args.reasoner)
        backend.load()

        def show(step):
            print(f"--- step {step.step} ---")
            for line in textwrap.wrap(step.reasoning or "", 100):
                print(f"  {line}")
            print(f"Instruction: {step.instruction}  [{step.error or 'done'}; progress {step.progress:.0%}]", flush=True)

        traj = run_packing_episode(args.task, args.seed, backend, cell=PackingCell.build(grounding=args.grounding),
                                  render=False, on_step=show)
        print(f"task {args.task} seed {args.seed}: success={traj.success} progress={traj.progress:.0%}")
        return 0
    if args.seeds < 1 or args.rollouts < 1 or args.workers < 1:
        p.error("--seeds, --rollouts and --workers must be at least 1")
    from tqdm import tqdm

    tasks = args.tasks.split(",")
    jobs = [(task, seed, rollout) for task in tasks for seed in range(args.seeds) for rollout in range(args.rollouts)]
    results: dict[str, list[tuple[bool, float]]] = {task: [] for task in tasks}
    pool = None
    if args.workers == 1:
        _init_worker(args.reasoner, args.grounding)
        outcomes = map(_run_one, jobs)
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(args.workers, multiprocessing.get_context("spawn"), _init_worker,
                                   (args.reasoner, args.grounding))
        outcomes = pool.map(_run_one, jobs)
    with tqdm(total=len(jobs), unit="episode", file=sys.stderr) as bar:
        for task, ok, progress in outcomes:  # in job order, so results do not depend on --workers
            results[task].append((ok, progress))
            bar.update()
    if pool is not None:
        pool.shutdown()
    print("\n".join(table_rows(results)))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 0
