"""Reasoning budgets on a scripted backend: exact token caps, a forced instruction section."""

from __future__ import annotations

import numpy as np
import pytest

from r3.reasoning import ReasonerInput, ReasoningBudget, decide, make_backend
from r3.reasoning.backends import BACKENDS, register_backend
from r3.reasoning.backends.base import Generation, ReasonerBackend
from r3.reasoning.parsing import ErrorKind

ANSWER = ("Reasoning: " + " ".join(f"w{i}" for i in range(300)) + "\nInstruction: touch the red moon").split(
    " "
)


class Scripted(ReasonerBackend):
    """One 'token' per space-separated word of a fixed answer; after a prefix it names the instruction."""

    model_id = "scripted"

    def __init__(self, words=ANSWER):
        self.words, self.calls = words, []

    @classmethod
    def from_spec(cls, rest, **options):
        return cls(**options)

    def _generate(self, messages, prefix, max_tokens, stop, on_text):
        self.calls.append((prefix, max_tokens, stop))
        words = self.words
        if prefix:
            words = ["touch", "the", "red", "moon"]
        out = []
        for w in words[: max_tokens or len(words)]:
            out.append(w)
            text = " ".join(out)
            if stop and any(s in text for s in stop):
                text = text[: min(text.find(s) for s in stop if s in text)]
                break
        finish = "stop" if len(out) < (max_tokens or 10**9) or out[-1] == words[-1] else "length"
        if on_text:
            on_text(text)
        return Generation(text if not prefix else " " + text, finish, 10, len(out), 0.0)


INP = ReasonerInput("language_table", "touch the red moon", [np.zeros((8, 8, 3), np.uint8)])


@pytest.mark.parametrize("n", [0, 5, 50, 100])
def test_budget_caps_reasoning_and_still_ends_with_an_instruction(n):
    backend = Scripted()
    chunks = []
    step = decide(backend, INP, ReasoningBudget(n), on_text=chunks.append)
    out = step.output
    assert out.reasoning_tokens == n and out.reasoning_truncated
    assert out.stages == (1 if n == 0 else 2)
    assert out.raw_text.count("Instruction:") == 1 and "".join(chunks).replace(
        " ", ""
    ) == out.raw_text.replace(" ", "")
    assert step.valid and step.parsed.instruction_text == "touch the red moon", step.parsed
    assert len(step.parsed.reasoning.split()) <= n


def test_no_budget_is_one_full_generation():
    step = decide(Scripted(), INP, ReasoningBudget(None))
    assert step.output.stages == 1 and step.output.reasoning_tokens is None and step.valid
    assert len(step.parsed.reasoning.split()) == 300


def test_model_that_concludes_within_budget_is_not_truncated():
    short = ["Reasoning:", "it", "is", "there\nInstruction:", "touch", "the", "red", "moon"]
    step = decide(Scripted(short), INP, ReasoningBudget(50))
    assert not step.output.reasoning_truncated and step.valid and step.output.reasoning_tokens == 4


def test_zero_budget_is_parsed_as_instruction_only():
    step = decide(Scripted(), INP, ReasoningBudget(0))
    assert step.output.raw_text.startswith("Instruction:") and step.valid


@pytest.fixture
def forget_registered_backends():
    yield
    BACKENDS.reload()


def test_budget_validation():
    with pytest.raises(ValueError, match="max_reasoning_tokens"):
        ReasoningBudget(-1)


def test_registry_builds_registered_backends_lazily(forget_registered_backends):
    register_backend("scripted", f"{__name__}:Scripted")
    assert isinstance(make_backend("scripted:"), Scripted)
    with pytest.raises(ValueError, match=r"backend spec 'nope:x': unknown backend 'nope' \(known: "):
        make_backend("nope:x")


def test_openai_spec_parsing():
    b = make_backend("openai:http://h:1/v1,model=m,key_env=MY_KEY", timeout_s=3)
    assert (b.base_url, b.model, b.key_env, b.timeout_s) == ("http://h:1/v1", "m", "MY_KEY", 3)
    with pytest.raises(ValueError, match="model= is required"):
        make_backend("openai:http://h:1/v1")


def test_truncated_generation_is_reported():
    step = decide(Scripted(ANSWER[:20]), INP, ReasoningBudget(None))
    assert not step.valid and step.parsed.kind is ErrorKind.NO_INSTRUCTION
