"""Packing benchmarks: IK solve time and one pick-and-place cycle's wall time in simulation.

    python bench/bench_packing.py [--passes 3] [--poses 100] [--cycles 5] [--smoke] [--json PATH]

- IK: ``poses`` random reachable poses (joints drawn within 80 % of their limits, seeded from home,
  as ``test_ik`` does); each pass reports the median and p90 over all poses, and their ratio (the
  tail target: p90 <= 5x median), of the wall time, of the CPU time (on a loaded machine a solve
  longer than a scheduler slice is preempted; CPU time leaves that out) and of the iterations
  (every start's, summed);
- cycle: pick (approach, descend, close, lift), place into the medium tray and home, through the
  ``sim`` executor; wall time per cycle and the simulated time it stands for.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "osmesa")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, no install

import numpy as np
from common import COUNT, Report, parser

from r3.packing_episode import PackingCell
from r3.sim.packing import scene


def ik_pass(solver, qpos, poses: int, seed: int) -> dict[str, np.ndarray]:
    """Wall seconds, CPU seconds (this thread's: what a loaded machine's preemption does not add)
    and iterations (over all starts) of ``poses`` solves."""
    rng = np.random.default_rng(seed)
    targets = [solver.forward(rng.uniform(solver.low * 0.8, solver.high * 0.8), qpos) for _ in range(poses)]
    out = {"wall": [], "cpu": [], "iterations": []}
    for p, R in targets:
        t, c = time.perf_counter(), time.thread_time()
        sol = solver.solve(p, R, qpos, seeds=[np.array(scene.HOME_Q)])
        out["cpu"].append(time.thread_time() - c)
        out["wall"].append(time.perf_counter() - t)
        out["iterations"].append(sol.iterations)
    return {k: np.array(v, float) for k, v in out.items()}


def cycle(cell, k: int) -> tuple[float, float]:
    """(wall s, simulated s) of one pick-and-place cycle of the soup can from slot ``k``."""
    cell.env.set_layout({"soup can": (0.30, -0.1 + 0.05 * (k % 5), 0.0)})
    g, a = cell.grounder, cell.actions
    t = time.perf_counter()
    pick = a.pick("soup can", g.locate("soup can"))
    place = a.place("soup can", g.project((0.50, -0.02, 0.008)))
    home = a.home()
    wall = time.perf_counter() - t
    if not (pick.ok and place.ok and home.ok):
        raise RuntimeError(f"the cycle failed: {pick}, {place}, {home}")
    return wall, (pick.control_steps + place.control_steps + home.control_steps) * scene.CONTROL_DT


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--passes", type=COUNT, default=3, help="passes per figure (default: %(default)s)")
    p.add_argument("--poses", type=COUNT, default=100, help="IK poses per pass (default: %(default)s)")
    p.add_argument(
        "--cycles", type=COUNT, default=5, help="pick-and-place cycles per pass (default: %(default)s)"
    )
    args = p.parse_args()
    if args.smoke:
        args.passes, args.poses, args.cycles = 1, 10, 1
    report = Report("packing", vars(args))
    cell = PackingCell.build()
    cell.env.reset(seed=0)
    solver, qpos = cell.executor.solver, cell.env.data.qpos
    passes = [ik_pass(solver, qpos, args.poses, k) for k in range(args.passes)]
    note = f"{args.poses} random reachable poses per pass"
    for key, unit, scale in (("wall", "ms", 1e3), ("cpu", "ms", 1e3), ("iterations", "iterations", 1)):
        what = {"wall": "wall time", "cpu": "CPU time", "iterations": "iterations over all starts"}[key]
        report.add(f"IK solve {what}, median", [np.median(r[key]) * scale for r in passes], unit, note=note)
        report.add(f"IK solve {what}, p90", [np.percentile(r[key], 90) * scale for r in passes], unit)
        report.add(
            f"IK solve {what}, p90 / median (target <= 5)",
            [np.percentile(r[key], 90) / np.median(r[key]) for r in passes],
            "x",
            note="per pass",
        )
    walls, sims = [], []
    for k in range(args.passes):
        runs = [cycle(cell, j) for j in range(args.cycles)]
        walls.append(float(np.median([w for w, _ in runs])))
        sims.append(float(np.median([s for _, s in runs])))
    report.add("pick-and-place cycle, wall", walls, "s", note=f"median of {args.cycles} cycles per pass")
    report.add("pick-and-place cycle, simulated", sims, "s", note="the same cycles' simulated time")
    report.finish(args.json)


if __name__ == "__main__":
    main()
