"""Headless MuJoCo rendering that coexists with torch in one process.

On machines without a display r3 renders with OSMesa, which brings its own LLVM; with
MUJOCO_GL=osmesa, ``import mujoco`` loads it. The CUDA build of torch brings triton, whose native
library crashes the process when it is loaded *after* that LLVM (transformers imports triton
lazily, e.g. when a VLM backend loads after a scene was built). Loaded first, both work. So every
r3 module that uses MuJoCo imports it from here: ``from r3.sim.offscreen import mujoco``.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])


def load_triton_library() -> None:
    """Load triton's native library, if triton is installed, before OSMesa's LLVM.

    The library alone (``triton/_C/libtriton.so``, 30-40 ms) rather than the package (170 ms on this
    project's machines: every simulator process and evaluation worker pays it at start); the
    ``import triton`` that comes later finds the library already loaded. A triton laid out otherwise
    is imported whole."""
    spec = importlib.util.find_spec("triton")
    if spec is None or spec.origin is None:
        return
    library = Path(spec.origin).parent / "_C" / "libtriton.so"
    if library.is_file():
        ctypes.CDLL(str(library))
    else:
        import triton  # noqa: F401


if os.environ["MUJOCO_GL"] == "osmesa":
    load_triton_library()

import mujoco  # after triton's library, above

__all__ = ["mujoco"]
