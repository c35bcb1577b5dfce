"""A backend that answers with recorded text, in order: for replaying an episode's reasoner outputs
(from a bag) and for feeding fixed or hostile answers through the real loop (safety tests).

Step k of every episode gets recorded answer k. Spec ``replay:PATH`` where PATH is a bag folder
(its ReasonerStep raw responses and finish reasons) or a JSONL file with one
``{"text": ..., "finish_reason": ...}`` object per line. A bag folder is read with r3.data's reader,
imported only then: the backend is a plug-in chosen at run time, and r3.data sits above r3.reasoning
(the import layers in pyproject.toml).
"""

from __future__ import annotations

import time
from pathlib import Path

from r3.files import bounded_repr, is_kind, json_value, path_problem
from r3.reasoning.backends.base import (
    FULL_REASONING,
    BackendError,
    BackendOutput,
    ReasonerBackend,
    ReasoningBudget,
    error_line,
)


def load_answers(path: str | Path) -> list[tuple[str, str]]:
    """(text, finish_reason) pairs from a bag folder or a JSONL file."""
    path = Path(path)
    if path.is_dir():
        from r3.data.bags import read_messages
        from r3.graph import names

        try:
            return [recorded_answer(msg) for _, _, _, msg in read_messages(path, {names.REASONER_STEPS})]
        except Exception as exc:  # no metadata, a torn stream, a folder of bags: rosbags' errors alike
            raise BackendError(f"replay source {path} is not a readable bag: {error_line(exc)}") from exc
    if not path.is_file():
        raise BackendError(f"replay source not found: {path}")
    answers = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                answers.append(_jsonl_answer(json_value(line)))
            except (ValueError, KeyError, TypeError) as exc:  # not JSON, nested too deep, no text
                raise BackendError(f"{path}:{number}: expected a JSON object with 'text': {exc}") from None
    return answers


def _jsonl_answer(record: object) -> tuple[str, str]:
    """(text, finish_reason) of one JSONL line's object; a TypeError when either is no text (a null
    text had replayed as the answer "None")."""
    if not isinstance(record, dict):
        raise TypeError(f"got {bounded_repr(record)}")
    answer = record["text"], record.get("finish_reason", "stop")
    for key, value in zip(("text", "finish_reason"), answer):
        if not is_kind(value, str):
            raise TypeError(f"{key}={bounded_repr(value)} is no text")
    return answer


def recorded_answer(step) -> tuple[str, str]:
    """A recorded ReasonerStep's (text, finish_reason). A bag recorded before steps carried their
    finish reason replays "stop" where the step was taken and an unknown one where it was refused:
    the text alone may parse (a truncated answer that the guard refused for its "length"), and a
    replay must never move where the recording refused."""
    finish = getattr(step, "finish_reason", "")
    if not finish:
        finish = "stop" if step.valid else "not recorded"
    return step.raw_response, finish


class ReplayBackend(ReasonerBackend):
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.model_id = f"replay:{self.path}"
        self.answers: list[tuple[str, str]] = []

    @classmethod
    def from_spec(cls, rest: str, **options) -> ReplayBackend:
        if not rest:
            raise ValueError("replay spec needs a source: replay:BAG_DIR or replay:FILE.jsonl")
        return cls(rest)

    def load_problem(self) -> str | None:
        """A source that is no path (:func:`~r3.files.path_problem`) or is not there: a command says so
        before it makes its output or starts a graph, not once an episode asks for an answer."""
        if problem := path_problem(self.path):
            return f"replay source {problem}"
        return None if self.path.exists() else f"replay source not found: {self.path}"

    def load(self) -> None:
        if problem := self.load_problem():
            raise BackendError(problem)
        self.answers = load_answers(self.path)

    def _generate(self, messages, prefix, max_tokens, stop, on_text):
        raise NotImplementedError("ReplayBackend answers whole steps in decide()")

    def decide(self, inp, budget: ReasoningBudget = FULL_REASONING, on_text=None) -> BackendOutput:
        start = time.perf_counter()
        if inp.step >= len(self.answers):
            raise BackendError(
                f"{self.path} has no answer for step {inp.step} ({len(self.answers)} recorded)"
            )
        text, finish = self.answers[inp.step]
        if on_text is not None:
            on_text(text)
        elapsed = time.perf_counter() - start
        return BackendOutput(
            text, finish, None, len(text.split()), None, elapsed, elapsed, self.model_id, 1, False
        )
