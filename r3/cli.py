"""The `r3` command line: one entry point, one sub-command per job.

Each sub-command lives next to the code it drives and is imported only when it runs, so
`r3 --help` stays fast and an optional dependency (torch, rclpy) is needed only by the
commands that use it.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import signal
import sys
import threading
from concurrent.futures.process import BrokenProcessPool

#: What the machine, not the command, got wrong: each ends a command in one line, not a traceback
#: (EFBIG: a file past ``ulimit -f`` or the filesystem's largest, FAT32's 4 GiB).
MACHINE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO)

#: sub-command -> (module, function, one-line help). The function takes argv (list[str]).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "doctor": ("r3.doctor", "main", "report which optional parts this machine has"),
    "sim": (
        "r3.sim.cli",
        "main",
        "one in-process Language Table episode with live reasoning and a video (r3 sim demo)",
    ),
    "packing": (
        "r3.sim.packing.cli",
        "main",
        "one in-process packing episode with its reasoning, a video and a summary (r3 packing demo)",
    ),
    "judge": ("r3.rewards.cli", "judge_main", "score a candidate instruction against a reference"),
    "launch": ("r3.graph.cli", "launch_main", "start a graph profile's nodes and supervise them"),
    "model": ("r3.reasoning.cli", "model_main", "build tiny test models (r3 model tiny)"),
    "train": ("r3.train.cli", "train_main", "train the reasoner: sft, rl (Dr. GRPO), impute, export"),
    "run": ("r3_ros.run_cli", "main", "run one episode through the ROS graph (the main job)"),
    "collect": (
        "r3.data.cli",
        "collect_main",
        "expert episodes in-process, one rosbag2 bag each (resumable)",
    ),
    "dataset": ("r3.data.cli", "dataset_main", "bags -> sft / rl datasets, their stats, LeRobot export"),
    "bag": (
        "r3.data.cli",
        "bag_main",
        "repair episode bags whose recorder was killed (r3 bag repair PATH...)",
    ),
    "eval": (
        "r3_ros.eval_cli",
        "eval_main",
        "evaluate a reasoner on held-out scenes of either suite; compare two evaluations",
    ),
    "mini": (
        "r3.mini",
        "mini_main",
        "the whole R^3 recipe at laptop scale: collect, SFT, RL, eval against baselines (Table 2)",
    ),
}


class Terminated(BaseException):
    """SIGTERM (``kill``, a job scheduler, ``docker stop``), raised where the command is so that it ends
    as on Ctrl-C: its staging folders and torn episodes removed, what it finished kept, one line. A
    BaseException, as KeyboardInterrupt, so that no command's ``except Exception`` takes it for an
    error of its own."""


def _terminate(signum, frame) -> None:
    raise Terminated


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="r3",
        description="r3: robot reasoners in natural language over ROS 2.",
        epilog="Run 'r3 COMMAND --help' for the options of one command.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, _, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        parser.parse_args(argv or ["--help"])
        return 2
    module, function, _ = COMMANDS[argv[0]]
    # A command may set its own (r3 launch, rclpy); only the main thread may set one, and a caller
    # that runs r3 in another thread keeps its process's handling.
    in_main = threading.current_thread() is threading.main_thread()
    earlier = signal.getsignal(signal.SIGTERM)
    if in_main:
        signal.signal(signal.SIGTERM, _terminate)
    try:
        return int(getattr(importlib.import_module(module), function)(argv[1:]) or 0)
    except KeyboardInterrupt:  # Ctrl-C: what a resumable command finished is kept, nothing to trace
        print(f"\nr3 {argv[0]}: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print(f"\nr3 {argv[0]}: terminated (SIGTERM)", file=sys.stderr)
        return 128 + signal.SIGTERM
    except BrokenProcessPool:  # a worker killed (by hand, by the kernel for memory) mid-run
        print(
            f"r3 {argv[0]}: error: a worker process died; what finished is kept (run the same command "
            "again to go on)",
            file=sys.stderr,
        )
        return 1
    except OSError as exc:
        if exc.errno not in MACHINE_ERRORS:
            raise
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"r3 {argv[0]}: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 1
    except Exception as exc:
        # A reasoner that fails mid-episode (a replay out of answers, a server gone): one line, as
        # `r3 eval` and the reasoner node say it. Its module is loaded if it raised one.
        backends = sys.modules.get("r3.reasoning.backends.base")
        if backends is None or not isinstance(exc, backends.BackendError):
            raise
        print(f"r3 {argv[0]}: error: reasoner backend: {exc}", file=sys.stderr)
        return 1
    finally:
        if in_main:  # None: a handler set outside Python, which Python cannot put back
            signal.signal(signal.SIGTERM, signal.SIG_DFL if earlier is None else earlier)


if __name__ == "__main__":
    sys.exit(main())
