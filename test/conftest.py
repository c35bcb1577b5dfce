"""Shared test set-up: a ROS domain no other process holds (``ros_domains``), so parallel runs never
cross-talk.

The variables are set at import, before any test creates a node, and child processes inherit them.
The session's domain replaces any ``ROS_DOMAIN_ID`` of the caller's shell, which may name a live graph.
"""

from __future__ import annotations

import contextlib
import os
import signal

# One compute thread per test process and each process it starts, set before numpy or torch loads:
# `make test` runs three workers on two cores, and torch's and OpenBLAS's default of a thread per
# core had their threads spin-waiting for each other (a vision-pretraining test took 362 s beside
# other workers, 7 s alone).
for _threads in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")

import pytest
from hypothesis import settings
from ros_domains import DomainClaim, claim_for_this_process

import r3_ros  # noqa: F401 - this process's own nodes get r3's DDS profile too

SESSION_DOMAIN = DomainClaim()
os.environ["ROS_DOMAIN_ID"] = str(SESSION_DOMAIN.domain)
os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("PYTHONUNBUFFERED", "1")

# Property-based tests see the same examples on every run and machine: a fixed budget, derandomized,
# no example database, no deadline (a loaded CI machine must not turn a slow example into a failure).
settings.register_profile(
    "r3", derandomize=True, max_examples=300, deadline=None, database=None, print_blob=True
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "r3"))

# The CUDA torch build brings triton, whose native library crashes the process when it is first
# loaded after OSMesa (MuJoCo's CPU renderer) has loaded its own LLVM; loaded first, both work.
# transformers imports triton lazily (through torch._dynamo), often after a test has rendered.
try:
    import triton  # noqa: F401
except ImportError:
    pass


#: The files that take longest, by their time in a clean-clone run of `make test` on 2 idle cores
#: (a served model trained first, graphs started by their module fixtures, the whole mini chain,
#: training), in that order. `make test` starts them first (with ``--no-loadscope-reorder``): xdist
#: otherwise hands out the files with the most tests first, which left the one-test files of
#: several minutes each running alone at the end of the run.
LONGEST_FILES = (
    "test_tools_served_model.py",
    "test_safety_graph.py",
    "test_headline_figures.py",
    "test_sim_controller.py",
    "test_colcon_workspace.py",
    "test_silent_nodes.py",
    "test_bench_smoke.py",
    "test_graph_backends.py",
    "test_mini_quick.py",
    "test_train_tiny.py",
    "test_hostile_graph.py",
    "test_eval_runner.py",
    "test_interfaces_graph.py",
    "test_multiturn_tiny.py",
)


def pytest_collection_modifyitems(items):
    """The longest files first, every other file after them in the order collected."""
    first = {name: rank for rank, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: first.get(item.path.name, len(first)))


def pytest_report_header(config):
    return f"ROS_DOMAIN_ID {SESSION_DOMAIN.domain} (held by this session)"


@pytest.fixture
def ros_env() -> dict[str, str]:
    """Environment for child processes that run ROS nodes."""
    return dict(os.environ)


@pytest.fixture
def private_ros_env():
    """Call it for a child environment whose ROS domain no other process holds, e.g. for a test
    that starts a graph of its own next to the session's; each claim ends with the test. A test that
    creates nodes in this process calls it with ``in_process=True``: that domain stays claimed until
    the session ends."""
    claims: list[DomainClaim] = []

    def claim(in_process: bool = False) -> dict[str, str]:
        if in_process:
            return dict(os.environ, ROS_DOMAIN_ID=str(claim_for_this_process()))
        claims.append(DomainClaim())
        return dict(os.environ, ROS_DOMAIN_ID=str(claims[-1].domain))

    yield claim
    for c in claims:
        c.release()


@pytest.fixture(scope="session")
def tabletop():
    """The perception test scene (MuJoCo, 640x480 camera about 1 m from the objects)."""
    from r3.sim.tabletop import TabletopScene

    scene = TabletopScene()
    yield scene
    scene.close()


@pytest.fixture(scope="session")
def tabletop_frame(tabletop):
    return tabletop.render(stamp_ns=1_000_000_000)


@pytest.fixture(scope="session")
def expert_bags(tmp_path_factory):
    """Expert episodes of the RL split (one scene per task, at most 6 steps each), collected once per
    session for every test that reads bags; a test that changes bags works on a copy."""
    from r3.data.cli import collect_main

    out = tmp_path_factory.mktemp("expert_bags")
    args = [
        "--split",
        "T_R",
        "--scenes",
        "1",
        "--trials",
        "1",
        "--max-steps",
        "6",
        "--out",
        str(out),
        "--quiet",
    ]
    assert collect_main(args) == 0
    return out


#: How much of each graph member's log a failed test's report shows.
LOG_TAIL_LINES = 25
_STARTED = pytest.StashKey[float]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report ends with the tail of every ``*.log`` written under the session's
    temporary folder while it ran (the graph members' logs of `r3 launch` and the supervisor), so a
    failure on a CI machine, whose folders are gone afterwards, shows what each node said."""
    report = yield
    if call.when == "setup":
        item.stash[_STARTED] = call.start
    elif report.failed and _STARTED in item.stash:
        root = item.config._tmp_path_factory.getbasetemp()
        for log in sorted(root.rglob("*.log")):
            if log.stat().st_mtime >= item.stash[_STARTED]:
                tail = log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
                report.sections.append((f"log {log.relative_to(root)}", "\n".join(tail)))
    return report


@pytest.fixture
def ends_within():
    """``with ends_within(seconds):`` ends the block with a TimeoutError, not a hang, once it runs past
    ``seconds`` (a read of a FIFO that never ends, in a test of the fix that refuses one)."""

    @contextlib.contextmanager
    def within(seconds: int):
        def hung(*_):
            raise TimeoutError(f"still running after {seconds} s")

        previous = signal.signal(signal.SIGALRM, hung)
        signal.alarm(seconds)
        try:
            yield
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)

    return within
