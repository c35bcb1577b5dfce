"""A reasoner backend that answers from a script: the tests' stand-in for a model."""

from __future__ import annotations

from r3.reasoning.backends.base import BackendOutput, ReasonerBackend


class Script(ReasonerBackend):
    """Answers from ``answers``, one per call, whatever the step, and records what it was shown
    (``inputs``). An answer is a text (finished with "stop"), a (text, finish reason) pair, or a
    (category, text, finish reason) triple as ``r3.safety.fuzz.hostile_outputs`` makes them."""

    model_id = "script"

    def __init__(self, answers):
        self.answers, self.inputs = iter(answers), []

    def _generate(self, *args):
        raise AssertionError("not used")

    def decide(self, inp, budget=None, on_text=None):
        self.inputs.append(inp)
        answer = next(self.answers)
        if isinstance(answer, str):
            answer = (answer, "stop")
        text, finish = answer[-2:]
        return BackendOutput(text, finish, None, None, None, 0.0, 0.0, self.model_id, 1, False)
