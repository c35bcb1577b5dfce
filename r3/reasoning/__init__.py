"""The reasoner core: prompts, response parsing, budgets and model backends (ROS-free).

Typical use (the reasoner node does this): ``backend = make_backend(spec); backend.load()`` at
configure time, then ``decide(backend, ReasonerInput(...), ReasoningBudget(...))`` each step.
Heavy libraries (torch, transformers, openai) are imported only by the backend that needs them.
"""

from r3.reasoning.backends import (
    BackendError,
    BackendOutput,
    ReasonerBackend,
    ReasoningBudget,
    make_backend,
    register_backend,
)
from r3.reasoning.parsing import ErrorKind, ParsedResponse, ResponseError, parse_response
from r3.reasoning.prompts import ReasonerInput, build_messages, prompt_text
from r3.reasoning.reasoner import Decision, decide

__all__ = [
    "BackendError",
    "BackendOutput",
    "Decision",
    "ErrorKind",
    "ParsedResponse",
    "ReasonerBackend",
    "ReasonerInput",
    "ReasoningBudget",
    "ResponseError",
    "build_messages",
    "decide",
    "make_backend",
    "parse_response",
    "prompt_text",
    "register_backend",
]
