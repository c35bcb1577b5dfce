"""A number out of range on any r3 command is refused by argparse with the option and the range
(exit status 2) before anything starts. Before r3.cli_args these were tracebacks: a negative seed
from gymnasium, a zero width as a ZeroDivisionError, a negative hidden size from transformers, and
`r3 run --max-steps -3` as a SystemError from the RunTask message once the whole graph was up."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from r3.cli_args import integer, positive, seed
from r3.data.cli import collect_main
from r3.eval.cli import run_main as eval_run_main
from r3.graph.cli import parse_overrides
from r3.mini import MiniError, load_mini_config
from r3.reasoning.cli import tiny_model_main
from r3.sim.cli import demo_main as sim_demo_main
from r3.sim.packing.cli import demo_main as packing_demo_main
from r3.train.cli import train_main
from r3_ros.run_cli import main as run_main

CONFIG = Path(__file__).parents[2] / "config"


@pytest.mark.parametrize(
    "command, argv, why",
    [
        (run_main, ["--max-steps", "-3"], "argument --max-steps: expected an integer 0..4294967295, got -3"),
        (run_main, ["--seed", "1" + "0" * 20], "argument --seed: expected an integer 0..9223372036854775807"),
        (run_main, ["--seed", "-1"], "argument --seed: expected an integer 0..9223372036854775807, got -1"),
        (run_main, ["--reasoning-budget", "-2"], "argument --reasoning-budget: expected an integer -1.."),
        (run_main, ["--startup-timeout", "0"], "argument --startup-timeout: expected a finite number > 0"),
        (sim_demo_main, ["--seed", "-4"], "argument --seed: expected an integer 0.."),
        (sim_demo_main, ["--width", "0"], "argument --width: expected an integer 16..4096, got 0"),
        (sim_demo_main, ["--fps", "nan"], "argument --fps: expected a finite number > 0, got 'nan'"),
        # Found by a hostile user: an OverflowError after the episode had run, a torn video left.
        (sim_demo_main, ["--fps", "1e-9"], "argument --fps: expected frames per second in [0.1, 240]"),
        (packing_demo_main, ["--fps", "0.001"], "argument --fps: expected frames per second in [0.1, 240]"),
        (
            sim_demo_main,
            ["--max-steps", "-1"],
            "argument --max-steps: expected an integer 1..4294967295, got -1",
        ),
        # No upper bound took --budget 10^22, which no other command (r3 run, r3 eval) takes.
        (
            sim_demo_main,
            ["--budget", str(2**31)],
            "argument --budget: expected an integer 0..2147483647, got",
        ),
        (packing_demo_main, ["--seed", "-4"], "argument --seed: expected an integer 0.."),
        (
            packing_demo_main,
            ["--frame-every", "0"],
            "argument --frame-every: expected an integer 1..4294967295",
        ),
        # No upper bound took --max-steps and --frame-every 10^22, which r3 eval and r3 collect refuse.
        (
            sim_demo_main,
            ["--max-steps", str(2**32)],
            "argument --max-steps: expected an integer 1..4294967295",
        ),
        (
            sim_demo_main,
            ["--frame-every", str(2**32)],
            "argument --frame-every: expected an integer 0..4294967295",
        ),
        (
            packing_demo_main,
            ["--max-steps", str(10**22)],
            "argument --max-steps: expected an integer 1..4294967295",
        ),
        (
            packing_demo_main,
            ["--frame-every", str(2**32)],
            "argument --frame-every: expected an integer 1..4294967295",
        ),
        (tiny_model_main, ["--hidden", "-1"], "argument --hidden: expected an integer 32..2048, got -1"),
        (tiny_model_main, ["--hidden", "48"], "argument --hidden: expected a multiple of 32, got 48"),
        (eval_run_main, ["--via-ros-timeout", "-1"], "argument --via-ros-timeout: expected a finite number"),
        (eval_run_main, ["--via-ros-scenes", "0"], "argument --via-ros-scenes: expected an integer >= 1"),
        # Found by a hostile sweep: --via-ros sent 2^31 as RunTask's int32 reasoning_budget, wrapped
        # to -2^31, which the reasoner refuses, once the in-process evaluation had run.
        (
            eval_run_main,
            ["--reasoning-budget", str(2**31), "--tasks", "V", "--scenes", "1", "--trials", "1"],
            "error: budget must be None (full) or a whole number in 0..2147483647, got 2147483648",
        ),
    ],
)
def test_an_out_of_range_number_is_refused_before_anything_starts(command, argv, why, tmp_path, capsys):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exited:
        command([*argv, "--out", str(out)])
    assert exited.value.code == 2
    assert why in capsys.readouterr().err
    assert not out.exists()


def test_sim_demo_help_names_the_budgets_bound(capsys):
    with pytest.raises(SystemExit):
        sim_demo_main(["--help"])
    assert "0..2147483647" in " ".join(capsys.readouterr().out.split())


def test_the_types_take_their_bounds_and_name_the_bad_text():
    assert integer(-1, 5)("-1") == -1 and integer(0)("123456789012345678901234567890") > 0
    assert seed("9223372036854775807") == 2**63 - 1 and positive("0.5") == 0.5
    for parse, text, why in (
        (integer(0), "3.5", "expected an integer >= 0, got '3.5'"),
        (integer(0, 9), "10", "expected an integer 0..9, got 10"),
        (positive, "inf", "expected a finite number > 0, got 'inf'"),
        (positive, "1e309", "expected a finite number > 0, got 1e309"),
        (positive, "fast", "expected a finite number > 0, got 'fast'"),
    ):
        with pytest.raises(argparse.ArgumentTypeError, match=why):
            parse(text)


#: Numbers int() and float() read but r3's backend specs refused: Arabic-Indic and full-width digits,
#: Python's digit groups. Found by a hostile sweep: `r3 run --seed ٣` ran seed 3 and `r3 collect
#: --scenes ٣` collected 3 scenes, while `--reasoner transformers:M,seed=٣` was refused.
NOT_DIGITS_0_9 = ("\u0663", "\uff13", "1_000")


@pytest.mark.parametrize("text", NOT_DIGITS_0_9)
@pytest.mark.parametrize(
    "command, option",
    [
        (run_main, "--seed"),
        (run_main, "--startup-timeout"),
        (sim_demo_main, "--max-steps"),
        (sim_demo_main, "--fps"),
        (packing_demo_main, "--seed"),
        (tiny_model_main, "--vocab-size"),
        (eval_run_main, "--scenes"),
        (eval_run_main, "--workers"),
        (eval_run_main, "--reasoning-budget"),
        (collect_main, "--scenes"),
        (collect_main, "--max-steps"),
    ],
)
def test_a_number_is_written_in_digits_0_9_on_every_command(command, option, text, tmp_path, capsys):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exited:
        command([option, text, "--out", str(out)])
    assert exited.value.code == 2
    assert f"argument {option}: expected" in capsys.readouterr().err
    assert not out.exists()


def test_the_types_read_digits_0_9_as_the_backend_specs_do():
    for parse in (seed, positive, integer(1, 5000)):
        for text in (*NOT_DIGITS_0_9, "0x10", "3 4", ""):
            with pytest.raises(argparse.ArgumentTypeError, match="digits 0-9 only"):
                parse(text)
    with pytest.raises(argparse.ArgumentTypeError, match=r"got '1+\.\.\.1+' \(digits 0-9 only\)"):
        integer(0)("1" * 5000)  # beyond int()'s digit limit: refused, quoted in 80 characters
    assert integer()(" -7") == -7 and positive("2.5e-1") == 0.25


def test_a_set_value_is_a_number_only_in_digits_0_9():
    """`r3 launch/run --set` read "٣" as the integer 3 and "nan" as a float; as ``ros2 run -p`` and
    the backend specs do, they stay text, and the parameter's type check names them as typed."""
    values = ["3", " 3", "-2.5", "1e-3", *NOT_DIGITS_0_9, "nan", "inf", "0x10", "true"]
    node = parse_overrides([f"n.p{i}={v}" for i, v in enumerate(values)])["n"]
    assert list(node.values()) == [3, 3, -2.5, 0.001, *NOT_DIGITS_0_9, "nan", "inf", "0x10", True]


def test_a_set_number_too_long_for_python_is_refused_in_a_short_message():
    """A 5,000-digit --set value ended the command with Python's own digit-limit message, and the
    message quoted all 5,000 digits."""
    with pytest.raises(ValueError) as refused:
        parse_overrides(["r3_sim_node.max_steps=" + "1" * 5000])
    assert "a whole number of 5000 digits: too long for any parameter" in str(refused.value)
    assert len(str(refused.value)) < 300


@pytest.mark.parametrize(
    "argv, why",
    [
        (["--task", "../x"], "unknown language_table task '../x'"),
        (["--suite", "mars"], "unknown suite 'mars'"),
        (["--suite", "packing", "--task", "99"], "unknown packing task '99'"),
        (["--task", "T", "--interface", "semantic"], "interface 'semantic' acts on packing, not 'language_"),
        (["--suite", ""], "argument --suite: expected a value"),
        (["--reasoner", ""], "argument --reasoner: expected a value"),
        (["--out", ""], "argument --out: expected a folder"),
        # Found by a hostile user: a --set of the interface was checked only once the graph was up, and
        # a --set that one of r3 run's own options overruled was dropped without a word.
        (
            ["--set", "r3_reasoner_node.interface=semantic"],
            "interface 'semantic' acts on packing, not 'langu",
        ),
        (["--set", "r3_recorder_node.output_dir=/tmp/elsewhere"], "r3 run's bags go under --out"),
        (
            ["--reasoner", "expert", "--set", "r3_reasoner_node.backend=replay:/x"],
            "--set r3_reasoner_node.backend='replay:/x' contradicts --reasoner 'expert'",
        ),
        (
            [
                "--suite",
                "packing",
                "--task",
                "4",
                "--interface",
                "tools",
                "--set",
                "r3_reasoner_node.interface=plan",
            ],
            "--set r3_reasoner_node.interface='plan' contradicts --interface 'tools'",
        ),
        # Found by a hostile sweep: an interface --set to no interface, on packing, ended r3 run in a
        # KeyError traceback (the step budget was looked up before the interface was checked).
        (
            ["--suite", "packing", "--task", "4", "--set", "r3_reasoner_node.interface=Plan"],
            "interface 'Plan' is not served here",
        ),
        (
            ["--suite", "packing", "--task", "4", "--set", "r3_reasoner_node.interface=plan "],
            "interface 'plan ' is not served here",
        ),
        # Found by a hostile sweep: --task defaulted to Language Table's V whatever the suite, so
        # `r3 run --suite packing` without a task was always refused; the suite's own task is taken.
        (
            ["--suite", "packing", "--set", "r3_reasoner_node.interface=Plan"],
            "interface 'Plan' is not served here",
        ),
    ],
)
def test_r3_run_refuses_a_goal_the_reasoner_would_refuse_before_starting_a_graph(argv, why, tmp_path, capsys):
    """The reasoner's own check (r3.safety.goals.check_run_task); before, r3 run started the four
    nodes and waited for them only to print the reasoner's refusal."""
    with pytest.raises(SystemExit) as exited:
        run_main([*argv, "--out", str(tmp_path / "out")])
    assert exited.value.code == 2 and why in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "reasoner, given",
    [
        ("expert", "expert "),
        (" expert", "expert"),
        ("openai:http://h:1/v1,model=m", "openai: http://h:1/v1 , model = m"),
    ],
)
def test_r3_run_takes_a_set_backend_that_names_its_reasoner_with_spaces_around(reasoner, given, tmp_path):
    """Found by a hostile user: `--reasoner expert --set r3_reasoner_node.backend='expert '` was refused
    as a contradiction, though the spec's space rule reads both as one backend (``same_spec``)."""
    from r3_ros.run_cli import _parser, graph_overrides

    args = _parser().parse_args(
        ["--reasoner", reasoner, "--set", f"r3_reasoner_node.backend={given}", "--out", str(tmp_path)]
    )
    assert graph_overrides(args)["r3_reasoner_node"]["backend"] == reasoner


def test_r3_run_refuses_a_set_backend_that_is_no_spec_with_the_parsers_reason(tmp_path, capsys):
    spec = "r3_reasoner_node.backend=expert,"
    with pytest.raises(SystemExit) as exited:
        run_main(["--reasoner", "expert", "--set", spec, "--out", str(tmp_path / "out")])
    assert exited.value.code == 2 and not (tmp_path / "out").exists()
    assert "backend spec 'expert,': '' is not KEY=VALUE" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["--reasoner", "openai:http://me:s3cr3t@127.0.0.1:9/v1,model=m"],
        ["--reasoner", "expert", "--set", "r3_reasoner_node.backend=openai:http://me:s3cr3t@h:1/v1,model=m"],
    ],
    ids=["reasoner", "set_backend"],
)
def test_r3_run_refuses_a_password_in_a_url_and_shows_it_nowhere(argv, tmp_path, capsys):
    """Refused before any graph starts (a usage error, or r3 run's check of the graph's backend)."""
    try:
        code = run_main([*argv, "--out", str(tmp_path / "out")])
    except SystemExit as exited:
        code = exited.code
    shown = capsys.readouterr()
    assert code != 0 and not (tmp_path / "out").exists()
    assert "s3cr3t" not in shown.out + shown.err and "holds '@'" in shown.err


@pytest.mark.parametrize(
    "argv, why",
    [
        (["--workers", "-2"], "error: workers must be >= 1, got -2"),
        (["--reasoner", "transformers:/nonexistent"], "model directory not found: /nonexistent"),
    ],
)
def test_r3_eval_refuses_bad_workers_or_reasoner_with_its_reason_alone(argv, why, tmp_path, capsys):
    """Checked before any episode: the refusal is the one line on stderr (a progress bar of 0
    episodes was drawn before it) and nothing is written."""
    out = tmp_path / "out"
    code = eval_run_main(["--reasoner", "expert", *argv, "--tasks", "V", "--scenes", "1", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and why in err and "episode" not in err.replace(why, "")
    assert not out.exists()


@pytest.mark.parametrize("typed", ["010", "1:30", "0x10", "1_000", "\u0663"])
def test_a_train_set_number_is_the_number_its_digits_say(typed, tmp_path, capsys):
    """Found by a hostile sweep: `r3 train --set seed=010` trained with seed 8 (YAML 1.1 octal),
    `seed=1:30` with 90 and `seed=1_000` with 1000; they stay text and the config names them."""
    config = CONFIG / "train" / "sft_tiny_cpu.yaml"
    argv = ["sft", "--config", str(config), "--check", "--set", f"output_dir={tmp_path / 'out'}"]
    assert train_main([*argv, "--set", f"seed={typed}"]) == 2
    assert f"seed={typed!r}: expected int" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("typed", ["010", "1:30", "0x10", "1_000", ".nan"])
def test_a_config_file_number_is_the_number_its_digits_say(typed, tmp_path, capsys):
    """Found by a hostile sweep: `seed: 010` in a training config trained with seed 8 (YAML 1.1
    octal), as `--set seed=010` did; a config file keeps such a number as its text, and the config's
    type check names what was written, as for --set."""
    config = tmp_path / "sft.yaml"
    config.write_text((CONFIG / "train" / "sft_tiny_cpu.yaml").read_text() + f"seed: {typed}\n")
    argv = ["sft", "--config", str(config), "--check", "--set", f"output_dir={tmp_path / 'out'}"]
    assert train_main(argv) == 2
    assert f"seed={typed!r}: expected int" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_mini_config_size_is_the_number_its_digits_say(tmp_path):
    """The same rule for every file read with read_yaml_mapping: r3 mini's `scenes: 010` was 8 scenes."""
    text = (CONFIG / "mini" / "quick.yaml").read_text()
    config = tmp_path / "mini.yaml"
    config.write_text(re.sub(r"^  scenes: \d+$", "  scenes: 010", text, count=1, flags=re.MULTILINE))
    with pytest.raises(MiniError, match="collect.scenes: expected a whole number >= 1, got '010'"):
        load_mini_config(config)
