"""Backend specs, ``SCHEME[:ARGUMENT][,KEY=VALUE]...``: the one parser every caller goes through.

>>> parse_spec("transformers:/models/r3,device=cuda:0,dtype=bfloat16")
BackendSpec(scheme='transformers', argument='/models/r3', pairs=(('device', 'cuda:0'), ('dtype', 'bfloat16')))

The argument is everything between the first ':' and the first ',' (a folder, a URL; it holds no
comma); each option is KEY=VALUE. The same string works wherever a reasoner is chosen: ``r3 run
--reasoner``, ``r3 eval --reasoner``, ``r3 collect --backend``, the reasoner node's ``backend``
parameter in graph.yaml or ``--set r3_reasoner_node.backend=...``. A backend class declares the
keys it takes in ``SPEC_OPTIONS`` (key -> :class:`Option`), and :func:`spec_options` turns the
pairs into typed values: an unknown key, a missing required one or a value of the wrong type is a
``ValueError`` that names the key and the valid ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

_BOOLS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


@dataclass(frozen=True)
class Option:
    """One key a backend spec may carry: its type (str, int, float or bool) and what it does."""

    kind: type
    help: str
    required: bool = False

    def parse(self, key: str, text: str):
        if self.kind is bool:
            if text.lower() not in _BOOLS:
                raise ValueError(f"{key}={text!r}: expected true or false")
            return _BOOLS[text.lower()]
        try:
            return self.kind(text)
        except ValueError:
            raise ValueError(
                f"{key}={text!r}: expected {'a number' if self.kind is float else 'an integer'}"
            ) from None


@dataclass(frozen=True)
class BackendSpec:
    scheme: str
    argument: str
    pairs: tuple[tuple[str, str], ...]


def parse_spec(spec: str) -> BackendSpec:
    """Split ``spec`` into scheme, argument and KEY=VALUE pairs (not yet checked against a backend)."""
    head, *rest = spec.split(",")
    scheme, _, argument = head.strip().partition(":")
    if not scheme:
        raise ValueError(f"backend spec {spec!r}: expected SCHEME[:ARGUMENT][,KEY=VALUE...]")
    pairs = []
    for item in rest:
        key, sep, value = item.strip().partition("=")
        if not sep or not key:
            raise ValueError(f"backend spec {spec!r}: {item.strip()!r} is not KEY=VALUE")
        pairs.append((key.strip(), value.strip()))
    return BackendSpec(scheme, argument.strip(), tuple(pairs))


def spec_options(spec: BackendSpec, options: Mapping[str, Option]) -> dict:
    """The spec's options as typed values, checked against the backend's ``options``."""
    name = f"backend spec for {spec.scheme!r}"
    values = {}
    for key, text in spec.pairs:
        if key not in options:
            valid = f"valid keys: {', '.join(options)}" if options else f"{spec.scheme} takes no options"
            raise ValueError(f"{name}: unknown key {key!r}; {valid}")
        if key in values:
            raise ValueError(f"{name}: {key} is given twice")
        try:
            values[key] = options[key].parse(key, text)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
    missing = [key for key, option in options.items() if option.required and key not in values]
    if missing:
        raise ValueError(f"{name}: {', '.join(f'{key}=' for key in missing)} is required")
    return values


#: The sampling keys every generating backend takes (its constructor's keyword arguments).
SAMPLING_OPTIONS = {
    "temperature": Option(float, "sampling temperature; 0 = greedy decoding"),
    "top_p": Option(float, "nucleus sampling mass, in (0, 1]"),
    "max_new_tokens": Option(int, "tokens generated per decision step at most"),
    "seed": Option(int, "sampling seed, so the same prompt gives the same answer"),
    "thinking": Option(bool, "let a thinking model think before it answers (true/false)"),
}
