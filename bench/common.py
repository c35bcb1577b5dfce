"""What every benchmark shares: repeated passes, min/median/max, the machine's load, a JSON record.

A benchmark measures each figure over several passes and reports ``min / median / max``; a figure
that is measured once says so (n = 1). Figures are never derived from other figures. The load
average is read before and after the run and printed beside the figures, since this project's
machines are often shared. ``--json PATH`` (or the ``R3_BENCH_JSON`` folder that ``run_all.py``
sets) writes the record; ``bench/compare.py A.json B.json`` prints the ratios of two runs.
``--smoke`` asks for the smallest sizes: CI runs every benchmark once that way, never as a gate.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from r3.cli_args import folder, integer, positive  # noqa: F401  (the scripts take them from here)
from r3.files import folder_problem


@dataclass
class Figure:
    """One measured quantity over ``n`` passes; ``better`` says which direction is an improvement."""

    name: str
    unit: str
    values: list[float]
    better: str = "lower"
    note: str = ""

    @property
    def summary(self) -> dict:
        v = sorted(self.values)
        return {"min": v[0], "median": statistics.median(v), "max": v[-1], "n": len(v)}

    def line(self) -> str:
        s = self.summary
        if s["n"] == 1:
            text = f"{_fmt(s['median'])} {self.unit} (n=1)"
        else:
            text = (
                f"{_fmt(s['median'])} {self.unit} median, {_fmt(s['min'])}-{_fmt(s['max'])} "
                f"over {s['n']} passes"
            )
        return f"{self.name:<58} {text}" + (f"  [{self.note}]" if self.note else "")


def _fmt(x: float) -> str:
    a = abs(x)
    return f"{x:.0f}" if a >= 100 else f"{x:.1f}" if a >= 10 else f"{x:.2f}" if a >= 0.1 else f"{x:.3g}"


def process_tree(pid: int) -> dict[int, str]:
    """{pid: command line} of every process below ``pid`` (Linux /proc): a launched graph's nodes."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = {}, list(children.get(pid, []))
    while todo:
        p = todo.pop()
        try:
            out[p] = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
        todo += children.get(p, [])
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds that ``pid`` has used so far: unlike wall time, what a loaded
    machine's other work does not inflate."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load() -> dict:
    one, five, fifteen = os.getloadavg()
    return {"1min": one, "5min": five, "15min": fifteen, "cores": os.cpu_count()}


@dataclass
class Report:
    """The figures of one benchmark script; ``finish`` prints the load and writes the JSON record."""

    bench: str
    args: dict = field(default_factory=dict)
    figures: list[Figure] = field(default_factory=list)
    load_before: dict = field(default_factory=load)
    started: float = field(default_factory=time.time)

    def add(self, name: str, values, unit: str, better: str = "lower", note: str = "") -> Figure:
        values = [float(v) for v in (values if isinstance(values, (list, tuple)) else [values])]
        if not values:
            raise ValueError(f"figure {name!r} has no measured value")
        figure = Figure(name, unit, values, better, note)
        self.figures.append(figure)
        print(figure.line(), flush=True)
        return figure

    def finish(self, json_path: str | None = None) -> dict:
        after = load()
        print(
            f"load average before {self.load_before['1min']:.2f}, after {after['1min']:.2f} "
            f"(1 min, {after['cores']} cores)",
            flush=True,
        )
        record = {
            "bench": self.bench,
            "args": self.args,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self.started)),
            "seconds": time.time() - self.started,
            "machine": {"python": platform.python_version(), "platform": platform.platform()},
            "load_before": self.load_before,
            "load_after": after,
            "figures": [{**asdict(f), **f.summary} for f in self.figures],
        }
        target = json_path or (
            str(Path(os.environ["R3_BENCH_JSON"]) / f"{self.bench}.json")
            if os.environ.get("R3_BENCH_JSON")
            else None
        )
        if target:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            Path(target).write_text(json.dumps(record, indent=1, default=str))  # the args hold paths
        return record


#: Argparse types of the benchmarks' options, r3's own (a bad value is refused naming the option,
#: before anything runs): a count of passes, episodes, frames; seconds or a rate; a folder to write.
COUNT = integer(1)


def json_file(text: str) -> Path:
    """An argparse type: a JSON file to write, in a folder that is one or can be made one."""
    path = Path(text)
    if not text.strip() or path.is_dir():
        raise argparse.ArgumentTypeError(f"expected a file to write, got {text!r}")
    if problem := folder_problem(path.parent):
        raise argparse.ArgumentTypeError(problem)
    return path


def worker_counts(text: str) -> list[int]:
    """An argparse type: comma-separated worker counts, each >= 1 ("1,2")."""
    return [COUNT(item.strip()) for item in text.split(",")]


def parser(doc: str) -> argparse.ArgumentParser:
    """The arguments every benchmark takes (``--json``, ``--smoke``); scripts add their own."""
    p = argparse.ArgumentParser(
        description=doc.strip().split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--json", metavar="PATH", type=json_file, help="also write the figures to this JSON file")
    p.add_argument("--smoke", action="store_true", help="smallest sizes, to check the benchmark runs (CI)")
    return p
