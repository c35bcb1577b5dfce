"""The VLM judge against a real OpenAI-compatible HTTP server on 127.0.0.1 with canned answers."""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from r3.rewards import JudgeFailure, JudgeReward, VLMJudge
from r3.rewards.cli import judge_main
from r3.rewards.result import Tier


def _chat(content):
    return 200, json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]})


class _Server:
    """Serves the next canned (status, body) on every POST and records the requests."""

    def __init__(self):
        self.reply = _chat('{"analysis": "ok", "score": 1.0}')
        self.requests = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append((self.path, dict(self.headers), json.loads(body)))
                status, text = outer.reply
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(text.encode())

            def log_message(self, *args):
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def server():
    s = _Server()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


@pytest.mark.parametrize(
    "content, tier",
    [
        ('{"analysis": "same words", "score": 1.0}', Tier.LINGUISTIC),
        ('{"analysis": "adverb", "score": 0.5}', Tier.ADVERB_MISMATCH),
        (
            '<think>picture it</think>```json\n{"analysis": "same block, same place", "score": 0.25}\n```',
            Tier.SEMANTIC,
        ),
        ('Step 1 ... {"analysis": "different blocks", "score": "0.0"}', Tier.NO_MATCH),
    ],
)
def test_valid_verdicts(server, content, tier):
    server.reply = _chat(content)
    result = VLMJudge(server.url, "judge", api_key="k").judge("push the red moon up", "move the red moon up")
    assert result.tier is tier and result.reason.startswith("VLM judge")
    path, headers, body = server.requests[-1]
    assert path == "/v1/chat/completions" and headers["Authorization"] == "Bearer k"
    assert body["model"] == "judge" and "push the red moon up" in body["messages"][0]["content"][-1]["text"]


@pytest.mark.parametrize("kind", ["PNG", "JPEG"])
def test_image_is_sent_as_data_url(server, kind):
    import base64
    import io

    from PIL import Image

    encoded = io.BytesIO()
    Image.new("RGB", (8, 6), (200, 40, 40)).save(encoded, format=kind)
    server.reply = _chat('{"analysis": "x", "score": 0.0}')
    VLMJudge(server.url, "judge").judge("touch the red moon", "touch the blue cube", image=encoded.getvalue())
    url = server.requests[-1][2]["messages"][0]["content"][0]["image_url"]["url"]
    head = f"data:image/{kind.lower()};base64,"
    assert url.startswith(head) and base64.b64decode(url[len(head) :]) == encoded.getvalue()


@pytest.mark.parametrize(
    "reply, kind",
    [
        (_chat('{"analysis": "x", "score": 0.75}'), "answer"),
        (_chat('{"analysis": "x", "score": true}'), "answer"),
        (_chat('{"analysis": "x", "score": "high"}'), "answer"),
        (_chat("I think they match."), "answer"),
        ((200, '{"id": "no choices"}'), "protocol"),
        ((200, "not json"), "protocol"),
        ((500, '{"error": "overloaded"}'), "http"),
    ],
)
def test_failures_are_typed_never_zero(server, reply, kind):
    server.reply = reply
    with pytest.raises(JudgeFailure) as err:
        VLMJudge(server.url, "judge").judge("push the red moon up", "move the red moon up")
    assert err.value.kind == kind


def test_transport_failure():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(JudgeFailure) as err:
        VLMJudge(f"http://127.0.0.1:{port}/v1", "judge", timeout_s=2).judge(
            "touch the red moon", "touch the red moon"
        )
    assert err.value.kind == "transport"


def test_unparseable_candidate_needs_no_server(server):
    before = len(server.requests)
    result = VLMJudge(server.url, "judge").judge("move the red block", "move the red moon up")
    assert result.tier is Tier.INVALID and len(server.requests) == before


@pytest.mark.parametrize(
    "kwargs", [{"base_url": "127.0.0.1:8000", "model": "m"}, {"base_url": "http://x", "model": ""}]
)
def test_settings_are_validated(kwargs):
    with pytest.raises(ValueError):
        VLMJudge(**kwargs)


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("timeout_s", float("nan"), r"timeout_s=nan: expected a number, a value in \(0, 86400\]"),
        ("timeout_s", float("inf"), r"timeout_s=inf: expected a number"),
        ("timeout_s", 0, r"timeout_s=0: expected a number"),
        ("timeout_s", -5.0, r"timeout_s=-5.0: expected a number"),
        ("timeout_s", "30", r"timeout_s='30': expected a number"),
        ("max_tokens", 0, r"max_tokens=0: expected a whole number, a value in \[1, 1000000\]"),
        ("max_tokens", -1, r"max_tokens=-1: expected a whole number"),
        ("max_tokens", 10**9, r"max_tokens=1000000000: expected a whole number"),
        ("max_tokens", 1.5, r"max_tokens=1.5: expected a whole number"),
        ("max_tokens", True, r"max_tokens=True: expected a whole number"),
    ],
)
def test_a_number_out_of_its_range_is_refused_at_construction(key, value, reason):
    """NaN, infinity, 0 and negatives were taken and failed only at the first judgment (or never)."""
    with pytest.raises(ValueError, match=reason):
        VLMJudge("http://127.0.0.1:1/v1", "judge", **{key: value})
    assert VLMJudge("http://127.0.0.1:1/v1", "judge", timeout_s=1, max_tokens=1).timeout_s == 1


def test_reward_function_skips_or_raises_on_failure(server):
    server.reply = (500, "{}")
    completions = ["Reasoning: it is low.\nInstruction: push the red moon up"]
    reward = JudgeReward(vlm=VLMJudge(server.url, "judge"))
    with pytest.warns(RuntimeWarning, match="sample skipped"):
        assert reward(completions, expert_instruction=["move the red moon up"]) == [None]
    with pytest.raises(JudgeFailure):
        JudgeReward(vlm=VLMJudge(server.url, "judge"), on_failure="raise")(
            completions, expert_instruction=["move the red moon up"]
        )
    server.reply = _chat('{"analysis": "same", "score": 0.25}')
    assert reward(completions, expert_instruction=["move the red moon up"]) == [0.25]


def test_cli_vlm_backend(server, capsys):
    argv = [
        "--candidate",
        "push the red moon up",
        "--reference",
        "move the red moon up",
        "--backend",
        "vlm",
        "--vlm-url",
        server.url,
        "--vlm-model",
        "judge",
    ]
    server.reply = _chat('{"analysis": "same", "score": 1.0}')
    assert judge_main(argv) == 0 and json.loads(capsys.readouterr().out)["tier"] == "linguistic_match"
    server.reply = (503, "{}")
    assert judge_main(argv) == 1 and json.loads(capsys.readouterr().out)["error"] == "http"


# ------------------------------------------------ a hostile server: bounded in time and bytes
def judge_failure(url: str) -> JudgeFailure:
    """The failure of one judgment with timeout_s=1, run in a thread so that a hang fails the test."""
    from test_openai_hostile_server import NO_HANG_S

    result: list = []

    def run() -> None:
        try:
            judge = VLMJudge(url, "judge", timeout_s=1)
            result.append(judge.judge("touch the red moon", "touch the blue cube"))
        except Exception as exc:  # noqa: BLE001 - handed to the test, which says what it expected
            result.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(NO_HANG_S)
    assert not thread.is_alive(), f"the judgment still runs after {NO_HANG_S} s: it hangs"
    assert isinstance(result[0], JudgeFailure), result
    assert "\n" not in str(result[0]) and url in str(result[0])
    return result[0]


def trickled_body(h) -> None:
    """A 200 whose 12-byte body comes one byte every 0.25 s (each read far inside the read timeout)."""
    import time

    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", "12")
    h.end_headers()
    for _ in range(12):
        h.wfile.write(b" ")
        h.wfile.flush()
        time.sleep(0.25)


def endless_body(h) -> None:
    """A 200 whose body never ends (a server gone wrong, or a memory bomb)."""
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Connection", "close")
    h.end_headers()
    while True:
        h.wfile.write(b" " * 65536)


def gzip_body(h) -> None:
    import gzip

    h.send(200, gzip.compress(b" " * 20_000_000), headers=[("Content-Encoding", "gzip")])


def redirect(h) -> None:
    h.send(307, b"", headers=[("Location", "http://me:hunter2@elsewhere.example/v1/chat/completions")])


def escaped_error_page(h) -> None:
    h.send(500, b"boom \x1b[2J\x1b]0;title\x07 " + b"y" * 5000, "text/plain")


def _hostile_cases():
    from test_openai_hostile_server import endless_continue, slow_headers

    timeout = ("transport", "did not finish its reply within timeout_s=1 s")
    return {
        "slow_headers": (slow_headers, *timeout),
        "endless_continue": (endless_continue, *timeout),
        "trickled_body": (trickled_body, *timeout),
        "endless_body": (endless_body, "protocol", "sent more than 4194304 bytes for one reply"),
        "gzip_body": (gzip_body, "protocol", "HTTP 200 with Content-Encoding 'gzip' (identity was asked"),
        "redirect": (redirect, "http", "HTTP 307: a redirect to (not shown"),
        "escaped_error_page": (escaped_error_page, "http", "HTTP 500: boom \\x1b[2J"),
    }


@pytest.mark.parametrize("case", _hostile_cases().keys())
def test_a_hostile_server_fails_the_judgment_within_timeout_s_in_one_line(case):
    """urllib's timeout holds each read alone: a judgment with timeout_s=1 took 18 s against headers
    sent a byte at a time and never ended against endless "100 Continue", and read a reply whole."""
    import time

    from test_openai_hostile_server import hostile

    server, kind, expected = _hostile_cases()[case]
    with hostile(server) as (url, _):
        start = time.monotonic()
        failure = judge_failure(url)
    assert failure.kind == kind and expected in str(failure), str(failure)
    assert time.monotonic() - start < 2.5
    assert "hunter2" not in str(failure) and all(c.isprintable() for c in str(failure))
