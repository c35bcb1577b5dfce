"""`--help` explains every option of every r3 command and of every program under bench/ and scripts/
(bench/compare.py listed its two files with no word on which is which)."""

from __future__ import annotations

import argparse
import contextlib
import io
import runpy
import sys
from pathlib import Path

import pytest

from r3.cli import COMMANDS
from r3.cli import main as r3_main

ROOT = Path(__file__).resolve().parents[2]
#: The second word of each r3 command that takes one.
SUBCOMMANDS = {
    "sim": ["demo"],
    "packing": ["demo"],
    "model": ["tiny"],
    "train": ["sft", "rl", "impute", "export"],
    "dataset": ["build", "stats", "export-lerobot"],
    "bag": ["repair"],
    "eval": ["run", "compare"],
}
PROGRAMS = sorted(p for p in (*ROOT.glob("bench/*.py"), *ROOT.glob("scripts/*.py")) if p.name != "common.py")


def _parsers_asked_for_help(monkeypatch, call) -> list[argparse.ArgumentParser]:
    """Every parser ``call`` parses with (``--help`` ends it), with the sub-commands' parsers in them."""
    seen: list[argparse.ArgumentParser] = []
    parse = argparse.ArgumentParser.parse_known_args

    def noting(self, *args, **kwargs):
        seen.append(self)
        return parse(self, *args, **kwargs)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", noting)
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(SystemExit):
        call()
    out, stack = [], list(seen)
    while stack:
        parser = stack.pop()
        out.append(parser)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack.extend(action.choices.values())
    assert out, "no parser was asked for --help"
    return out


def _without_help(parsers) -> list[str]:
    return [
        f"{p.prog}: {a.dest}"
        for p in parsers
        for a in p._actions
        if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) and not a.help
    ]


@pytest.mark.parametrize(
    "argv", [[c, *s] for c in COMMANDS for s in ([[w] for w in SUBCOMMANDS[c]] if c in SUBCOMMANDS else [[]])]
)
def test_every_option_of_every_r3_command_has_help(monkeypatch, argv):
    parsers = _parsers_asked_for_help(monkeypatch, lambda: r3_main([*argv, "--help"]))
    assert _without_help(parsers) == []


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_option_of_every_bench_and_script_program_has_help(monkeypatch, program):
    monkeypatch.setattr(sys, "argv", [str(program), "--help"])
    parsers = _parsers_asked_for_help(monkeypatch, lambda: runpy.run_path(str(program), run_name="__main__"))
    assert _without_help(parsers) == []


def _default_unsaid(parsers) -> list[str]:
    """Options that take a value of their own when left out but whose help does not say which."""
    return [
        f"{p.prog}: {'/'.join(a.option_strings)} (default {a.default!r})"
        for p in parsers
        for a in p._actions
        if a.option_strings
        and not isinstance(a, argparse._HelpAction)
        and a.default not in (None, False, [], argparse.SUPPRESS)
        and "default" not in (a.help or "")
    ]


@pytest.mark.parametrize(
    "argv", [[c, *s] for c in COMMANDS for s in ([[w] for w in SUBCOMMANDS[c]] if c in SUBCOMMANDS else [[]])]
)
def test_every_option_of_every_r3_command_says_its_default(monkeypatch, argv):
    """Found by a first-time user: `r3 judge --vlm-url` went to a server on this machine's port 8000
    when neither the option nor R3_JUDGE_URL was given, and its help did not say so."""
    parsers = _parsers_asked_for_help(monkeypatch, lambda: r3_main([*argv, "--help"]))
    assert _default_unsaid(parsers) == []
