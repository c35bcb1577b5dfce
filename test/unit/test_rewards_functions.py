"""TRL-contract reward functions and the reward composer (table-driven)."""

import math
import pickle

import pytest

from r3.rewards import (
    JudgeReward,
    LengthPenaltyReward,
    PlanFormatReward,
    PlanLCSReward,
    RewardComposer,
    completion_text,
    instruction_rewards,
    plan_rewards,
)

ANSWER = "Reasoning: the red moon sits low on the board.\nInstruction: push the red moon upwards"


@pytest.mark.parametrize(
    "completion, text",
    [
        ("plain", "plain"),
        ({"role": "assistant", "content": "one message"}, "one message"),
        ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "a"),
        (
            [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "x"},
                        {"type": "image"},
                        {"type": "text", "text": "y"},
                    ],
                }
            ],
            "xy",
        ),
        ([{"role": "assistant", "content": None}], ""),
    ],
)
def test_completion_text(completion, text):
    assert completion_text(completion) == text


_GARBAGE = [
    42,
    None,
    [],
    ["Instruction: touch the red moon"],  # a list of strings is no conversation
    [{"role": "assistant", "content": [{"type": "text", "text": 5}]}],
    [
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Instruction: "}, {"type": "text", "text": 5}],
        }
    ],
    [{"role": "assistant", "content": 42}],
    {"role": "assistant", "content": {"text": "Instruction: touch the red moon"}},
    [{"role": "assistant", "content": "Instruction: touch the red moon"}, "x"],
]


@pytest.mark.parametrize("completion", _GARBAGE)
def test_completion_text_of_anything_else_is_no_text(completion):
    assert completion_text(completion) == ""


@pytest.mark.parametrize("completion", _GARBAGE)
def test_every_reward_scores_a_completion_without_text_as_invalid_and_never_raises(completion):
    """The reward contract: any completion gets a score (the reward's score of no answer), never an
    exception (TypeError and AttributeError stopped a training run)."""
    from r3.rewards import PackingPlanFormatReward, PackingPlanLCSReward

    cases = [
        (JudgeReward(), {"expert_instruction": ["touch the red moon"]}, 0.0),
        (LengthPenaltyReward(), {}, -1.0),
        (PlanFormatReward(), {"action_dictionary": [{1: "pick up"}]}, 0.0),
        (PlanLCSReward(), {"reference_plan": [["pick up"]]}, 0.0),
        (PackingPlanFormatReward(), {"action_dictionary": [["home()", "done()"]]}, 0.0),
        (PackingPlanLCSReward(), {"reference_plan": [["home()"]]}, 0.0),
    ]
    for reward, columns, invalid in cases:
        assert reward([completion], **columns) == [invalid], reward.__name__


def test_a_plan_dictionary_key_that_is_no_action_id_skips_its_sample_with_a_warning():
    plan = '{"executable_plan": [{"action_id": 1, "action_name": "pick up"}]}'
    with pytest.warns(RuntimeWarning, match="'one' is not an integer action id"):
        assert PlanFormatReward()([plan, plan], action_dictionary=[{"one": "pick up"}, {1: "pick up"}]) == [
            None,
            0.3 * 0.25 + 0.3 * 1.0 + 0.4 * 1.0,  # one of the four sections
        ]


@pytest.mark.parametrize(
    "completion, reference, suite, expected",
    [
        (ANSWER, "move the red moon up", None, 1.0),
        ([{"role": "assistant", "content": ANSWER}], "move the red moon up", "language_table", 1.0),
        (ANSWER, "move the red moon up slightly", None, 0.5),
        (ANSWER, "move the red moon down", None, 0.0),
        ("Reasoning: no answer given", "move the red moon up", None, 0.0),
        ("Reasoning: hmm\nInstruction: move the red block up", "move the red moon up", None, 0.0),
        (
            "Reasoning: a\nInstruction: touch the red moon\nInstruction: touch the red moon",
            "touch the red moon",
            None,
            0.0,
        ),
        (
            "Instruction: touch the red moon",
            "touch the red moon",
            None,
            1.0,
        ),  # no reasoning: length term's job
        (
            "Reasoning: ok\nInstruction: Pack the soup can into the small tray.",
            "Pack the soup can into the small tray.",
            "packing",
            1.0,
        ),
        (
            "Reasoning: ok\nInstruction: Pack the soup can into the large tray.",
            "Pack the soup can into the small tray.",
            "packing",
            0.0,
        ),
    ],
)
def test_judge_reward(completion, reference, suite, expected):
    kwargs = {"expert_instruction": [reference]}
    if suite:
        kwargs["suite"] = [suite]
    assert JudgeReward()([completion], **kwargs) == [expected]


def test_judge_reward_columns_are_checked():
    with pytest.raises(ValueError, match="expert_instruction"):
        JudgeReward()([ANSWER])
    with pytest.raises(ValueError, match="2 values for 1"):
        JudgeReward()([ANSWER], expert_instruction=["a", "b"])
    with pytest.raises(ValueError, match="unknown suite"):
        JudgeReward()([ANSWER], expert_instruction=["touch the red moon"], suite=["chess"])
    with pytest.warns(RuntimeWarning, match="skipped"):
        assert JudgeReward()([ANSWER], expert_instruction=["move the red block up"]) == [None]


def test_length_reward():
    assert LengthPenaltyReward(target_words=10)(
        [ANSWER, "Instruction: x", " ".join(["w"] * 12)]
    ) == pytest.approx([0.0, -1.0, 0.0])


PLAN = (
    '{"visual_state_description": "apple", "reasoning_and_reflection": "get it", "language_plan": "pick", '
    '"executable_plan": [{"action_id": 2, "action_name": "pick up apple"}]}'
)


def test_plan_rewards():
    kwargs = {
        "action_dictionary": [{"1": "find apple", "2": "pick up apple"}],
        "reference_plan": [["find apple", "pick up apple"]],
    }
    assert PlanFormatReward()([PLAN], **kwargs) == [1.0]
    assert PlanLCSReward()([PLAN], **kwargs) == [0.5]
    (result,) = plan_rewards().evaluate([PLAN], **kwargs)
    assert result.terms == {"plan_format": 1.0, "plan_lcs": 0.5}
    assert result.total == pytest.approx(0.2 * 1.0 + 0.8 * 0.5)
    for fn in (PlanFormatReward(), PlanLCSReward()):
        with pytest.raises(ValueError, match="column"):
            fn([PLAN])


def test_composer_reports_unscaled_terms_and_total():
    n = len(ANSWER.split())
    composer = instruction_rewards(target_words=20, weights={"judge": 2.0, "length": 0.5})
    results = composer.evaluate(
        [ANSWER, "Instruction: move the red moon down"], expert_instruction=["move the red moon up"] * 2
    )
    assert [r.terms["judge"] for r in results] == [1.0, 0.0]
    assert [r.terms["length"] for r in results] == pytest.approx([math.log2(n / 20), -1.0])
    assert [r.total for r in results] == pytest.approx([2.0 + 0.5 * math.log2(n / 20), -0.5])
    assert composer(["Instruction: touch the red moon"], expert_instruction=["touch the red moon"]) == [
        pytest.approx(2.0 - 0.5)
    ]


def test_composer_none_term_skips_the_sample():
    composer = RewardComposer(
        {"a": lambda completions, **kw: [None, 1.0], "b": lambda completions, **kw: [1.0, 1.0]},
        {"a": 1.0, "b": 1.0},
    )
    assert composer(["x", "y"]) == [None, 2.0]


@pytest.mark.parametrize(
    "terms, weights, match",
    [
        ({}, {}, "at least one"),
        ({"a": len}, {"b": 1.0}, "exactly the terms"),
        ({"a": len}, {"a": float("nan")}, "finite"),
        ({"a": len}, {"a": True}, "finite"),
        ({"a": "not callable"}, {"a": 1.0}, "callable"),
    ],
)
def test_composer_validates(terms, weights, match):
    with pytest.raises(ValueError, match=match):
        RewardComposer(terms, weights)


def test_composer_checks_term_lengths():
    composer = RewardComposer({"a": lambda completions, **kw: [1.0]}, {"a": 1.0})
    with pytest.raises(ValueError, match="1 values for 2"):
        composer(["x", "y"])


def test_trl_contract_names_weights_and_pickling():
    composer = instruction_rewards()
    funcs, weights = composer.trl_reward_funcs(), composer.trl_reward_weights()
    assert [f.__name__ for f in funcs] == ["judge", "length"] and weights == [1.0, 1.0]
    for fn in (*funcs, PlanFormatReward(), PlanLCSReward(), composer, plan_rewards()):
        copy = pickle.loads(pickle.dumps(fn))
        assert copy.__name__ == fn.__name__
    clone = pickle.loads(pickle.dumps(funcs[0]))
    assert clone([ANSWER], expert_instruction=["move the red moon up"], prompts=["p"]) == [1.0]
