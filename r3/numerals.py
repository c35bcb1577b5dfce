"""What text r3 reads as a number, wherever a person types one: a command's option, a backend spec's
KEY=VALUE, a ``--set`` value. ASCII digits only, as they are printed back: Python's ``int()`` and
``float()`` also take "1_000", Arabic-Indic or full-width digits, "nan" and "inf", which one command
took and another refused, and which reached messages and folder names in another form than typed.

>>> [bool(INTEGER.fullmatch(t)) for t in ("-3", "1_000", "\\u0663", "0x10")]
[True, False, False, False]
>>> [bool(DECIMAL.fullmatch(t)) for t in ("2.5e-3", ".5", "nan", "1e309")]
[True, True, False, True]
"""

from __future__ import annotations

import re

INTEGER = re.compile(r"[+-]?[0-9]+")
#: A decimal number, maybe with an exponent; one too large for a float (1e309) still matches and
#: reads as inf, so a reader that needs a finite number checks that too.
DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def says_its_digits(number: object, text: str) -> bool:
    """Whether ``number``, which YAML read from ``text``, is the number its digits 0-9 say. YAML 1.1
    (PyYAML) reads 010 as 8, 1:30 as 90, 0x10 as 16, 1_000 as 1000 and .nan as a float: a config
    keeps such a value as the text, so that its type check names what was written.

    >>> [says_its_digits(n, t) for n, t in ((8, "010"), (90, "1:30"), (10, "10"), (2.5, "2.5e0"))]
    [False, False, True, True]
    """
    if not isinstance(number, int | float) or isinstance(number, bool):
        return True
    form = INTEGER if isinstance(number, int) else DECIMAL
    text = text.strip()
    return bool(form.fullmatch(text)) and type(number)(text) == number
