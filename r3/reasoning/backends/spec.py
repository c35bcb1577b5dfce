"""Backend specs, ``SCHEME[:ARGUMENT][,KEY=VALUE]...``: the one parser every caller goes through.

>>> parse_spec("transformers:/models/r3,device=cuda:0,dtype=bfloat16")
BackendSpec(scheme='transformers', argument='/models/r3', pairs=(('device', 'cuda:0'), ('dtype', 'bfloat16')))

The argument is everything between the first ':' and the first ',' (a folder, a URL; it holds no
comma); each option is KEY=VALUE; spaces around either are not part of it. The same string works
wherever a reasoner is chosen: ``r3 run --reasoner``, ``r3 eval --reasoner``, ``r3 collect
--backend``, the reasoner node's ``backend`` parameter in graph.yaml or ``--set
r3_reasoner_node.backend=...``. A backend class declares the keys it takes in ``SPEC_OPTIONS`` (key
-> :class:`Option`), and :func:`spec_options` turns the pairs into typed values: an unknown key, a
missing required one or a value of the wrong type is a ``ValueError`` that names the key and the
valid ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from r3.files import is_kind
from r3.numerals import DECIMAL, INTEGER
from r3.urls import shown_url

_BOOLS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


@dataclass(frozen=True)
class Option:
    """One key a backend spec may carry: its type (str, int, float or bool), what it does, and for
    numbers the range it must lie in (``low``/``high`` inclusive; ``above``: strictly greater).
    A str is never empty; a float is finite."""

    kind: type
    help: str
    required: bool = False
    low: float | None = None
    high: float | None = None
    above: float | None = None

    def parse(self, key: str, text: str):
        if self.kind is bool:
            if text.lower() not in _BOOLS:
                raise ValueError(f"{key}={text!r}: expected true or false")
            return _BOOLS[text.lower()]
        if self.kind is str:
            if not text:
                raise ValueError(f"{key}= is empty: expected a value")
            return text
        number = self.kind is float
        if not (DECIMAL if number else INTEGER).fullmatch(text):
            raise ValueError(f"{key}={text!r}: expected {'a number' if number else 'an integer'}")
        value = self.kind(text)
        if number and not math.isfinite(value):
            raise ValueError(f"{key}={text!r}: expected a finite number")
        if self._outside(value):
            raise ValueError(f"{key}={text!r}: expected {self.range()}")
        return value

    def value_problem(self, value) -> str | None:
        """Why ``value``, as a JSON file held it, is no value of this option (a bool is no number, an
        integer no float can hold is none), or None."""
        try:
            if is_kind(value, self.kind) and (self.kind is str or not self._outside(value)):
                return None
        except OverflowError:
            pass
        what = {bool: "true or false", str: "a string", int: "a whole number", float: "a number"}[self.kind]
        return f"expected {what}" + ("" if self.kind in (bool, str) else f", {self.range()}")

    def _outside(self, value) -> bool:
        return (
            (self.low is not None and value < self.low)
            or (self.high is not None and value > self.high)
            or (self.above is not None and value <= self.above)
        )

    def range(self) -> str:
        """The allowed range in words, e.g. "a value in (0, 1]"."""
        low = f"({_num(self.above)}" if self.above is not None else "(-inf"
        low = f"[{_num(self.low)}" if self.low is not None else low
        high = f"{_num(self.high)}]" if self.high is not None else "inf)"
        return f"a value in {low}, {high}"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


@dataclass(frozen=True)
class BackendSpec:
    scheme: str
    argument: str
    pairs: tuple[tuple[str, str], ...]


def parse_spec(spec: str) -> BackendSpec:
    """Split ``spec`` into scheme, argument and KEY=VALUE pairs (not yet checked against a backend);
    spaces around each part are not part of it.

    >>> parse_spec(" openai : http://h:1/v1 , model = m ")
    BackendSpec(scheme='openai', argument='http://h:1/v1', pairs=(('model', 'm'),))
    """
    head, *rest = spec.split(",")
    scheme, _, argument = head.partition(":")
    scheme = scheme.strip()
    if not scheme:
        raise ValueError(f"backend spec {shown_url(spec)}: expected SCHEME[:ARGUMENT][,KEY=VALUE...]")
    pairs = []
    for item in rest:
        key, sep, value = item.strip().partition("=")
        if not sep or not key:
            raise ValueError(f"backend spec {shown_url(spec)}: {shown_url(item.strip())} is not KEY=VALUE")
        pairs.append((key.strip(), value.strip()))
    return BackendSpec(scheme, argument.strip(), tuple(pairs))


def same_spec(a: str, b: str) -> bool:
    """Whether two specs name the same backend with the same options, as :func:`parse_spec` reads
    them (the space rule: "expert " is "expert"); a ValueError when either is no spec.

    >>> same_spec("expert ", "expert"), same_spec("openai:U, model=m", "openai:U,model=m")
    (True, True)
    """
    return parse_spec(a) == parse_spec(b)


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


#: The most tokens a spec may ask one generation for (no model's context is longer), and the largest seed
#: (numpy and torch take seeds below 2^32).
MAX_NEW_TOKENS, MAX_SEED = 1_000_000, 2**32 - 1

#: The sampling temperatures a model is run at (0: greedy decoding); a checkpoint's and a training
#: config's too (``r3.reasoning.prompts.temperature_problem``).
TEMPERATURES = (0.0, 10.0)

#: The sampling keys every generating backend takes (its constructor's keyword arguments).
SAMPLING_OPTIONS = {
    "temperature": Option(
        float,
        "sampling temperature, in [0, 10]; 0 = greedy decoding",
        low=TEMPERATURES[0],
        high=TEMPERATURES[1],
    ),
    "top_p": Option(float, "nucleus sampling mass, in (0, 1]", above=0, high=1),
    "max_new_tokens": Option(
        int, f"tokens per decision step at most, in [1, {MAX_NEW_TOKENS}]", low=1, high=MAX_NEW_TOKENS
    ),
    "seed": Option(
        int, f"sampling seed in [0, {MAX_SEED}]: the same prompt gives the same answer", low=0, high=MAX_SEED
    ),
    "thinking": Option(bool, "let a thinking model think before it answers (true/false)"),
}
