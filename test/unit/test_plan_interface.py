"""The plan interface's answers (RoboGPT-R1 plans of semantic actions): the plan grammar, the "Plan:"
answer through the shared response rules, the prompt, what ends an episode, property tests and 1,000
fuzzed hostile answers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scripted import fuzzed_decisions

from r3.episode_loop import StepDecision, ends_episode
from r3.instructions import plan, semantic
from r3.instructions.packing import ITEMS
from r3.instructions.plan import MAX_PLAN_STEPS, Plan, PlanError, PlanErrorKind, parse
from r3.instructions.semantic import ActionType, SemanticAction
from r3.reasoning import ReasonerInput
from r3.reasoning.backends.base import BackendOutput, Generation, ReasonerBackend, ReasoningBudget
from r3.reasoning.parsing import ErrorKind, ParsedResponse, ResponseError, parse_response
from r3.reasoning.prompts import PromptSettings, prompt_text
from r3.reasoning.reasoner import Decision
from r3.safety.fuzz import PLAN_CATEGORIES, hostile_outputs

IMAGE = np.zeros((8, 8, 3), dtype=np.uint8)
K = PlanErrorKind
PICK = "pick(soup can, [412, 530])"
PLACE = "place(soup can, [655, 380])"


def test_a_plan_parses_step_by_step_with_the_semantic_grammar():
    got = parse(f"1. {PICK}\n\n2) Place('Soup Can', [655, 380])\n 3 . home()\n4. done()")
    assert got == Plan(
        (
            SemanticAction(ActionType.PICK, "soup can", (412, 530)),
            SemanticAction(ActionType.PLACE, "soup can", (655, 380)),
            SemanticAction(ActionType.HOME),
            SemanticAction(ActionType.DONE),
        )
    )
    assert plan.format_instruction(got) == f"1. {PICK}\n2. {PLACE}\n3. home()\n4. done()"


@pytest.mark.parametrize(
    "text, kind, step",
    [
        (None, K.NOT_TEXT, 0),
        (["1. home()"], K.NOT_TEXT, 0),
        ("", K.EMPTY, 0),
        (" \n\t\n", K.EMPTY, 0),
        ("1. home()\n" * (MAX_PLAN_STEPS * 40), K.TOO_LONG, 0),
        ("pick up the soup can", K.NOT_A_STEP, 1),
        ("home()", K.NOT_A_STEP, 1),
        ("First:\n1. home()", K.NOT_A_STEP, 1),
        ("1. home()\nthen\n2. done()", K.NOT_A_STEP, 2),
        ("1. home()\n2. done()\nThat is all.", K.TRAILING_TEXT, 2),
        ("1. home()\n- home()", K.TRAILING_TEXT, 1),
        ("2. home()", K.NUMBERING, 1),
        ("0. home()", K.NUMBERING, 1),
        ("1. home()\n3. done()", K.NUMBERING, 2),
        ("1. home()\n1. done()", K.NUMBERING, 2),  # a second plan restarting at 1
        ("1. home()\n2. home()\n1. home()\n2. done()", K.NUMBERING, 3),
        (
            "\n".join(f"{i}. home()" for i in range(1, MAX_PLAN_STEPS + 2)),
            K.TOO_MANY_STEPS,
            MAX_PLAN_STEPS + 1,
        ),
        (f"1. {PICK}\n2. fly()", K.BAD_STEP, 2),
        ("1. home() done()", K.BAD_STEP, 1),
        (f"1. {PICK}; {PLACE}", K.BAD_STEP, 1),
        ("1. pick(soup can, [1001, 5])", K.BAD_STEP, 1),
        ("1. pick(soupcan, [1, 5])", K.BAD_STEP, 1),
        ("1.", K.BAD_STEP, 1),
        ("1. done()\n2. home()", K.STEP_AFTER_DONE, 2),
        ("\uff11. home()", K.NOT_A_STEP, 1),  # a full-width digit is not a step number
        ("1\uff0e home()", K.NOT_A_STEP, 1),
    ],
)
def test_invalid_plans_are_refused_with_their_kind_and_step(text, kind, step):
    got = parse(text)
    assert isinstance(got, PlanError) and got.kind is kind and got.step == step, got
    assert got.reason
    if step:
        assert f"step {step}" in got.reason, got.reason


def test_a_bad_step_names_the_semantic_error_kind():
    got = parse(f"1. {PICK}\n2. place(soup can, [5, nan])")
    assert got.reason.startswith("step 2: invalid_point:"), got.reason
    got = parse(f"1. {PICK}\n2. pick(gelatin\x1fbox, [470, 516])")  # was carried out as "gelatin box"
    assert got.reason.startswith("step 2: unknown_label:") and "hidden character U+001F" in got.reason, (
        got.reason
    )


def test_a_plan_built_in_code_keeps_the_grammar_rules():
    with pytest.raises(ValueError, match="1-"):
        Plan(())
    with pytest.raises(ValueError, match="last"):
        Plan((SemanticAction(ActionType.DONE), SemanticAction(ActionType.HOME)))
    with pytest.raises(ValueError, match="steps"):
        Plan((SemanticAction(ActionType.HOME),) * (MAX_PLAN_STEPS + 1))


_actions = st.one_of(
    st.builds(
        SemanticAction,
        st.sampled_from([ActionType.PICK, ActionType.PLACE]),
        st.sampled_from(ITEMS),
        st.tuples(st.integers(0, 1000), st.integers(0, 1000)),
    ),
    st.just(SemanticAction(ActionType.HOME)),
)


@given(st.lists(_actions, min_size=1, max_size=MAX_PLAN_STEPS - 1), st.booleans())
def test_canonical_plans_round_trip(steps, done):
    p = Plan((*steps, SemanticAction(ActionType.DONE)) if done else tuple(steps))
    text = plan.format_instruction(p)
    assert parse(text) == p
    assert plan.step_texts(text) == [semantic.format_instruction(a) for a in p.steps]
    answer = f"Reasoning: r.\nPlan:\n{text}"
    parsed = parse_response(answer, "packing", interface="plan")
    assert isinstance(parsed, ParsedResponse) and parsed.instruction_text == text


@given(st.text(max_size=400))
def test_parse_never_raises(text):
    got = parse(text)
    assert isinstance(got, Plan | PlanError)
    if isinstance(got, Plan):  # what is accepted is a canonical plan, read again the same
        assert parse(plan.format_instruction(got)) == got


def test_the_plan_section_runs_to_the_end_of_the_answer():
    answer = f"Reasoning: the can is on the table.\n**Plan:**\n1. {PICK}\n2. {PLACE}\n```\n"
    parsed = parse_response(answer, "packing", interface="plan")
    assert parsed.instruction_text == f"1. {PICK}\n2. {PLACE}"
    assert parsed.reasoning == "the can is on the table."
    two = parse_response("Reasoning: r.\nPlan:\n1. home()\nPlan:\n1. done()", "packing", interface="plan")
    assert two.kind is ErrorKind.MULTIPLE_INSTRUCTIONS
    prose = parse_response(f"Reasoning: r.\nPlan:\n1. {PICK}\nAnd then I rest.", "packing", interface="plan")
    assert prose.kind is ErrorKind.INSTRUCTION_OUTSIDE_GRAMMAR and prose.reason.startswith("trailing_text:")
    # the other interfaces keep reading one line: a plan is no semantic answer
    one = parse_response(f"Reasoning: r.\nAction: {PICK}\n{PLACE}", "packing", interface="semantic")
    assert one.kind is ErrorKind.TRAILING_TEXT


@pytest.mark.parametrize("brk", list("\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"), ids=lambda c: f"U+{ord(c):04X}")
def test_only_a_newline_separates_two_steps(brk):
    """splitlines() also breaks at \\v, \\x1c-\\x1e, U+0085, U+2028...: a plan taking them as step breaks
    carried out "1. home()\\v2. done()"; the answer's other grammars refuse these characters."""
    answer = f"Reasoning: r.\nPlan:\n1. home(){brk}2. done()"
    refused = parse_response(answer, "packing", interface="plan")
    assert isinstance(refused, ResponseError) and refused.reason.startswith("line_break:"), refused
    assert parse(f"1. home(){brk}2. done()").kind.value == "line_break"
    if brk != "\r":  # "\n\r\n" is a blank line with a CRLF end
        between = parse_response(
            f"Reasoning: r.\nPlan:\n1. home()\n{brk}\n2. done()", "packing", interface="plan"
        )
        assert isinstance(between, ResponseError) and between.reason.startswith("line_break:"), between


def test_the_refused_line_breaks_are_every_break_of_splitlines_but_the_newline():
    breaks = {chr(i) for i in range(0x110000) if len(f"a{chr(i)}b".splitlines()) == 2}
    assert set(plan.OTHER_LINE_BREAKS) == breaks - {"\n"}


def test_a_plan_written_with_crlf_line_ends_is_read_as_with_newlines():
    parsed = parse_response(
        "Reasoning: r.\r\nPlan:\r\n1. home()\r\n2. done()\r\n", "packing", interface="plan"
    )
    assert isinstance(parsed, ParsedResponse) and parsed.instruction_text == "1. home()\n2. done()"


def test_the_plan_prompt_shares_the_packing_opening_and_the_action_list():
    text = prompt_text(ReasonerInput("packing", "Pack the soup can.", [IMAGE, IMAGE], interface="plan"))
    semantic_text = prompt_text(ReasonerInput("packing", "Pack the soup can.", [IMAGE], interface="semantic"))
    assert "## Goal\nPack the soup can." in text and "## Your previous plan\nNone" in text
    actions = semantic_text[semantic_text.index("## Actions") :].split("\n\n")[0]
    assert actions.split("\n", 2)[2] in text  # the same list of calls, after its own lead line
    assert f"at most {MAX_PLAN_STEPS} steps" in text
    assert text.rstrip().endswith("Write nothing after the plan.")


def test_a_previous_plan_response_recasts_to_its_plan_and_results():
    settings = PromptSettings("instruction_only", "instruction")
    result = f"Plan result: stopped at step 1 of 2.\nStep 1 {PICK}: x"
    history = f"Reasoning: r.\nPlan:\n1. {PICK}\n2. home()\n{result}"
    inp = ReasonerInput("packing", "g", [IMAGE], interface="plan", history="response", history_text=history)
    assert settings.apply(inp).history_text == f"1. {PICK}\n2. home()\n{result}"


def _decision(instruction: str, valid: bool = True) -> StepDecision:
    output = BackendOutput(instruction, "stop", None, None, None, 0.0, 0.0, "script", 1, False)
    parsed = (
        ParsedResponse("r", None, instruction, instruction)
        if valid
        else ResponseError(ErrorKind.NO_INSTRUCTION, "refused", instruction)
    )
    inp = ReasonerInput("packing", "g", [IMAGE], interface="plan")
    return StepDecision(0, inp, Decision(output, parsed, inp), instruction if valid else "", "", "", "")


@pytest.mark.parametrize(
    "instruction, fell_short, ends",
    [
        ("done()", False, True),
        ("home()", False, False),
        ("1. home()\n2. done()", False, True),
        ("1. home()\n2. done()", True, False),  # the plan stopped before its done()
        ("1. done()", False, True),
        ("1. home()\n2. home()", False, False),
        ("Pack the soup can into the small tray.", False, False),
    ],
)
def test_an_episode_ends_when_its_last_action_done_is_reached(instruction, fell_short, ends):
    assert ends_episode(_decision(instruction), fell_short) is ends
    assert ends_episode(_decision(instruction, valid=False), fell_short) is False


def test_a_thousand_fuzzed_plan_answers_give_no_crash_and_no_accepted_plan():
    outputs = hostile_outputs(1000, seed=21, huge_every=50, interface="plan")
    assert {c for c, _, _ in outputs} == set(PLAN_CATEGORIES)
    accepted, kinds = fuzzed_decisions(outputs, "plan", IMAGE)
    assert accepted == []
    assert sum(kinds.values()) == 1000
    print(f"\n1,000 hostile plan answers, 0 accepted; refusals by kind: {dict(kinds)}")


def test_the_plan_fuzzer_perturbs_valid_plans():
    """The categories are built from valid plans: the same answers without their defect are accepted."""
    from r3.safety.fuzz import _plan_answer, _valid_plan

    rng = np.random.default_rng(0)
    for _ in range(200):
        text = _plan_answer(_valid_plan(rng))
        assert isinstance(parse_response(text, "packing", interface="plan"), ParsedResponse), text


class Budgeted(ReasonerBackend):
    """Records the token limit of each generation stage; reasons, then writes a one-step plan."""

    model_id = "budgeted"

    def __init__(self):
        self.limits = []

    def _generate(self, messages, prefix, max_tokens, stop, on_text):
        self.limits.append(max_tokens)
        return Generation("r." if not prefix else "\n1. home()", "stop", 1, 1, 0.0)


@pytest.mark.parametrize("interface, calls", [("plan", MAX_PLAN_STEPS), ("semantic", 1)])
def test_the_answer_stage_of_a_budgeted_plan_gets_its_budget_per_step(interface, calls):
    backend = Budgeted()
    inp = ReasonerInput("packing", "goal", [IMAGE], interface=interface)
    backend.decide(inp, ReasoningBudget(max_reasoning_tokens=50, instruction_tokens=40))
    assert backend.limits == [50, 40 * calls]
