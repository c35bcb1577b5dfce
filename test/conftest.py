"""Shared test set-up: an isolated DDS domain per test session, so parallel runs never cross-talk.

The variables are set at import, before any test creates a node, and child processes inherit them.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
os.environ.setdefault("ROS_DOMAIN_ID", str(1 + os.getpid() % 100))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("PYTHONUNBUFFERED", "1")

# The CUDA torch build brings triton, whose native library crashes the process when it is first
# loaded after OSMesa (MuJoCo's CPU renderer) has loaded its own LLVM; loaded first, both work.
# transformers imports triton lazily (through torch._dynamo), often after a test has rendered.
try:
    import triton  # noqa: F401
except ImportError:
    pass


@pytest.fixture
def ros_env() -> dict[str, str]:
    """Environment for child processes that run ROS nodes."""
    return dict(os.environ)


@pytest.fixture(scope="session")
def tabletop():
    """The perception test scene (MuJoCo, 640x480 camera about 1 m from the objects)."""
    from r3.perception.scene import TabletopScene

    scene = TabletopScene()
    yield scene
    scene.close()


@pytest.fixture(scope="session")
def tabletop_frame(tabletop):
    return tabletop.render(stamp_ns=1_000_000_000)
