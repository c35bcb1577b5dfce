"""Response parsing: table-driven cases and a >=10,000-case fuzz that must never raise."""

from __future__ import annotations

import numpy as np
import pytest

from r3.instructions import language_table, packing
from r3.reasoning.parsing import ErrorKind, ParsedResponse, ResponseError, parse_response

LT = "language_table"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Reasoning: left of it.\nInstruction: touch the red moon", "touch the red moon"),
        (
            '**Reasoning:** x\n**Instruction:** "Move the red moon up slightly."',
            "move the red moon up slightly",
        ),
        ("reasoning: x\ninstruction: 'touch the blue cube'.", "touch the blue cube"),
        ("  Reasoning: x Instruction: touch the green cube  ", "touch the green cube"),
        (
            "Reasoning: the previous instruction: touch it, failed.\nInstruction: touch the blue cube",
            "touch the blue cube",
        ),
        ("## Reasoning: x\n## Instruction:\n\n  touch the red moon\n", "touch the red moon"),
        (
            "Reasoning: x.\n- **Instruction**: `push the yellow star into the blue cube`",
            "push the yellow star into the blue cube",
        ),
    ],
)
def test_valid(text, expected):
    result = parse_response(text, LT)
    assert isinstance(result, ParsedResponse), result
    assert result.instruction_text == expected and result.raw == text and result.reasoning


@pytest.mark.parametrize(
    "text, kind, kwargs",
    [
        (None, ErrorKind.NOT_TEXT, {}),
        (b"Instruction: touch the red moon", ErrorKind.NOT_TEXT, {}),
        ("", ErrorKind.NO_INSTRUCTION, {}),
        ("Reasoning: I will push something", ErrorKind.NO_INSTRUCTION, {}),
        ("Reasoning: x\nInstruction:   ", ErrorKind.NO_INSTRUCTION, {}),
        (
            "Reasoning: x\nInstruction: touch the red moon\nInstruction: touch the blue cube",
            ErrorKind.MULTIPLE_INSTRUCTIONS,
            {},
        ),
        ("Instruction: touch the red moon", ErrorKind.EMPTY_REASONING, {}),
        ("Reasoning: x\nInstruction: fly to the moon", ErrorKind.INSTRUCTION_OUTSIDE_GRAMMAR, {}),
        ("Reasoning: x\nInstruction: touch the red block", ErrorKind.INSTRUCTION_OUTSIDE_GRAMMAR, {}),
        ("Reasoning: x\nInstruction: touch the red moon", ErrorKind.TRUNCATED, {"finish_reason": "length"}),
        (
            "Reasoning: x\nInstruction: touch the red moon",
            ErrorKind.INSTRUCTION_OUTSIDE_GRAMMAR,
            {"suite": "chess"},
        ),
    ],
)
def test_invalid(text, kind, kwargs):
    result = parse_response(text, kwargs.pop("suite", LT), **kwargs)
    assert isinstance(result, ResponseError) and result.kind is kind and result.reason


TRAILING = ("\n", "\n\n", "\u2028", "\u0085", "\v", "\f", "\r", "\n**Instruction:** ", "\nNext instruction: ")
SECOND = {
    LT: ("touch the red moon", "push the blue cube into the green star"),
    "packing": ("Pack the sugar box into the medium tray.", "Remove the soup can from the small tray."),
}


@pytest.mark.parametrize("suite", SECOND)
@pytest.mark.parametrize("separator", TRAILING, ids=repr)
def test_a_second_instruction_after_the_first_is_refused(suite, separator):
    first, second = SECOND[suite]
    result = parse_response(f"Reasoning: x\nInstruction: {first}{separator}{second}", suite)
    assert isinstance(result, ResponseError), result
    assert result.kind in (ErrorKind.TRAILING_TEXT, ErrorKind.MULTIPLE_INSTRUCTIONS) and result.reason


@pytest.mark.parametrize("suite", SECOND)
def test_only_whitespace_and_wrappers_may_follow_the_instruction(suite):
    first, _ = SECOND[suite]
    result = parse_response(f"Reasoning: x\nInstruction: **{first}**\u2028 \t\n```\n**\u3000\n", suite)
    assert isinstance(result, ParsedResponse), result
    refused = parse_response(f"Reasoning: x\nInstruction: {first}\nHope this helps!", suite)
    assert refused.kind is ErrorKind.TRAILING_TEXT and "Hope this helps" in refused.reason


def test_instruction_only_mode_needs_no_reasoning():
    assert parse_response(
        "Instruction: touch the red moon", LT, mode="instruction_only"
    ).instruction_text == ("touch the red moon")


def test_packing_canonical_text():
    result = parse_response("Reasoning: x\nInstruction: pack the sugar box into the medium tray", "packing")
    assert result.instruction_text == "Pack the sugar box into the medium tray."


# --- fuzz -------------------------------------------------------------------------------------

HEADERS = (
    "Instruction:",
    "instruction:",
    "**Instruction:**",
    "**Instruction**:",
    "INSTRUCTION:",
    "## Instruction:",
)
REASONING_HEADERS = ("Reasoning:", "reasoning:", "**Reasoning:**", "")
WRAP = (("", ""), ('"', '"'), ("'", "'"), ("**", "**"), ("`", "`"), ("“", "”"))
JUNK = [
    "nan",
    "NaN",
    "inf",
    "-0",
    "1e309",
    "\u0000",
    "\u202e",
    "🤖",
    "ß",
    "\t",
    "…",
    "Instruction",
    ":",
    "Reasoning:",
]


def _packing_sample(rng):
    kind = packing.PackingInstructionType(rng.choice([t.value for t in packing.PackingInstructionType]))
    item = str(rng.choice(packing.ITEMS))
    trays = [str(t) for t in rng.permutation(packing.TRAYS)[:2]]
    instr = packing.PackingInstruction(
        kind, item, trays[0], trays[1] if kind is packing.PackingInstructionType.TRANSFER else None
    )
    text = packing.format_instruction(instr)
    return instr, (text.lower() if rng.random() < 0.3 else text)


def _valid_case(rng):
    if rng.random() < 0.7:
        instr = language_table.sample_instruction(rng)
        suite, text = LT, language_table.paraphrase(instr, rng)
    else:
        (instr, text), suite = _packing_sample(rng), "packing"
    left, right = WRAP[rng.integers(len(WRAP))]
    period = "." if rng.random() < 0.3 and not text.endswith(".") else ""
    reasoning = " ".join(
        rng.choice(["the", "moon", "is", "left", "of", "tray", "so", "I", "push"], size=rng.integers(1, 30))
    )
    head = REASONING_HEADERS[rng.integers(len(REASONING_HEADERS))] or "Reasoning:"
    sep = str(rng.choice(["\n", "\n\n", " ", ". "]))
    header = HEADERS[rng.integers(len(HEADERS))]
    if sep == " " and header.startswith("instruction"):  # mid-sentence lower case is prose, not a header
        header = "Instruction:"
    answer = f"{' ' * rng.integers(3)}{head} {reasoning}{sep}{header} {left}{text}{period}{right}"
    return suite, instr, answer + rng.choice(["", "\n", "  \n"])


def _same(suite, a, b):
    return language_table.compare(a, b) == language_table.MATCH if suite == LT else a == b


def _garbage(rng, n):
    pieces = [chr(int(c)) for c in rng.integers(32, 0x2FFF, size=n)]
    return "".join(pieces)


def test_fuzz_ten_thousand_responses():
    rng = np.random.default_rng(1234)
    counts = dict.fromkeys(["valid", "truncated", "none", "multiple", "empty", "outside", "garbage"], 0)
    for i in range(10_500):
        suite, instr, answer = _valid_case(rng)
        case = i % 8
        if case in (0, 1):
            result = parse_response(answer, suite)
            assert isinstance(result, ParsedResponse), (answer, result)
            assert _same(suite, result.instruction, instr), (answer, result.instruction, instr)
            counts["valid"] += 1
            continue
        if case == 2:
            cut = answer[: rng.integers(0, len(answer))]
            result, want = parse_response(cut, suite, finish_reason="length"), ErrorKind.TRUNCATED
            counts["truncated"] += 1
        elif case == 3:
            body = answer.split("nstruction")[0][:-1] if "nstruction" in answer else answer
            body = body.replace("INSTRUCTION", "").replace("Instruction", "").replace("instruction", "")
            result, want = parse_response(body, suite), ErrorKind.NO_INSTRUCTION
            counts["none"] += 1
        elif case == 4:
            extra = (
                f"\nInstruction: {rng.choice(JUNK)}"
                if rng.random() < 0.5
                else "\nInstruction: touch the red moon"
            )
            result, want = parse_response(answer + extra, suite), ErrorKind.MULTIPLE_INSTRUCTIONS
            counts["multiple"] += 1
        elif case == 5:
            words = [
                "nan",
                "NaN",
                "1e309",
                "-inf",
                "🤖🤖",
                "move",
                "the",
                "moon",
                "tray",
                "\u202e",
                "ß",
                "0x1F",
            ]
            bad = " ".join(rng.choice(words, size=rng.integers(1, 8)))
            big = "x" * int(rng.integers(0, 2)) * 400
            result = parse_response(f"Reasoning: r\nInstruction: fly {bad} {big}", suite)
            want = ErrorKind.INSTRUCTION_OUTSIDE_GRAMMAR
            counts["outside"] += 1
        elif case == 6:
            start = answer.lower().rfind("instruction")
            start -= answer[start - 2 : start] in ("**", "# ") and 2
            result, want = parse_response("  \n" + answer[start:], suite), ErrorKind.EMPTY_REASONING
            counts["empty"] += 1
        else:
            size = int(rng.choice([0, 5, 100, 5000, 200_000 if i % 800 == 7 else 50]))
            result = parse_response(
                _garbage(rng, size), suite, mode=str(rng.choice(["reason", "instruction_only"]))
            )
            assert isinstance(result, (ParsedResponse, ResponseError))
            assert isinstance(result, ParsedResponse) or result.reason
            counts["garbage"] += 1
            continue
        assert isinstance(result, ResponseError) and result.kind is want and result.reason, (answer, result)
    assert sum(counts.values()) >= 10_000 and min(counts.values()) > 1000, counts


def test_empty_reasoning_is_reported_in_reason_mode_only():
    assert parse_response("**Instruction:** touch the red moon", LT).kind is ErrorKind.EMPTY_REASONING
    assert isinstance(
        parse_response("**Instruction:** touch the red moon", LT, mode="instruction_only"), ParsedResponse
    )


@pytest.mark.parametrize(
    "interface, header, answer",
    [
        ("instruction", "Instruction:", "Pack the soup can into the small tray."),
        ("semantic", "Action:", "home()"),
    ],
)
def test_an_answer_line_of_half_a_million_periods_is_read_at_once(interface, header, answer):
    """Found by a hostile test: a 1 MB instruction line of ". . . ." kept the parser 20 s (each round of
    stripping wrappers and final periods copied the line again), a reasoner stalled on one answer.
    The bound is on this process's CPU time (about 0.4 s a parse here): the wall clock of a machine
    busy with other work passed 3 s with the fix in."""
    import time

    start = time.process_time()
    result = parse_response(f"Reasoning: r.\n{header} {'. ' * 500_000}", "packing", interface=interface)
    assert result.kind is ErrorKind.NO_INSTRUCTION and time.process_time() - start < 3
    result = parse_response(
        f"Reasoning: r.\n{header} {answer} {'. ' * 500_000}", "packing", interface=interface
    )
    assert result.instruction_text == answer and time.process_time() - start < 3
