"""Every benchmark runs at its smallest sizes and writes its figures (a smoke test, never a timed gate)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from r3.profiling import read_wakes

BENCH = Path(__file__).resolve().parents[2] / "bench"
SCRIPTS = sorted(BENCH.glob("bench_*.py"))


def _run(args: list[str], env: dict, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


def _check_record(record: dict, bench: str) -> None:
    assert record["bench"] == bench and record["args"]["smoke"] is True
    assert record["figures"], "a benchmark without figures"
    for key in ("load_before", "load_after"):
        assert set(record[key]) == {"1min", "5min", "15min", "cores"}
    for f in record["figures"]:
        assert f["n"] == len(f["values"]) >= 1 and f["better"] in ("lower", "higher"), f
        assert f["min"] <= f["median"] <= f["max"], f


def test_every_benchmark_is_covered():
    assert {s.stem for s in SCRIPTS} == {
        "bench_bags",
        "bench_data",
        "bench_decision_frames",
        "bench_episode",
        "bench_eval",
        "bench_graph",
        "bench_judge",
        "bench_language_table",
        "bench_packing",
        "bench_perception",
        "bench_turn_rewards",
    }


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_benchmark_smoke_writes_its_figures(script, tmp_path, private_ros_env):
    out = tmp_path / "record.json"
    extra = ["--out", str(tmp_path / "graph")] if script.stem == "bench_graph" else []
    # A domain of its own: a benchmark's graph never meets the graphs of the tests after it.
    run = _run([str(script), "--smoke", "--json", str(out), *extra], private_ros_env(), timeout=240)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "load average before" in run.stdout
    _check_record(json.loads(out.read_text()), script.stem.removeprefix("bench_"))


def test_run_all_merges_records_and_compare_reads_them(tmp_path):
    env = dict(os.environ)
    env.pop("R3_BENCH_JSON", None)
    for _ in range(2):
        run = _run([str(BENCH / "run_all.py"), "bags", "--smoke", "--out", str(tmp_path)], env, timeout=120)
        assert run.returncode == 0, run.stdout + run.stderr
    merged = sorted(tmp_path.glob("*.json"))
    assert len(merged) == 2, merged  # a second run within the same second gets a folder of its own
    data = json.loads(merged[-1].read_text())
    assert set(data["benches"]) == {"bags"} and data["smoke"] is True
    _check_record(data["benches"]["bags"], "bags")
    compared = _run([str(BENCH / "compare.py"), str(merged[0]), str(merged[-1])], env, timeout=30)
    assert compared.returncode == 0, compared.stderr
    names = [f["name"] for f in data["benches"]["bags"]["figures"]]
    assert all(f"bags: {name}"[:72] in compared.stdout for name in names)
    assert " MB/s, " in compared.stdout and " ms, " in compared.stdout


@pytest.mark.parametrize(
    "name, text, says",
    [
        ("run", None, "is a folder, not a run's JSON file (run_all.py's figures of that run are in"),
        ("absent.json", None, "No such file or directory"),
        ("text.json", "nope", "is not a benchmark run's JSON (JSONDecodeError"),
        ("other.json", '{"x": 1}', "is not a benchmark run's JSON (KeyError"),
        ("bare.json", '{"bench": "x", "figures": [{"name": "a"}]}', "figure 'a' lacks a median, min, max"),
        ("strings.json", '{"bench": "x", "figures": ["a"]}', "is not a benchmark run's JSON (TypeError"),
    ],
)
def test_compare_refuses_what_is_not_a_run_in_one_line(tmp_path, name, text, says):
    """bench/compare.py given run_all.py's folder of a run (beside its JSON file), or any other file,
    ended in a traceback."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run.json").write_text('{"benches": {}}')
    if text is not None:
        (tmp_path / name).write_text(text)
    compared = _run([str(BENCH / "compare.py"), str(tmp_path / name), str(tmp_path / "run.json")], {}, 30)
    assert compared.returncode == 2 and "Traceback" not in compared.stderr, compared.stderr
    assert f"compare.py: error: {tmp_path / name}" in compared.stderr and says in compared.stderr


@pytest.mark.parametrize(
    "script, argv, says",
    [
        ("bench_eval.py", ["--passes", "0"], "argument --passes: expected an integer >= 1, got 0"),
        ("bench_eval.py", ["--workers", "1,x"], "argument --workers: expected an integer >= 1, got 'x'"),
        (
            "bench_graph.py",
            ["--packing-episodes", "-1"],
            "argument --packing-episodes: expected an integer >= 0",
        ),
        (
            "bench_judge.py",
            ["--seconds", "nan"],
            "argument --seconds: expected a finite number > 0, got 'nan'",
        ),
        ("bench_bags.py", ["--json", "{tmp}"], "argument --json: expected a file to write"),
        ("profile_graph.py", ["--out", "{file}/x"], "argument --out: {file}/x: no folder can be made under"),
    ],
)
def test_a_benchmarks_bad_option_is_refused_before_it_runs(tmp_path, script, argv, says):
    """``--passes 0`` ended in "figure has no measured value" once the benchmark had run, ``--workers
    abc`` in a ValueError, ``--json`` into a file's path after the whole run."""
    file = tmp_path / "file"
    file.write_text("")
    argv = [a.format(tmp=tmp_path, file=file) for a in argv]
    done = _run([str(BENCH / script), *argv], dict(os.environ), timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert says.format(file=file) in done.stderr, done.stderr


def _bench_common():
    spec = importlib.util.spec_from_file_location("bench_common", BENCH / "common.py")
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _running(pid: int) -> bool:
    """``pid`` exists and is not a zombie waiting to be reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_killed_graph_benchmark_leaves_no_graph_behind(tmp_path, private_ros_env):
    """bench_graph.py killed while its graph ran (a caller's timeout sends SIGKILL) left the launcher
    and its nodes serving, and the next benchmark measured beside them."""
    process_tree = _bench_common().process_tree
    bench = subprocess.Popen(
        [sys.executable, str(BENCH / "bench_graph.py"), "--smoke", "--out", str(tmp_path / "graph")],
        env=private_ros_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    tree: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 180
        while not any("r3_sim_node" in command for command in tree.values()):
            assert time.monotonic() < deadline and bench.poll() is None, "the benchmark's graph never started"
            time.sleep(0.2)
            tree = process_tree(bench.pid)
        bench.kill()
        bench.wait()
        deadline = time.monotonic() + 30
        while any(_running(pid) for pid in tree) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [command for pid, command in tree.items() if _running(pid)]
    finally:
        bench.kill()
        for pid in tree:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


PROFILED = {
    "language_table": (
        {"r3_sim_node", "r3_lowlevel_node", "r3_reasoner_node", "r3_recorder_node"},
        "r3_sim_node",
        "/pusher/command",
    ),
    "packing": (
        {"r3_packing_sim_node", "r3_perception_node", "r3_reasoner_node", "r3_recorder_node"},
        "r3_packing_sim_node",
        "/r3/perception/objects",
    ),
}


@pytest.mark.parametrize("suite", sorted(PROFILED))
def test_profile_graph_writes_every_nodes_stacks(suite, tmp_path, private_ros_env):
    """bench/profile_graph.py: each node of the launched graph samples itself (r3.profiling) and
    writes its stacks; the summary names every node and the in-process side."""
    nodes, simulator, command_topic = PROFILED[suite]
    out = tmp_path / "profile"
    run = _run(
        [str(BENCH / "profile_graph.py"), "--suite", suite, "--episodes", "1", "--packing-steps", "1"]
        + ["--top", "3", "--out", str(out)],
        private_ros_env(),
        timeout=240,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    written = {p.name.rsplit("-", 1)[0] for p in (out / "stacks").glob("r3_*.txt")}
    assert written == nodes
    for raw in (out / "stacks").glob("*.txt"):
        assert sum(int(line.rpartition(" ")[2]) for line in raw.read_text().splitlines()) > 0, raw
    assert "all nodes:" in run.stdout and "in process:" in run.stdout
    # Each node also counted what woke its executor; the simulator wakes for what its motion waits on
    # (the pusher's commands; the perception node's objects).
    (sim_wakes,) = (out / "stacks").glob(f"{simulator}-*.wakes.tsv")
    assert command_topic in {source for source, _, _ in read_wakes(sim_wakes)}
    assert run.stdout.count("executor wake-ups:") == len(nodes)
