"""A CPU-time stack sampler that runs inside the process it profiles.

py-spy cannot attach on every machine (a container without ptrace, a Python build it does not
know), and cProfile sees one thread while a node's work is spread over its executor's threads. This
sampler wakes ``rate`` times a second, and charges the CPU time each Python thread used since its
last wake to the stack that thread is on now: idle threads cost nothing, and a busy one's cost lands
on what it is doing. A callback shorter than the period, though, is charged to wherever its thread
waits next (a thread pool's loop), so a wait's share is an upper bound; the totals are exact.
Threads that Python does not run (the DDS library's own) are measured too, by their name, from
``/proc``: their CPU time, not their stacks.

The output is collapsed stacks (``frame;frame;... microseconds``, one line per distinct stack),
the format flame-graph tools read. Native threads appear as one frame, ``[native thread NAME]``.

A node records when the environment names a folder (``R3_PROFILE_DIR``; see ``r3_ros.spin``): it
samples while the file ``RECORDING`` exists in that folder, and writes ``<name>-<pid>.txt`` there
each time the file goes away, so a benchmark can leave its warm-up out.

Since a wake-up of rclpy's Python executor costs far more than most callbacks it runs, a node
also keeps a :class:`WakeLedger` over the same window: how often its executor woke, for what
(a topic, a service, a timer's period, an action), and the CPU time the executor's own wait
machinery took each time, written next to the stacks as ``<name>-<pid>.wakes.tsv``.
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

PROFILE_DIR_ENV = "R3_PROFILE_DIR"
RECORDING_FLAG = "RECORDING"
WAKES_SUFFIX = ".wakes.tsv"


def _frame_name(frame) -> str:
    code = frame.f_code
    return f"{code.co_name} ({code.co_filename}:{frame.f_lineno})"


def _stack(frame) -> str:
    names = []
    while frame is not None:
        names.append(_frame_name(frame))
        frame = frame.f_back
    return ";".join(reversed(names))


def _native_threads() -> dict[int, tuple[str, float]]:
    """{tid: (name, CPU seconds)} of every thread of this process, from /proc (Linux)."""
    out, tick = {}, os.sysconf("SC_CLK_TCK")
    for task in Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:  # the thread ended while we looked
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        out[int(task.name)] = (name, (int(fields[11]) + int(fields[12])) / tick)
    return out


class StackSampler:
    """Collapsed stacks weighted by CPU time; ``start()``, ``stop()``, then ``collapsed()``."""

    def __init__(self, rate: float = 200.0):
        if not rate > 0:
            raise ValueError(f"rate must be positive, got {rate!r}")
        self.period = 1.0 / rate
        self.stacks: collections.Counter[str] = collections.Counter()
        self._cpu: dict[int, float] = {}
        self._native_start: dict[int, tuple[str, float]] = {}
        self._running = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._native_start = _native_threads()
        self._cpu = {}
        self._running.set()
        self._thread = threading.Thread(target=self._run, name="r3-stack-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._running.clear()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._charge_native()

    def collapsed(self) -> str:
        return "".join(f"{stack} {round(us)}\n" for stack, us in self.stacks.most_common() if us >= 1)

    def _run(self) -> None:
        me = threading.get_ident()
        while self._running.is_set():
            self._sample(me)
            time.sleep(self.period)

    def _sample(self, me: int) -> None:
        frames = sys._current_frames()
        for ident, frame in frames.items():
            if ident == me:
                continue
            try:
                cpu = time.clock_gettime(time.pthread_getcpuclockid(ident))
            except (OSError, ProcessLookupError):  # the thread ended since the snapshot
                continue
            before = self._cpu.get(ident)
            self._cpu[ident] = cpu
            if before is not None and cpu > before:
                self.stacks[_stack(frame)] += (cpu - before) * 1e6

    def _charge_native(self) -> None:
        """Threads Python does not run: their CPU time over the window, by thread name."""
        python_tids = {t.native_id for t in threading.enumerate()}
        for tid, (name, cpu) in _native_threads().items():
            if tid in python_tids:
                continue
            before = self._native_start.get(tid, (name, 0.0))[1]
            if cpu > before:
                self.stacks[f"[native thread {name}]"] += (cpu - before) * 1e6


class WakeLedger:
    """Wake-ups of one executor while recording: by what woke it, how many and the CPU seconds its
    wait machinery took (``record`` is called from the executor's spinning thread only)."""

    def __init__(self):
        self.recording = False
        self.wakes: collections.Counter[str] = collections.Counter()
        self.cpu_s: collections.Counter[str] = collections.Counter()

    def start(self) -> None:
        self.wakes.clear()
        self.cpu_s.clear()
        self.recording = True

    def stop(self) -> None:
        self.recording = False

    def record(self, source: str, cpu_s: float) -> None:
        if self.recording:
            self.wakes[source] += 1
            self.cpu_s[source] += cpu_s

    def tsv(self) -> str:
        """``source<TAB>wake-ups<TAB>CPU microseconds`` per line, most wake-ups first."""
        return "".join(f"{s}\t{n}\t{self.cpu_s[s] * 1e6:.0f}\n" for s, n in self.wakes.most_common())


def read_wakes(path: Path) -> list[tuple[str, int, float]]:
    """(source, wake-ups, CPU seconds) from a ``.wakes.tsv`` file."""
    rows = [line.split("\t") for line in path.read_text().splitlines() if line]
    return [(source, int(n), int(us) / 1e6) for source, n, us in rows]


def _write(path: Path, text: str) -> None:
    partial = path.with_suffix(".part")
    partial.write_text(text)
    partial.replace(path)  # a reader never sees half a file


def record_while_flagged(
    folder: str | os.PathLike, name: str, rate: float = 200.0, wakes: WakeLedger | None = None
) -> Callable[[], None]:
    """Sample while ``folder/RECORDING`` exists; write ``folder/<name>-<pid>.txt`` (and, with a
    ``wakes`` ledger the node's executor fills, ``<name>-<pid>.wakes.tsv``) whenever it goes away.
    Runs in a daemon thread (a node under ``R3_PROFILE_DIR``) until the function returned is called,
    which writes what it sampled so far (a node that stops while the flag exists)."""
    folder = Path(folder)
    flag, out = folder / RECORDING_FLAG, folder / f"{name}-{os.getpid()}.txt"
    stopped = threading.Event()

    def write(sampler: StackSampler) -> None:
        sampler.stop()
        _write(out, sampler.collapsed())
        if wakes is not None:
            wakes.stop()
            _write(out.with_name(out.stem + WAKES_SUFFIX), wakes.tsv())

    def watch() -> None:
        sampler = None
        while not stopped.is_set():
            flagged = flag.exists()
            if flagged and sampler is None:
                sampler = StackSampler(rate)
                sampler.start()
                if wakes is not None:
                    wakes.start()
            elif not flagged and sampler is not None:
                write(sampler)
                sampler = None
            stopped.wait(0.05)
        if sampler is not None:
            write(sampler)

    thread = threading.Thread(target=watch, name="r3-profile-watch", daemon=True)
    thread.start()

    def stop() -> None:
        stopped.set()
        thread.join()

    return stop
