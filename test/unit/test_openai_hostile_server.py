"""The openai backend and `r3 eval` against a hostile OpenAI-compatible server (an in-test
http.server thread): every bad reply is refused with a one-line reason (a BackendError naming the
server, or an invalid answer), nothing hangs, nothing is recorded as an outcome it is not."""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from r3.eval.cli import eval_main
from r3.eval.runner import EvalConfig, EvalError, evaluate
from r3.reasoning import BackendError, ReasonerInput, ReasoningBudget, decide, make_backend

IMAGE = np.zeros((48, 64, 3), np.uint8)
GOOD = "Reasoning: the red moon is left.\nInstruction: touch the red moon"
#: Generous bound for "it did not hang": the deadlines under test are 1-2 s.
NO_HANG_S = 60.0


def chunk(delta: dict | None = None, finish=None, **fields) -> dict:
    event = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    return {**event, "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}], **fields}


def sse(*events) -> bytes:
    """Events as server-sent events (a str is sent as it is), then [DONE]."""
    out = b""
    for e in events:
        out += b"data: " + (e if isinstance(e, str) else json.dumps(e)).encode() + b"\n\n"
    return out + b"data: [DONE]\n\n"


class Hostile(BaseHTTPRequestHandler):
    """GET .../models lists one model (or ``models`` decides); POST .../chat/completions is ``chat``."""

    protocol_version = "HTTP/1.1"
    chat: Callable[[Hostile], None]
    models: Callable[[Hostile], None] | None = None
    posts: list

    def log_message(self, *args) -> None:
        pass

    def send(self, status: int, body: bytes, content_type="application/json", headers=()) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()

    def do_GET(self) -> None:
        if self.models is not None:
            try:
                return type(self).models(self)
            except (BrokenPipeError, ConnectionResetError):  # the backend stopped reading: as it should
                return None
        model = {"id": "m", "object": "model", "created": 0, "owned_by": "test"}
        self.send(200, json.dumps({"object": "list", "data": [model]}).encode())

    def do_POST(self) -> None:
        self.posts.append(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        try:
            type(self).chat(self)
        except (BrokenPipeError, ConnectionResetError):  # the backend stopped reading: as it should
            pass


@contextmanager
def hostile(chat, models=None) -> Iterator[tuple[str, list]]:
    """A server for the block; yields its /v1 URL and the bodies of the chat requests it got."""
    handler = type("H", (Hostile,), {"chat": chat, "models": models, "posts": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1", handler.posts
    finally:
        server.shutdown()
        server.server_close()


def answer(body: bytes) -> Callable[[Hostile], None]:
    def chat(h: Hostile) -> None:
        h.send(200, body, "text/event-stream")

    return chat


def one_decision(url: str, options: str = "", inp: ReasonerInput | None = None):
    """One decision step through the backend, in a thread so that a hang fails the test, not the run;
    (the decision, the exception) with one of them None."""
    result: list = [None, None]

    def run() -> None:
        try:
            backend = make_backend(f"openai:{url},model=m,attempts=1{options}")
            backend.load()
            try:
                result[0] = decide(backend, inp or ReasonerInput("language_table", "make a line", [IMAGE]))
            finally:
                backend.close()
        except Exception as exc:  # noqa: BLE001 - handed to the test, which says what it expected
            result[1] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(NO_HANG_S)
    assert not thread.is_alive(), f"the decision still runs after {NO_HANG_S} s: it hangs"
    return result


def backend_error(url: str, options: str = "", inp: ReasonerInput | None = None) -> str:
    decision, exc = one_decision(url, options, inp)
    assert isinstance(exc, BackendError), (decision, exc)
    message = str(exc)
    assert "\n" not in message and url in message
    return message


# ------------------------------------------------------------------------------------ F1: deadline
def trickle(piece: bytes) -> Callable[[Hostile], None]:
    """Keeps the stream open forever, sending ``piece`` every 0.3 s (far inside the read timeout)."""

    def chat(h: Hostile) -> None:
        h.start_stream()
        while True:
            h.wfile.write(piece)
            h.wfile.flush()
            time.sleep(0.3)

    return chat


@pytest.mark.parametrize(
    "piece",
    [b": keepalive\n\n", b"data: " + json.dumps(chunk({"content": "x"})).encode() + b"\n\n"],
    ids=["keepalive_comments", "a_token_now_and_then"],
)
def test_a_reply_that_never_ends_is_cut_off_at_timeout_s(piece):
    with hostile(trickle(piece)) as (url, _):
        start = time.monotonic()
        message = backend_error(url, ",timeout_s=1.5")
    assert "did not finish its reply within timeout_s=1.5 s" in message
    assert time.monotonic() - start < NO_HANG_S


# --------------------------------------------------------- error pages and model lists: bounded
def error_page(h: Hostile) -> None:
    """A 500 whose HTML page is 2 MiB."""
    h.send(500, b"<html>" + b"x" * (2 << 20), "text/html")


def compressed_page(h: Hostile) -> None:
    """A 500 whose 20 MB of JSON come gzip-compressed in 20 KB (a small bomb)."""
    h.send(500, gzip.compress(b" " * 20_000_000), headers=[("Content-Encoding", "gzip")])


def trickled_page(h: Hostile) -> None:
    """A 500 whose page comes one byte every 0.25 s for 3 s (each read far inside the read timeout)."""
    h.send_response(500)
    h.send_header("Content-Type", "text/html")
    h.send_header("Content-Length", "12")
    h.end_headers()
    try:
        for _ in range(12):
            h.wfile.write(b"x")
            h.wfile.flush()
            time.sleep(0.25)
    except BrokenPipeError:  # the backend stopped reading: as it should
        pass


BODIES = {
    "huge": (error_page, "sent more than 1048576 bytes for one reply"),
    "gzip_bomb": (compressed_page, "HTTP 500 with Content-Encoding 'gzip'"),
    "trickled": (trickled_page, "did not finish its reply within timeout_s=1 s"),
}


@pytest.mark.parametrize("where", ["chat", "models"])
@pytest.mark.parametrize("body", BODIES.values(), ids=BODIES.keys())
def test_bodies_the_sdk_reads_whole_are_bounded_too(body, where):
    """The SDK reads a model list and an error page whole (inflating a compressed one) with only a
    per-read timeout: each is refused at 1 MiB, compressed or past timeout_s."""
    server, expected = body
    chat, models = (server, None) if where == "chat" else (answer(b""), server)
    with hostile(chat, models) as (url, _):
        start = time.monotonic()
        message = backend_error(url, ",timeout_s=1")
    assert expected in message
    assert time.monotonic() - start < 2.5


# ------------------------------------------------- status line and headers: within timeout_s too
def slow_headers(h: Hostile) -> None:
    """A status line and headers one byte every 0.25 s (each read far inside the read timeout)."""
    for byte in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}":
        h.wfile.write(bytes([byte]))
        h.wfile.flush()
        time.sleep(0.25)


def endless_continue(h: Hostile) -> None:
    """Interim "100 Continue" replies, one every 0.25 s, never a final one."""
    while True:
        h.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        h.wfile.flush()
        time.sleep(0.25)


@pytest.mark.parametrize("where", ["chat", "models"])
@pytest.mark.parametrize("server", [slow_headers, endless_continue], ids=["slow_headers", "endless_continue"])
def test_a_reply_whose_headers_never_end_is_cut_off_at_timeout_s(server, where):
    """httpx2's timeout holds each read alone: the deadline covers the status line and headers too."""
    chat, models = (server, None) if where == "chat" else (answer(b""), server)
    with hostile(chat, models) as (url, _):
        start = time.monotonic()
        message = backend_error(url, ",timeout_s=1")
    assert "did not finish its reply within timeout_s=1 s (its status line and headers" in message
    assert time.monotonic() - start < 2.5


ESCAPED = "boom \x1b[2J\x1b]0;title\x07 " + "y" * 5000


def escaped_error_page(h: Hostile) -> None:
    h.send(500, json.dumps({"error": {"message": ESCAPED}}).encode())


@pytest.mark.parametrize(
    "chat, models",
    [
        (escaped_error_page, None),
        (answer(b""), escaped_error_page),
        (answer(sse({"error": {"message": ESCAPED}})), None),
    ],
    ids=["error_page", "model_list_error_page", "error_event"],
)
def test_a_servers_error_message_is_shown_short_and_its_escapes_not_obeyed(chat, models):
    with hostile(chat, models) as (url, _):
        message = backend_error(url)
    assert "boom \\x1b[2J" in message and len(message) < 600
    assert all(c.isprintable() for c in message), message


# ------------------------------------------------------------- a 200 that is no event stream
COMPLETION = {
    "id": "c",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": GOOD}, "finish_reason": "stop"}],
}


@pytest.mark.parametrize(
    "body, content_type",
    [
        (b"<html><body>It works!</body></html>", "text/html"),
        (json.dumps(COMPLETION).encode(), "application/json"),
    ],
    ids=["html_page", "whole_json_completion"],
)
def test_a_reply_that_is_no_event_stream_is_a_malformed_reply_naming_its_content_type(body, content_type):
    """Not an empty answer refused for its missing "Instruction:" section, which hid the cause."""

    def chat(h: Hostile) -> None:
        h.send(200, body, content_type)

    with hostile(chat) as (url, _):
        message = backend_error(url)
    assert (
        f"sent a malformed reply: HTTP 200 with Content-Type '{content_type}', not the event stream"
        in message
    )


# ------------------------------------------------------------------------------------ F4: shapes
CONTENT = chunk({"content": GOOD})
MALFORMED = {
    "content_number": sse(chunk({"content": 42})),
    "content_list": sse(chunk({"content": ["Reasoning: r", "Instruction: touch the red moon"]})),
    "choices_dict": sse({**CONTENT, "choices": {"0": {"delta": {"content": "x"}}}}),
    "choices_string": sse({**CONTENT, "choices": "Instruction: touch the red moon"}),
    "choice_null": sse({**CONTENT, "choices": [None]}),
    "delta_null": sse({**CONTENT, "choices": [{"index": 0, "delta": None}]}),
    "usage_string": sse(CONTENT, chunk({}, "stop", usage="lots")),
    "finish_reason_number": sse(CONTENT, chunk({}, 12345)),
    "invalid_json_event": sse("{not json", CONTENT),
    "invalid_json_after_text": sse(CONTENT, "{not json"),
    "json_array_event": sse([1, 2, 3]),
    "json_number_event": sse("42"),
    "deep_event": sse("[" * 100_000 + "]" * 100_000),
}


@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_stream_is_a_backend_error_naming_the_servers_reply(body):
    with hostile(answer(body)) as (url, _):
        message = backend_error(url)
    assert "sent a malformed reply: " in message


def tools_input() -> ReasonerInput:
    return ReasonerInput("packing", "put the soup can in the small tray", [IMAGE, IMAGE], interface="tools")


def calls(*pieces) -> bytes:
    """A tools answer whose tool calls are ``pieces`` (index, name, arguments), one event each."""
    events = [chunk({"content": "Reasoning: r\nTool call:"})]
    for index, name, args in pieces:
        events.append(
            chunk({"tool_calls": [{"index": index, "function": {"name": name, "arguments": args}}]})
        )
    return sse(*events, chunk({}, "tool_calls"))


MALFORMED_CALLS = {
    "index_null_beside_0": calls((None, "set_gripper", '{"opening": 1}'), (0, "done", "{}")),
    "name_int": calls((0, 5, "{}")),
    "arguments_object": calls((0, "set_gripper", {"opening": 1})),
    "arguments_5000_digits": calls((0, "set_gripper", '{"opening": ' + "1" * 5000 + "}")),
    "arguments_100k_deep": calls((0, "set_gripper", '{"opening": ' + "[" * 100_000 + "]" * 100_000 + "}")),
}


@pytest.mark.parametrize("body", MALFORMED_CALLS.values(), ids=MALFORMED_CALLS.keys())
def test_malformed_tool_calls_are_a_backend_error_or_an_invalid_answer(body):
    with hostile(answer(body)) as (url, _):
        decision, exc = one_decision(url, ",function_calls=true", tools_input())
    if exc is not None:
        assert isinstance(exc, BackendError), exc
        assert "sent a malformed reply: " in str(exc) and "\n" not in str(exc)
    else:
        assert not decision.valid and decision.parsed.reason, decision.parsed


UNDECLARED_CALLS = {
    "tools_without_function_calls": ("", tools_input()),
    "semantic": (
        ",function_calls=true",
        ReasonerInput("packing", "pack the soup can", [IMAGE, IMAGE], interface="semantic"),
    ),
    "plan": (
        ",function_calls=true",
        ReasonerInput("packing", "pack the soup can", [IMAGE, IMAGE], interface="plan"),
    ),
}


@pytest.mark.parametrize("options, inp", UNDECLARED_CALLS.values(), ids=UNDECLARED_CALLS.keys())
def test_tool_calls_a_request_declared_no_tools_for_are_a_backend_error(options, inp):
    """A server that answers with tool calls though the request declared none is off the protocol: its
    calls are never written into the answer (a tools answer ending in its header would take them)."""
    with hostile(answer(calls((0, "done", "{}")))) as (url, posts):
        message = backend_error(url, options, inp)
    assert "tools" not in json.loads(posts[0])
    assert "sent a malformed reply: tool calls, though the request declared no tools" in message


def test_a_tool_name_sent_again_with_each_piece_of_its_arguments_is_one_name():
    """Found by a hostile sweep: a server that repeats the function's name in every streamed piece (the
    protocol sends it once) had its call joined into "set_grippersetgripper" and refused as unknown."""
    pieces = calls((0, "set_gripper", '{"open'), (0, "set_gripper", 'ing": 1}'))
    with hostile(answer(pieces)) as (url, _):
        decision, exc = one_decision(url, ",function_calls=true", tools_input())
    assert exc is None and decision.valid, (decision, exc)
    assert decision.output.raw_text.endswith("Tool call: set_gripper(opening=1)")


def test_a_well_formed_stream_still_reads():
    with hostile(answer(sse(chunk({"content": GOOD[:10]}), chunk({"content": GOOD[10:]}, "stop")))) as (
        url,
        _,
    ):
        decision, exc = one_decision(url)
    assert exc is None and decision.valid, (decision, exc)


# ------------------------------------------------------------------ token counts a record can hold
def step_msg(decision, inp: ReasonerInput):
    """The decision as the reasoner node publishes it: a ReasonerStep, serialized and read back (its
    counts are uint32: a larger one failed to serialize, or came back wrapped around)."""
    from builtin_interfaces.msg import Time
    from rclpy.serialization import deserialize_message, serialize_message

    from r3.episode_loop import StepDecision
    from r3_ros.conversions import ReasonerStep, reasoner_step_msg

    record = StepDecision(0, inp, decision, "", "", "", "")
    msg = reasoner_step_msg("e", "V", record, (0, 0, 0), [], Time())
    return deserialize_message(serialize_message(msg), ReasonerStep)


def test_a_token_count_no_record_can_hold_is_no_count():
    """A count past uint32 reached the node's conversion to a ReasonerStep, which failed on it."""
    usage = {"prompt_tokens": 12, "completion_tokens": 99999999999999999999999999}
    inp = ReasonerInput("language_table", "make a line", [IMAGE])
    with hostile(answer(sse(CONTENT, chunk({}, "stop", usage=usage)))) as (url, _):
        decision, exc = one_decision(url, inp=inp)
    assert exc is None and decision.valid, (decision, exc)
    assert (decision.output.prompt_tokens, decision.output.completion_tokens) == (12, None)
    msg = step_msg(decision, inp)
    assert (msg.prompt_tokens, msg.completion_tokens) == (12, 0)


def test_two_stages_counts_whose_sum_no_record_can_hold_are_no_count():
    """Under a reasoning budget a step's counts are two generations' sums: each fits, the sum not."""
    most = 2**32 - 1
    usage = {"prompt_tokens": most, "completion_tokens": most}
    inp = ReasonerInput("language_table", "make a line", [IMAGE])
    with hostile(answer(sse(CONTENT, chunk({}, "stop", usage=usage)))) as (url, _):
        backend = make_backend(f"openai:{url},model=m,attempts=1")
        backend.load()
        decision = decide(backend, inp, ReasoningBudget(max_reasoning_tokens=8))
        backend.close()
    out = decision.output
    assert (out.stages, out.reasoning_tokens, out.prompt_tokens, out.completion_tokens) == (
        2,
        most,
        None,
        None,
    )
    msg = step_msg(decision, inp)
    assert (msg.prompt_tokens, msg.completion_tokens) == (0, 0)


# ------------------------------------------------------------------------------------ F5: size
def endless_words(h: Hostile) -> None:
    """A reply of 50 MB at most, to a request for 16 tokens."""
    h.start_stream()
    event = b"data: " + json.dumps(chunk({"content": "word " * 2000})).encode() + b"\n\n"
    for _ in range(50_000_000 // len(event)):
        h.wfile.write(event)


def test_a_reply_far_beyond_max_new_tokens_is_not_read_to_its_end():
    with hostile(endless_words) as (url, _):
        message = backend_error(url, ",max_new_tokens=16,timeout_s=60")
    assert "bytes for one reply; stopped reading" in message


def test_one_long_line_is_cut_off_too():
    body = b"data: " + b"x" * (8 << 20)  # no newline: nothing to parse, just bytes
    with hostile(answer(body)) as (url, _):
        assert "stopped reading" in backend_error(url, ",max_new_tokens=16")


# ------------------------------------------------------------------------------------ F8: redirect
PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")


@pytest.mark.parametrize("variable", ["http_proxy", "HTTP_PROXY", "all_proxy"])
def test_the_environments_proxy_carries_the_requests_as_the_sdks_own_client_did(variable, monkeypatch):
    """The guarded transport (a transport of r3's own, which httpx gives no proxy from the
    environment) dropped the proxy a user's shell names: a server reached only through it was
    unreachable. Here the server behind the proxy is an address nothing answers on (TEST-NET-1)."""
    for name in (*PROXY_VARIABLES, "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with hostile(answer(sse(chunk({"content": GOOD}, "stop")))) as (proxy, posts):
        monkeypatch.setenv(variable, proxy.removesuffix("/v1"))
        decision, exc = one_decision("http://192.0.2.1:9/v1", ",timeout_s=2")
    assert exc is None and decision.valid, (decision, exc)
    assert len(posts) == 1


def test_no_proxy_names_the_servers_reached_directly(monkeypatch):
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", "http://192.0.2.1:9")  # a proxy nothing answers on
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    with hostile(answer(sse(chunk({"content": GOOD}, "stop")))) as (url, posts):
        decision, exc = one_decision(url, ",timeout_s=2")
    assert exc is None and decision.valid and len(posts) == 1, (decision, exc)


def test_a_redirect_is_not_followed_and_names_where_it_pointed():
    with hostile(answer(sse(CONTENT, chunk({}, "stop")))) as (elsewhere, received):
        target = elsewhere + "/chat/completions"

        def redirect(h: Hostile) -> None:
            h.send(307, b"", headers=[("Location", target)])

        with hostile(redirect) as (url, _):
            message = backend_error(url)
    assert "HTTP 307" in message and target in message and "not followed" in message
    assert received == [], "the prompt was sent to the redirect's host"


# ------------------------------------------------------------------------------------ F13: finish
@pytest.mark.parametrize("finish", ["content_filter", "banana"])
def test_an_answer_that_did_not_stop_normally_is_not_valid(finish):
    with hostile(answer(sse(CONTENT, chunk({}, finish)))) as (url, _):
        decision, exc = one_decision(url)
    assert exc is None and not decision.valid, (decision, exc)
    assert decision.parsed.kind.value == "truncated" and finish in decision.parsed.reason


# ------------------------------------------------------------------------------------ F7: load
def models_status(status: int, body: bytes = b'{"error": "nope"}') -> Callable[[Hostile], None]:
    def models(h: Hostile) -> None:
        h.send(status, body)

    return models


@pytest.mark.parametrize("content_type", ["text/html", ""])
def test_a_model_list_that_is_no_json_is_a_malformed_reply_naming_its_content_type(content_type):
    """An HTML page for the model list was "a malformed reply: AttributeError: ...", the SDK's own
    words, which hide what came."""

    def html(h: Hostile) -> None:
        h.send(200, b"<html><body>a proxy's login page</body></html>", content_type)

    with hostile(answer(sse(chunk({"content": GOOD}, "stop"))), models=html) as (url, _):
        message = backend_error(url)
    assert (
        f"answered the model list with a malformed reply: HTTP 200 with Content-Type {content_type!r}"
        in message
    )


@pytest.mark.parametrize(
    "models",
    [models_status(401), models_status(404), models_status(200, b"{not json"), models_status(200, b"[1, 2]")],
    ids=["401", "404", "invalid_json", "not_a_list"],
)
def test_a_failed_load_is_a_backend_error_and_r3_eval_refuses_in_one_line(models, tmp_path, capsys):
    with hostile(answer(b""), models) as (url, _):
        backend = make_backend(f"openai:{url},model=m,attempts=1")
        with pytest.raises(BackendError) as info:
            backend.load()
        assert url in str(info.value) and "\n" not in str(info.value)
        rc = eval_main(
            ["--reasoner", f"openai:{url},model=m,attempts=1", "--tasks", "V", "--scenes", "1"]
            + ["--trials", "1", "--max-steps", "1", "--out", str(tmp_path / "eval")]
        )
    err = capsys.readouterr().err
    assert rc != 0 and "Traceback" not in err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert url in line


# ------------------------------------------------------------------------------------ F2: eval
def test_a_backend_failure_mid_episode_is_an_error_of_r3_eval_and_a_resume_runs_it_again(tmp_path):
    out, healthy = tmp_path / "eval", threading.Event()

    def chat(h: Hostile) -> None:  # 401 (a revoked key) until the test says the server is healthy
        if healthy.is_set():
            answer(sse(CONTENT, chunk({}, "stop")))(h)
        else:
            h.send(401, b'{"error": {"message": "bad key"}}')

    with hostile(chat) as (url, _):
        config = EvalConfig(f"openai:{url},model=m,attempts=1", tasks=("V",), scenes=1, trials=1, max_steps=1)
        with pytest.raises(EvalError, match="HTTP 401.*resume"):
            evaluate(config, out)
        episodes = out / "episodes.jsonl"
        assert not episodes.exists() or episodes.read_text() == "", "the failed episode was recorded"
        healthy.set()
        (record,) = evaluate(config, out)
    assert "skipped" not in record and "success" in record


# -------------------------------------------------------------------- F9: credentials in the URL
SECRET = "s3cr3t-pa55"
CREDENTIALS = {
    "in_the_url": "openai:http://me:{}@127.0.0.1:9/v1,model=m",
    "and_a_bad_port": "openai:http://me:{}@127.0.0.1:abc/v1,model=m",
    "with_a_slash": "openai:http://me:pa/{}@127.0.0.1:9/v1,model=m",
    "without_a_scheme": "openai:me:{}@127.0.0.1:9/v1,model=m",
    "in_a_spec_that_is_no_spec": "openai:http://me:{}@127.0.0.1:9/v1,model",
    "under_an_unknown_scheme": "opnai:http://me:{}@127.0.0.1:9/v1,model=m",
}


@pytest.mark.parametrize("spec", [s.format(SECRET) for s in CREDENTIALS.values()], ids=CREDENTIALS.keys())
def test_a_url_with_a_password_is_refused_and_the_password_shown_nowhere(spec, tmp_path, capsys, caplog):
    """A password in the URL would be printed in the model id (results, bags), every error message
    and the HTTP library's errors: refused, the refusal saying where the key goes, naming no part of it."""
    with pytest.raises(ValueError) as info:
        make_backend(spec)
    assert SECRET not in str(info.value) and "pa/" not in str(info.value)
    if spec.startswith("openai:http") and spec.endswith("model=m"):
        assert "holds '@'" in str(info.value) and "$OPENAI_API_KEY" in str(info.value)
    with pytest.raises(EvalError) as info:
        evaluate(EvalConfig(spec, tasks=("V",), scenes=1, trials=1), tmp_path / "eval")
    assert SECRET not in str(info.value)
    rc = eval_main(["--reasoner", spec, "--tasks", "V", "--scenes", "1", "--out", str(tmp_path / "cli")])
    shown = capsys.readouterr()
    assert rc != 0 and SECRET not in shown.out + shown.err + caplog.text
    assert not (tmp_path / "eval").exists() and not (tmp_path / "cli").exists()


def test_the_key_goes_in_key_env_and_the_judge_refuses_a_password_too():
    from r3.rewards.vlm import VLMJudge

    with pytest.raises(ValueError, match=r"\$MY_KEY instead") as info:
        make_backend(f"openai:https://me:{SECRET}@example.org/v1,model=m,key_env=MY_KEY")
    assert SECRET not in str(info.value)
    with pytest.raises(ValueError, match=r"\$R3_JUDGE_API_KEY instead") as info:
        VLMJudge(f"http://me:{SECRET}@127.0.0.1:9/v1", "m")
    assert SECRET not in str(info.value)


def server_error(h: Hostile) -> None:
    h.send(503, b'{"error": "overloaded"}')


@pytest.mark.parametrize("where", ["chat", "models"])
def test_a_server_error_after_every_attempt_names_the_server_once_and_its_status(where):
    """A 5xx, retried to the last attempt, said "cannot reach URL ... (HTTPStatusError: ... for url
    'URL/models' ...)": the server named twice, and as unreachable though it answered."""
    chat, models = (server_error, None) if where == "chat" else (answer(b""), server_error)
    with hostile(chat, models) as (url, _):
        message = backend_error(url)
    assert message.count(url) == 1, message
    assert f"{url} answered with an error after 1 attempts: HTTP 503: Error code: 503" in message, message


# ------------------------------------------------------------------------------------ F6: options
@pytest.mark.parametrize(
    "option",
    [
        "timeout_s=nan",
        "timeout_s=inf",
        "temperature=nan",
        "temperature=inf",
        "temperature=-1",
        "temperature=1e308",
        "top_p=nan",
        "top_p=-3",
        "max_new_tokens=-5",
        "max_new_tokens=0",
        "max_new_tokens=100000000000000000000",
        "seed=-1",
        "seed=1000000000000000000000000000000",
        "model=",
        "max_new_tokens=1_000",
        "max_new_tokens=１２",
        "attempts=0",
    ],
)
def test_out_of_range_options_are_refused_at_spec_parsing(option, tmp_path):
    key = option.partition("=")[0]
    url = "openai:http://127.0.0.1:9/v1"
    spec = f"{url},{option}" if key == "model" else f"{url},model=m,{option}"
    with pytest.raises(ValueError) as info:
        make_backend(spec)
    assert f"{key}=" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(EvalError, match=f"{key}="):
        evaluate(EvalConfig(spec, tasks=("V",), scenes=1, trials=1), tmp_path / "eval")
    assert not (tmp_path / "eval").exists()
