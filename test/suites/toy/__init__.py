"""A minimal third suite, all in this folder: a marker on a number line that must reach a goal cell.

It exists to show what a suite is (issue 16, acceptance 3): a :class:`r3.suites.Suite` record
(:data:`SUITE`) pointing at its grammar (:mod:`.grammar`) and its tasks and simulator (:mod:`.line`,
an ``r3.episode_loop.SuiteSim``), which the one episode loop drives in process and the generic
simulator node (``r3_suite_sim_node``) drives in the graph. A test registers it once: in process
with ``r3.suites.register_suite(SUITE)``, for the graph's processes through an ``r3.suites`` entry
point; nothing else in r3 knows it.
"""

from __future__ import annotations

import os
from pathlib import Path

from r3.suites import Suite

#: The suite's graph: r3_suite_sim_node hosting its simulator, r3's reasoner and recorder.
GRAPH = Path(__file__).with_name("graph.yaml")


def _make_sim():
    from .line import LineSim

    return LineSim()


SUITE = Suite(
    name="toy_line",
    title="Number line",
    tasks_module=f"{__name__}.line",
    grammar_module=f"{__name__}.grammar",
    interfaces=("instruction",),
    default_history="response",
    make_sim=_make_sim,
)


def entry_point_env(folder: Path, pythonpath: str = "") -> dict[str, str]:
    """PYTHONPATH for processes that find this suite as a user's package adds one: an installed
    distribution (written into ``folder``) with an ``r3.suites`` entry point. In this process the
    suite stays unregistered."""
    from fake_packages import fake_distribution

    fake_distribution(folder, "r3.suites", f"{SUITE.name} = {__name__}:SUITE", name="r3_toy_line")
    tests = Path(__file__).resolve().parents[2]  # the folder that holds suites/ and fake_packages.py
    rest = pythonpath or os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": os.pathsep.join([str(folder), str(tests), rest])}
