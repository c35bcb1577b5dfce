"""Formula tests for the simulator-free reward terms and plan rewards (table-driven)."""

import math

import pytest

from r3.rewards.plan import (
    MAX_JSON_PLAN_CHARS,
    MAX_JSON_PLAN_STEPS,
    plan_actions,
    plan_format_reward,
    plan_format_terms,
    plan_reward,
)
from r3.rewards.terms import exact_match, lcs_length, lcs_reward, length_penalty, normalise_instruction_text


@pytest.mark.parametrize(
    "candidate, reference, expected",
    [
        ("Pack the soup can into the small tray.", "Pack the soup can into the small tray.", 1.0),
        ("pack the soup can into the small tray", "Pack the soup can into the small tray.", 1.0),
        ("  Pack the soup  can\tinto the small tray . ", "pack the soup can into the small tray", 1.0),
        (
            "Pack the soup can into the small tray..",
            "Pack the soup can into the small tray",
            0.0,
        ),  # one period only
        ("Pack the soup can into the large tray.", "Pack the soup can into the small tray.", 0.0),
        ("Put the soup can in the small tray.", "Pack the soup can into the small tray.", 0.0),
        ("", "", 1.0),
        ("", "Pack the soup can into the small tray.", 0.0),
    ],
)
def test_exact_match(candidate, reference, expected):
    assert exact_match(candidate, reference) == expected


def test_normalise_instruction_text():
    assert normalise_instruction_text(" A  B. ") == "a b"


def _words(n):
    return " ".join(["w"] * n)


@pytest.mark.parametrize(
    "n, target, expected",
    [
        (0, 80, -1.0),  # n clipped to 1: log2(1/80) < -1, clipped to -1
        (1, 80, -1.0),
        (40, 80, -1.0),  # half the target costs exactly 1
        (60, 80, math.log2(60 / 80)),
        (79, 80, math.log2(79 / 80)),
        (80, 80, 0.0),  # n >= T: no penalty
        (500, 80, 0.0),
        (0, 1, 0.0),  # T = 1: even the empty response is clipped up to the target
        (3, 4, math.log2(3 / 4)),
    ],
)
def test_length_penalty(n, target, expected):
    assert length_penalty(_words(n), target) == pytest.approx(expected)


def test_length_penalty_counts_whitespace_words_and_rejects_bad_target():
    assert length_penalty("a\nb\tc  d", 8) == -1.0
    with pytest.raises(ValueError, match="target_words"):
        length_penalty("a", 0)


@pytest.mark.parametrize(
    "predicted, reference, expected",
    [
        (["a", "b", "c"], ["a", "b", "c"], 1.0),
        (["a", "c"], ["a", "b", "c"], 2 / 3),
        (["c", "b", "a"], ["a", "b", "c"], 1 / 3),  # order matters
        (["x", "a", "y", "b"], ["a", "b"], 1.0),  # extra predicted steps are not penalised here
        (["a", "a", "a"], ["a", "b", "a"], 2 / 3),  # repeated actions count once per match
        (["a"], ["a", "a", "a"], 1 / 3),
        (["a", "a", "b", "b"], ["a", "b", "a", "b"], 3 / 4),
        ([], ["a"], 0.0),
        ([], [], 1.0),  # empty reference, empty prediction
        (["a"], [], 0.0),  # empty reference, superfluous steps
        (["Pick Up", " put  down "], ["pick up", "put down"], 1.0),  # names normalised
    ],
)
def test_lcs_reward(predicted, reference, expected):
    assert lcs_reward(predicted, reference) == pytest.approx(expected)


def test_lcs_length_is_symmetric():
    assert lcs_length("abcbdab", "bdcaba") == lcs_length("bdcaba", "abcbdab") == 4


DICT = {1: "find apple", 2: "pick up apple", 3: "put down"}
SECTIONS = (
    '"visual_state_description": "an apple on a table", "reasoning_and_reflection": "get it", '
    '"language_plan": "find, pick, put"'
)


def _plan(steps, sections=SECTIONS):
    return "{" + sections + ', "executable_plan": ' + steps + "}"


GOOD_STEPS = (
    '[{"action_id": 1, "action_name": "find apple"}, {"action_id": 2, "action_name": "Pick up apple"}]'
)


@pytest.mark.parametrize(
    "plan, expected",
    [
        (_plan(GOOD_STEPS), {"section": 1.0, "type": 1.0, "validity": 1.0}),
        ("```json\n" + _plan(GOOD_STEPS) + "\n```", {"section": 1.0, "type": 1.0, "validity": 1.0}),
        (
            _plan(GOOD_STEPS, '"visual_state_description": "x", "language_plan": "y"'),
            {"section": 0.75, "type": 1.0, "validity": 1.0},
        ),  # one section missing
        (
            _plan(
                GOOD_STEPS,
                '"visual_state_description": "", "reasoning_and_reflection": 3, "language_plan": "y"',
            ),
            {"section": 0.5, "type": 1.0, "validity": 1.0},
        ),  # empty and mistyped
        (_plan("[]"), {"section": 1.0, "type": 0.0, "validity": 0.0}),  # no steps
        (_plan('"find the apple"'), {"section": 0.75, "type": 0.0, "validity": 0.0}),
        (
            _plan(
                '[{"action_id": "1", "action_name": "find apple"}, '
                '{"action_id": true, "action_name": "find apple"}]'
            ),
            {"section": 1.0, "type": 0.0, "validity": 0.0},
        ),  # str and bool ids
        (
            _plan('[{"action_id": 1, "action_name": ""}, {"action_id": 3, "action_name": "put down"}]'),
            {"section": 1.0, "type": 0.5, "validity": 0.5},
        ),
        (
            _plan(
                '[{"action_id": 9, "action_name": "teleport"}, {"action_id": 3, "action_name": "put down"}]'
            ),
            {"section": 1.0, "type": 1.0, "validity": 0.5},
        ),  # invented id is invalid
        (
            _plan('[{"action_id": 1, "action_name": "put down"}, "find apple"]'),
            {"section": 1.0, "type": 0.5, "validity": 0.0},
        ),  # wrong name, bare string
        ("first find the apple, then pick it up", {"section": 0.0, "type": 0.0, "validity": 0.0}),
        ('["not", "an", "object"]', {"section": 0.0, "type": 0.0, "validity": 0.0}),
    ],
)
def test_plan_format_terms(plan, expected):
    assert plan_format_terms(plan, DICT) == pytest.approx(expected)


@pytest.mark.parametrize(
    "terms, expected",
    [
        ({"section": 1.0, "type": 1.0, "validity": 1.0}, 1.0),
        ({"section": 1.0, "type": 1.0, "validity": 0.5}, 0.8),
        ({"section": 0.75, "type": 0.0, "validity": 0.0}, 0.225),
    ],
)
def test_plan_format_weights(monkeypatch, terms, expected):
    monkeypatch.setattr("r3.rewards.plan.plan_format_terms", lambda plan, d: terms)
    assert plan_format_reward("ignored", DICT) == pytest.approx(expected)


def test_action_dictionary_with_string_keys():
    assert plan_format_reward(_plan(GOOD_STEPS), {"1": "find apple", "2": "pick up apple"}) == pytest.approx(
        1.0
    )


@pytest.mark.parametrize(
    "plan, reference, expected",
    [
        (_plan(GOOD_STEPS), ["find apple", "pick up apple"], 1.0),
        (_plan(GOOD_STEPS), ["find apple", "pick up apple", "put down", "find apple"], 0.2 + 0.8 * 0.5),
        ("no plan", ["find apple"], 0.0),
        (_plan("[]"), [], 0.2 * 0.3 + 0.8 * 1.0),  # empty reference, empty plan: LCS term 1
    ],
)
def test_plan_reward(plan, reference, expected):
    assert plan_reward(plan, reference, DICT) == pytest.approx(expected)


def test_plan_actions_skips_malformed_steps():
    assert plan_actions(_plan('[{"action_id": 1, "action_name": "a"}, 7, {"action_id": 2}]')) == ["a"]
    assert plan_actions("nope") == []


_STEP = '{"action_id": 1, "action_name": "find apple"}'


@pytest.mark.parametrize(
    "plan",
    [
        "[" * 100_000 + "]" * 100_000,  # json: RecursionError
        '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}",
        _plan('[{"action_id": 1' + "0" * 5000 + ', "action_name": "find apple"}]'),  # json: ValueError
        _plan("[" + ", ".join([_STEP] * 10**6) + "]"),  # a million steps: more than is read
        _plan("[" + ", ".join([_STEP] * 3000) + "]"),
        "x" * (MAX_JSON_PLAN_CHARS + 1),
        # two answers in one: a second plan, a step's second name (json keeps the last of each)
        _plan('[{"action_id": 9, "action_name": "fly"}], "executable_plan": ' + GOOD_STEPS),
        _plan('[{"action_id": 3, "action_name": "fly", "action_name": "put down"}]'),
    ],
    ids=[
        "deep",
        "deep_in_object",
        "huge_int",
        "million_steps",
        "longer_than_read",
        "long_text",
        "plan_twice",
        "name_twice",
    ],
)
def test_a_json_plan_that_cannot_be_read_scores_zero_and_never_raises(plan):
    assert plan_format_terms(plan, DICT) == {"section": 0.0, "type": 0.0, "validity": 0.0}
    assert plan_actions(plan) == []
    assert plan_reward(plan, ["find apple"] * 20, DICT) == 0.0


def test_the_steps_after_the_longest_plan_are_no_steps():
    n = 2 * MAX_JSON_PLAN_STEPS
    plan = _plan("[" + ", ".join([_STEP] * n) + "]")
    assert plan_format_terms(plan, DICT) == {"section": 1.0, "type": 0.5, "validity": 0.5}
    assert plan_actions(plan) == ["find apple"] * MAX_JSON_PLAN_STEPS
    # repeating an action beyond the cap gains no LCS over a longer reference
    assert lcs_reward(plan_actions(plan), ["find apple"] * n) == 0.5


@pytest.mark.parametrize("key", ["one", "1" + "0" * 5000, 1.5, None, True])
def test_an_action_dictionary_key_that_is_no_id_is_named(key):
    with pytest.raises(ValueError, match="is not an integer action id"):
        plan_format_reward(_plan(GOOD_STEPS), {key: "find apple"})
