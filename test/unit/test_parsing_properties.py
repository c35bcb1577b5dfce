"""Property-based tests (Hypothesis) of every answer parser and the guard: random structure, Unicode,
separators, duplicated and trailing instructions, truncation. The example budget is fixed and the
runs are derandomized (the "r3" profile in test/conftest.py), so CI sees the same cases every time;
a failure prints its shrunk, minimal counterexample."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from r3.instructions import language_table as lt
from r3.instructions import packing
from r3.reasoning.parsing import ErrorKind, ParsedResponse, ResponseError, parse_response
from r3.safety import ResponseGuard, refusal_note
from r3.safety.guard import MAX_NOTE_CHARS

SUITES = ("language_table", "packing")
#: Every character ``str.splitlines`` ends a line at.
LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
WHITESPACE = "".join(c for c in map(chr, range(0x3001)) if c.isspace())
WRAPPERS = "\"'`*_“”‘’«»"
HEADERS = (
    "Instruction:",
    "instruction:",
    "INSTRUCTION:",
    "**Instruction:**",
    "**Instruction**:",
    "## Instruction:",
    "- Instruction:",
    "> Instruction:",
    "__Instruction__:",
)
REASONING_HEADERS = ("Reasoning:", "reasoning:", "**Reasoning:**", "## Reasoning:")
_SECTION_WORD = re.compile(r"(?i)instruction|reasoning")

seeds = st.integers(0, 2**32 - 1)
lt_instructions = seeds.map(lambda s: lt.sample_instruction(np.random.default_rng(s)))


@st.composite
def packing_instructions(draw) -> packing.PackingInstruction:
    kind = draw(st.sampled_from(packing.PackingInstructionType))
    trays = draw(st.permutations(packing.TRAYS))
    to_tray = trays[1] if kind is packing.PackingInstructionType.TRANSFER else None
    return packing.PackingInstruction(kind, draw(st.sampled_from(packing.ITEMS)), trays[0], to_tray)


@st.composite
def instructions(draw) -> tuple[str, object, str]:
    """(suite, instruction, a surface form of it the grammar reads back as the same instruction)."""
    suite = draw(st.sampled_from(SUITES))
    if suite == "language_table":
        instr = draw(lt_instructions)
        return suite, instr, lt.paraphrase(instr, np.random.default_rng(draw(seeds)))
    instr = draw(packing_instructions())
    text = packing.format_instruction(instr)
    return suite, instr, draw(st.sampled_from([text, text.lower(), text.upper(), text.rstrip(".")]))


#: Prose with no section word in it (any case, Unicode case folding included), and something to read.
reasoning_texts = st.text(min_size=1, max_size=200).filter(
    lambda t: not _SECTION_WORD.search(t) and t.strip() and not _SECTION_WORD.search(t.casefold())
)
#: Whitespace and wrappers: what may follow an instruction.
fillers = st.text(alphabet=WHITESPACE + WRAPPERS, max_size=20)
#: A separator that ends the instruction's line.
line_ends = st.tuples(
    st.text(alphabet=" \t", max_size=3),
    st.sampled_from(LINE_BREAKS),
    st.text(alphabet=WHITESPACE, max_size=5),
).map("".join)
#: Text with something in it that is neither whitespace nor a wrapper: a second instruction, a remark.
tails = st.one_of(
    st.text(min_size=1, max_size=80),
    st.tuples(
        st.sampled_from(("", "Next instruction: ", "Then: ", "- ", "2. ", "Instruction: ")),
        st.sampled_from(
            [lt.format_instruction(lt.sample_instruction(np.random.default_rng(i))) for i in range(20)]
        ),
    ).map("".join),
).filter(lambda t: any(not c.isspace() and c not in WRAPPERS for c in t))


@st.composite
def answers(draw) -> tuple[str, object, str]:
    """(suite, instruction, a well-formed answer giving exactly that instruction), randomly dressed."""
    suite, instr, text = draw(instructions())
    head = draw(st.sampled_from(REASONING_HEADERS))
    sep = draw(st.sampled_from(["\n", "\n\n", " ", ". ", "\r\n"]))
    header = draw(st.sampled_from(HEADERS))
    if sep == " " and not header[0].isupper():  # mid-sentence, only a capitalised word is a header
        header = "Instruction:"
    left, right = draw(
        st.sampled_from([("", ""), ('"', '"'), ("'", "'"), ("**", "**"), ("`", "`"), ("“", "”")])
    )
    period = draw(st.sampled_from(["", "."])) if not text.endswith(".") else ""
    before = draw(st.text(alphabet=" \t\n", max_size=3))
    body = f"{before}{head} {draw(reasoning_texts)}{sep}{header} {left}{text}{period}{right}"
    return suite, instr, body


def _same(suite, a, b) -> bool:
    return lt.compare(a, b) == lt.MATCH if suite == "language_table" else a == b


def _refused(result) -> bool:
    return isinstance(result, ResponseError) and bool(result.reason)


# --- parse_response ---------------------------------------------------------------------------


@given(
    st.one_of(st.text(), st.none(), st.integers(), st.binary(), st.lists(st.text())),
    st.sampled_from((*SUITES, "chess")),
    st.sampled_from(("reason", "instruction_only")),
    st.sampled_from((None, "stop", "length")),
)
def test_parse_response_never_raises_and_always_says_why(text, suite, mode, finish):
    result = parse_response(text, suite, mode, finish)
    assert isinstance(result, ParsedResponse) or _refused(result)
    if isinstance(result, ParsedResponse):
        assert isinstance(text, str) and suite in SUITES and finish != "length" and result.raw == text


@given(answers(), fillers)
def test_a_well_formed_answer_gives_its_instruction(answer, trailing):
    suite, instr, text = answer
    result = parse_response(text + trailing, suite)
    assert isinstance(result, ParsedResponse), result
    assert _same(suite, result.instruction, instr) and result.reasoning


@given(answers(), line_ends, tails, fillers)
def test_any_text_after_the_instruction_is_refused(answer, line_end, tail, trailing):
    suite, _, text = answer
    result = parse_response(text + line_end + tail + trailing, suite)
    assert _refused(result), result
    assert result.kind in (ErrorKind.TRAILING_TEXT, ErrorKind.MULTIPLE_INSTRUCTIONS), result


@given(answers(), st.sampled_from(HEADERS), line_ends, instructions())
def test_a_duplicated_instruction_section_is_refused(answer, header, line_end, second):
    suite, _, text = answer
    result = parse_response(f"{text}{line_end}{header} {second[2]}", suite)
    assert _refused(result), result


@given(answers(), st.data())
def test_a_truncated_answer_is_refused(answer, data):
    suite, _, text = answer
    cut = text[: data.draw(st.integers(0, len(text)))]
    result = parse_response(cut, suite, finish_reason="length")
    assert _refused(result) and result.kind is ErrorKind.TRUNCATED


# --- the grammars ------------------------------------------------------------------------------


@given(lt_instructions)
def test_language_table_canonical_text_reads_back(instr):
    assert lt.parse(lt.format_instruction(instr)) == instr


@given(packing_instructions())
def test_packing_canonical_text_reads_back(instr):
    assert packing.parse(packing.format_instruction(instr)) == instr


@given(st.text(max_size=300), st.sampled_from((lt, packing)))
def test_a_grammar_never_raises_and_what_it_accepts_is_canonical(text, grammar):
    result = grammar.parse(text)
    if isinstance(result, lt.ParseError):
        assert result.reason
    else:
        assert grammar.parse(grammar.format_instruction(result)) == result


@given(
    instructions(),
    instructions(),
    st.sampled_from(
        ["; ", ". ", " then ", ", then ", "; and then ", "! ", " ", "\n", "\u2028", "\x85", " and "]
    ),
)
def test_a_grammar_refuses_two_instructions_in_one_text(first, second, joint):
    (suite, _, a), (_, _, b) = first, second
    grammar = lt if suite == "language_table" else packing
    assert isinstance(grammar.parse(a.rstrip(".") + joint + b), lt.ParseError)


# --- the guard ---------------------------------------------------------------------------------


@given(st.lists(st.booleans(), max_size=40), st.integers(1, 5))
def test_the_guard_stops_exactly_at_the_nth_refusal_in_a_row(valid, limit):
    guard, run = ResponseGuard(limit), 0
    for ok in valid:
        run = 0 if ok else run + 1
        assert guard.observe(ok, "why") is (run >= limit)
        assert guard.consecutive_invalid == run


@given(st.text(max_size=5000))
def test_a_refusal_note_is_bounded_and_quotes_the_reason(reason):
    note = refusal_note(reason)
    assert len(note) <= MAX_NOTE_CHARS + 100 and reason[:MAX_NOTE_CHARS] in note
