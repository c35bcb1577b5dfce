"""The rule for a server's base URL (an OpenAI-compatible reasoner or judge): checked when it is
given, so a malformed one is refused with a reason, never found by the HTTP client mid-episode.

>>> url_problem("http://127.0.0.1:8000/v1") is None
True
>>> url_problem("http://127.0.0.1:abc/v1")
"port 'abc' is not a number in [0, 65535]"
"""

from __future__ import annotations

from urllib.parse import urlsplit


def url_problem(url: str) -> str | None:
    """Why ``url`` is no http(s) URL of a server (scheme, host, port, no spaces or control
    characters), or None."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return "expected http://... or https://..."
    if any(c.isspace() or not c.isprintable() for c in url):
        return "holds a space or a control character"
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # an unclosed IPv6 bracket
        return str(exc)
    if not parts.hostname:
        return "names no host"
    try:
        parts.port  # noqa: B018 - raises for a port that is no number or out of range
    except ValueError:
        return f"port {parts.netloc.rsplit(':', 1)[-1]!r} is not a number in [0, 65535]"
    return None
