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


@pytest.fixture
def ros_env() -> dict[str, str]:
    """Environment for child processes that run ROS nodes."""
    return dict(os.environ)
