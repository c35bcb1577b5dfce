"""Headless MuJoCo rendering that coexists with torch in one process.

On machines without a display r3 renders with OSMesa, which brings its own LLVM; with
MUJOCO_GL=osmesa, ``import mujoco`` loads it. The CUDA build of torch brings triton, whose native
library crashes the process when it is loaded *after* that LLVM (transformers imports triton
lazily, e.g. when a VLM backend loads after a scene was built). Loaded first, both work. So every
r3 module that uses MuJoCo imports it from here: ``from r3.sim.offscreen import mujoco``.
"""

from __future__ import annotations

import importlib.util
import os

os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
if os.environ["MUJOCO_GL"] == "osmesa" and importlib.util.find_spec("triton") is not None:
    import triton  # noqa: F401  (must be loaded before OSMesa's LLVM)

import mujoco

__all__ = ["mujoco"]
