"""The rule for a server's base URL (an OpenAI-compatible reasoner or judge): checked when it is
given, so a malformed one is refused with a reason, never found by the HTTP client mid-episode.

A URL holds no user name or password: it is shown wherever the server is named (a reasoner's
model id in results and bags, logs, every error message, the HTTP library's own errors) and often
given where anyone may read it (a command line, a launch file, a ROS parameter), so masking it in
r3's own messages would not keep a password; the API key comes from an environment variable.

>>> url_problem("http://127.0.0.1:8000/v1", "OPENAI_API_KEY") is None
True
>>> url_problem("http://127.0.0.1:abc/v1", "OPENAI_API_KEY")
"port 'abc' is not a number in [0, 65535]"
"""

from __future__ import annotations

from urllib.parse import urlsplit


def url_problem(url: str, key_env: str) -> str | None:
    """Why ``url`` is no http(s) URL of a server (scheme, host, port, no spaces or control
    characters, no user name or password: the key goes in the environment variable ``key_env``),
    or None."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return "expected http://... or https://..."
    if "@" in url:  # before any part of it is shown; a password may hold "/" or "@" too
        return (
            "holds '@': no user name or password in a server's URL, which is shown wherever the "
            f"server is named (model id, logs, results); give the API key in ${key_env} instead"
        )
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


def shown_url(text) -> str:
    """``text`` (a URL, a backend spec holding one, or whatever was given in its place) as repr
    shows it, or not at all where it holds "@": a password may stand before it, and messages are
    kept (logs, results).

    >>> shown_url("openai:http://127.0.0.1:8000/v1,model=m")
    "'openai:http://127.0.0.1:8000/v1,model=m'"
    >>> shown_url("openai:http://me:secret@host/v1,model=m")
    "(not shown: it holds '@', a password may stand before it)"
    """
    return "(not shown: it holds '@', a password may stand before it)" if "@" in str(text) else repr(text)
