"""Helpers for tests that run servers on loopback: a free port, and a stand-in OpenAI-compatible
server that streams fixed answers (text and, as a server's tool parser returns them, tool calls)."""

from __future__ import annotations

import json
import socket
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: The expert's first instruction on task V, seed 3: its blocks are on that board, so the policy moves.
KNOWN_VALID = (
    "Reasoning: the red pentagon belongs at the bottom of the V.\n"
    "Instruction: move the red pentagon to the bottom center"
)


class StandIn(BaseHTTPRequestHandler):
    """Streams ``answer`` to every chat request as vLLM would, then ``tool_calls`` (name, JSON
    arguments), each in two pieces, ``delay_s`` after the request came (a model thinking); the
    requests received are kept in ``requests``."""

    answer: ClassVar[str] = ""
    tool_calls: ClassVar[tuple[tuple[str, str], ...]] = ()
    delay_s: ClassVar[float] = 0.0
    requests: ClassVar[list[dict]] = []

    def log_message(self, *args) -> None:
        pass

    def _send(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # /v1/models: the backend's check at load time
        model = {"id": "stand-in", "object": "model", "created": 0, "owned_by": "test"}
        self._send(json.dumps({"object": "list", "data": [model]}).encode(), "application/json")

    def do_POST(self) -> None:
        self.requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        time.sleep(self.delay_s)
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "stand-in"}

        def delta(d: dict, finish: str | None = None) -> dict:
            return dict(chunk, choices=[{"index": 0, "delta": d, "finish_reason": finish}])

        events = [delta({"role": "assistant", "content": self.answer})]
        for k, (name, args) in enumerate(self.tool_calls):
            half, first = len(args) // 2, {"index": k, "id": f"call_{k}", "type": "function"}
            opening = {**first, "function": {"name": name, "arguments": args[:half]}}
            events.append(delta({"tool_calls": [opening]}))
            events.append(delta({"tool_calls": [{"index": k, "function": {"arguments": args[half:]}}]}))
        events.append(delta({}, "tool_calls" if self.tool_calls else "stop"))
        usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
        events.append(dict(chunk, choices=[], usage=usage))
        self._send(
            b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n",
            "text/event-stream",
        )


@contextmanager
def stand_in_server(answer: str = "", tool_calls: tuple[tuple[str, str], ...] = (), delay_s: float = 0.0):
    """A stand-in server on loopback for the block; yields (its /v1 URL, the requests it receives)."""
    fields = {"answer": answer, "tool_calls": tool_calls, "delay_s": delay_s, "requests": []}
    handler = type("Answering", (StandIn,), fields)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1", handler.requests
    finally:
        server.shutdown()
        server.server_close()
