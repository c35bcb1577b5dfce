"""Packing benchmarks: IK solve time and one pick-and-place cycle's wall time in simulation.

Run: ``.venv/bin/python bench/bench_packing.py``. Prints medians over a few repetitions; the
cycle is pick (approach, descend, close, lift), place into the medium tray and home, through the
``sim`` executor, with its simulated duration for comparison.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from r3.packing_episode import PackingCell
from r3.sim.packing import scene


def main() -> None:
    cell = PackingCell.build()
    env, solver = cell.env, cell.executor.solver
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    times, iters = [], []
    for _ in range(50):
        q = rng.uniform(solver.low * 0.8, solver.high * 0.8)
        p, R = solver.forward(q, env.data.qpos)
        t = time.perf_counter()
        sol = solver.solve(p, R, env.data.qpos, seeds=[np.array(scene.HOME_Q)])
        times.append(time.perf_counter() - t)
        iters.append(sol.iterations)
    print(f"IK solve: median {statistics.median(times) * 1e3:.2f} ms, "
          f"p90 {np.percentile(times, 90) * 1e3:.2f} ms, median {statistics.median(iters)} iterations")
    cycles, sim = [], []
    for k in range(5):
        env.set_layout({"soup can": (0.30, -0.1 + 0.05 * k, 0.0)})
        g, a = cell.grounder, cell.actions
        t = time.perf_counter()
        pick = a.pick("soup can", g.locate("soup can"))
        place = a.place("soup can", g.project((0.50, -0.02, 0.008)))
        home = a.home()
        cycles.append(time.perf_counter() - t)
        sim.append((pick.control_steps + place.control_steps + home.control_steps) * scene.CONTROL_DT)
        assert pick.ok and place.ok and home.ok, (pick, place, home)
    print(f"pick-and-place cycle: median {statistics.median(cycles):.2f} s wall for "
          f"{statistics.median(sim):.1f} s simulated ({statistics.median(sim) / statistics.median(cycles):.0f}x real time)")


if __name__ == "__main__":
    main()
