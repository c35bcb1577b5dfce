"""The judge-agreement harness, run on the shipped labelled set (R^3 Table 13 figures)."""

import json
import math
from collections import Counter

import pytest

from r3.instructions.language_table import InstructionType, parse
from r3.rewards.agreement import (
    DEFAULT_CASES,
    Case,
    cohen_kappa,
    evaluate,
    load_cases,
    main,
    pearson_r,
    rule_backend,
)
from r3.rewards.result import JudgeResult, Tier


@pytest.mark.parametrize(
    "a, b, kappa",
    [
        ([0, 0, 1, 1], [0, 0, 1, 1], 1.0),
        ([0, 0, 1, 1], [0, 0, 1, 0], 0.5),
        ([0, 1, 0, 1], [1, 0, 1, 0], -1.0),
        ([0.25, 0.25], [0.25, 0.25], 1.0),  # one class on both sides
        ([0, 0.25, 0.5, 1], [0, 0.25, 0.5, 1], 1.0),
    ],
)
def test_cohen_kappa(a, b, kappa):
    assert cohen_kappa(a, b) == pytest.approx(kappa)


@pytest.mark.parametrize(
    "a, b, r",
    [
        ([0, 0.5, 1], [0, 0.5, 1], 1.0),
        ([0, 0.5, 1], [1, 0.5, 0], -1.0),
        ([1, 1, 1], [0, 0.5, 1], math.nan),
    ],
)
def test_pearson_r(a, b, r):
    assert pearson_r(a, b) == pytest.approx(r, nan_ok=True)


@pytest.mark.parametrize(
    "fn, args", [(cohen_kappa, ([], [])), (cohen_kappa, ([1], [1, 0])), (pearson_r, ([1], [1]))]
)
def test_rating_lists_are_checked(fn, args):
    with pytest.raises(ValueError):
        fn(*args)


def test_bad_label_is_rejected(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps({"candidate": "a", "reference": "b", "human_score": 0.3}) + "\n")
    with pytest.raises(ValueError, match="human_score"):
        load_cases(path)


def test_confusion_and_disagreements():
    cases = [Case("a", "b", 1.0), Case("c", "d", 0.25), Case("e", "f", 0.0)]
    verdicts = {"a": Tier.LINGUISTIC, "c": Tier.NO_MATCH, "e": Tier.NO_MATCH}
    report = evaluate(cases, lambda c: JudgeResult(verdicts[c.candidate], "x"))
    assert (report.n, report.agree) == (3, 2)
    assert report.confusion[1][0] == 1 and len(report.disagreements) == 1


def test_labelled_set_covers_the_rubric():
    cases = load_cases()
    assert len(cases) >= 150
    categories = Counter(c.category.split("/")[0] for c in cases)
    for group in ("type", "paraphrase", "adverb", "reverse", "different", "invalid", "packing", "semantic"):
        assert categories[group] > 0, group
    kinds = {c.category for c in cases}
    for paraphrase in ("verb", "location", "direction", "article", "preposition"):
        assert f"paraphrase/{paraphrase}" in kinds
    types = {parse(c.reference).type for c in cases if c.suite == "language_table"}
    assert types == set(InstructionType)
    semantic = [c for c in cases if c.snapshot is not None]
    assert all(c.snapshot.is_file() for c in semantic)
    assert sum(c.human_score == 0.25 for c in semantic) >= 20
    assert {c.human_score for c in cases} == {0.0, 0.25, 0.5, 1.0}


def test_agreement_on_the_labelled_set(capsys):
    report = evaluate(load_cases(), rule_backend())
    print(report.format())
    assert report.n >= 150 and not report.failures
    # README: 98.0 % agreement, Cohen's kappa 0.971, Pearson 0.997 on 203 cases. The judge is
    # deterministic; these bounds allow one more disagreement than published (198 of 203), no more.
    assert report.agreement >= 0.975
    assert report.kappa >= 0.96
    assert report.pearson >= 0.99
    # Like R^3's judge, any disagreement should sit between "no match" and "semantic match".
    assert all({c.human_score, r.score} <= {0.0, 0.25} for c, r in report.disagreements)


def test_main_prints_table_13_figures(capsys):
    assert main([str(DEFAULT_CASES)]) == 0
    out = capsys.readouterr().out
    assert "Cohen's kappa" in out and "Pearson r" in out
