"""What no grammar takes: characters a name or an instruction would hold unseen.

Python's ``str.split()`` folds the information separators U+001C-U+001F, U+0085 and the line and
paragraph separators into spaces, so "soup\\x1fcan" read as "soup can" while a log shows one word;
zero-width and direction marks change what a text reads as without showing.
"""

from __future__ import annotations

import unicodedata

#: Unicode categories no grammar takes, beyond the C ones (control, format, unassigned, private use).
SEPARATORS = ("Zl", "Zp")


def hidden_character(text: str, allowed: str = "") -> str:
    """Why ``text`` holds a character no grammar takes (a control, format, unassigned, line or
    paragraph separator character not in ``allowed``), naming the first; "" when it holds none."""
    for char in text:
        category = unicodedata.category(char)
        if char not in allowed and (category[0] == "C" or category in SEPARATORS):
            return f"holds the hidden character U+{ord(char):04X}"
    return ""
