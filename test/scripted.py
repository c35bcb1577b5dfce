"""A reasoner backend that answers from a script: the tests' stand-in for a model."""

from __future__ import annotations

from collections import Counter

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


def fuzzed_decisions(outputs, interface: str, image) -> tuple[list, Counter]:
    """Each of ``outputs`` (``hostile_outputs`` triples) decided on the packing cell in ``interface``
    (a crash fails the caller's test): the accepted (category, instruction) pairs, and the refusals
    counted by kind (every refusal must give a reason)."""
    from r3.reasoning.prompts import ReasonerInput
    from r3.reasoning.reasoner import decide

    backend, accepted, kinds = Script(outputs), [], Counter()
    for step, (category, _, _) in enumerate(outputs):
        decision = decide(backend, ReasonerInput("packing", "goal", [image], step=step, interface=interface))
        if decision.valid:
            accepted.append((category, decision.parsed.instruction_text))
        else:
            assert decision.parsed.reason, category
            kinds[decision.parsed.kind.value] += 1
    return accepted, kinds
