"""The semantic interface's answers (ERR actions): the action grammar, the "Action:" answer through the
shared response rules, property tests and 1,000 fuzzed hostile answers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scripted import fuzzed_decisions

from r3.instructions import semantic
from r3.instructions.packing import ITEMS
from r3.instructions.semantic import ActionError, ActionErrorKind, ActionType, SemanticAction, parse
from r3.reasoning import ReasonerInput
from r3.reasoning.backends.base import ReasonerBackend
from r3.reasoning.parsing import ErrorKind, ParsedResponse, ResponseError, parse_response
from r3.reasoning.reasoner import decide
from r3.safety.fuzz import SEMANTIC_CATEGORIES, TRAILING_SEPARATORS, hostile_outputs

IMAGE = np.zeros((8, 8, 3), dtype=np.uint8)
K = ActionErrorKind
#: What may follow an answer's last line and be dropped: quotes, emphasis, a final period.
WRAPPERS = "\"'`*_“”‘’«»."


@pytest.mark.parametrize(
    "text, expected",
    [
        ("pick(soup can, [412, 530])", SemanticAction(ActionType.PICK, "soup can", (412, 530))),
        ("Pick( 'Soup  Can' , [ 412 ,530 ] )", SemanticAction(ActionType.PICK, "soup can", (412, 530))),
        ('place("sugar box", [0, 1000])', SemanticAction(ActionType.PLACE, "sugar box", (0, 1000))),
        ("home()", SemanticAction(ActionType.HOME)),
        ("  DONE( ) ", SemanticAction(ActionType.DONE)),
    ],
)
def test_valid_calls_parse(text, expected):
    assert parse(text) == expected


@pytest.mark.parametrize(
    "text, kind",
    [
        (None, K.NOT_TEXT),
        (b"home()", K.NOT_TEXT),
        ("   ", K.EMPTY),
        ("home" * 100, K.TOO_LONG),
        ("pick soup can", K.NOT_A_CALL),
        ("pick(soup can, (1, 2))", K.NOT_A_CALL),
        ("robot.home()", K.NOT_A_CALL),
        ("fly()", K.UNKNOWN_ACTION),
        ("home() done()", K.TRAILING_TEXT),
        ("home();", K.TRAILING_TEXT),
        ("pick(soup can, [1, 2]) then place(soup can, [3, 4])", K.TRAILING_TEXT),
        ("home(now)", K.BAD_ARGUMENTS),
        ("pick(soup can)", K.BAD_ARGUMENTS),
        ("pick(soup can, [1, 2, 3])", K.BAD_ARGUMENTS),
        ('pick(soup can", [1, 2])', K.BAD_ARGUMENTS),
        ("pick(soupcan, [1, 2])", K.UNKNOWN_LABEL),
        ("pick(soup c\u0430n, [1, 2])", K.UNKNOWN_LABEL),  # a Cyrillic a
        # Found by a hostile client: str.split() folded these into a space, and the pick was carried out.
        ("pick(soup\x1fcan, [1, 2])", K.UNKNOWN_LABEL),
        ("pick(soup\x85can, [1, 2])", K.UNKNOWN_LABEL),
        ("pick(soup can\u200b, [1, 2])", K.UNKNOWN_LABEL),
        ("place(small tray, [1, 2])", K.UNKNOWN_LABEL),
        ("pick(soup can, [-1, 2])", K.INVALID_POINT),
        ("pick(soup can, [1001, 2])", K.INVALID_POINT),
        ("pick(soup can, [1.5, 2])", K.INVALID_POINT),
        ("pick(soup can, [nan, 2])", K.INVALID_POINT),
        ("pick(soup can, [2, inf])", K.INVALID_POINT),
        ("pick(soup can, [+5, 2])", K.INVALID_POINT),
        ("pick(soup can, [\u0663, 2])", K.INVALID_POINT),  # an Arabic-Indic three
        ("pick(soup can, [, 2])", K.INVALID_POINT),
    ],
)
def test_invalid_calls_are_refused_with_their_kind(text, kind):
    result = parse(text)
    assert isinstance(result, ActionError) and result.kind is kind and result.reason


def test_actions_validate_themselves():
    with pytest.raises(ValueError):
        SemanticAction(ActionType.PICK, "soup can", (1001, 0))
    with pytest.raises(ValueError):
        SemanticAction(ActionType.PICK, "soup can", (1.0, 0))
    with pytest.raises(ValueError):
        SemanticAction(ActionType.HOME, "soup can")


actions = st.one_of(
    st.builds(
        SemanticAction,
        st.sampled_from(semantic.POINTED),
        st.sampled_from(ITEMS),
        st.tuples(st.integers(0, 1000), st.integers(0, 1000)),
    ),
    st.builds(SemanticAction, st.sampled_from([ActionType.HOME, ActionType.DONE])),
)


@given(actions)
def test_canonical_text_round_trips(action):
    assert parse(semantic.format_instruction(action)) == action


@given(st.text())
def test_parse_never_raises_and_accepts_only_valid_actions(text):
    result = parse(text)
    assert isinstance(result, SemanticAction | ActionError)
    if isinstance(result, SemanticAction):
        assert parse(semantic.format_instruction(result)) == result


@given(
    st.sampled_from(semantic.POINTED),
    st.sampled_from(ITEMS),
    st.one_of(st.integers(), st.floats(allow_nan=True, allow_infinity=True)),
    st.integers(0, 1000),
)
def test_points_outside_0_1000_or_not_integers_are_refused(kind, item, x, y):
    text = f"{kind.value}({item}, [{x}, {y}])"
    valid = isinstance(x, int) and 0 <= x <= 1000
    result = parse(text)
    assert isinstance(result, SemanticAction) == valid, text
    if not valid:
        assert result.kind in (K.INVALID_POINT, K.TOO_LONG), text


@given(actions, actions, st.sampled_from(TRAILING_SEPARATORS + (" ", "; ", ", ", " then ")))
def test_a_second_call_after_the_first_is_refused(first, second, sep):
    a, b = semantic.format_instruction(first), semantic.format_instruction(second)
    result = parse_response(f"Reasoning: r.\nAction: {a}{sep}{b}", "packing", interface="semantic")
    assert isinstance(result, ResponseError), (a, sep, b)
    assert result.kind in (ErrorKind.TRAILING_TEXT, ErrorKind.INSTRUCTION_OUTSIDE_GRAMMAR), result


@given(actions, st.text(min_size=1))
def test_trailing_text_on_the_call_line_is_refused(action, tail):
    text = f"Action: {semantic.format_instruction(action)} {tail}"
    result = parse_response(text, "packing", mode="instruction_only", interface="semantic")
    if not all(c.isspace() or c in WRAPPERS for c in tail):
        assert isinstance(result, ResponseError), text


@pytest.mark.parametrize(
    "text, kind, reason_starts",
    [
        ("Reasoning: it is on the table.\nAction: pick(soup can, [412, 530])", None, ""),
        ("Reasoning: r.\nAction: home()\nAction: done()", ErrorKind.MULTIPLE_INSTRUCTIONS, "2 'Action:'"),
        ("Reasoning: r.\nAction: home()\nthen done()", ErrorKind.TRAILING_TEXT, "text after"),
        ("Reasoning: r.\nAction: home() done()", ErrorKind.INSTRUCTION_OUTSIDE_GRAMMAR, "trailing_text:"),
        ("Reasoning: r.\nInstruction: home()", ErrorKind.NO_INSTRUCTION, "no 'Action:' section"),
        (
            "Reasoning: r.\nAction: pick(soup can, [1, 2000])",
            ErrorKind.INSTRUCTION_OUTSIDE_GRAMMAR,
            "invalid_point",
        ),
        ("Action: home()", ErrorKind.EMPTY_REASONING, "no reasoning"),
    ],
)
def test_semantic_answers_through_the_response_rules(text, kind, reason_starts):
    result = parse_response(text, "packing", interface="semantic")
    if kind is None:
        assert isinstance(result, ParsedResponse) and result.instruction_text == "pick(soup can, [412, 530])"
    else:
        assert result.kind is kind and result.reason.startswith(reason_starts), result.reason


def test_the_instruction_interface_is_unchanged_by_the_semantic_one():
    assert parse_response("Reasoning: r.\nAction: home()", "packing").reason == "no 'Instruction:' section"
    ok = parse_response("Reasoning: r.\nInstruction: Pack the soup can into the small tray.", "packing")
    assert ok.instruction_text == "Pack the soup can into the small tray."
    refused = parse_response(
        "Reasoning: r.\nInstruction: Pack the soup can into the small tray.", "packing", interface="semantic"
    )
    assert refused.kind is ErrorKind.NO_INSTRUCTION


def test_a_thousand_fuzzed_semantic_answers_give_no_crash_and_no_accepted_action():
    outputs = hostile_outputs(1000, seed=21, huge_every=50, interface="semantic")
    assert {c for c, _, _ in outputs} == set(SEMANTIC_CATEGORIES)
    accepted, kinds = fuzzed_decisions(outputs, "semantic", IMAGE)
    assert accepted == []
    assert sum(kinds.values()) == 1000
    print(f"\n1,000 hostile semantic answers, 0 accepted; refusals by kind: {dict(kinds)}")


def test_the_fuzzer_perturbs_valid_answers():
    """The categories are built from valid calls: the same answers with their defect removed are accepted."""
    from r3.safety.fuzz import _valid_action

    rng = np.random.default_rng(0)
    for _ in range(200):
        text = f"Reasoning: r.\nAction: {_valid_action(rng)}"
        assert isinstance(parse_response(text, "packing", interface="semantic"), ParsedResponse), text


# --- the prompt and the answer header ---------------------------------------------------------


def _semantic_input(**kw) -> ReasonerInput:
    return ReasonerInput(
        "packing", "Pack the soup can into the small tray.", [IMAGE, IMAGE], interface="semantic", **kw
    )


def test_the_semantic_prompt_names_every_item_and_its_examples_parse():
    import re

    from r3.reasoning.prompts import prompt_text

    text = prompt_text(_semantic_input())
    assert all(item in text for item in ITEMS)
    examples = re.findall(r'"((?:pick|place|home|done)\([^"]*\))"', text)
    assert len(examples) == 2 and all(isinstance(parse(e), SemanticAction) for e in examples)
    assert text.endswith("Reasoning: <your reasoning>\nAction: <one action>\nWrite nothing after the action.")
    only = prompt_text(_semantic_input(mode="instruction_only"))
    assert only.endswith("Action: <one action>\nAnswer with this single line and nothing else.")
    assert "Reasoning:" not in only


def test_the_previous_action_and_its_result_are_shown():
    from r3.reasoning.prompts import prompt_text

    text = prompt_text(_semantic_input(history_text="pick(soup can, [412, 530])\nResult: ok"))
    assert "## Your previous action\npick(soup can, [412, 530])\nResult: ok" in text


def test_the_semantic_interface_is_for_the_packing_workcell():
    with pytest.raises(ValueError, match="acts on packing, not .language_table."):
        ReasonerInput("language_table", "goal", [IMAGE], interface="semantic")
    with pytest.raises(ValueError, match="interface"):
        ReasonerInput("packing", "goal", [IMAGE], interface="telepathy")


class Budgeted(ReasonerBackend):
    """Reasons in words until it is cut off, then writes a call after whatever header it is given."""

    model_id = "budgeted"

    def __init__(self):
        self.calls = []

    def _generate(self, messages, prefix, max_tokens, stop, on_text):
        from r3.reasoning.backends.base import Generation

        self.calls.append((prefix, stop))
        if prefix:
            return Generation(" home()", "stop", 1, 1, 0.0)
        return Generation("Reasoning: the arm is in the way", "length", 1, max_tokens, 0.0)


def test_a_reasoning_budget_forces_the_action_header():
    from r3.reasoning.backends.base import ReasoningBudget

    backend = Budgeted()
    decision = decide(backend, _semantic_input(), ReasoningBudget(5))
    assert backend.calls[0][1] == ["Action:"] and backend.calls[1][0].endswith("\nAction:")
    assert decision.valid and decision.parsed.instruction_text == "home()"


@pytest.mark.parametrize(
    "mode, history, expected",
    [
        (
            "reason",
            "instruction",
            "pick(soup can, [412, 530])\nResult: ok. The soup can is now in the gripper.",
        ),
        (
            "instruction_only",
            "response",
            "Action: pick(soup can, [412, 530])\nResult: ok. The soup can is now in the gripper.",
        ),
    ],
)
def test_a_model_trained_on_another_history_keeps_the_result_line(mode, history, expected):
    from r3.reasoning.prompts import PromptSettings

    previous = (
        "Reasoning: r.\nAction: pick(soup can, [412, 530])\nResult: ok. The soup can is now in the gripper."
    )
    inp = _semantic_input(history="response", history_text=previous)
    assert PromptSettings(mode, history).apply(inp).history_text == expected
