"""The suite registry (issue 16, acceptance 2): a suite is one registered record, and outside the
registry no module compares suite names; external suites come from the ``r3.suites`` entry points."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from r3.suites import DEFAULT_SUITE, get_suite, register_suite, reload_suites, suite_names

ROOT = Path(__file__).resolve().parents[2]
SUITE_LITERAL = r"""["'](language_table|packing)["']"""
#: ``suite == "packing"``, ``goal.suite not in ("", "language_table")``, ``"packing" != suite``.
SUITE_COMPARISON = re.compile(
    rf"""(suite|SUITE)[a-z_.]*\)? *(==|!=|(not +)?in) *\(?[^)#\n]*{SUITE_LITERAL}"""
    rf"""|{SUITE_LITERAL} *(==|!=|(not +)?in) *[a-z_.]*suite"""
)


def suite_name_comparisons(root: Path) -> list[str]:
    """Every line of r3's code (registry aside) that compares a suite with a suite-name literal."""
    files = [
        path
        for folder in [root / "r3", root / "bench", root / "scripts", *root.glob("r3_*")]
        for path in folder.rglob("*.py")
        if (root / "r3" / "suites") not in path.parents
    ]
    return [
        f"{path.relative_to(root)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if SUITE_COMPARISON.search(line)
    ]


@pytest.fixture
def fresh_registry():
    """The registry read again before and after the test, so what a test registers stays there."""
    reload_suites()
    yield
    reload_suites()


def test_no_module_outside_the_registry_compares_suite_names():
    assert suite_name_comparisons(ROOT) == []


@pytest.mark.parametrize(
    "line",
    [
        'if suite == "packing":',
        'elif args.suite != "language_table":',
        'if goal.suite not in ("", "language_table"):',
        "if config.suite in ('packing',):",
        'if "packing" == obs.state.suite:',
    ],
)
def test_the_comparison_check_finds_each_way_of_comparing(line, tmp_path):
    (tmp_path / "r3").mkdir()
    (tmp_path / "r3" / "m.py").write_text(f"{line}\n    pass\n")
    assert suite_name_comparisons(tmp_path) == [f"r3/m.py:1: {line}"]


def test_the_comparison_check_leaves_names_that_are_not_compared_alone(tmp_path):
    (tmp_path / "r3").mkdir()
    (tmp_path / "r3" / "m.py").write_text('SUITE = "packing"\nget_suite("language_table")\n')
    assert suite_name_comparisons(tmp_path) == []


def test_the_built_in_suites_are_registered_in_order():
    assert suite_names()[:2] == ("language_table", "packing")
    assert get_suite("packing").workcell and not get_suite("language_table").workcell


def test_an_unknown_suite_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown suite 'mars' \(known: language_table, packing"):
        get_suite("mars")


def test_a_second_suite_of_a_name_is_refused(fresh_registry):
    with pytest.raises(ValueError, match="'packing' is already registered"):
        register_suite(replace(get_suite("packing"), title="another packing"))
    assert get_suite("packing").title == "packing"


def test_a_registered_suite_is_known_to_the_goal_checks(fresh_registry):
    from r3.safety.goals import check_interface, check_suite

    register_suite(replace(get_suite("language_table"), name="board2"))
    assert check_suite("board2") == "board2"
    assert check_interface("instruction", "board2") == "instruction"
    reload_suites()
    with pytest.raises(ValueError, match="unknown suite 'board2'"):
        check_suite("board2")


def test_an_entry_point_adds_a_suite(tmp_path, monkeypatch, fresh_registry):
    assert "toy" not in suite_names()
    dist = tmp_path / "fake_suite-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-suite\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[r3.suites]\ntoy = toy_suite:SUITE\n")
    (tmp_path / "toy_suite.py").write_text(
        "from r3.suites import Suite\n"
        "SUITE = Suite(name='toy', title='Toy', tasks_module='toy_suite', grammar_module='toy_suite',\n"
        "              interfaces=('instruction',), default_history='none')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "toy" not in suite_names()  # the entry points are read once, before the package was there
    reload_suites()
    toy = get_suite("toy")
    assert toy.title == "Toy" and toy is sys.modules["toy_suite"].SUITE
    assert suite_names() == ("language_table", "packing", "toy")


def test_an_entry_point_that_loads_no_suite_is_refused(tmp_path, monkeypatch, caplog, fresh_registry):
    """Refused when chosen; the commands that list the suites run on without it (they once raised)."""
    dist = tmp_path / "bad_suite-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: bad-suite\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[r3.suites]\nbad = bad_suite:SUITE\n")
    (tmp_path / "bad_suite.py").write_text("SUITE = 'not a suite'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reload_suites()
    refusal = (
        "suite 'bad' (r3.suites entry point 'bad_suite:SUITE' of package 'bad-suite'): must load a Suite"
    )
    assert suite_names() == suite_names() == ("language_table", "packing")
    assert caplog.messages == [f"r3: skipped {refusal} named 'bad', got 'not a suite'"]  # once
    with pytest.raises(ValueError, match=re.escape(refusal)):
        get_suite("bad")


def test_the_registry_loads_no_simulator():
    code = (
        "import sys, r3.suites, r3.safety.goals, r3.reasoning.prompts, r3.rewards.judge\n"
        "r3.suites.suite_names()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'mujoco' or m.startswith('r3.sim')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_default_suite_is_registered():
    assert get_suite(DEFAULT_SUITE).name == DEFAULT_SUITE
