"""Parse a reasoner's answer ("Reasoning: ... Instruction: ...") into a typed instruction.

:func:`parse_response` never raises: every input gives either a :class:`ParsedResponse` or a
:class:`ResponseError` whose ``kind`` says what went wrong (see :class:`ErrorKind`), so the
reasoner node can publish an invalid step as data and the RL reward can score it as zero.

What counts as a section header: "Reasoning:" / "Instruction:" in any case, optionally wrapped
in markdown bold or preceded by "#", "-", ">" markers, at the start of a line or after the end
of a sentence (". Instruction: ..."). "the previous instruction: ..." in the middle of a
sentence is not a header. The instruction is the first non-empty line after its header; quotes,
markdown emphasis and a trailing period around it are dropped, then the suite's grammar decides.

An answer holds exactly one instruction, so nothing may follow the instruction's line but
whitespace (any Unicode whitespace, line and paragraph separators included) and the wrapper
characters in ``_WRAPPERS`` (quotes, markdown emphasis, backticks: a closing "```" or "**" line
carries no instruction). Any other trailing text, a second instruction in whatever form
("Next instruction: ...", a line after a form feed or U+2028), or a remark, is refused as
``trailing_text``: the reasoner must not execute the first half of an answer and drop the rest.
"""

from __future__ import annotations

import enum
import importlib
import re
from dataclasses import dataclass

from r3.instructions.language_table import ParseError
from r3.instructions.plan import PlanError
from r3.instructions.semantic import ActionError
from r3.instructions.tools import ToolCallError
from r3.plugins import Registry, having
from r3.reasoning.prompts import ANSWER_HEADERS
from r3.suites import get_suite, suite_names

#: The grammars of the interfaces whose answers are the same whatever the suite, interface -> "module:
#: grammar", a grammar being anything with ``parse(text)`` and ``format_instruction(instruction)``, as a
#: suite's ``grammar_module`` is: one ERR action (semantic), one ZAP tool call (tools) or one RoboGPT-R1
#: plan of numbered semantic actions (plan); a package adds one through the ``r3.grammars`` entry points.
#: The built-in ones are modules, attributes of their package since the imports above load them.
GRAMMARS = Registry(
    "grammar",
    {
        "semantic": "r3.instructions:semantic",
        "tools": "r3.instructions:tools",
        "plan": "r3.instructions:plan",
    },
    check=having("parse", "format_instruction"),
)
#: The interfaces whose answer section runs to the end of the answer (a plan's numbered steps, one a
#: line) rather than being its first line; their grammar judges every line and the length.
MULTI_LINE_ANSWERS: tuple[str, ...] = ("plan",)
#: The finish reasons of an answer that ended normally (None: the backend reports none); any other
#: ("length", "content_filter", whatever a server makes up) means the answer may be cut or altered.
NORMAL_FINISH = (None, "stop", "tool_calls")
#: Longer instruction lines are rejected before the grammar sees them (no instruction is this long).
MAX_INSTRUCTION_CHARS = 300


class ErrorKind(str, enum.Enum):
    NOT_TEXT = "not_text"  # the response is not a str
    TRUNCATED = (
        "truncated"  # generation did not end normally: its token limit ("length"), a content filter...
    )
    NO_INSTRUCTION = "no_instruction"  # no "Instruction:" section, or it is empty
    MULTIPLE_INSTRUCTIONS = "multiple_instructions"  # more than one "Instruction:" section
    TRAILING_TEXT = "trailing_text"  # text other than whitespace after the instruction's line
    EMPTY_REASONING = "empty_reasoning"  # reason mode, but nothing before the instruction
    INSTRUCTION_OUTSIDE_GRAMMAR = "instruction_outside_grammar"  # the grammar rejected it


@dataclass(frozen=True)
class ParsedResponse:
    """A valid answer. ``instruction_text`` is the grammar's canonical phrasing."""

    reasoning: str
    instruction: object
    instruction_text: str
    raw: str


@dataclass(frozen=True)
class ResponseError:
    """An invalid answer: ``kind`` for counting, ``reason`` for people, and what could be read."""

    kind: ErrorKind
    reason: str
    raw: str
    reasoning: str = ""
    instruction_text: str = ""


_MARK = r"(?:\*\*|__|\*|_|`)?"
#: Where a header may start: text start, line start, or right after the end of a sentence.
_BOUNDARY = r"(?:^|(?<=\n)|(?<=[.!?)\]])|(?<=[.!?)\]]\s))[ \t]*(?:[#>\-*]+[ \t]*)?"


def _header(word: str) -> re.Pattern:
    """Any case at a boundary, or the capitalised word after any whitespace ("... Instruction: x")."""
    cap = word.capitalize() + "|" + word.upper()
    return re.compile(
        rf"{_BOUNDARY}{_MARK}(?i:{word}){_MARK}[ \t]*:{_MARK}|(?<=\s){_MARK}(?:{cap}){_MARK}[ \t]*:{_MARK}"
    )


#: Interface -> the header of its answer section ("Instruction:" or "Action:").
_ANSWER_RES = {interface: _header(h.rstrip(":").lower()) for interface, h in ANSWER_HEADERS.items()}
_REASONING_RE = _header("reasoning")
_WRAPPERS = "\"'`*_“”‘’«» \t"


def _is_filler(text: str) -> bool:
    """True when ``text`` is only whitespace and wrapper characters (nothing an instruction is made of)."""
    return all(c.isspace() or c in _WRAPPERS for c in text)


def _clean_instruction(line: str) -> str:
    """``line`` without the whitespace and wrappers around it and its final periods, in one pass from
    each end (stripping them in turn copied the line once per ". ": a line of 500,000 took 20 s)."""
    start, end = 0, len(line)
    while start < end and _is_filler(line[start]):
        start += 1
    while end > start and (line[end - 1] == "." or _is_filler(line[end - 1])):
        end -= 1
    return line[start:end]


def answer_grammar(interface: str, suite: str):
    """The grammar that reads answers of ``interface`` on ``suite``: the interface's own
    (:data:`GRAMMARS`), else the suite's instruction grammar (``Suite.grammar_module``).

    >>> answer_grammar("tools", "packing").__name__, answer_grammar("instruction", "packing").__name__
    ('r3.instructions.tools', 'r3.instructions.packing')
    """
    if interface in GRAMMARS.names():
        return GRAMMARS.get(interface)
    return importlib.import_module(get_suite(suite).grammar_module)


def parse_response(
    text, suite: str, mode: str = "reason", finish_reason: str | None = None, interface: str = "instruction"
):
    """``text`` -> :class:`ParsedResponse` or :class:`ResponseError`; never raises.

    ``interface`` "instruction" reads the "Instruction:" section with the suite's grammar; "semantic"
    reads the "Action:" section with the semantic action grammar (:mod:`r3.instructions.semantic`),
    "tools" the "Tool call:" section with the tool grammar (:mod:`r3.instructions.tools`) and "plan" the
    "Plan:" section, every line of it to the end, with the plan grammar (:mod:`r3.instructions.plan`);
    their refusals name their kind ("invalid_point: ...", "bad_step: ..."). Every other rule is the same.

    ``mode`` "reason" requires non-empty reasoning before the instruction; "instruction_only"
    does not. A ``finish_reason`` other than :data:`NORMAL_FINISH` ("length": the generation ran out
    of tokens; "content_filter"; anything a server makes up) makes the answer truncated, since its
    last section cannot be trusted to be complete.

    >>> parse_response(
    ...     "Reasoning: it is left.\\nInstruction: **touch the red moon.**", "language_table"
    ... ).instruction_text
    'touch the red moon'
    >>> parse_response("Instruction: fly away", "language_table").kind.value
    'empty_reasoning'
    """
    if not isinstance(text, str):
        return ResponseError(
            ErrorKind.NOT_TEXT, f"expected a str, got {type(text).__name__}", repr(text)[:200]
        )
    if suite not in suite_names():
        return ResponseError(ErrorKind.INSTRUCTION_OUTSIDE_GRAMMAR, f"unknown suite {suite!r}", text)
    if interface not in ANSWER_HEADERS:
        return ResponseError(ErrorKind.INSTRUCTION_OUTSIDE_GRAMMAR, f"unknown interface {interface!r}", text)
    header = ANSWER_HEADERS[interface]
    headers = list(_ANSWER_RES[interface].finditer(text))
    reasoning = _REASONING_RE.sub("", text[: headers[0].start()] if headers else text, count=1).strip()
    if finish_reason == "length":
        return ResponseError(
            ErrorKind.TRUNCATED, "generation hit its token limit before finishing", text, reasoning
        )
    if finish_reason not in NORMAL_FINISH:
        shown = " ".join(str(finish_reason).split())[:40]
        return ResponseError(
            ErrorKind.TRUNCATED,
            f"generation ended with finish_reason {shown!r}, not a normal stop: the answer may be incomplete",
            text,
            reasoning,
        )
    if not headers:
        return ResponseError(ErrorKind.NO_INSTRUCTION, f"no '{header}' section", text, reasoning)
    if len(headers) > 1:
        return ResponseError(
            ErrorKind.MULTIPLE_INSTRUCTIONS,
            f"{len(headers)} '{header}' sections, expected one",
            text,
            reasoning,
        )
    multi_line = interface in MULTI_LINE_ANSWERS
    section = text[headers[0].end() :]
    # A multi-line answer's lines are split at "\n" only: its grammar refuses the other line breaks
    # (\v, \x1c, U+2028, ...) that splitlines() would take; after a one-line answer they are trailing text.
    lines = section.split("\n") if multi_line else section.splitlines()
    first = next((i for i, ln in enumerate(lines) if ln.strip(_WRAPPERS)), len(lines))
    if multi_line:
        body = lines[first:]
        while body and _is_filler(body[-1]):  # a closing fence or emphasis line, as after one line
            body.pop()
        instruction_text, trailing = "\n".join(body).strip(), ""
    else:
        instruction_text = _clean_instruction(lines[first] if lines[first:] else "")
        trailing = "\n".join(lines[first + 1 :])
    if not instruction_text:
        return ResponseError(ErrorKind.NO_INSTRUCTION, f"the '{header}' section is empty", text, reasoning)
    if not _is_filler(trailing):
        return ResponseError(
            ErrorKind.TRAILING_TEXT,
            f"text after the instruction: {trailing.strip()[:60]!r}; an answer holds exactly one instruction",
            text,
            reasoning,
            instruction_text,
        )
    if mode == "reason" and not reasoning:
        return ResponseError(
            ErrorKind.EMPTY_REASONING, "no reasoning before the instruction", text, "", instruction_text
        )
    if not multi_line and len(instruction_text) > MAX_INSTRUCTION_CHARS:
        return ResponseError(
            ErrorKind.INSTRUCTION_OUTSIDE_GRAMMAR,
            f"instruction is {len(instruction_text)} characters long (at most {MAX_INSTRUCTION_CHARS})",
            text,
            reasoning,
            instruction_text[:MAX_INSTRUCTION_CHARS],
        )
    grammar = answer_grammar(interface, suite)
    try:
        instruction = grammar.parse(instruction_text)
    except Exception as exc:  # noqa: BLE001 - a grammar bug must not take the reasoner down; report it as data
        return ResponseError(
            ErrorKind.INSTRUCTION_OUTSIDE_GRAMMAR,
            f"grammar error: {type(exc).__name__}: {exc}",
            text,
            reasoning,
            instruction_text,
        )
    if isinstance(instruction, ParseError):
        reason = (
            f"{instruction.kind.value}: {instruction.reason}"
            if isinstance(instruction, ActionError | ToolCallError | PlanError)
            else instruction.reason
        )
        return ResponseError(ErrorKind.INSTRUCTION_OUTSIDE_GRAMMAR, reason, text, reasoning, instruction_text)
    return ParsedResponse(reasoning, instruction, grammar.format_instruction(instruction), text)
