"""Start a profile's nodes as processes, watch them, and bring them all down together.

This is what ``r3 launch`` runs on machines without launch_ros. Policy, as with a lifecycle
manager: the graph is one unit. When a member exits on its own, the supervisor reports which one,
how (exit code or signal) and why in its own words (:meth:`Supervisor.said_last`), gives the others
``grace_s`` to finish what they were doing (the reasoner ends its episode with an error naming the
member), then stops them: SIGINT, then SIGTERM, then SIGKILL. Children die with the supervisor even
if it is killed (PR_SET_PDEATHSIG).

The first exit is also written, at once, to the file named by ``R3_MEMBER_EXITS`` in every member's
environment (:class:`MemberExits`): the reasoner reads it while it waits and ends its episode with
an error naming the member well within 2 s, instead of after its heartbeat timeout (5 s), which is
longer than the grace the others get.

Before it starts anything it removes the Fast DDS shared-memory segments that processes killed
earlier left in /dev/shm (``r3.graph.shared_memory``), and says how many.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Self

import yaml

from r3.graph import shared_memory
from r3.graph.description import Member, Profile
from r3.workers import die_with_parent

#: Environment variable naming the file where a process manager writes the members that exited.
MEMBER_EXITS_ENV = "R3_MEMBER_EXITS"
#: How a node's one line begins that says why it could not configure itself (``r3_ros.spin``).
FATAL = "fatal: "
#: How much of a member's log is read for why it exited.
SAID_LAST_BYTES = 64 * 1024


def describe_exit(code: int) -> str:
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


def ros_arguments(member: Member, params_file: Path) -> list[str]:
    """The ``--ros-args`` a member's process gets: its node name, parameters file and remappings."""
    args = ["--ros-args", "-r", f"__node:={member.name}", "--params-file", str(params_file)]
    for src, dst in member.remappings.items():
        args += ["-r", f"{src}:={dst}"]
    return args


def resolve_executable(member: Member) -> list[str]:
    """The command that starts a member: the console script next to this Python, or ``python -m``."""
    if not member.is_r3_node:
        found = shutil.which(member.executable)
        if found is None:
            raise FileNotFoundError(
                f"{member.name}: executable {member.executable!r} ({member.package}) "
                f"is not on PATH; this profile needs a full ROS 2 install"
            )
        return [found]
    script = Path(sys.executable).parent / member.executable
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-m", f"{member.executable}.main"]


def record_exit(path: str | Path, exit_: Exit) -> None:
    """Append one member's exit to a member-exits file (``r3 launch`` and the launch_ros file both do)."""
    with open(path, "a") as f:
        f.write(f"{exit_}\n")


class MemberExits:
    """The exits a process manager wrote to its member-exits file, one line each ("r3_sim_node was
    killed by SIGKILL"); read cheaply and often (a stat unless the file grew)."""

    def __init__(self, path: str | Path | None):
        self.path = None if path is None else Path(path)
        self._lines: list[str] = []
        self._size = 0

    @classmethod
    def from_environment(cls) -> MemberExits:
        return cls(os.environ.get(MEMBER_EXITS_ENV))

    def read(self) -> list[str]:
        if self.path is None:
            return []
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return []
        if size != self._size:
            self._size = size
            self._lines = [line for line in self.path.read_text(errors="replace").splitlines() if line]
        return self._lines


@dataclass
class Exit:
    member: str
    code: int

    def __str__(self) -> str:
        return f"{self.member} {describe_exit(self.code)}"


class Supervisor:
    """Runs the members of one profile. Use as a context manager or call start()/stop()."""

    def __init__(
        self,
        profile: Profile,
        log_dir: str | Path,
        env: dict[str, str] | None = None,
        grace_s: float = 4.0,
        echo: Callable[[str], None] | None = None,
    ):
        self.profile = profile
        self.log_dir = Path(log_dir)
        self.env = dict(os.environ if env is None else env)
        self.grace_s = grace_s
        self.echo = echo or (lambda line: print(line, file=sys.stderr, flush=True))
        self.processes: dict[str, subprocess.Popen] = {}
        self.first_exit: Exit | None = None
        self._params_dir = tempfile.TemporaryDirectory(prefix="r3-params-")

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def exits_file(self) -> Path:
        return self.log_dir / "member_exits"

    def start(self) -> None:
        if (swept := shared_memory.sweep()).removed:
            self.echo(f"[r3 launch] {swept}")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.exits_file.write_text("")
        self.env[MEMBER_EXITS_ENV] = str(self.exits_file.resolve())
        for member in self.profile.started:  # members with `start: false` are the user's to start
            params_file = Path(self._params_dir.name) / f"{member.name}.yaml"
            params_file.write_text(yaml.safe_dump({member.name: {"ros__parameters": member.parameters}}))
            cmd = resolve_executable(member) + member.arguments + ros_arguments(member, params_file)
            with open(self.log_dir / f"{member.name}.log", "w") as log:
                self.processes[member.name] = subprocess.Popen(
                    cmd,
                    env=self.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    # PR_SET_PDEATHSIG can only be set in the child; the callback makes one libc call
                    preexec_fn=die_with_parent,  # noqa: PLW1509
                )
            self.echo(f"[r3 launch] started {member.name} (pid {self.processes[member.name].pid})")

    def poll(self) -> Exit | None:
        """The first member that has exited, if any (remembered once seen)."""
        if self.first_exit is None:
            for name, proc in self.processes.items():
                code = proc.poll()
                if code is not None:
                    self.first_exit = Exit(name, code)
                    record_exit(self.exits_file, self.first_exit)
                    said = self.said_last(name)
                    self.echo(f"[r3 launch] {self.first_exit}: {said}; see {self.log_dir / (name + '.log')}")
                    break
        return self.first_exit

    def wait(self, stop_requested: Callable[[], bool] = lambda: False, period_s: float = 0.1) -> Exit | None:
        """Block until a member exits or ``stop_requested()``; then stop every member."""
        try:
            while not stop_requested() and self.poll() is None:
                time.sleep(period_s)
            if self.first_exit is not None:
                deadline = time.monotonic() + self.grace_s
                while time.monotonic() < deadline and any(p.poll() is None for p in self.processes.values()):
                    time.sleep(period_s)
        finally:
            self.stop()
        return self.first_exit

    def stop(self, timeout_s: float = 5.0) -> None:
        """SIGINT every running member, then SIGTERM, then SIGKILL, each after ``timeout_s``."""
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            running = [p for p in self.processes.values() if p.poll() is None]
            if not running:
                break
            for proc in running:
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline and any(p.poll() is None for p in running):
                time.sleep(0.05)
        self._params_dir.cleanup()

    def said_last(self, member: str) -> str:
        """Why ``member`` exited, in its own words: the ``fatal:`` line of a node that could not configure
        itself (a part its parameter chose that cannot be loaded), else the last line of its log; read
        from the log's last :data:`SAID_LAST_BYTES` (a node that ran for hours wrote megabytes before)."""
        log = self.log_dir / f"{member}.log"
        try:
            with log.open("rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - SAID_LAST_BYTES))
                tail = f.read().decode(errors="replace")
        except OSError:
            tail = ""
        lines = [line for line in tail.splitlines() if line.strip()]
        fatal = [line for line in lines if line.startswith(FATAL)]
        return (fatal[-1].removeprefix(FATAL) if fatal else (lines[-1] if lines else "no output")).strip()

    def running(self) -> list[str]:
        return [name for name, p in self.processes.items() if p.poll() is None]
