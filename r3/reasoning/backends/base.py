"""The reasoner backend contract, and reasoning budgets implemented once for every backend.

A backend only has to implement :meth:`ReasonerBackend._generate` (one generation from chat
messages plus an optional assistant prefix); :meth:`ReasonerBackend.decide` turns that into one
decision step under a :class:`ReasoningBudget`.

Budgets (R^3 Table 3: full reasoning, trunc@100, trunc@50, no reasoning): with a cap of N tokens
the model writes at most N reasoning tokens (stopping early at "Instruction:"); then the
truncated reasoning plus "\\nInstruction:" becomes an assistant prefix and a short continuation
(``instruction_tokens``) produces the instruction. N = 0 skips the reasoning stage entirely. The
semantic interface does the same with its "Action:" header.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from r3.reasoning.prompts import ANSWER_CALLS, ANSWER_HEADERS, ReasonerInput, build_messages
from r3.safety.goals import UINT32_MAX

OnText = Callable[[str], None]


class BackendError(RuntimeError):
    """A backend cannot load or cannot reach its model; the message names what and where."""


def error_line(exc: BaseException) -> str:
    """An exception in one line: its type and its message's first line (transformers' and jinja's
    messages run over several, with advice)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


@dataclass(frozen=True)
class ReasoningBudget:
    """How many tokens the reasoning may take: None = unlimited (up to the backend's
    ``max_new_tokens``), 0 = instruction only, N = truncate at N tokens."""

    max_reasoning_tokens: int | None = None
    instruction_tokens: int = 40

    def __post_init__(self) -> None:
        if self.max_reasoning_tokens is not None and self.max_reasoning_tokens < 0:
            raise ValueError(f"max_reasoning_tokens={self.max_reasoning_tokens}: must be >= 0 or None")
        if self.instruction_tokens < 1:
            raise ValueError(f"instruction_tokens={self.instruction_tokens}: must be >= 1")


#: The default budget: reason as long as the backend allows.
FULL_REASONING = ReasoningBudget()


@dataclass(frozen=True)
class Generation:
    """One call to the model. Token counts are None when the server reports none (:func:`token_count`)."""

    text: str
    finish_reason: str
    prompt_tokens: int | None
    completion_tokens: int | None
    model_s: float


@dataclass(frozen=True)
class BackendOutput:
    """One decision step's raw answer and its costs.

    ``raw_text`` is the whole answer as the parser should see it (forced "Instruction:" header
    included). ``reasoning_tokens`` is the reasoning stage's completion tokens under a budget
    (None without one). ``model_s`` is time inside the model calls; ``latency_s`` the whole step.
    """

    raw_text: str
    finish_reason: str
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    latency_s: float
    model_s: float
    model_id: str
    stages: int
    reasoning_truncated: bool


#: The most a token count may be: a recorded ReasonerStep holds a step's counts as uint32.
MAX_TOKEN_COUNT = UINT32_MAX


def token_count(value) -> int | None:
    """``value`` as a token count, or None ("no count") where it is none: not an int (a bool is
    none), negative, or more than a ReasonerStep holds (:data:`MAX_TOKEN_COUNT`). A server reports
    its counts as it likes; one no record can hold is dropped, not the step's answer with it.

    >>> token_count(12), token_count(-1), token_count(True), token_count(99999999999999999999)
    (12, None, None, None)
    """
    fits = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKEN_COUNT
    return value if fits else None


def _add(a: int | None, b: int | None) -> int | None:
    """Two stages' counts as one step's: no count where either has none or the sum is none."""
    return None if a is None or b is None else token_count(a + b)


class ReasonerBackend(ABC):
    """A VLM that answers reasoner prompts. Construct cheaply; :meth:`load` at configure time;
    :meth:`close` at cleanup."""

    model_id: str = ""
    #: The most tokens one generation writes (set by the backends that generate).
    max_new_tokens: int
    #: The KEY=VALUE options its spec may carry (:mod:`r3.reasoning.backends.spec`); none by default.
    SPEC_OPTIONS: ClassVar[dict] = {}

    def load(self) -> None:
        """Load weights or connect; raise :class:`BackendError` with a clear message on failure."""

    def load_problem(self) -> str | None:
        """What :meth:`load` would fail on that can be seen without loading (a model folder that is
        not there), or None: commands check it before they start workers or a graph."""
        return None

    def close(self) -> None:
        """Release the model or connection."""

    def new_tokens(self, max_tokens: int | None) -> int:
        """Tokens one generation may write: ``max_tokens`` (a step's reasoning budget), never more
        than the backend's own cap ``max_new_tokens`` (a RunTask goal's budget comes from the
        network: 2^31 - 1 let a model that never stops write until memory ran out)."""
        cap = self.max_new_tokens
        return cap if max_tokens is None else min(max_tokens, cap)

    def prompt_input(self, inp: ReasonerInput) -> ReasonerInput:
        """``inp`` as this model wants to be prompted (a trained checkpoint declares its mode and
        history); unchanged by default."""
        return inp

    @abstractmethod
    def _generate(
        self,
        messages: list[dict],
        prefix: str,
        max_tokens: int | None,
        stop: list[str] | None,
        on_text: OnText | None,
    ) -> Generation:
        """Generate the assistant's answer, continuing after ``prefix`` when it is not empty.

        ``text`` excludes the prefix and ends before the first stop string. ``max_tokens`` None
        means the backend's own cap.
        """

    def decide(
        self, inp: ReasonerInput, budget: ReasoningBudget = FULL_REASONING, on_text: OnText | None = None
    ) -> BackendOutput:
        """One decision step: prompt for ``inp``, generate under ``budget``, report costs."""
        start = time.perf_counter()
        inp = self.prompt_input(inp)
        messages = build_messages(inp)
        n = budget.max_reasoning_tokens
        if inp.mode == "instruction_only" or n is None:
            g = self._generate(messages, "", None, None, on_text)
            return BackendOutput(
                g.text,
                g.finish_reason,
                g.prompt_tokens,
                g.completion_tokens,
                None,
                time.perf_counter() - start,
                g.model_s,
                self.model_id,
                1,
                False,
            )
        header = ANSWER_HEADERS[inp.interface]  # "Instruction:", or "Action:" for the semantic interface
        prefix, stages, prompt_tokens, reasoning_tokens, model_s, truncated = "", 0, 0, 0, 0.0, True
        abnormal = False
        if n > 0:
            first = self._generate(messages, "", n, [header], on_text)
            prefix = first.text.rstrip() + "\n"
            stages, prompt_tokens, reasoning_tokens, model_s = (
                1,
                first.prompt_tokens,
                first.completion_tokens,
                first.model_s,
            )
            truncated = first.finish_reason == "length"
            abnormal = first.finish_reason not in ("stop", "length", "tool_calls")  # a filter, nonsense
        prefix += header
        if on_text is not None:
            on_text(prefix[len(prefix) - len(header) - (1 if n > 0 else 0) :])
        answer_tokens = budget.instruction_tokens * ANSWER_CALLS.get(inp.interface, 1)  # a plan: per step
        second = self._generate(messages, prefix, answer_tokens, None, on_text)
        return BackendOutput(
            raw_text=prefix + second.text,
            finish_reason=first.finish_reason if abnormal else second.finish_reason,  # the answer holds both
            prompt_tokens=_add(prompt_tokens, second.prompt_tokens),
            completion_tokens=_add(reasoning_tokens, second.completion_tokens),
            reasoning_tokens=reasoning_tokens,
            latency_s=time.perf_counter() - start,
            model_s=model_s + second.model_s,
            model_id=self.model_id,
            stages=stages + 1,
            reasoning_truncated=truncated,
        )
