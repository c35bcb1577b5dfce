"""One decision step for callers (the reasoner node, the evaluator): generate, then parse.

>>> # backend = make_backend("transformers:/models/r3"); backend.load()
>>> # step = decide(backend, ReasonerInput("language_table", goal, [image]), ReasoningBudget(100))
>>> # step.valid, step.parsed.instruction_text if step.valid else step.parsed.kind
"""

from __future__ import annotations

from dataclasses import dataclass

from r3.reasoning.backends.base import FULL_REASONING, BackendOutput, OnText, ReasonerBackend, ReasoningBudget
from r3.reasoning.parsing import ParsedResponse, ResponseError, parse_response
from r3.reasoning.prompts import ReasonerInput


@dataclass(frozen=True)
class Decision:
    """A step's raw output and its parse: ``parsed`` is a ParsedResponse when ``valid``; ``prompted``
    is the input as the backend prompted the model (a checkpoint recasts mode and history)."""

    output: BackendOutput
    parsed: ParsedResponse | ResponseError
    prompted: ReasonerInput

    @property
    def valid(self) -> bool:
        return isinstance(self.parsed, ParsedResponse)


def parse_mode(inp: ReasonerInput, budget: ReasoningBudget) -> str:
    """A zero budget removes the reasoning, so its answers are judged as instruction-only."""
    return (
        "instruction_only" if inp.mode == "instruction_only" or budget.max_reasoning_tokens == 0 else "reason"
    )


def decide(
    backend: ReasonerBackend,
    inp: ReasonerInput,
    budget: ReasoningBudget = FULL_REASONING,
    on_text: OnText | None = None,
) -> Decision:
    """Run one decision step of ``backend`` on ``inp`` and parse the answer (never raises on bad text).

    The answer is parsed in the mode the backend prompted in (a checkpoint may declare its own).
    """
    inp = backend.prompt_input(inp)
    out = backend.decide(inp, budget, on_text)
    mode = parse_mode(inp, budget)
    return Decision(out, parse_response(out.raw_text, inp.suite, mode, out.finish_reason, inp.interface), inp)
