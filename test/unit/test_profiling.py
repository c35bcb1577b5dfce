"""r3.profiling: CPU time lands on the stack that used it, idle threads cost nothing, and a node's
recording follows its flag file."""

import threading
import time

import pytest

from r3.profiling import RECORDING_FLAG, StackSampler, WakeLedger, read_wakes, record_while_flagged


def busy_loop(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(range(2000))


def idle_wait(stop: threading.Event) -> None:
    stop.wait()


def cpu_by_function(collapsed: str) -> dict[str, float]:
    """Inclusive CPU seconds per function name."""
    out: dict[str, float] = {}
    for line in collapsed.splitlines():
        stack, _, us = line.rpartition(" ")
        for name in {frame.split(" (")[0] for frame in stack.split(";")}:
            out[name] = out.get(name, 0.0) + int(us) / 1e6
    return out


def run_threads(seconds: float) -> None:
    stop = threading.Event()
    threads = [threading.Thread(target=f, args=(stop,)) for f in (busy_loop, idle_wait)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()


def test_cpu_time_is_charged_to_the_busy_thread_not_the_idle_one():
    sampler = StackSampler(rate=200)
    sampler.start()
    run_threads(0.6)
    sampler.stop()
    cpu = cpu_by_function(sampler.collapsed())
    assert cpu.get("busy_loop", 0.0) > 0.1, cpu  # most of 0.6 s of one thread's CPU
    assert cpu.get("idle_wait", 0.0) < 0.2 * cpu["busy_loop"], cpu


def test_a_bad_rate_is_refused():
    with pytest.raises(ValueError, match="rate must be positive"):
        StackSampler(rate=0)


def test_a_node_records_while_the_flag_exists_and_writes_when_it_goes(tmp_path):
    stop = record_while_flagged(tmp_path, "probe")
    (tmp_path / RECORDING_FLAG).touch()
    time.sleep(0.2)  # the watcher has seen the flag
    run_threads(0.4)
    (tmp_path / RECORDING_FLAG).unlink()
    deadline = time.monotonic() + 5
    while not list(tmp_path.glob("probe-*.txt")) and time.monotonic() < deadline:
        time.sleep(0.05)
    (written,) = tmp_path.glob("probe-*.txt")
    assert cpu_by_function(written.read_text()).get("busy_loop", 0.0) > 0.05
    stop()
    assert "r3-profile-watch" not in {t.name for t in threading.enumerate()}


def test_a_node_stopped_while_the_flag_exists_writes_what_it_sampled(tmp_path):
    stop = record_while_flagged(tmp_path, "probe")
    (tmp_path / RECORDING_FLAG).touch()
    time.sleep(0.2)  # the watcher has seen the flag
    run_threads(0.4)
    stop()
    (written,) = tmp_path.glob("probe-*.txt")
    assert cpu_by_function(written.read_text()).get("busy_loop", 0.0) > 0.05


def test_wake_ups_are_counted_only_while_recording_and_written_beside_the_stacks(tmp_path):
    ledger = WakeLedger()
    ledger.record("/before", 0.001)  # not recording yet: left out
    stop = record_while_flagged(tmp_path, "probe", wakes=ledger)
    (tmp_path / RECORDING_FLAG).touch()
    deadline = time.monotonic() + 5
    while not ledger.recording and time.monotonic() < deadline:
        time.sleep(0.01)
    for _ in range(3):
        ledger.record("/pusher/command", 0.0005)
    ledger.record("timer 0.25 s", 0.002)
    (tmp_path / RECORDING_FLAG).unlink()
    while not list(tmp_path.glob("probe-*.wakes.tsv")) and time.monotonic() < deadline:
        time.sleep(0.05)
    (written,) = tmp_path.glob("probe-*.wakes.tsv")
    assert read_wakes(written) == [("/pusher/command", 3, 0.0015), ("timer 0.25 s", 1, 0.002)]
    ledger.record("/after", 0.001)  # stopped: left out
    assert "/after" not in ledger.wakes
    stop()
