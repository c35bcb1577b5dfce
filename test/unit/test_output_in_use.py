"""A second run of a resumable command on a folder another run is writing is refused before it writes
anything; a run killed at any moment leaves no lock behind. Found by starting `r3 collect` twice on one
--out: the second removed the first's episode in progress (`.partial`), and one of the two ended in a
FileNotFoundError traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from r3.data.cli import collect_main
from r3.data.collect import COLLECTION, PARTIAL
from r3.files import OUTPUT_MARK, FileRefused, mark_output
from r3.train.cli import TRAINING_RUN, train_main

COLLECT = ["--split", "T_R", "--scenes", "1", "--trials", "1", "--max-steps", "2", "--quiet"]
COLLECT += ["--width", "64", "--height", "48"]


@pytest.fixture
def running(tmp_path):
    """Starts a process that marks a folder as ``what`` (as a command does when it starts) and then
    stops itself, as a run frozen with SIGSTOP; killed at the end."""
    started = []

    def start(out: Path, what: str, mark: bool = True) -> subprocess.Popen:
        """``mark`` False: the folder is held without a mark, as an evaluation holds its folder."""
        code = (
            "import os, signal, sys\n"
            "from pathlib import Path\n"
            "from r3.files import hold_output, mark_output\n"
            + (
                "mark_output(sys.argv[1], sys.argv[2])\n"
                if mark
                else "Path(sys.argv[1]).mkdir(parents=True); hold_output(Path(sys.argv[1]), sys.argv[2])\n"
            )
            + "os.kill(os.getpid(), signal.SIGSTOP)\n"
        )
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        run = subprocess.Popen([sys.executable, "-c", code, str(out), what], env=env)
        started.append(run)
        os.waitpid(run.pid, os.WUNTRACED)  # returns once it has stopped, its mark held
        return run

    yield start
    for run in started:
        run.kill()
        run.wait()


def test_a_second_collect_on_a_folder_in_use_is_refused(tmp_path, running, capsys):
    out = tmp_path / "bags"
    first = running(out, COLLECTION)
    (out / PARTIAL / "episode").mkdir(parents=True)  # the first run's episode in progress
    with pytest.raises(SystemExit) as exited:
        collect_main([*COLLECT, "--out", str(out)])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "is in use: another running command is writing episode collection there" in err
    assert "Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == sorted([OUTPUT_MARK, PARTIAL])
    assert (out / PARTIAL / "episode").is_dir()

    first.send_signal(signal.SIGKILL)  # killed while frozen: its lock goes with it
    first.wait()
    assert collect_main([*COLLECT, "--out", str(out)]) == 0
    assert "3 planned, 0 already done" in capsys.readouterr().out


def test_a_second_training_run_on_its_output_dir_is_refused(tmp_path, running, capsys, monkeypatch):
    import r3.train.cli

    out = tmp_path / "run"
    running(out, TRAINING_RUN)
    monkeypatch.setattr(r3.train.cli, "_preflight", lambda job, cfg: None)  # no model or dataset here
    monkeypatch.setattr(r3.train.cli, "_prepared", lambda job, cfg: ())
    monkeypatch.setattr(r3.train.cli, "_train", lambda *_: pytest.fail("trained into a folder in use"))
    argv = ["sft", "--config", "config/train/sft_tiny_cpu.yaml", "--set", f"output_dir={out}"]
    assert train_main(argv) == 2
    err = capsys.readouterr().err
    assert "is in use: another running command is writing training run there" in err
    assert sorted(p.name for p in out.iterdir()) == [OUTPUT_MARK]


def test_the_same_process_marks_its_folder_again_and_a_mark_is_held_once(tmp_path, running):
    out = tmp_path / "collection"
    assert mark_output(out, COLLECTION) == out
    assert mark_output(out, COLLECTION) == out  # a run that marks its folder twice is not refused
    assert json.loads((out / OUTPUT_MARK).read_text()) == {"what": COLLECTION}
    other = tmp_path / "other"
    running(other, COLLECTION)
    with pytest.raises(FileRefused, match="is in use"):
        mark_output(other, COLLECTION)
    assert mark_output(other, COLLECTION, hold=False) == other  # a training run's second process


def test_a_second_evaluation_on_a_folder_in_use_is_refused(tmp_path, running, capsys):
    """Found by the crash sweep: two `r3 eval run` on one --out each ran every episode and wrote it into
    one episodes.jsonl (safe, but twice the work, and a resume mended the other run's last line)."""
    from r3.cli import main as r3_main
    from r3.eval.runner import EPISODES_FILE

    out = tmp_path / "eval"
    argv = ["eval", "--tasks", "V", "--scenes", "1", "--trials", "1", "--max-steps", "1", "--out", str(out)]
    first = running(out, "an evaluation", mark=False)
    assert r3_main(argv) == 2
    err = capsys.readouterr().err
    assert "is in use: another running command is writing an evaluation there" in err
    assert "Traceback" not in err and list(out.iterdir()) == []
    first.send_signal(signal.SIGKILL)  # killed while frozen: its lock goes with it
    first.wait()
    assert r3_main(argv) == 0
    assert len((out / EPISODES_FILE).read_text().splitlines()) == 1
