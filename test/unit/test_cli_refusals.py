"""Hostile command lines are refused with one line that says why (exit status 2, no traceback), and
refused before anything is written, moved or removed. Each case was found by trying the commands as
an outsider would: before these fixes, ``--overwrite`` with an empty or overlapping ``--out``
deleted the current folder's files or the input bags, ``r3 train export`` overwrote the base model,
empty values silently meant the defaults, and the rest ended in Python tracebacks."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import numpy as np
import pytest

from r3.data.build import DATASET_ENTRIES, build_dataset, find_bags
from r3.data.cli import bag_main, collect_main, dataset_main
from r3.eval.cli import eval_main
from r3.files import OUTPUT_MARK, FileRefused, bounded_repr, folder_problem, path_problem, replaced_output
from r3.graph.cli import launch_main
from r3.mini import mini_main
from r3.reasoning.cli import tiny_model_main
from r3.rewards.cli import judge_main
from r3.sim.cli import demo_main as sim_demo_main
from r3.sim.packing.cli import demo_main as packing_demo_main
from r3.train.cli import train_main
from r3.workers import LOCAL_WORKERS_PER_CPU
from r3_ros.run_cli import main as run_main

TOO_MANY_WORKERS = str(LOCAL_WORKERS_PER_CPU * (os.cpu_count() or 1) + 1)


def refused(main, argv, capsys, says: str) -> str:
    """Runs ``main(argv)``; asserts exit status 2 (returned or argparse's) and that the error names
    ``says``, without a traceback. Returns stderr."""
    try:
        status = main(argv)
    except SystemExit as exited:
        status = exited.code
    err = capsys.readouterr().err
    assert status == 2, err
    assert says in err and "Traceback" not in err, err
    return err


def test_overwrite_never_empties_the_current_folder(tmp_path, monkeypatch, capsys):
    (tmp_path / "bags").mkdir()
    (tmp_path / "keep.txt").write_text("mine")
    monkeypatch.chdir(tmp_path)
    for argv in (
        ["build", "bags", "--kind", "sft", "--out", "", "--overwrite"],
        ["export-lerobot", "bags", "--out", "", "--overwrite"],
    ):
        refused(dataset_main, argv, capsys, "argument --out: expected a folder, got an empty path")
    for out in (".", tmp_path, "/"):
        with pytest.raises(FileRefused), replaced_output(out, ["data"], overwrite=True, what="dataset"):
            pass
    assert (tmp_path / "keep.txt").read_text() == "mine"


@pytest.fixture
def fake_bags(tmp_path):
    """Two folders that look like bags by name (replace_output reads names, nothing else)."""
    root = tmp_path / "bags"
    for name in ("L-1", "L-2"):
        (root / name).mkdir(parents=True)
        (root / name / "metadata.yaml").write_text("rosbag2_bagfile_information: {}\n")
        (root / name / "L-1_0.mcap").write_bytes(b"not really")
    return root


@pytest.mark.parametrize(
    "argv",
    [
        ["build", "{bags}", "--kind", "sft", "--out", "{bags}", "--overwrite"],
        ["build", "{bags}/L-1", "--kind", "sft", "--out", "{bags}", "--overwrite"],
        ["build", "{bags}", "--kind", "sft", "--out", "{bags}/L-2", "--overwrite"],
        ["build", "{bags}/L-1", "--kind", "sft", "--out", "{parent}", "--overwrite"],
        ["export-lerobot", "{bags}", "--out", "{bags}", "--overwrite"],
    ],
)
def test_overwrite_never_removes_the_inputs(fake_bags, argv, capsys):
    before = sorted(str(p) for p in fake_bags.rglob("*"))
    argv = [a.format(bags=fake_bags, parent=fake_bags.parent) for a in argv]
    refused(dataset_main, argv, capsys, "does not write: not replacing it")
    assert sorted(str(p) for p in fake_bags.rglob("*")) == before


def test_overwrite_replaces_an_earlier_output_of_the_same_command(tmp_path):
    out = tmp_path / "ds"
    writes = ["data", "images", "r3_dataset.json"]
    with replaced_output(out, writes, overwrite=False, what="dataset") as folder:
        (folder / "images" / "e").mkdir(parents=True)
        (folder / "r3_dataset.json").write_text("{}")
    assert sorted(p.name for p in out.iterdir()) == sorted([OUTPUT_MARK, "images", "r3_dataset.json"])
    with (
        pytest.raises(FileExistsError, match="pass --overwrite"),
        replaced_output(out, writes, overwrite=False, what="dataset"),
    ):
        pass
    with replaced_output(out, writes, overwrite=True, what="dataset") as folder:
        assert folder != out and sorted(p.name for p in out.iterdir()) == [
            OUTPUT_MARK,
            "images",
            "r3_dataset.json",
        ]
        (folder / "data").mkdir()
        (folder / "data" / "new").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == [OUTPUT_MARK, "data"]
    assert (out / "data" / "new").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]  # nothing left beside it


def _mark(out: Path, what: str) -> None:
    """``out`` as r3 leaves an earlier ``what``: torn by a crash or whole, it has the mark."""
    out.mkdir(parents=True, exist_ok=True)
    (out / OUTPUT_MARK).write_text(json.dumps({"what": what}))


@pytest.mark.parametrize(
    "argv, holds",
    [
        (["build", "{bags}", "--kind", "sft"], {"data/mine.csv": "a user's", "images/cat.png": "own"}),
        (["build", "{bags}", "--kind", "sft"], {"data/mine.csv": "a user's", "r3_dataset.json": "{}"}),
        (
            ["build", "{bags}", "--kind", "sft"],
            {"data/mine.csv": "a user's", OUTPUT_MARK: '{"what": "LeRobot dataset"}'},
        ),
        (["export-lerobot", "{bags}"], {"data/mine.csv": "a user's", "meta/notes.txt": "own"}),
        (["export-lerobot", "{bags}"], {"meta/info.json": '"codebase_version"'}),
    ],
)
def test_overwrite_replaces_only_what_r3_wrote_there(fake_bags, tmp_path, argv, holds, capsys):
    """Found by a hostile user: ``--overwrite`` judged a folder by its entries' names, so a user's
    own ``data/`` and ``images/`` (or ``data/`` beside a hand-written ``r3_dataset.json``) were
    deleted and replaced by a dataset. Only a folder r3 marked as that output, or one whose index
    file says it is one (written before the mark), is replaced."""
    out = tmp_path / "mine"
    for name, text in holds.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    before = _files(out)
    argv = [a.format(bags=fake_bags) for a in argv]
    refused(dataset_main, [*argv, "--out", str(out), "--overwrite"], capsys, "that r3 wrote")
    assert _files(out) == before


@pytest.mark.parametrize(
    "argv, index, says",
    [
        (
            ["build", "{bags}", "--kind", "sft"],
            {"r3_dataset.json": '{"kind": "sft"}'},
            "no sft rows in 2 sources",
        ),
        (
            ["export-lerobot", "{bags}"],
            {"meta/info.json": '{"codebase_version": "v3.0"}'},
            "no readable episodes",
        ),
    ],
)
def test_overwrite_takes_an_output_written_before_there_were_marks(
    fake_bags, tmp_path, argv, index, says, capsys
):
    """An output of an r3 that left no mark is still taken for one by its index file: the command
    goes on to read its sources (which fail here, so the earlier output stays)."""
    out = tmp_path / "old"
    for name, text in {**index, "data/stale": "the earlier rows"}.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    argv = [a.format(bags=fake_bags) for a in argv]
    refused(dataset_main, [*argv, "--out", str(out), "--overwrite"], capsys, says)
    assert (out / "data" / "stale").read_text() == "the earlier rows"


def test_a_staging_folder_whose_process_is_gone_is_removed_by_the_next_run(tmp_path):
    """Found by a hostile user: `r3 dataset build` killed mid-write left `.ds.partial-...` (as large as
    the dataset) beside its output, and no later run took it away. A live process's stays."""
    import subprocess
    import sys

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    abandoned = tmp_path / f".ds.partial-{gone.stdout.strip()}-abc123"
    running = tmp_path / f".ds.partial-{os.getpid()}-def456"
    other = tmp_path / f".other.partial-{gone.stdout.strip()}-abc123"
    for folder in (abandoned, running, other):
        (folder / "data").mkdir(parents=True)
    with replaced_output(tmp_path / "ds", ("data",), overwrite=False, what="dataset") as staging:
        (staging / "data").mkdir()
    assert not abandoned.exists() and running.is_dir() and other.is_dir()
    assert (tmp_path / "ds" / "data").is_dir()


def _files(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "argv, writes, says",
    [
        (["build", "{bags}", "--kind", "sft"], DATASET_ENTRIES, "no sft rows in 2 sources (L-1: "),
        (["export-lerobot", "{bags}"], ("meta", "data", "videos"), "no readable episodes to export"),
    ],
)
def test_a_failed_overwrite_keeps_the_earlier_output(fake_bags, tmp_path, argv, writes, says, capsys):
    """Found by a hostile try: ``--overwrite`` removed the earlier output before reading a source,
    so sources that all failed to read replaced a good dataset with one of 0 rows (the LeRobot
    export: with nothing)."""
    out = tmp_path / "out"
    _mark(out, "dataset" if argv[0] == "build" else "LeRobot dataset")
    for name in writes[:2]:
        (out / name).mkdir(parents=True)
        (out / name / "earlier").write_text("the earlier output")
    before = _files(out)
    argv = [a.format(bags=fake_bags) for a in argv]
    refused(dataset_main, [*argv, "--out", str(out), "--overwrite"], capsys, says)
    assert _files(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bags", "out"]  # no staging folder left


def test_an_export_of_a_folder_without_bags_says_so(tmp_path, capsys):
    """Found by a hostile user: the reason was empty ("no readable episodes to export: ")."""
    (tmp_path / "empty").mkdir()
    argv = ["export-lerobot", str(tmp_path / "empty"), "--out", str(tmp_path / "out")]
    refused(dataset_main, argv, capsys, "no readable episodes to export: no episode bags in the sources")


def test_an_interrupted_build_keeps_the_earlier_output(fake_bags, tmp_path, monkeypatch):
    """Ctrl-C (or a full disk) in the middle of a build leaves the earlier dataset as it was."""
    import r3.data.build

    out = tmp_path / "out"
    _mark(out, "dataset")
    (out / "data").mkdir(parents=True)
    (out / "data" / "earlier").write_text("the earlier output")

    def interrupted(bag):
        raise KeyboardInterrupt

    monkeypatch.setattr(r3.data.build, "read_episode", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_dataset(find_bags([fake_bags]), out, "sft", overwrite=True)
    assert _files(out) == {"data/earlier": b"the earlier output", OUTPUT_MARK: b'{"what": "dataset"}'}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bags", "out"]


def test_judge_refuses_an_input_its_backend_would_ignore(tmp_path, capsys):
    """Found by a hostile try: ``--image`` with the rule backend (and ``--snapshot`` with the VLM
    backend) was read and ignored, so the verdict looked as if it had seen the scene."""
    image = tmp_path / "scene.png"
    image.write_bytes(b"png")
    pair = ["--candidate", "push the red moon left", "--reference", "push the red moon left"]
    refused(judge_main, [*pair, "--image", str(image)], capsys, "--image is for --backend vlm")
    refused(
        judge_main,
        [*pair, "--backend", "vlm", "--vlm-model", "m", "--snapshot", str(image)],
        capsys,
        "--snapshot is for the rule backend",
    )


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(
    "argv, image, says",
    [
        (
            ["--suite", "packing", "--reference", "fly to mars"],
            None,
            "reference 'fly to mars' does not parse",
        ),
        (["--backend", "vlm", "--reference", "fly to mars"], None, "reference 'fly to mars' does not parse"),
        (["--backend", "vlm", "--reference", "push the red moon left"], b"png", "not a readable PNG or JPEG"),
        (
            ["--backend", "vlm", "--reference", "push the red moon left"],
            b"\x89PNG\r\n\x1a\n" + bytes(40),
            "PNG or JPEG",
        ),
        (
            ["--backend", "vlm", "--reference", "push the red moon left"],
            "GIF",
            "the image is GIF, not PNG or JPEG",
        ),
    ],
)
def test_judge_refuses_a_reference_or_image_no_verdict_could_be_given_for(
    argv, image, says, tmp_path, capsys
):
    """Found by a hostile user: ``r3 judge --suite packing`` scored against a reference outside the
    grammar (the Language Table one refused it), the VLM backend sent such a reference to the
    server, and ``--image`` bytes went to the server as a JPEG whatever they were. Each is refused
    before any server is asked (the URL here answers nothing; asking it would exit 1, not 2)."""
    if image is not None:
        path = tmp_path / "scene.png"
        if image == "GIF":
            from PIL import Image

            Image.new("RGB", (4, 4)).save(path, format="GIF")
        else:
            path.write_bytes(image)
        argv = [*argv, "--image", str(path)]
    server = ["--vlm-model", "m", "--vlm-url", f"http://127.0.0.1:{_closed_port()}/v1"]
    refused(judge_main, ["--candidate", "push the red moon left", *argv, *server], capsys, says)


def test_export_never_writes_over_the_base_or_the_adapter(tmp_path, capsys):
    base, adapter = tmp_path / "base", tmp_path / "adapter"
    base.mkdir()
    adapter.mkdir()
    (base / "config.json").write_text("{}")
    (adapter / "adapter_config.json").write_text("{}")
    common = ["export", "--adapter", str(adapter), "--base", str(base)]
    for out in (base, adapter):
        refused(train_main, [*common, "--out", str(out)], capsys, "is not an empty folder")
    refused(
        train_main, [*common[:2], str(base), *common[3:], "--out", str(tmp_path / "m")], capsys, "adapter"
    )
    assert sorted(p.name for p in base.iterdir()) == ["config.json"]


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--tasks", ""], "unknown or none given"),
        (["--tasks", "V,V"], "tasks ['V'] named more than once"),
        (["--scenes", str(10**30)], "scenes must be in 1..100000"),
        (["--trials", "1001"], "trials must be in 1..1000"),
        (["--max-steps", str(10**12)], "max_steps must be in 1..4294967295"),  # RunTask's, for --via-ros
        (["--reasoner", ""], "argument --reasoner: expected a value, got an empty one"),
        (["--reasoner", "transformers:/nonexistent/model"], "model directory not found"),
        (
            ["--reasoner", "transformers:m\x1b[2Jx"],
            "model directory 'm\\x1b[2Jx' holds the control character",
        ),
        (["--reasoner", "transformers:" + "y/" * 2500], "bytes long (made absolute); at most 4,095"),
        (["--reasoner", "replay:a\nb"], "replay source 'a\\nb' holds the control character U+000A at 1"),
        (["--reasoner", "replay:" + "y/" * 2500], "bytes long (made absolute); at most 4,095"),
        (["--reasoner", "replay:no/such/answers.jsonl"], "replay source not found: no/such/answers.jsonl"),
        (["--workers", TOO_MANY_WORKERS], "local worker processes"),
        (["--ray", "bogus", "--workers", "2"], "Ray address 'bogus'"),
    ],
)
def test_eval_refuses_before_writing_anything(argv, says, tmp_path, capsys):
    out = tmp_path / "eval"
    refused(eval_main, ["run", "--tasks", "V", "--scenes", "1", *argv, "--out", str(out)], capsys, says)
    assert not out.exists()


def test_eval_compare_refuses_foreign_folders(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, suite, task in ((a, "language_table", "V"), (b, "packing", "4")):
        folder.mkdir()
        (folder / "config.json").write_text(
            json.dumps({"reasoner": "expert", "suite": suite, "tasks": [task]})
        )
        (folder / "episodes.jsonl").write_text('{"task": "V"}\n')  # a line that is no record
    refused(eval_main, ["compare", str(a), str(b), "--names", "X"], capsys, "expected two names A,B")
    # Found by a hostile user: each of these broke the Markdown table or was read as "A" and "B,C".
    refused(eval_main, ["compare", str(a), str(b), "--names", "A,B,C"], capsys, "expected two names A,B")
    for names in ("a|b,c", "a\nb,c"):
        refused(
            eval_main, ["compare", str(a), str(b), "--names", names], capsys, "a '|' or a control character"
        )
    refused(eval_main, ["compare", str(a), str(b)], capsys, "A evaluates language_table, B packing")
    (b / "config.json").write_text("[1, 2]")
    refused(eval_main, ["compare", str(a), str(b)], capsys, "is not an evaluation's config")
    (b / "config.json").write_bytes(b"\xff\xfe")
    refused(eval_main, ["compare", str(a), str(b)], capsys, "does not read as an evaluation's config")


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--split", ""], "argument --split: expected a value"),
        (["--backend", ""], "argument --backend: expected a value"),
        (["--backend", "transformers:/nonexistent/model"], "model directory not found"),
        (
            ["--backend", "transformers:m\nx"],
            "model directory 'm\\nx' holds the control character U+000A at 1",
        ),
        (["--backend", "transformers:" + "y" * 300], "the name 'yyy"),
        (["--workers", TOO_MANY_WORKERS], "local worker processes"),
        (["--ray", "bogus"], "Ray address 'bogus'"),
        (["--height", "100000"], "CollectConfig.height must be in [16, 4096]"),
        (["--max-steps", str(10**12)], "CollectConfig.max_steps must be in [1, 4294967295]"),  # RunTask's
        (["--steps-per-instruction", str(2**32)], "CollectConfig.steps_per_instruction must be in [1, "),
        # No upper bound took --frame-every 10^22, which r3 sim demo refuses.
        (["--frame-every", str(10**22)], "CollectConfig.frame_every must be in [0, 4294967295]"),
        (["--frame-every", "-1"], "CollectConfig.frame_every must be in [0, 4294967295]"),
        (["--out", ""], "argument --out: expected a folder"),
    ],
)
def test_collect_refuses_before_collecting(argv, says, tmp_path, capsys):
    out = tmp_path / "bags"
    refused(collect_main, ["--scenes", "1", "--out", str(out), *argv], capsys, says)
    assert not out.exists()


#: Every command with an output folder (``--out``), with the other options it needs.
OUTPUT_COMMANDS = [
    (collect_main, ["--scenes", "1"]),
    (dataset_main, ["build", "--kind", "sft", "bags"]),
    (dataset_main, ["export-lerobot", "bags"]),
    (eval_main, ["--scenes", "1"]),
    (eval_main, ["compare", "a", "b"]),
    (mini_main, ["--quick"]),
    (tiny_model_main, []),
    (sim_demo_main, []),
    (packing_demo_main, []),
    (train_main, ["export", "--adapter", "a", "--base", "b"]),
]


@pytest.mark.parametrize(
    "main, argv",
    OUTPUT_COMMANDS,
    ids=[f"{m.__module__}.{m.__name__} {' '.join(a)}" for m, a in OUTPUT_COMMANDS],
)
@pytest.mark.parametrize("under", ["a file", "beneath a file", "/proc"])
def test_an_output_folder_that_cannot_be_made_is_refused_before_any_work(tmp_path, capsys, main, argv, under):
    """``--out`` naming a file, or a path beneath one, ended ``r3 sim demo``, ``r3 packing demo``,
    ``r3 eval`` and ``r3 mini`` in a traceback (NotADirectoryError, FileExistsError), some of them only
    once the episode had run; one under /proc (which root may "write") ended five commands in one."""
    file = tmp_path / "mine"
    file.write_text("mine")
    out, says = {
        "a file": (file, "is a file, not a folder"),
        "beneath a file": (file / "x", "a file"),
        "/proc": (Path("/proc/r3-out"), "/proc is on a read-only or virtual filesystem"),
    }[under]
    refused(main, [*argv, "--out", str(out)], capsys, says)
    assert file.read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


def test_a_folder_to_write_is_one_or_can_be_made_one(tmp_path):
    """The rule ``--out`` and ``r3 train``'s ``output_dir`` share (``r3.cli_args.folder_problem``)."""
    (tmp_path / "file").write_text("")
    assert folder_problem(tmp_path) is None
    assert folder_problem(tmp_path / "new" / "deeper") is None
    assert folder_problem(tmp_path / "file") == f"{tmp_path / 'file'} is a file, not a folder"
    assert folder_problem(tmp_path / "file" / "x" / "y").endswith(f"under {tmp_path / 'file'}, a file")
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    assert (
        folder_problem(tmp_path / "link")
        == f"{tmp_path / 'link'} is a link to {tmp_path / 'gone'}, which does not exist"
    )


#: Paths no command may be handed, with what the refusal says of each: control characters (newline,
#: tab, carriage return, ESC, NEL, the line separator), an invisible format character, a byte that is
#: not UTF-8 (Python hands it over as a lone surrogate), and names and paths longer than Linux takes.
BAD_PATHS = {
    "newline": ("runs/a\nb", "holds the control character U+000A at 6"),
    "tab": ("runs/a\tb", "holds the control character U+0009 at 6"),
    "carriage return": ("runs/a\rb", "holds the control character U+000D at 6"),
    "escape": ("runs/a\x1b[31mb", "holds the control character U+001B at 6"),
    "next line": ("runs/a\x85b", "holds the control character U+0085 at 6"),
    "line separator": ("runs/a\u2028b", "holds the control character U+2028 at 6"),
    "zero-width space": ("runs/a\u200bb", "holds the control character U+200B at 6"),
    "not UTF-8": ("runs/a\udcffb", "holds a byte that is not UTF-8 (U+DCFF) at 6"),
    "a 300-byte name": ("runs/" + "x" * 300, "is 300 bytes long; at most"),
    "a 5,000-byte path": ("/".join(["y" * 200] * 25), "bytes long (made absolute); at most"),
}


@pytest.mark.parametrize("bad", BAD_PATHS)
def test_a_path_with_a_control_character_or_too_long_for_linux_is_no_path(bad):
    """The rule every command's paths share (``r3.files.path_problem``), the first offender named as
    U+XXXX with its position; an output folder's own name leaves room for its staging folder's."""
    path, says = BAD_PATHS[bad]
    assert says in path_problem(path) and says in folder_problem(path)
    assert "\x1b" not in path_problem(path) and "\n" not in path_problem(path)  # shown escaped
    assert path_problem("runs/a b/é") is None and path_problem("n" * 255) is None
    assert "is 230 bytes long; at most 215" in folder_problem("n" * 230)


#: Every command with an output folder and the other options it needs, ``r3 run`` among them.
OUT_COMMANDS = [*OUTPUT_COMMANDS, (run_main, [])]


@pytest.mark.parametrize(
    "main, argv", OUT_COMMANDS, ids=[f"{m.__module__}.{m.__name__} {' '.join(a)}" for m, a in OUT_COMMANDS]
)
@pytest.mark.parametrize("bad", [*BAD_PATHS, "a 230-byte name"])
def test_an_output_path_with_a_control_character_or_too_long_is_refused_before_any_work(
    main, argv, bad, tmp_path, monkeypatch, capsys
):
    """Found by trying each command's --out: a newline, tab, carriage return, ESC, NEL or line
    separator was taken, the folder made and written, and the last line (r3 collect's "-> OUT", r3
    eval's "written: OUT/table.md") printed split in two or obeyed as a terminal escape; a byte that is
    not UTF-8 ended r3 model tiny in a traceback; a 230-byte name ended r3 model tiny and r3 sim demo
    in OSError "File name too long" (their staging folder's name is longer), after the episode ran."""
    out, says = BAD_PATHS.get(bad, ("n" * 230, "is 230 bytes long; at most 215"))
    monkeypatch.chdir(tmp_path)
    err = refused(main, [*argv, "--out", out], capsys, f"argument --out: {bounded_repr(out)}")
    assert says in err.splitlines()[-1], err  # one line, the path in it escaped
    assert list(tmp_path.iterdir()) == []


#: Every command's paths to read (and ``r3 launch``'s log folder, ``r3 dataset stats``'s plot), each
#: given ``{path}``, with the name its refusal gives the option.
INPUT_PATHS = [
    (dataset_main, ["build", "{path}", "--kind", "sft", "--out", "o"], "argument bags"),
    (dataset_main, ["export-lerobot", "{path}", "--out", "o"], "argument bags"),
    (dataset_main, ["stats", "{path}"], "argument dir"),
    (dataset_main, ["stats", "d", "--plot", "{path}"], "argument --plot"),
    (bag_main, ["repair", "{path}"], "argument bags"),
    (eval_main, ["compare", "{path}", "b"], "argument a"),
    (mini_main, ["--config", "{path}", "--out", "o"], "argument --config"),
    (train_main, ["sft", "--config", "{path}"], "argument --config"),
    (train_main, ["export", "--adapter", "{path}", "--base", "b", "--out", "o"], "argument --adapter"),
    (train_main, ["export", "--adapter", "a", "--base", "{path}", "--out", "o"], "argument --base"),
    (judge_main, ["--candidate", "x", "--reference", "x", "--snapshot", "{path}"], "argument --snapshot"),
    (launch_main, ["--check", "--graph", "{path}"], "argument --graph"),
    (launch_main, ["--check", "--logs", "{path}"], "argument --logs"),
    (run_main, ["--graph", "{path}"], "argument --graph"),
]


@pytest.mark.parametrize(
    "main, argv, option",
    INPUT_PATHS,
    ids=[f"{m.__module__}.{m.__name__} {' '.join(a)}" for m, a, _ in INPUT_PATHS],
)
@pytest.mark.parametrize("bad", ["escape", "newline", "not UTF-8", "a 300-byte name", "a 5,000-byte path"])
def test_a_path_to_read_with_a_control_character_or_too_long_is_refused(
    main, argv, option, bad, tmp_path, monkeypatch, capsys
):
    """Found by trying each command's input paths: one holding ESC was printed raw in the command's
    "not found" line, a newline split it, and a name past 255 bytes ended r3 judge --snapshot in an
    OSError traceback ("File name too long") from argparse."""
    path, says = BAD_PATHS[bad]
    monkeypatch.chdir(tmp_path)
    err = refused(main, [a.replace("{path}", path) for a in argv], capsys, f"{option}: ")
    assert says in err.splitlines()[-1], err
    assert list(tmp_path.iterdir()) == []


def test_train_refuses_an_output_dir_with_a_control_character_as_the_command_line_does(tmp_path, capsys):
    """``output_dir`` is checked by the rule ``--out`` is (a config's text values already refused ESC,
    but a newline or tab in a path was taken)."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    config = tmp_path / "sft.yaml"
    config.write_text(f'model: {model}\ndataset: {tmp_path / "data"}\noutput_dir: "{tmp_path}/run\\tx"\n')
    refused(train_main, ["sft", "--config", str(config), "--check"], capsys, "output_dir: ")
    assert "holds the control character U+0009" in refused(
        train_main, ["sft", "--config", str(config)], capsys, "output_dir: "
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "sft.yaml"]


def test_collect_refuses_a_file_for_its_folder(tmp_path, capsys):
    file = tmp_path / "bags"
    file.write_text("mine")
    refused(collect_main, ["--scenes", "1", "--out", str(file)], capsys, "is a file, not a folder")
    assert file.read_text() == "mine"


@pytest.mark.parametrize(
    "out, holds, says",
    [
        (".", {}, "refusing to write episode collection into the current folder"),
        ("/", None, "refusing to write episode collection into /"),
        ("mine", {"notes.txt": "a user's"}, "holds notes.txt (no episode collection that r3 wrote"),
        (
            "export",
            {"data/chunk-000/episode_000000.parquet": "rows", OUTPUT_MARK: '{"what": "LeRobot dataset"}'},
            "holds data (r3 marked it as 'LeRobot dataset')",
        ),
        ("graph", {"run_0/metadata.yaml": "a bag", "run_0/run_0.mcap": "of the graph"}, "holds run_0 (no"),
    ],
    ids=["current folder", "root", "a user's folder", "a LeRobot export", "a graph's bags"],
)
def test_collect_writes_only_into_a_new_or_empty_folder_or_its_own_collection(
    out, holds, says, tmp_path, capsys, monkeypatch
):
    """Found by a hostile user: `r3 collect --out /` wrote 6 bags and r3_collection.json into the
    filesystem root, `--out .` into the current folder, and any other --out took bags beside what it
    held. The rule `r3 sim demo` and `r3 dataset export-lerobot` follow, for a resumable output."""
    import r3.data.collect

    argv = ["--split", "T_R", "--scenes", "1", "--trials", "1", "--max-steps", "2", "--quiet"]
    argv += ["--width", "64", "--height", "48"]
    monkeypatch.chdir(tmp_path)
    if holds is None:  # nothing may be written into /, even by a run of this test without the check
        monkeypatch.setattr(r3.data.collect, "claim_folder", lambda *a: pytest.fail(f"collected into {out}"))
    for name, text in (holds or {}).items():
        (tmp_path / out / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / out / name).write_text(text)
    before = _files(tmp_path), sorted(tmp_path.rglob("*"))
    refused(collect_main, [*argv, "--out", out], capsys, says)
    assert (_files(tmp_path), sorted(tmp_path.rglob("*"))) == before


def test_collect_goes_on_in_its_own_earlier_collection(tmp_path, capsys):
    """An empty folder, the collection a run made, and one from before collections were marked (its
    r3_collection.json) are written into; a resumed run skips what they hold."""
    argv = ["--split", "T_R", "--scenes", "1", "--trials", "1", "--max-steps", "2", "--quiet"]
    argv += ["--width", "64", "--height", "48", "--out", str(tmp_path / "bags")]
    (tmp_path / "bags").mkdir()
    assert collect_main(argv) == 0
    assert "3 planned, 0 already done" in capsys.readouterr().out
    assert collect_main(argv) == 0
    assert "3 planned, 3 already done" in capsys.readouterr().out
    (tmp_path / "bags" / OUTPUT_MARK).unlink()
    assert collect_main(argv) == 0
    assert "3 planned, 3 already done" in capsys.readouterr().out


@pytest.mark.parametrize(
    "run_file, says",
    [
        (None, "no adapter_model.safetensors (the adapter's weights)"),
        ('{"mode": "reason", "history": "bogus", "temperature": 2}', "not valid prompt settings"),
        ("link", "r3_prompt.json is not a regular file"),
        ("[1]", "r3_prompt.json is not a JSON object"),
    ],
    ids=["no weights", "invalid prompt settings", "a symlink", "no object"],
)
def test_export_refuses_an_adapter_whose_weights_or_run_files_are_not_what_it_copies(
    run_file, says, tmp_path, capsys
):
    """Found by a hostile user: `r3 train export` copied an r3_prompt.json the exported checkpoint
    then could not load, copied a symlinked r3_prompt.json's target (/etc/shadow) into the export, and
    without the adapter's weights peft asked the network ("Name or service not known")."""
    base, adapter = tmp_path / "base", tmp_path / "adapter"
    base.mkdir()
    adapter.mkdir()
    (base / "config.json").write_text("{}")
    (adapter / "adapter_config.json").write_text('{"r": 8}')
    if run_file is not None:
        (adapter / "adapter_model.safetensors").write_bytes(b"")
        if run_file == "link":
            (tmp_path / "secret").write_text("root:secret:19000::::::\n")
            (adapter / "r3_prompt.json").symlink_to(tmp_path / "secret")
        else:
            (adapter / "r3_prompt.json").write_text(run_file)
    out = tmp_path / "merged"
    argv = ["export", "--adapter", str(adapter), "--base", str(base), "--out", str(out)]
    assert "secret" not in refused(train_main, argv, capsys, says)
    assert not out.exists()


@pytest.mark.parametrize("broken", ["adapter", "base"])
def test_export_of_an_adapter_or_base_that_does_not_load_is_one_line(broken, tmp_path, capsys):
    """Found by a hostile user: an adapter_config.json that is no JSON ended `r3 train export` in a
    JSONDecodeError traceback, a base folder with an empty config in transformers' ValueError."""
    base, adapter = tmp_path / "base", tmp_path / "adapter"
    base.mkdir()
    adapter.mkdir()
    (base / "config.json").write_text("{}")
    (adapter / "adapter_config.json").write_text("{garbage" if broken == "adapter" else '{"r": 8}')
    (adapter / "adapter_model.safetensors").write_bytes(b"")
    out = tmp_path / "merged"
    says = "does not read as JSON" if broken == "adapter" else "model: cannot load"
    refused(
        train_main,
        ["export", "--adapter", str(adapter), "--base", str(base), "--out", str(out)],
        capsys,
        says,
    )
    assert not out.exists()


@pytest.mark.parametrize(
    "text, says",
    [
        ("model: [unclosed\n  : :", "is not a YAML file"),
        ("learning_rate: .inf\n", "learning_rate='.inf': expected int or float"),
        ("epsilon: 0.3\nepsilon_high: 0.2\n", "epsilon_high=0.2: must be >= epsilon=0.3"),
        ("seed: 2001-13-45\n", "is not a YAML file: a value YAML cannot make: 'month must be in 1..12'"),
        (f"max_steps: 1{'0' * 5000}\n", "is not a YAML file: a value YAML cannot make"),
        (
            f"max_steps: 0x{'f' * 4000}\n",
            "max_steps='0xfffffffffffffffffffffffff...ffffffffffffffffffffffffffff': expected int",
        ),
        ("lora: {r: 0x8000000000000000}\n", "lora.r='0x8000000000000000': expected int"),
        ("output_dir: elsewhere\n", "the key 'output_dir' is given twice (line 4)"),
        ("lora: {r: 8, alpha: 16, r: 4}\n", "the key 'r' is given twice (line 4)"),
    ],
    ids=[
        "no YAML",
        "infinite",
        "epsilon",
        "no date",
        "an integer of 5,001 digits",
        "hex",
        "nested",
        "a key twice",
        "a nested key twice",
    ],
)
def test_train_refuses_a_bad_config_in_one_line(text, says, tmp_path, capsys):
    """Found by a hostile user: a date that is none and an integer of more digits than Python turns
    into a number ended `r3 train --check` in a ValueError traceback, and so did a hexadecimal one (which
    YAML reads without the limit) in the first refusal quoting it; a number in YAML 1.1's other forms
    (hexadecimal, .inf) now stays the text written, shortened in the refusal. A key given twice was
    read as its last value, the first dropped without a word."""
    config = tmp_path / "rl.yaml"
    body = f"model: {tmp_path}\ndataset: {tmp_path}\noutput_dir: {tmp_path / 'o'}\n"
    config.write_text(body + text)
    refused(train_main, ["rl", "--config", str(config), "--check"], capsys, says)


@pytest.mark.parametrize("rate", ["5e-3", "5.0e-3", "1.5E4", ".5e1"])
def test_train_reads_a_float_yaml_leaves_as_text_and_checks_the_model_folder(rate, tmp_path, capsys):
    """PyYAML reads ``5e-3`` (no dot) and ``5.0e3`` (no sign) as strings; each is the number it spells
    (a hostile sweep found ``1.0e300`` refused as no number). A missing model folder is refused by
    ``--check`` too, not found only once training starts."""
    config = tmp_path / "sft.yaml"
    config.write_text(
        f"model: {tmp_path / 'none'}\ndataset: {tmp_path}\noutput_dir: o\nlearning_rate: {rate}\n"
    )
    refused(
        train_main, ["sft", "--config", str(config), "--check"], capsys, "model: model directory not found"
    )
    refused(
        train_main, ["sft", "--config", str(config), "--set", "max_steps=[1"], capsys, "VALUE is not YAML"
    )


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--out", ""], "argument --out: expected a folder"),
        (["--hidden", str(10**30)], "argument --hidden: expected an integer 32..2048"),
        (["--vocab-size", str(10**9)], "argument --vocab-size: expected an integer 1..65536"),
        (["--vocab-size", "1"], "argument --vocab-size: vocab_size=1: expected 298..65536 for idefics3"),
        (["--arch", "qwen2_5_vl", "--vocab-size", "264"], "vocab_size=264: expected 265..65536 for qwen"),
    ],
)
def test_model_tiny_refuses_sizes_and_paths(argv, says, tmp_path, capsys):
    """Found by an outside tester: `--vocab-size 1` built a tokenizer of 298 tokens (its special tokens
    and byte alphabet), not the size asked for; a size below those is refused, naming the minimum."""
    refused(tiny_model_main, ["--out", str(tmp_path / "m"), *argv], capsys, says)
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("asked", [300, 4096])
def test_model_tiny_says_the_vocabulary_it_built(asked, tmp_path, capsys):
    """The tokenizer has the size asked for, or fewer tokens where r3's prompts give no more BPE
    merges (4096): the command says how many."""
    from transformers import AutoTokenizer

    assert tiny_model_main(["--out", str(tmp_path / "m"), "--vocab-size", str(asked)]) == 0
    built = len(AutoTokenizer.from_pretrained(str(tmp_path / "m"), local_files_only=True))
    assert f"(vocabulary of {built} tokens, " in capsys.readouterr().out
    assert built == asked if asked == 300 else built < asked


@pytest.mark.parametrize("content", [b"", b"\x00garbage" * 50, "npy", "npz"])
def test_judge_refuses_what_is_no_snapshot(content, tmp_path, capsys):
    path = tmp_path / "snap"
    if content in ("npy", "npz"):
        with open(path, "wb") as f:
            (np.save(f, np.zeros(3)) if content == "npy" else np.savez(f, other=np.zeros(3)))
    else:
        path.write_bytes(content)
    argv = ["--candidate", "move the red moon left", "--reference", "move the red moon right"]
    argv += ["--snapshot", str(path)]
    err = refused(judge_main, argv, capsys, "not a Language Table snapshot")
    assert "allow_pickle" not in err


@pytest.mark.parametrize(
    "suite, says",
    [
        ("language_table", "not a Language Table snapshot"),
        ("packing", "the packing judge compares the instructions as text and simulates no snapshot"),
    ],
)
def test_judge_refuses_a_snapshot_it_cannot_simulate_whatever_the_verdict(suite, says, tmp_path, capsys):
    """Found by a hostile user: a --snapshot of random bytes scored 1.0 when the two instructions
    matched as text (it was read only to simulate a difference), and the packing judge, which
    simulates nothing, took any file."""
    path = tmp_path / "snap"
    path.write_bytes(b"\x00garbage" * 50)
    same = {"language_table": "move the red moon left", "packing": "Pack the foam brick into the large tray."}
    same = same[suite]
    argv = ["--candidate", same, "--reference", same, "--suite", suite, "--snapshot", str(path)]
    assert "argument --snapshot: " in refused(judge_main, argv, capsys, says)


@pytest.mark.parametrize("option", ["--snapshot", "--image"])
def test_judge_refuses_a_file_that_is_not_there_even_when_it_would_not_read_it(option, tmp_path, capsys):
    """Found by a hostile user: `--snapshot /nonexistent/file` scored 1.0 (the rule judge had no need
    to simulate), and `--image` of a missing file was found only when the VLM was asked."""
    argv = ["--candidate", "move the blue cube left", "--reference", "push the blue cube left"]
    backend = ["--backend", "vlm", "--vlm-model", "m"] if option == "--image" else []
    missing = str(tmp_path / "nonexistent" / "file")
    refused(
        judge_main, [*argv, *backend, option, missing], capsys, f"argument {option}: {missing}: not found"
    )


@pytest.mark.parametrize("what", ["/dev/zero", "folder", "fifo", "too_big"])
def test_judge_refuses_a_snapshot_it_would_read_without_bound(what, tmp_path, capsys):
    """``--snapshot /dev/zero`` read until memory ran out (4-7 GB), a FIFO blocked for ever."""
    from r3.rewards.semantic import MAX_SNAPSHOT_BYTES

    path = {"/dev/zero": "/dev/zero", "folder": str(tmp_path)}.get(what, str(tmp_path / "snap"))
    if what == "fifo":
        os.mkfifo(path)
    elif what == "too_big":
        with open(path, "wb") as f:
            f.truncate(MAX_SNAPSHOT_BYTES + 1)
    argv = ["--candidate", "move the red moon left", "--reference", "move the red moon right"]
    says = "is larger than" if what == "too_big" else "is not a regular file"
    err = refused(judge_main, [*argv, "--snapshot", path], capsys, says)
    assert len(err.strip().splitlines()[-1]) < 200


def test_a_snapshot_is_far_under_the_size_read_and_bytes_over_it_are_refused():
    from r3.rewards import semantic

    snapshots = Path(semantic.__file__).parent / "data" / "snapshots"  # Language Table, about 3 KB
    largest = max(p.stat().st_size for p in snapshots.glob("*.npz"))
    assert largest * 100 < semantic.MAX_SNAPSHOT_BYTES
    assert semantic.load_snapshot(b"x" * semantic.MAX_SNAPSHOT_BYTES) == b"x" * semantic.MAX_SNAPSHOT_BYTES
    with pytest.raises(ValueError, match="at most"):
        semantic.load_snapshot(b"x" * (semantic.MAX_SNAPSHOT_BYTES + 1))


@pytest.mark.parametrize(
    "text, says",
    [
        (b"profiles: [unclosed", "is not a YAML file"),
        (b"\xff\xfe\x00binary", "is not a YAML file"),
        (b"- a\n- b\n", "expected a mapping at the top level"),
        (b"profiles: {p: null}\n", "profile 'p': expected a mapping"),
        (b"profiles: {p: {members: [1, 2]}}\n", "profile 'p': expected a mapping"),
        (b"profiles: {p: {members: hello}}\n", "profile 'p': expected a mapping"),
        (
            b"profiles: {p: {members: [{name: a, start: false}, {name: a, start: false}]}}\n",
            "['a'] more than once",
        ),
    ],
)
def test_launch_refuses_a_bad_graph_description(text, says, tmp_path, capsys):
    graph = tmp_path / "graph.yaml"
    graph.write_bytes(text)
    refused(launch_main, ["p", "--graph", str(graph), "--check"], capsys, says)


def test_a_yaml_file_that_is_a_folder_a_device_or_missing_is_called_so(tmp_path, capsys):
    """A folder for ``--graph`` was said not to exist, and ``--config /tmp`` or ``/dev/null`` "not
    found"."""
    for path, why in [
        (tmp_path, "a folder"),
        ("/dev/null", "not a regular file"),
        (tmp_path / "x", "not found"),
    ]:
        refused(
            launch_main, ["p", "--graph", str(path), "--check"], capsys, f"{path}: {why}; expected a YAML"
        )
        refused(train_main, ["sft", "--config", str(path)], capsys, f"{path}: {why}; expected a YAML file")
        refused(mini_main, ["--config", str(path)], capsys, f"{path}: {why}; expected a YAML file")


def test_a_bad_set_names_the_command_it_was_given_to(capsys):
    err = refused(launch_main, ["--set", "garbage", "--check"], capsys, "--set 'garbage': expected")
    assert "r3 launch: error: --set 'garbage'" in err  # the command's own name, once


@pytest.mark.parametrize(
    "text, says",
    [
        ("- a\n- b\n", "expected a mapping at the top level, got list (an r3 mini config has the sections"),
        ("{workers: [", "is not a YAML file"),
    ],
)
def test_mini_refuses_a_bad_config_before_writing(text, says, tmp_path, capsys):
    config = tmp_path / "mini.yaml"
    config.write_text(text)
    refused(mini_main, ["--config", str(config), "--out", str(tmp_path / "run")], capsys, says)
    assert not (tmp_path / "run").exists()


def test_mini_refuses_sizes_and_workers_before_writing(tmp_path, capsys):
    from r3.mini import CONFIGS

    text = (CONFIGS / "quick.yaml").read_text().replace("  hidden: 64", "  hidden: abc")
    (tmp_path / "bad.yaml").write_text(text)
    out = str(tmp_path / "run")
    refused(mini_main, ["--config", str(tmp_path / "bad.yaml"), "--out", out], capsys, "hidden='abc'")
    refused(mini_main, ["--quick", "--workers", TOO_MANY_WORKERS, "--out", out], capsys, "local worker")
    # Found by a hostile user: `workers: 0` wrote mini.json and the stage configs, then was refused.
    (tmp_path / "none.yaml").write_text(re.sub(r"(?m)^workers: .*$", "workers: 0", text.replace("abc", "64")))
    refused(
        mini_main, ["--config", str(tmp_path / "none.yaml"), "--out", out], capsys, "workers must be >= 1"
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("task", ["13", "0", "", "abc"])
def test_packing_demo_refuses_an_unknown_goal(task, tmp_path, capsys):
    refused(packing_demo_main, ["--task", task, "--out", str(tmp_path / "o")], capsys, "argument --task")
    assert not (tmp_path / "o").exists()


def test_a_tiny_model_is_never_written_over_a_folder_with_something_in_it(tmp_path, capsys):
    """Found by a hostile user: `r3 model tiny --out CHECKPOINT` replaced a trained checkpoint's
    config and weights with random ones and left its other files, so the folder still looked trained."""
    checkpoint = tmp_path / "sft" / "final"
    checkpoint.mkdir(parents=True)
    files = {"config.json": '{"trained": true}', "model.safetensors": "WEIGHTS", "r3_train.json": "{}"}
    for name, text in files.items():
        (checkpoint / name).write_text(text)
    refused(tiny_model_main, ["--out", str(checkpoint)], capsys, "is not empty")
    assert {p.name: p.read_text() for p in checkpoint.iterdir()} == files


@pytest.mark.parametrize(
    "command",
    [
        ["sim", "demo", "--video", "none", "--max-steps", "3"],
        ["packing", "demo", "--video", "none", "--max-steps", "3"],
        ["collect", "--split", "T_R", "--scenes", "1", "--trials", "1", "--quiet"],
    ],
    ids=["sim demo", "packing demo", "collect"],
)
def test_a_reasoner_that_fails_mid_episode_is_one_line(command, tmp_path, capsys):
    """Found by a hostile user: a replay that ran out of answers after its first step ended `r3 sim
    demo`, `r3 packing demo` and `r3 collect` in a BackendError traceback (`r3 eval` said it in one
    line)."""
    from r3.cli import main

    answers = tmp_path / "one.jsonl"
    answers.write_text(json.dumps({"text": "Reasoning: x\nInstruction: move the blue cube left"}) + "\n")
    option = "--reasoner" if command[0] == "packing" else "--backend"
    status = main([*command, option, f"replay:{answers}", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 1 and "Traceback" not in err, err
    assert f"r3 {command[0]}: error: reasoner backend: {answers} has no answer for step" in err, err
    if command[1] == "demo":  # the step taken is written, with the error as the outcome
        summary = json.loads((tmp_path / "out" / "summary.json").read_text())
        assert summary["decision_steps"] == len(summary["steps"]) == 1, summary
        assert summary["outcome"].startswith("error: reasoner backend: ") and not summary["success"]


@pytest.mark.parametrize("where", ["beneath a file", "in the dataset"])
def test_impute_refuses_an_output_it_cannot_write_or_that_is_its_input(where, tmp_path, capsys):
    """Found by a hostile user: `r3 train impute` with its output beneath a file sampled every row
    and then ended in a FileExistsError traceback (`--check` passed it); with its output the dataset's
    manifest, it wrote the JSONL over it and the dataset was gone."""
    dataset = tmp_path / "rl"
    dataset.mkdir()
    (dataset / "r3_dataset.json").write_text('{"kind": "rl"}')
    (tmp_path / "a.txt").write_text("mine")
    output = tmp_path / "a.txt" / "out.jsonl" if where == "beneath a file" else dataset / "r3_dataset.json"
    config = tmp_path / "impute.yaml"
    config.write_text(f"backend: expert\ndataset: {dataset}\noutput: {output}\n")
    says = "a file" if where == "beneath a file" else "inside the dataset it reads"
    refused(train_main, ["impute", "--config", str(config), "--check"], capsys, says)
    assert (dataset / "r3_dataset.json").read_text() == '{"kind": "rl"}'


@pytest.mark.parametrize(
    "field, value, why",
    [
        ("top_p", 2, "top_p=2: "),
        ("repetition_penalty", 0, "repetition_penalty=0: "),
        ("top_k", -1, "top_k=-1: "),
        ("temperature", "hot", "temperature='hot': "),
    ],
)
@pytest.mark.parametrize("job", ["rl", "export"])
def test_train_refuses_a_generation_config_that_sampling_would_refuse(
    job, field, value, why, tmp_path, capsys
):
    """Found by a review: the reasoner refused a generation_config.json with top_p 2 when it loaded the
    model, but `r3 train rl` trained from such a checkpoint (and failed at its first sample) and
    `r3 train export` copied one into the merged folder. Both refuse it first, in one line, by the
    reasoner's own check."""
    from r3.reasoning.backends.transformers_backend import GENERATION_FIELDS

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "generation_config.json").write_text(json.dumps({"do_sample": True, field: value}))
    problem = GENERATION_FIELDS[field].value_problem(value)
    assert problem
    said = f"{model / 'generation_config.json'}: {why}{problem}"
    if job == "rl":
        out = tmp_path / "run"
        config = tmp_path / "rl.yaml"
        config.write_text(f"model: {model}\ndataset: {tmp_path / 'data'}\noutput_dir: {out}\n")
        err = refused(train_main, ["rl", "--config", str(config)], capsys, f"r3 train rl: model: {said}")
    else:
        adapter, out = tmp_path / "adapter", tmp_path / "merged"
        adapter.mkdir()
        (adapter / "adapter_config.json").write_text('{"r": 8}')
        (adapter / "adapter_model.safetensors").write_bytes(b"")
        argv = ["export", "--adapter", str(adapter), "--base", str(model), "--out", str(out)]
        err = refused(train_main, argv, capsys, f"r3 train export: --base: {said}")
    assert err.count("\n") == 1 and not out.exists(), err


@pytest.mark.parametrize("job", ["sft", "rl"])
def test_train_refuses_an_output_dir_that_holds_a_finished_run(job, tmp_path, capsys):
    """Found by a hostile user: a second `r3 train sft` into the output_dir of a finished run deleted
    its checkpoints (TRL's rotation) and mixed a new adapter into its final model. A torn final (no
    r3_prompt.json, written last) is a run that did not finish and is trained again."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    run = tmp_path / "run"
    (run / "final").mkdir(parents=True)
    (run / "final" / "model.safetensors").write_text("TRAINED")
    config = tmp_path / "train.yaml"
    config.write_text(f"model: {model}\ndataset: {tmp_path / 'data'}\noutput_dir: {run}\n")
    train_main([job, "--config", str(config), "--check"])  # (refused later: there is no dataset)
    assert "finished run" not in capsys.readouterr().err  # a torn final: trained again
    (run / "final" / "r3_prompt.json").write_text("{}")
    refused(train_main, [job, "--config", str(config), "--check"], capsys, "holds a finished run (final/)")
    assert (run / "final" / "model.safetensors").read_text() == "TRAINED"


@pytest.fixture(scope="module")
def built(expert_bags, tmp_path_factory):
    """An sft and an rl dataset of the session's expert bags, and a folder that passes as a model."""
    root = tmp_path_factory.mktemp("built")
    for kind in ("sft", "rl"):
        build_dataset(find_bags([expert_bags]), root / kind, kind)
    (root / "model").mkdir()
    (root / "model" / "config.json").write_text("{}")
    return root


@pytest.mark.parametrize("where", ["the model", "inside the dataset", "the eval dataset", "the root"])
def test_train_refuses_an_output_dir_in_what_it_reads(where, built, tmp_path, capsys):
    """Found by a hostile user: `r3 train sft` with output_dir its own dataset or model folder trained
    and wrote checkpoint-1/, final/ and a README.md into it; `--check` passed output_dir=/."""
    output_dir, says = {
        "the model": (built / "model", "inside the model it reads"),
        "inside the dataset": (built / "sft" / "run", "inside the dataset it reads"),
        "the eval dataset": (built / "rl", "inside the eval_dataset it reads"),
        "the root": (Path("/"), "output_dir /: holds the model it reads"),
    }[where]
    config = tmp_path / "sft.yaml"
    config.write_text(
        f"model: {built / 'model'}\ndataset: {built / 'sft'}\neval_dataset: {built / 'rl'}\n"
        f"output_dir: {output_dir}\n"
    )
    before = sorted(p.name for p in built.rglob("*"))
    refused(train_main, ["sft", "--config", str(config), "--check"], capsys, says)
    assert sorted(p.name for p in built.rglob("*")) == before


@pytest.mark.parametrize("holds", ["a user's files", "the model it reads"])
def test_train_writes_only_into_a_new_or_empty_folder_or_an_earlier_run(holds, built, tmp_path, capsys):
    """Found by a hostile user: an output_dir holding the user's README.md and checkpoint-7/ passed
    --check; the run wrote its model card over the README and TRL's rotation deleted checkpoint-7/ (or
    the model it was reading, kept as checkpoint-1/ in that folder)."""
    run = tmp_path / "run"
    if holds == "a user's files":
        (run / "checkpoint-7").mkdir(parents=True)
        (run / "checkpoint-7" / "notes.txt").write_text("mine")
        (run / "README.md").write_text("MY PROJECT")
        model, says = built / "model", "holds README.md, checkpoint-7"
    else:
        model = run / "checkpoint-1"
        shutil.copytree(built / "model", model)
        says = "holds the model it reads"
    config = tmp_path / "sft.yaml"
    config.write_text(f"model: {model}\ndataset: {built / 'sft'}\noutput_dir: {run}\n")
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    refused(train_main, ["sft", "--config", str(config), "--check"], capsys, says)
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def test_impute_replaces_only_its_own_earlier_output(built, tmp_path, capsys):
    """Found by a hostile user: `output: precious.jsonl` wrote the imputed records over a file of the
    user's; an earlier impute output is replaced as before."""
    output = tmp_path / "h.jsonl"
    output.write_text("my notes\n")
    config = tmp_path / "impute.yaml"
    config.write_text(f"backend: expert\ndataset: {built / 'rl'}\noutput: {output}\n")
    says = "is no earlier `r3 train impute` output"
    refused(train_main, ["impute", "--config", str(config), "--check"], capsys, says)
    assert output.read_text() == "my notes\n"
    record = {"episode_id": "e", "step": 1, "history": "", "history_kind": "none", "imputed": False}
    output.write_text(json.dumps(record) + "\n")
    assert train_main(["impute", "--config", str(config), "--check"]) == 0


@pytest.mark.parametrize(
    "job, setting, says",
    [
        ("sft", "eval_dataset: /nonexistent", "/nonexistent"),
        ("rl", "history_file: {config}", "not JSON"),
        ("rl", "history_file: {latin1}", "cannot be read"),
        ("rl", "history_file: {number}", "expected a JSON object, got int"),
        ("rl", "history_file: {bad_step}", "step='x': expected a whole number"),
        ("rl", "interface: semantic", "a rl dataset, expected a turns one"),
        ("rl", "history_file: {twice}", "a second record of e step 1"),
        ("rl", "history_file: {elsewhere}", "none of its 1 record(s) names a step of the dataset"),
    ],
    ids=[
        "eval_dataset missing",
        "history not JSON",
        "history not UTF-8",
        "history a number",
        "step",
        "turns",
        "a step twice",
        "another dataset's",
    ],
)
def test_train_check_reads_every_input_and_refuses_each_in_one_line(
    job, setting, says, built, tmp_path, capsys
):
    """Found by a hostile user: `--check` passed an eval_dataset that the run then refused after loading
    the model; a history_file that was no JSONL of `r3 train impute` (this config, Latin-1 bytes, a bare
    number) and `interface: semantic` on a single-step dataset ended in tracebacks or a bare KeyError."""
    (tmp_path / "latin1.jsonl").write_bytes(b'{"history": "caf\xe9"}\n')
    (tmp_path / "number.jsonl").write_text("5\n")
    record = {"episode_id": "e", "step": "x", "history": "", "history_kind": "none"}
    (tmp_path / "bad_step.jsonl").write_text(json.dumps(record) + "\n")
    record.update(step=1)
    (tmp_path / "elsewhere.jsonl").write_text(json.dumps(record) + "\n")
    (tmp_path / "twice.jsonl").write_text(2 * (json.dumps(record) + "\n"))
    config = tmp_path / f"{job}.yaml"
    names = ("latin1", "number", "bad_step", "elsewhere", "twice")
    files = {name: tmp_path / f"{name}.jsonl" for name in names}
    config.write_text(
        f"model: {built / 'model'}\ndataset: {built / job}\noutput_dir: {tmp_path / 'run'}\n"
        + setting.format(config=config, **files)
        + "\n"
    )
    refused(train_main, [job, "--config", str(config), "--check"], capsys, says)


def test_impute_refuses_max_rows_below_one(built, tmp_path, capsys):
    """Found by a hostile user: `max_rows: -1` passed and imputed nothing ("rows": 0)."""
    config = tmp_path / "impute.yaml"
    config.write_text(
        f"backend: expert\ndataset: {built / 'rl'}\noutput: {tmp_path / 'h.jsonl'}\nmax_rows: -1\n"
    )
    refused(train_main, ["impute", "--config", str(config), "--check"], capsys, "max_rows=-1: must be >= 1")


def test_train_refuses_cuda_on_a_machine_without_one_in_one_line(tmp_path, capsys, monkeypatch):
    """Found by a hostile user: `device: cuda` where torch sees no GPU ended `r3 train --check` in a
    RuntimeError traceback."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    config = tmp_path / "sft.yaml"
    config.write_text(f"model: {model}\ndataset: {tmp_path}\noutput_dir: {tmp_path / 'o'}\ndevice: cuda\n")
    refused(train_main, ["sft", "--config", str(config), "--check"], capsys, "device: device='cuda'")


def test_ctrl_c_ends_a_command_with_one_line_and_status_130(tmp_path, capsys, monkeypatch):
    """Found by a hostile user: Ctrl-C on `r3 collect` printed a KeyboardInterrupt traceback."""
    import r3.data.collect
    from r3.cli import main

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(r3.data.collect, "collect", interrupted)
    status = main(["collect", "--scenes", "1", "--quiet", "--out", str(tmp_path / "bags")])
    err = capsys.readouterr().err
    assert status == 130 and err.strip() == "r3 collect: interrupted", err


def test_sigterm_ends_a_command_as_ctrl_c_does_with_status_143(tmp_path, capsys, monkeypatch):
    """Found by the interruption sweep: `kill` (SIGTERM, as a job scheduler or `docker stop` sends it) on
    `r3 collect` or `r3 dataset build` ended it without a word, its torn episode left in .partial and
    its dataset's staging folder beside --out until a later run. SIGTERM now ends a command as Ctrl-C
    does (its cleanup runs, one line), with the status a shell gives a SIGTERM."""
    import signal

    import r3.data.collect
    from r3.cli import main

    cleaned = []

    def terminated(*args, **kwargs):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(2)  # main()'s handler raises before this ends
            raise AssertionError("SIGTERM did not stop the command")
        finally:
            cleaned.append(True)

    def survived(signum, frame):  # this test process's own, should main() not take SIGTERM
        pass

    monkeypatch.setattr(r3.data.collect, "collect", terminated)
    before = signal.signal(signal.SIGTERM, survived)
    try:
        status = main(["collect", "--scenes", "1", "--quiet", "--out", str(tmp_path / "bags")])
        assert signal.getsignal(signal.SIGTERM) is survived  # given back
    finally:
        signal.signal(signal.SIGTERM, before)
    err = capsys.readouterr().err
    assert status == 143 and err.strip() == "r3 collect: terminated (SIGTERM)" and cleaned, err


def test_a_command_run_in_another_thread_leaves_the_processs_sigterm_alone(tmp_path):
    """main() takes SIGTERM for the command it runs; only the main thread may set a handler, so a
    caller running r3 in a thread of its own got a ValueError from signal.signal before the command."""
    import signal
    import threading

    from r3.cli import main

    before, outcome = signal.getsignal(signal.SIGTERM), []

    def run() -> None:
        try:
            outcome.append(main(["eval", "--workers", "-2", "--out", str(tmp_path / "e")]))
        except SystemExit as exited:  # argparse's refusal of the option: the command ran
            outcome.append(exited.code)
        except Exception as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    assert outcome == [2] and signal.getsignal(signal.SIGTERM) is before


def test_a_run_whose_reasoner_never_started_leaves_a_folder_the_next_run_can_use(tmp_path, capsys):
    """Found by a hostile user: an `r3 eval` or `r3 collect` whose reasoner failed to load had
    written its settings already, so every later run into the folder was refused as "episodes of
    another configuration" though it held none. A folder without episodes takes the new settings;
    one with episodes still refuses other settings."""
    closed = f"openai:http://127.0.0.1:{_closed_port()}/v1,model=x,attempts=1"
    out = tmp_path / "eval"
    common = ["--tasks", "V", "--scenes", "1", "--trials", "1", "--max-steps", "1", "--out", str(out)]
    assert eval_main(["--reasoner", closed, *common]) != 0
    assert eval_main(["--reasoner", "expert", *common]) == 0, capsys.readouterr().err
    assert json.loads((out / "config.json").read_text())["reasoner"] == "expert"
    refused(
        eval_main, ["--reasoner", "random_valid", *common], capsys, "holds episodes of another configuration"
    )

    from r3.reasoning.backends import BackendError
    from r3.reasoning.tiny import build_tiny_model

    broken = build_tiny_model("idefics3", tmp_path / "model")
    (broken / "r3_prompt.json").write_text("[1, 2]")  # found only when the backend loads, in a worker
    folder = tmp_path / "bags"
    common = [
        "--split",
        "T_M",
        "--scenes",
        "1",
        "--trials",
        "1",
        "--max-steps",
        "1",
        "--workers",
        "1",
        "--quiet",
    ]
    with pytest.raises(BackendError):  # `r3 collect` says it in one line (r3.cli)
        collect_main([*common, "--out", str(folder), "--backend", f"transformers:{broken}"])
    assert collect_main([*common, "--out", str(folder), "--backend", "expert"]) == 0, capsys.readouterr().err
    refused(collect_main, [*common, "--out", str(folder), "--max-steps", "2"], capsys, "other settings")


@pytest.mark.parametrize(
    "raised, says",
    [
        (
            OSError(28, "No space left on device", "out/episode.mp4"),
            "No space left on device (out/episode.mp4)",
        ),
        (OSError(30, "Read-only file system", "out"), "Read-only file system (out)"),
        (OSError(27, "File too large", "out/success.png"), "File too large (out/success.png)"),
        (
            BrokenProcessPool("A child process terminated abruptly"),
            "a worker process died; what finished is kept",
        ),
    ],
    ids=["disk full", "read-only", "file too large", "worker killed"],
)
def test_what_the_machine_gets_wrong_ends_a_command_in_one_line(raised, says, monkeypatch, capsys):
    """Found by a hostile user: a full disk or a folder made read-only mid-run ended `r3 sim demo`,
    `r3 packing demo` and `r3 collect` in an OSError traceback, and a collect worker killed by hand in a
    BrokenProcessPool one (the collection itself resumes). Found by the interruption sweep: a file
    past `ulimit -f` (or a filesystem's largest file) ended `r3 eval` in an EFBIG traceback."""
    from r3.cli import main

    def fails(argv):
        raise raised

    monkeypatch.setattr("r3.sim.cli.main", fails)
    assert main(["sim", "demo"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"r3 sim: error: {says}") and "Traceback" not in err and err.count("\n") == 1, err
    monkeypatch.setattr("r3.sim.cli.main", lambda argv: (_ for _ in ()).throw(FileNotFoundError(2, "gone")))
    with pytest.raises(FileNotFoundError):  # a fault of r3's own is not hidden
        main(["sim", "demo"])


def _special_mark(out: Path, kind: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    if kind == "a FIFO":
        os.mkfifo(out / OUTPUT_MARK)
    elif kind == "a link to /dev/zero":
        (out / OUTPUT_MARK).symlink_to("/dev/zero")
    else:
        (out / OUTPUT_MARK).write_text(kind)


SPECIAL_MARKS = ["a FIFO", "a link to /dev/zero", "[" * 100_000, "garbage"]


@pytest.mark.parametrize("mark", SPECIAL_MARKS, ids=["fifo", "dev-zero", "deep JSON", "garbage"])
def test_a_mark_that_is_no_regular_file_or_no_json_is_refused_in_one_line(
    mark, tmp_path, capsys, ends_within
):
    """Found by a hostile user: a FIFO as .r3_output hung `r3 collect`, `r3 mini` and `r3 dataset
    build --overwrite` forever, a link to /dev/zero read until MemoryError, deeply nested JSON gave
    a RecursionError traceback; a garbage mark was "no .r3_output mark". Each is refused, named."""
    out = tmp_path / "out"
    _special_mark(out, mark)
    (out / "mine.txt").write_text("a user's")
    argv = ["--split", "T_R", "--scenes", "1", "--trials", "1", "--max-steps", "2", "--quiet"]
    says = ".r3_output is unreadable or no mark r3 wrote"
    with ends_within(20):
        err = refused(collect_main, [*argv, "--out", str(out)], capsys, says)
        assert says in err.strip().splitlines()[-1], err
        err = refused(mini_main, ["--out", str(out)], capsys, says)
        assert says in err.strip().splitlines()[-1], err
        (out / "mine.txt").unlink()
        bags = tmp_path / "bags"
        (bags / "L-1").mkdir(parents=True)
        (bags / "L-1" / "metadata.yaml").write_text("rosbag2_bagfile_information: {}\n")
        argv = ["build", str(bags), "--kind", "sft", "--out", str(out), "--overwrite"]
        err = refused(dataset_main, argv, capsys, f"(its {says})")
        assert says in err.strip().splitlines()[-1], err
    assert sorted(p.name for p in out.iterdir()) == [OUTPUT_MARK]


def test_a_mark_naming_an_output_over_two_lines_is_quoted_in_one(tmp_path, capsys):
    """Found by a hostile user: a forged mark whose ``what`` held a newline split the refusal."""
    out = tmp_path / "out"
    _mark(out, "LeRobot\ndataset")
    (out / "mine.txt").write_text("a user's")
    argv = ["--split", "T_R", "--scenes", "1", "--trials", "1", "--max-steps", "2", "--quiet"]
    says = r"r3 marked it as 'LeRobot\ndataset'"
    err = refused(collect_main, [*argv, "--out", str(out)], capsys, says)
    assert says in err.strip().splitlines()[-1], err


@pytest.mark.parametrize("kind", ["a FIFO", "a link to /dev/zero", "too large"])
def test_a_small_file_is_read_only_when_it_is_a_regular_file_of_bounded_size(kind, tmp_path, ends_within):
    from r3.files import read_small_text

    path = tmp_path / "meta.yaml"
    if kind == "too large":
        path.write_text("x" * 101)
    else:
        _special_mark(tmp_path, kind)
        path = tmp_path / OUTPUT_MARK
    with ends_within(10), pytest.raises(FileRefused, match=f"^{re.escape(str(path))} "):
        read_small_text(path, limit=100)


def test_launch_starts_no_second_graph_beside_nodes_of_its_names(tmp_path, capsys, monkeypatch):
    """Found by a first-contact trial: `r3 launch` run twice on one domain started a second graph,
    whose nodes answered every goal beside the first's (`r3 run --use-running-graph` then ended in
    "refused the reset: episode ... is running on this scene", from the other graph's simulator). It
    now asks the domain first (``already_running``: the probe, test_graph_probe.py) and refuses."""
    from r3.graph import cli as graph_cli

    asked = []
    monkeypatch.setenv("ROS_DOMAIN_ID", "17")
    monkeypatch.setattr(
        graph_cli, "already_running", lambda profile: asked.append(profile.name) or ["r3_sim_node"]
    )
    monkeypatch.setattr(graph_cli, "Supervisor", None)  # started, it would fail: nothing may start
    says = "/r3_sim_node is already running on ROS domain 17: a second r3 graph"
    refused(launch_main, ["sim_language_table_controller", "--logs", str(tmp_path / "logs")], capsys, says)
    assert asked == ["sim_language_table_controller"] and not (tmp_path / "logs").exists()


@pytest.mark.parametrize(
    "logs, says", [("file", "is a file, not a folder"), ("file/x", "no folder can be made")]
)
def test_launch_refuses_a_log_folder_it_cannot_make_before_anything_starts(
    logs, says, tmp_path, capsys, monkeypatch
):
    """Found by a hostile sweep: `r3 launch --logs FILE` checked only the path's characters, asked the
    domain for a running graph, then ended in a FileExistsError traceback making the folder; --logs
    is now checked as every output folder is, before anything else."""
    from r3.graph import cli as graph_cli

    (tmp_path / "file").write_text("kept")
    monkeypatch.setattr(graph_cli, "already_running", lambda profile: pytest.fail("asked the domain"))
    monkeypatch.setattr(graph_cli, "Supervisor", None)  # started, it would fail: nothing may start
    refused(launch_main, ["sim_language_table_controller", "--logs", str(tmp_path / logs)], capsys, says)
    assert (tmp_path / "file").read_text() == "kept" and sorted(tmp_path.iterdir()) == [tmp_path / "file"]


@pytest.mark.parametrize("main", ["sft", "launch"])
def test_yaml_nested_too_deeply_is_refused_in_one_line(main, tmp_path, capsys):
    """Found by a hostile user: YAML nested 5000 deep ended `r3 train sft --config`, `r3 launch
    --graph X --check` and `r3 run --graph X` (the same reader as launch's) in a RecursionError
    traceback."""
    path = tmp_path / "deep.yaml"
    path.write_text("[" * 5000 + "]" * 5000)
    argv = {"sft": (train_main, ["sft", "--config", str(path), "--check"])}
    argv["launch"] = (launch_main, ["p", "--graph", str(path), "--check"])
    main, args = argv[main]
    says = f"{path} is not a YAML file: YAML nested too deeply"
    err = refused(main, args, capsys, says)
    assert says in err.strip().splitlines()[-1], err


@pytest.fixture(scope="module")
def turns_built(tmp_path_factory):
    """A turns dataset of one stored semantic episode (two turns), and a folder that passes as a model."""
    root = tmp_path_factory.mktemp("turns")
    out = root / "episodes"
    argv = ["--suite", "packing", "--interface", "semantic", "--scenes", "1", "--trials", "1"]
    assert collect_main([*argv, "--max-steps", "2", "--out", str(out), "--quiet"]) in (0, 1)
    assert dataset_main(["build", str(out), "--kind", "turns", "--out", str(root / "ds")]) == 0
    (root / "model").mkdir()
    (root / "model" / "config.json").write_text("{}")
    return root


@pytest.mark.parametrize("damage", ["missing", "not npz", "npz without the arrays", "a folder"])
def test_train_rl_check_refuses_a_turns_dataset_whose_snapshot_does_not_restore(
    damage, turns_built, tmp_path, capsys
):
    """Found by an outside tester: `r3 train rl --check` passed a turns dataset whose snapshot file was
    missing, was no npz or an npz without the arrays the packing simulator restores; training then
    crashed."""
    data = shutil.copytree(turns_built / "ds", tmp_path / "ds")
    snapshot = min((data / "snapshots").rglob("step_000.npz"))
    snapshot.unlink()
    if damage == "not npz":
        snapshot.write_text("junk")
    elif damage == "npz without the arrays":
        np.savez(snapshot, physics=np.zeros(3))
    elif damage == "a folder":
        snapshot.mkdir()
    config = tmp_path / "rl.yaml"
    config.write_text(
        f"model: {turns_built / 'model'}\ndataset: {data}\noutput_dir: {tmp_path / 'run'}\n"
        "interface: semantic\n"
    )
    says = f"snapshot {snapshot}"
    refused(train_main, ["rl", "--config", str(config), "--check"], capsys, says)


@pytest.mark.parametrize("job", ["sft", "rl"])
def test_a_training_run_refused_on_its_dataset_makes_no_output_folder(job, tmp_path, capsys):
    """Found by a hostile user: ``r3 train sft`` marked its output_dir (making the folder) before it
    read the dataset, so a run refused for a dataset that is none left a new folder behind."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    config = tmp_path / "c.yaml"
    out = tmp_path / "out"
    config.write_text(f"model: {model}\ndataset: {tmp_path / 'none'}\noutput_dir: {out}\ndevice: cpu\n")
    refused(train_main, [job, "--config", str(config)], capsys, "has no r3_dataset.json")
    assert not out.exists()


def test_a_training_run_refused_on_a_model_that_cannot_load_leaves_no_folder(tmp_path, capsys, monkeypatch):
    """Found by a hostile user: a model folder whose weights do not load was refused in one line, but
    after the run had made and marked its output_dir, which stayed behind empty. A folder that was
    there before stays."""
    from r3.train import cli
    from r3.train.config import ConfigError

    def cannot_load(job, cfg, prepared):
        assert (Path(cfg.output_dir) / OUTPUT_MARK).is_file()  # made and marked before the model loads
        raise ConfigError(f"model: cannot load {cfg.model}: HeaderTooLarge")

    monkeypatch.setattr(cli, "_prepared", lambda job, cfg: ())
    monkeypatch.setattr(cli, "_train", cannot_load)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    config = tmp_path / "c.yaml"
    for out in (tmp_path / "new", tmp_path / "there"):
        config.write_text(f"model: {model}\ndataset: {tmp_path / 'd'}\noutput_dir: {out}\ndevice: cpu\n")
        if out.name == "there":
            out.mkdir()
        refused(train_main, ["sft", "--config", str(config)], capsys, "cannot load")
        assert out.exists() == (out.name == "there")
