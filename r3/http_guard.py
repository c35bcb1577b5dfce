"""The bounds on one exchange with a server that is not trusted (the reasoner's OpenAI-compatible
server, the VLM judge's): one deadline over the whole exchange, status line and headers included
(:class:`Deadline`), a cap on the bytes of one reply (:func:`reply_bytes`) and no compression
(:func:`encoding_problem`). An HTTP client's own timeout holds each read alone, so a server that
sends its headers a byte a second, "100 Continue" without end or a trickled body would run on far
past it; and a compressed body is inflated past any cap on what came over the wire.

>>> reply_bytes(10) == REPLY_BYTES_MIN
True
>>> encoding_problem("gzip")
"Content-Encoding 'gzip' (identity was asked for)"
"""

from __future__ import annotations

import socket
import threading

#: Bytes one reply may take on the wire: per token asked for (an SSE event of one token is about 200
#: bytes), never fewer than the minimum nor more than the absolute cap.
REPLY_BYTES_PER_TOKEN, REPLY_BYTES_MIN, REPLY_BYTES_MAX = 4096, 1 << 20, 64 << 20


def reply_bytes(max_tokens: int) -> int:
    """The most bytes read of one reply of at most ``max_tokens`` tokens."""
    return min(REPLY_BYTES_MAX, max(REPLY_BYTES_MIN, REPLY_BYTES_PER_TOKEN * max(0, max_tokens)))


def too_long(url: str, limit: int) -> str:
    """The message for a reply from ``url`` longer than ``limit`` bytes."""
    return f"{url} sent more than {limit} bytes for one reply; stopped reading"


def encoding_problem(content_encoding: str | None) -> str | None:
    """Why a reply with this Content-Encoding header is refused (we ask for identity), or None."""
    encoding = (content_encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        return None
    return f"Content-Encoding {encoding[:40]!r} (identity was asked for)"


class Deadline:
    """The end of one HTTP exchange, ``timeout_s`` after its request: then a watchdog thread shuts
    the sockets the exchange opened (given to :meth:`opened`), so whatever read waits on them ends at
    once. Call :meth:`end` when the reply is read; ``cut`` says a socket was shut, so the read that
    failed or ended early failed for the deadline."""

    def __init__(self, url: str, timeout_s: float) -> None:
        self.url, self.timeout_s = url, timeout_s
        self.sockets: list = []
        self.expired, self.cut = False, False
        self.lock = threading.Lock()
        self.watchdog = threading.Timer(timeout_s, self.expire)
        self.watchdog.daemon = True
        self.watchdog.start()

    def opened(self, sock):
        """Watch ``sock`` (returned as it is); one opened after the deadline, by a connect as slow as
        ``timeout_s``, is shut at once."""
        with self.lock:
            self.sockets.append(sock)
            if self.expired:
                self.cut = True
                shut(sock)
        return sock

    def expire(self) -> None:
        with self.lock:
            self.expired, self.cut = True, bool(self.sockets)  # none yet: connect's own timeout holds
            for sock in self.sockets:
                shut(sock)

    def end(self) -> None:
        self.watchdog.cancel()

    def reason(self, so_far: str) -> str:
        """The message for a reply cut off at the deadline, ``so_far`` saying how far it came."""
        return (
            f"{self.url} did not finish its reply within timeout_s={self.timeout_s:g} s ({so_far}); "
            "stopped reading"
        )


def shut(sock) -> None:
    """Shut ``sock`` for reading and writing, whichever thread waits on it. The plain socket's
    shutdown even for a TLS socket: ssl's own drops the TLS state under the thread reading it."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:  # closed already, or a TCP socket a TLS one took over
        pass
