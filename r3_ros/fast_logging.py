"""rclpy's logger, without reading its caller's source at every line.

To name the file a log line comes from (and to key its throttle and once filters by call site),
rclpy 9's ``RcutilsLogger.log`` asks ``inspect.getframeinfo`` for the file of each frame it walks:
that reads the caller's source lines and scans every loaded module for the one the frame belongs to.
Measured in an r3 process: 0.9-1.5 ms per log line, more in a process that has imported a model
library; and nodes log on the critical path (a reset's line before its answer goes out, an
episode's line before its result). The name it wants is the frame's own ``f_code.co_filename``,
which is what ``getframeinfo`` returns for a frame of any module loaded from a file.
"""

from __future__ import annotations

import inspect
import types
from typing import NamedTuple

from rclpy.impl import rcutils_logger


class _FrameFile(NamedTuple):
    """The one field of ``inspect.Traceback`` rclpy's logger reads."""

    filename: str


def _frame_file(frame: types.FrameType) -> _FrameFile:
    return _FrameFile(frame.f_code.co_filename)


def speed_up_rclpy_logging() -> bool:
    """Give rclpy's logger the frame's own file name in place of ``inspect.getframeinfo`` (once per
    process; any other rclpy, whose logger may read other fields, is left as it is). True when the
    logger uses it."""
    if rcutils_logger.inspect is not inspect:
        return getattr(rcutils_logger.inspect, "getframeinfo", None) is _frame_file
    try:
        looks = rcutils_logger.CallerId.__new__, rcutils_logger._find_caller
        sources = [inspect.getsource(f) for f in looks]
    except (AttributeError, OSError):  # another rclpy, or one installed without its sources
        return False
    if not all("getframeinfo(frame).filename" in source for source in sources):
        return False
    shim = types.SimpleNamespace(currentframe=inspect.currentframe, getframeinfo=_frame_file)
    rcutils_logger.inspect = shim
    return True
