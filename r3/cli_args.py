"""Types for the options of r3's commands (numbers in range, paths, folders, non-empty names) and the
reasoner backend a command loads.

A number out of range, an empty folder path, a path holding a control character or too long for
Linux (:func:`r3.files.path_problem`) or an empty name is refused by argparse, naming the option and
the reason (exit status 2), before anything starts: never a traceback from the simulator, the model
builder or a message field deep inside, and never a graph started only to refuse the goal it was
given.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path

from r3.files import bounded_repr, folder_problem, path_problem
from r3.numerals import DECIMAL, INTEGER
from r3.safety.goals import MAX_SEED


def integer(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in ``lo..hi`` written in ASCII digits (:mod:`r3.numerals`); no
    bound where None (a config that checks its own range takes ``integer()``)."""
    if lo is None:
        allowed = "" if hi is None else f" <= {hi}"
    else:
        allowed = f" {lo}..{hi}" if hi is not None else f" >= {lo}"

    def parse(text: str) -> int:
        try:  # int() also refuses more digits than sys.get_int_max_str_digits()
            value = int(text) if INTEGER.fullmatch(text.strip()) else None
        except ValueError:
            value = None
        if value is None:
            raise argparse.ArgumentTypeError(
                f"expected an integer{allowed}, got {bounded_repr(text, 80)} (digits 0-9 only)"
            )
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"expected an integer{allowed}, got {value}")
        return value

    return parse


def folder(text: str) -> Path:
    """An argparse type: the path of a folder to write (:func:`folder_problem`), refused before any
    work rather than in a traceback once it was done. An empty path is refused too: it would mean the
    current folder, whose files a command's output (and its ``--overwrite``) must never mix with."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a folder, got an empty path")
    if problem := folder_problem(text):
        raise argparse.ArgumentTypeError(problem)
    return Path(text)


def checked_path(text: str) -> str:
    """An argparse type: the path of a file or folder to read (or of a log folder or a plot to write),
    refused when no path r3 is handed may be it (:func:`path_problem`) before it is looked for."""
    if problem := path_problem(text):
        raise argparse.ArgumentTypeError(problem)
    return text


def readable_file(text: str) -> str:
    """An argparse type: the path of a regular file to read (refused when it is no :func:`checked_path`, is
    missing, a folder or a device, even by a command that would not have opened it this time)."""
    path = Path(checked_path(text))
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: not found; expected a file to read")
    if not path.is_file():
        kind = "a folder" if path.is_dir() else "a device, pipe or socket"
        raise argparse.ArgumentTypeError(f"{text} is not a regular file ({kind}); expected a file to read")
    return text


def word(text: str) -> str:
    """An argparse type: a non-empty name (a reasoner spec, a task list, a split), so that an empty
    value is refused instead of silently meaning the default."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a value, got an empty one")
    return text


#: Video frames per second a command takes: a GIF keeps each frame's time in hundredths of a second
#: and an H.264 encoder refuses rates far below 1; --fps 1e-9 ended `r3 sim demo` in an OverflowError,
#: after its episode had run, leaving a torn video.
FRAME_RATES = (0.1, 240.0)


def frame_rate(text: str) -> float:
    """An argparse type: video frames per second, within :data:`FRAME_RATES`."""
    value = positive(text)
    lo, hi = FRAME_RATES
    if not lo <= value <= hi:
        raise argparse.ArgumentTypeError(f"expected frames per second in [{lo:g}, {hi:g}], got {text}")
    return value


def positive(text: str) -> float:
    """An argparse type: a finite number above 0 (seconds, frames per second) in ASCII digits
    (:mod:`r3.numerals`)."""
    if not DECIMAL.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(
            f"expected a finite number > 0, got {bounded_repr(text, 80)} (digits 0-9 only)"
        )
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text}")
    return value


#: A scene seed: numpy's and gymnasium's generators take 0..2^63-1 (``r3.safety.goals.MAX_SEED``).
seed = integer(0, MAX_SEED)


def loaded_backend(parser: argparse.ArgumentParser, option: str, spec: str):
    """The reasoner backend ``spec`` names, loaded; a spec that does not build or a backend that
    cannot load ends the command with the reason (``option`` names where the spec came from)."""
    from r3.reasoning.backends import BackendError, make_backend

    try:
        backend = make_backend(spec)
        backend.load()
    except (ValueError, BackendError) as exc:
        parser.error(f"argument {option}: {exc}")
    return backend
