"""RoboGPT-R1's rewards on the packing plan interface's answers: the format terms, the LCS reward
against a reference plan, R = 0.2 format + 0.8 LCS/len(ref), as TRL reward functions; every expected
value below is computed by hand in its comment."""

from __future__ import annotations

import pickle

import pytest

from r3.instructions.plan import MAX_PLAN_CHARS
from r3.rewards import PackingPlanFormatReward, PackingPlanLCSReward, PlanLCSReward, plan_rewards
from r3.rewards.plan import (
    MAX_SCORED_CHARS,
    packing_action_dictionary,
    packing_plan_actions,
    packing_plan_answer_actions,
    packing_plan_format_terms,
)

DICTIONARY = packing_action_dictionary(["soup can", "sugar box"])
# a = pick(soup can), b = place(soup can), h = home(), c = pick(sugar box), d = place(sugar box)
REFERENCE = ["pick(soup can)", "place(soup can)", "home()", "pick(sugar box)", "place(sugar box)", "home()"]
A = "pick(soup can, [400, 500])"
B = "place(soup can, [650, 380])"
C = "pick(sugar box, [300, 320])"
D = "place(sugar box, [480, 540])"
H = "home()"


def answer(*steps: str, reasoning: str = "the cans are on the table.") -> str:
    plan = "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
    return f"Reasoning: {reasoning}\nPlan:\n{plan}"


@pytest.mark.parametrize(
    "completion, terms, lcs, total",
    [
        # the reference itself (other points): LCS 6/6; format 1
        (answer(A, B, H, C, D, H), (1.0, 1.0, 1.0), 1.0, 1.0),
        # sugar box first, c d h a b h: LCS is "a b h" or "c d h", 3/6; 0.2 + 0.8 * 0.5
        (answer(C, D, H, A, B, H), (1.0, 1.0, 1.0), 0.5, 0.6),
        # a h: LCS 2/6; 0.2 + 0.8 / 3
        (answer(A, H), (1.0, 1.0, 1.0), 2 / 6, 0.2 + 0.8 * 2 / 6),
        # place before pick, b a: LCS 1/6 (order matters); 0.2 + 0.8 / 6
        (answer(B, A), (1.0, 1.0, 1.0), 1 / 6, 0.2 + 0.8 / 6),
        # an item the scene does not hold: well-formed, not valid (validity 1/2); LCS 1/6 (the home)
        (answer("pick(cracker box, [1, 2])", H), (1.0, 1.0, 0.5), 1 / 6, 0.2 * (0.3 + 0.3 + 0.2) + 0.8 / 6),
        # prose between steps: 2 of 3 lines are steps; format 0.3 + 0.3 * 2/3 + 0.4 * 2/3 = 0.7667
        (
            "Reasoning: r.\nPlan:\n1. " + A + "\nthen\n2. " + H,
            (1.0, 2 / 3, 2 / 3),
            2 / 6,
            0.2 * (0.3 + 0.2 + 0.4 * 2 / 3) + 0.8 * 2 / 6,
        ),
        # no reasoning: half the sections; 0.2 * (0.15 + 0.3 + 0.4) + 0.8 * 1
        (answer(A, B, H, C, D, H).split("\n", 1)[1], (0.5, 1.0, 1.0), 1.0, 0.2 * 0.85 + 0.8),
    ],
)
def test_format_lcs_and_total_by_hand(completion, terms, lcs, total):
    got = packing_plan_format_terms(completion, DICTIONARY)
    assert (got["section"], got["type"], got["validity"]) == pytest.approx(terms)
    kwargs = {"action_dictionary": [DICTIONARY], "reference_plan": [REFERENCE]}
    assert PackingPlanLCSReward()([completion], **kwargs) == [pytest.approx(lcs)]
    (result,) = plan_rewards(answers="packing").evaluate([completion], **kwargs)
    assert result.total == pytest.approx(total)
    assert result.terms["plan_format"] == pytest.approx(0.3 * terms[0] + 0.3 * terms[1] + 0.4 * terms[2])


@pytest.mark.parametrize(
    "completion, fmt, lcs",
    [
        ("", 0.0, 0.0),
        ("   \n\t", 0.0, 0.0),
        # more than the scorer reads: every term 0, whatever it holds
        (answer(A, B, H) + "x" * MAX_SCORED_CHARS, 0.0, 0.0),
        # 25 steps: only the grammar's first 19 count as steps, so type and validity are 19/25; LCS 2/6
        # (the reference's two homes)
        (answer(*[H] * 25), 0.3 + 0.7 * 19 / 25, 2 / 6),
        # 999 steps (under the scored size, over the plan grammar's): a plan refused as a whole has no
        # step; format 0.3 (sections only), LCS 0
        (answer(*[H] * 999), 0.3, 0.0),
        # one valid step padded past the plan grammar's size with blank lines or spaces: no step
        (answer(A, H).replace("\n2. ", "\n" * MAX_PLAN_CHARS + "2. "), 0.3, 0.0),
        ("Reasoning: r.\nPlan:\n1." + " " * MAX_PLAN_CHARS + A, 0.3, 0.0),
        # steps after done() are no steps: 2 of 3 lines; LCS 1/6
        (answer(A, "done()", B), 0.3 + 0.7 * 2 / 3, 1 / 6),
        # a full-width step number is no step: format 0.3 (sections only), LCS 0
        ("Reasoning: r.\nPlan:\n\uff11. " + A, 0.3, 0.0),
        # a Cyrillic letter in the label: a call of the right form, outside the dictionary
        ("Reasoning: r.\nPlan:\n1. pick(soup c\u0430n, [1, 2])", 0.3 + 0.3, 0.0),
        # two plans under two headers: no plan section (the parser refuses both); section 1/2
        (answer(A, B) + "\nPlan:\n1. " + A, 0.3 * 0.5, 0.0),
        # two plans under one header: the second restarts at 1, so its steps do not count; 2 of 4 lines
        (answer(A, H, A, H).replace("3. ", "1. ").replace("4. ", "2. "), 0.3 + 0.15 + 0.2, 2 / 6),
        # reasoning only
        ("Reasoning: I would pick the soup can.", 0.15, 0.0),
        # steps apart by a vertical tab (or U+2028): one line, no step, as the plan grammar reads it
        (answer(A, H).replace("\n2. ", "\v2. "), 0.3, 0.0),
        (answer(A, H).replace("\n2. ", "\u20282. "), 0.3, 0.0),
        # ... or ending a line before its newline, where the call alone would read as valid
        (answer(A, H).replace("\n2. ", "\x1c\n2. "), 0.3, 0.0),
        (answer(A, H).replace("\n2. ", "\v\n2. "), 0.3, 0.0),
        # CRLF line ends read as newlines: format 1, LCS 2/6
        (answer(A, H).replace("\n", "\r\n"), 1.0, 2 / 6),
        # an emoji plan
        ("Reasoning: \U0001f916\nPlan:\n\U0001f916", 0.3, 0.0),
    ],
)
def test_hostile_completions_score_in_range_and_by_hand(completion, fmt, lcs):
    kwargs = {"action_dictionary": [DICTIONARY], "reference_plan": [REFERENCE]}
    (got_fmt,) = PackingPlanFormatReward()([completion], **kwargs)
    (got_lcs,) = PackingPlanLCSReward()([completion], **kwargs)
    assert got_fmt == pytest.approx(fmt) and got_lcs == pytest.approx(lcs)
    assert 0.0 <= got_fmt <= 1.0 and 0.0 <= got_lcs <= 1.0


def test_repeating_a_plan_gains_no_lcs():
    once = packing_plan_answer_actions(answer(A, B, H))
    twice = packing_plan_answer_actions(answer(A, B, H, A, B, H))
    assert once == REFERENCE[:3] and twice == REFERENCE[:3] + REFERENCE[:3]
    lcs = PackingPlanLCSReward()
    assert lcs([answer(A, B, H, A, B, H)], reference_plan=[REFERENCE[:3]]) == [1.0]  # LCS 3 of 3, not more


def test_the_rewards_take_chat_completions_and_check_their_columns():
    chat = [{"role": "assistant", "content": [{"type": "text", "text": answer(A, B, H, C, D, H)}]}]
    kwargs = {"action_dictionary": [DICTIONARY], "reference_plan": [REFERENCE]}
    assert plan_rewards(answers="packing")([chat], **kwargs) == [pytest.approx(1.0)]
    with pytest.raises(ValueError, match="action_dictionary"):
        PackingPlanFormatReward()([chat])
    with pytest.raises(ValueError, match="reference_plan"):
        PackingPlanLCSReward()([chat])
    with pytest.raises(ValueError, match="1 values for 2"):
        PackingPlanLCSReward()([chat, chat], reference_plan=[REFERENCE])
    with pytest.raises(ValueError, match="answers"):
        plan_rewards(answers="yaml")
    composer = plan_rewards(answers="packing")
    assert [f.__name__ for f in composer.trl_reward_funcs()] == ["plan_format", "plan_lcs"]
    assert composer.trl_reward_weights() == [0.2, 0.8]
    for fn in (PackingPlanFormatReward(), PackingPlanLCSReward(), composer):
        assert pickle.loads(pickle.dumps(fn)).__name__ == fn.__name__


@pytest.mark.parametrize("reference", ["home()", [None], [1, 2], {"plan": "home()"}], ids=repr)
@pytest.mark.parametrize("reward", [PackingPlanLCSReward(), PlanLCSReward()], ids=lambda r: type(r).__name__)
def test_a_reference_plan_that_is_no_list_of_action_names_skips_its_sample_with_a_warning(reward, reference):
    """Found by a hostile sweep: a reference stored as one string was scored letter by letter, and
    ``[None]`` or ``[1, 2]`` scored 0.0 without a word; like a plan dictionary that is no dictionary,
    it is a data bug, not a 0."""
    completion = answer(A, H) if isinstance(reward, PackingPlanLCSReward) else '{"executable_plan": []}'
    with pytest.warns(
        RuntimeWarning, match=r"plan_lcs: sample skipped, reference_plan .* is no list of action"
    ):
        assert reward([completion, completion], reference_plan=[reference, ["home()"]])[0] is None


def test_a_reference_plan_is_stored_as_action_names():
    assert packing_plan_actions("1. " + A + "\n2. " + H + "\n3. done()") == [
        "pick(soup can)",
        "home()",
        "done()",
    ]
    with pytest.raises(ValueError, match="not a plan"):
        packing_plan_actions("pick the soup can")
