"""Reasoner backends behind one interface, chosen by a spec string.

>>> make_backend("openai:http://127.0.0.1:8000/v1,model=tiny").model_id
'tiny@http://127.0.0.1:8000/v1'

Specs: "transformers:DIR", "openai:URL,model=NAME[,key_env=VAR]", "expert" (= "expert:language_table",
the privileged data expert), "replay:BAG_DIR|FILE.jsonl" (recorded answers, step by step). Other backends register with :func:`register_backend`; classes are
imported only when used, so choosing the openai backend never imports torch.
"""

from __future__ import annotations

import importlib

from r3.reasoning.backends.base import (
    BackendError,
    BackendOutput,
    Generation,
    OnText,
    ReasonerBackend,
    ReasoningBudget,
)

#: scheme -> "module:Class"; the class has ``from_spec(rest: str, **options)``.
BACKENDS: dict[str, str] = {
    "transformers": "r3.reasoning.backends.transformers_backend:TransformersBackend",
    "openai": "r3.reasoning.backends.openai_backend:OpenAIBackend",
    "expert": "r3.reasoning.expert:LanguageTableExpert",
    "replay": "r3.reasoning.backends.replay:ReplayBackend",
}


def register_backend(scheme: str, target: str) -> None:
    """Make ``make_backend("SCHEME:...")`` build ``target`` ("module:Class" with ``from_spec``)."""
    if ":" not in target:
        raise ValueError(f"target={target!r}: expected 'module:Class'")
    BACKENDS[scheme] = target


def make_backend(spec: str, **options) -> ReasonerBackend:
    """Build (not load) the backend named by ``spec``; ``options`` go to its constructor.

    A bare scheme ("expert") passes an empty rest; the backend decides whether that is enough.
    """
    scheme, _, rest = spec.partition(":")
    if scheme not in BACKENDS:
        raise ValueError(f"backend spec {spec!r}: expected SCHEME:..., SCHEME one of {sorted(BACKENDS)}")
    module, _, cls = BACKENDS[scheme].partition(":")
    return getattr(importlib.import_module(module), cls).from_spec(rest, **options)


__all__ = [
    "BACKENDS",
    "BackendError",
    "BackendOutput",
    "Generation",
    "OnText",
    "ReasonerBackend",
    "ReasoningBudget",
    "make_backend",
    "register_backend",
]
