"""Reasoner backends behind one interface, chosen by a spec string.

>>> make_backend("openai:http://127.0.0.1:8000/v1,model=tiny").model_id
'tiny@http://127.0.0.1:8000/v1'

Specs (:mod:`r3.reasoning.backends.spec`): "transformers:DIR[,device=...,dtype=...,temperature=...]",
"openai:URL,model=NAME[,key_env=VAR,...]", "expert" (= "expert:language_table", the privileged data
expert), "replay:BAG_DIR|FILE.jsonl" (recorded answers, step by step), "random_valid" and "random_goal_block"
(R^3's random baselines, :mod:`r3.reasoning.backends.baselines`). Each backend class lists the
keys it takes in ``SPEC_OPTIONS``. Other backends register with :func:`register_backend` or through
the ``r3.backends`` entry points (:mod:`r3.plugins`); classes are imported only when used, so choosing
the openai backend never imports torch.

>>> make_backend("expert,device=cuda")
Traceback (most recent call last):
ValueError: backend spec for 'expert': unknown key 'device'; expert takes no options
"""

from __future__ import annotations

from collections.abc import Mapping

from r3.files import bounded_repr
from r3.plugins import Registry, having
from r3.reasoning.backends.base import (
    BackendError,
    BackendOutput,
    Generation,
    OnText,
    ReasonerBackend,
    ReasoningBudget,
)
from r3.reasoning.backends.spec import Option, parse_spec, spec_options
from r3.urls import shown_url


def _backend_problem(name: str, part: object) -> str | None:
    """Why ``part`` is no backend class: it lacks ``from_spec`` or ``SPEC_OPTIONS``, or its
    ``SPEC_OPTIONS`` is no mapping of key to :class:`Option` (a spec's options are parsed with it)."""
    if problem := having("from_spec", "SPEC_OPTIONS")(name, part):
        return problem
    options = part.SPEC_OPTIONS
    if isinstance(options, Mapping) and all(
        isinstance(key, str) and isinstance(option, Option) for key, option in options.items()
    ):
        return None
    shown = bounded_repr(options, 60)
    return f"loads {bounded_repr(part, 60)}, whose SPEC_OPTIONS {shown} is no mapping of key to Option"


#: scheme -> "module:Class"; the class has ``from_spec(argument: str, **options)`` and ``SPEC_OPTIONS``.
BACKENDS = Registry(
    "backend",
    {
        "transformers": "r3.reasoning.backends.transformers_backend:TransformersBackend",
        "openai": "r3.reasoning.backends.openai_backend:OpenAIBackend",
        "expert": "r3.reasoning.expert:LanguageTableExpert",
        "replay": "r3.reasoning.backends.replay:ReplayBackend",
        "random_valid": "r3.reasoning.backends.baselines:RandomValidBackend",
        "random_goal_block": "r3.reasoning.backends.baselines:RandomGoalBlockBackend",
    },
    check=_backend_problem,
)
#: Make ``make_backend("SCHEME:...")`` build a "module:Class" with ``from_spec``.
register_backend = BACKENDS.register


def make_backend(spec: str, **options) -> ReasonerBackend:
    """Build (not load) the backend named by ``spec``; ``options`` go to its constructor, and the
    spec's own KEY=VALUE options win over them (they are the user's choice).

    A bare scheme ("expert") passes an empty argument; the backend decides whether that is enough.
    """
    parsed = parse_spec(spec)
    try:  # the registry says why: an unknown scheme, or a package's backend left out or broken
        cls = BACKENDS.get(parsed.scheme)
    except ValueError as exc:
        raise ValueError(f"backend spec {shown_url(spec)}: {exc}") from None
    options = {**options, **spec_options(parsed, cls.SPEC_OPTIONS)}
    return BACKENDS.call(parsed.scheme, cls.from_spec, parsed.argument, **options)


def check_backend(spec: str) -> ReasonerBackend:
    """:func:`make_backend`, then what the backend can check before loading; a ValueError saying
    what is wrong, so a command refuses a spec before it starts workers, a graph or an output."""
    backend = make_backend(spec)
    if problem := backend.load_problem():
        raise ValueError(problem)
    return backend


__all__ = [
    "BACKENDS",
    "BackendError",
    "BackendOutput",
    "Generation",
    "OnText",
    "ReasonerBackend",
    "ReasoningBudget",
    "check_backend",
    "make_backend",
    "register_backend",
]
