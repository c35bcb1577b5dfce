"""Reasoner backend for any OpenAI-compatible server (vLLM, ``transformers serve``, a hosted API).

Spec: "openai:URL,model=NAME[,key_env=VAR][,temperature=...]...", e.g. "openai:http://127.0.0.1:8000/v1,model=r3"
(the keys: SPEC_OPTIONS).
The key comes from the environment variable ``key_env`` (default OPENAI_API_KEY); local servers
need none. We use the official ``openai`` client rather than raw httpx: it already speaks the
server-sent-events stream, typed errors and usage records that vLLM and transformers serve emit,
so this file only adds retries with one clear message, streaming into ``on_text``, and the
assistant prefix for budgets.

Assistant prefixes (reasoning budgets) are sent as a final assistant message with vLLM's
``continue_final_message`` flag. A server that rejects the flag (transformers serve answers
HTTP 422) is asked again without it and remembered; it then starts a new assistant turn after
the prefix, so the answer still ends with an instruction section, but less faithfully.
Likewise stop strings: sent to the server (vLLM applies them), and if the stream fails before
any text (transformers serve cannot apply stop strings to VLMs) sent no more and applied here.

Tools interface with ``function_calls=true``: the request declares the pose tools
(:data:`r3.instructions.tools.TOOL_SCHEMAS`, OpenAI function-calling format) and the server's tool
parser (vLLM ``--enable-auto-tool-choice``) returns calls as structured ``tool_calls``. Each is
written after the answer's "Tool call:" header as the text the tool grammar reads
(:func:`~r3.instructions.tools.function_call_text`), so the grammar's refusals hold for them too; a
second call is a second line, refused as text after the call. Tool calls in the reply to a request
that declared no tools (another interface, or the option off) are a malformed reply: never read as
part of the answer.

A server is not trusted: the chat stream is read and checked here (the SDK's parsed chunks keep
whatever types the server sent). Each reply, status line and headers included, must come whole
within ``timeout_s`` (one deadline per attempt, besides httpx's per-read timeout of the same length,
so a server that keeps the stream open with keep-alive comments or a token now and then, or sends
its headers a byte at a time or "100 Continue" without end, ends in a BackendError, not a hang); it
may take at most :func:`reply_bytes` bytes on the wire (generous per token, with an absolute cap),
read in linear time; a reply that is no event stream (an HTML page, a whole JSON completion: its
Content-Type is named), an event that is no JSON object, or a field of the wrong type (content,
choices, delta, usage, finish_reason, a tool call's index, name or arguments), is a BackendError
naming the malformed reply; a redirect is never followed (the prompt and images would go to another host),
it is a BackendError naming where it pointed; no response may be compressed (we ask for
identity encoding). The deadline, the encoding and a cap of :data:`REPLY_BYTES_MIN` bytes hold for
the bodies the SDK reads whole too (the model list, an error page): the client's transport
enforces them (:func:`_guarded_transport`).
"""

from __future__ import annotations

import json
import os
import time
from typing import ClassVar

from r3.files import one_line
from r3.http_guard import REPLY_BYTES_MAX, REPLY_BYTES_MIN, Deadline, encoding_problem, reply_bytes, too_long
from r3.instructions.tools import TOOL_SCHEMAS, function_call_text
from r3.reasoning.backends.base import (
    FULL_REASONING,
    BackendError,
    BackendOutput,
    Generation,
    OnText,
    ReasonerBackend,
    ReasonerInput,
    ReasoningBudget,
    token_count,
)
from r3.reasoning.backends.spec import SAMPLING_OPTIONS, Option
from r3.reasoning.prompts import ANSWER_HEADERS, to_openai_content
from r3.urls import shown_url, url_problem

#: Most seconds ``timeout_s`` may be.
MAX_TIMEOUT_S = 86_400.0


class OpenAIBackend(ReasonerBackend):
    """``timeout_s`` bounds each HTTP request, the whole reply included; a connection failure is
    retried ``attempts`` times in all (not once text has started streaming) before
    :class:`BackendError`."""

    SPEC_OPTIONS: ClassVar[dict[str, Option]] = {
        "model": Option(str, "the model name the server serves", required=True),
        "key_env": Option(str, "environment variable holding the API key (default OPENAI_API_KEY)"),
        **SAMPLING_OPTIONS,
        "timeout_s": Option(
            float,
            "seconds each request may take, its whole streamed reply included (and each read of it)",
            above=0,
            high=MAX_TIMEOUT_S,
        ),
        "attempts": Option(int, "connection attempts in all before giving up, 1-100", low=1, high=100),
        "function_calls": Option(
            bool, "tools interface: declare the tools as OpenAI functions and read the server's tool calls"
        ),
    }

    def __init__(
        self,
        base_url: str,
        model: str,
        key_env: str = "OPENAI_API_KEY",
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_new_tokens: int = 1024,
        seed: int | None = 0,
        thinking: bool = False,
        timeout_s: float = 60.0,
        attempts: int = 3,
        function_calls: bool = False,
    ) -> None:
        if problem := url_problem(base_url, key_env):
            raise ValueError(f"base_url={shown_url(base_url)}: {problem}")
        if attempts < 1 or not 0 < timeout_s <= MAX_TIMEOUT_S:  # also refuses NaN
            raise ValueError(f"attempts={attempts}, timeout_s={timeout_s}: both must be positive, finite")
        self.base_url, self.model, self.key_env = base_url.rstrip("/"), model, key_env
        self.model_id = f"{model}@{self.base_url}"
        self.temperature, self.top_p, self.max_new_tokens, self.seed = (
            temperature,
            top_p,
            max_new_tokens,
            seed,
        )
        self.thinking, self.timeout_s, self.attempts = thinking, timeout_s, attempts
        self.function_calls = function_calls
        self._tools: list[dict] = []  # the functions declared for the decision being generated
        self.client = None
        self.continue_final_message = True  # cleared when the server rejects the flag
        self.server_stop = True  # cleared when the server fails on stop strings

    @classmethod
    def from_spec(cls, rest: str, **options) -> OpenAIBackend:
        return cls(rest, **options)

    def load(self) -> None:
        """Connect and check the server answers, so a wrong URL fails at configure time."""
        import openai

        self.client = openai.OpenAI(
            base_url=self.base_url,
            api_key=os.environ.get(self.key_env) or "not-needed",
            timeout=self.timeout_s,
            max_retries=0,
            http_client=openai.DefaultHttpxClient(
                timeout=self.timeout_s, follow_redirects=False, transport=_guarded_transport(self)
            ),
        )
        try:
            listed = self._with_retries(lambda: self.client.models.with_raw_response.list())
            kind = listed.headers.get("content-type", "")
            if "json" not in kind.lower():  # an HTML page: the SDK's own parse would say only AttributeError
                raise BackendError(
                    f"{self.base_url} answered the model list with a malformed reply: HTTP "
                    f"{listed.status_code} with Content-Type {one_line(kind, 60)!r}, not JSON"
                )
            listed.parse()
        except openai.APIStatusError as exc:
            raise BackendError(f"{self.base_url} refused the model list: {_status(exc)}") from None
        except openai.APIError as exc:  # a reply that does not read as a model list, a timeout
            raise BackendError(f"{self.base_url} gave no model list: {_describe(exc)}") from None
        except (ValueError, TypeError, AttributeError, RecursionError) as exc:  # what the SDK made of it
            raise BackendError(
                f"{self.base_url} answered the model list with a malformed reply: {_describe(exc)}"
            ) from None

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        self.client = None

    def decide(
        self, inp: ReasonerInput, budget: ReasoningBudget = FULL_REASONING, on_text: OnText | None = None
    ) -> BackendOutput:
        calls = self.function_calls and self.prompt_input(inp).interface == "tools"
        self._tools = [dict(t) for t in TOOL_SCHEMAS] if calls else []
        return super().decide(inp, budget, on_text)

    def _with_retries(self, call):
        import openai

        last: Exception | None = None
        for attempt in range(self.attempts):
            try:
                return call()
            except (openai.APIConnectionError, openai.InternalServerError) as exc:
                last = exc
                if attempt + 1 < self.attempts:
                    time.sleep(0.2 * (attempt + 1))
        if isinstance(
            last, openai.APIStatusError
        ):  # it answered: its status, not httpx's error naming it again
            raise BackendError(
                f"{self.base_url} answered with an error after {self.attempts} attempts: {_status(last)}"
            ) from last
        raise BackendError(
            f"cannot reach {self.base_url} after {self.attempts} attempts: {_describe(last)}"
        ) from last

    def _generate(self, messages, prefix, max_tokens, stop, on_text: OnText | None) -> Generation:
        if self.client is None:
            raise BackendError(f"backend for {self.base_url} is not loaded: call load() first")
        import openai

        chat = to_openai_content(messages)
        extra: dict = {"chat_template_kwargs": {"enable_thinking": self.thinking}}
        if prefix:
            chat.append({"role": "assistant", "content": prefix})
            if self.continue_final_message:
                extra.update(continue_final_message=True, add_generation_prompt=False)
        request = {
            "model": self.model,
            "messages": chat,
            "max_tokens": self.new_tokens(max_tokens),
            "temperature": self.temperature,
            "top_p": self.top_p,
            "stream": True,
            "stream_options": {"include_usage": True},
            "extra_body": extra,
        }
        if self.seed is not None:
            request["seed"] = self.seed
        if stop and self.server_stop:
            request["stop"] = stop
        if self._tools:
            request.update(tools=self._tools, tool_choice="auto")
        start = time.perf_counter()

        def send():
            manager = self.client.chat.completions.with_streaming_response.create(
                **request, extra_headers={"Accept-Encoding": "identity"}
            )
            return manager.__enter__()

        try:
            response = self._with_retries(send)
        except openai.UnprocessableEntityError:
            if not (prefix and self.continue_final_message):
                raise BackendError(f"{self.base_url} refused the request (HTTP 422)") from None
            self.continue_final_message = False
            return self._generate(messages, prefix, max_tokens, stop, on_text)
        except openai.APIStatusError as exc:
            raise BackendError(f"{self.base_url} refused the request: {_status(exc)}") from exc
        view = _StopView(stop, on_text)
        reply = _Reply(self.base_url, reply_bytes(request["max_tokens"]))
        try:
            reply.read(response.http_response, view)
        except _ServerError as exc:
            if "stop" in request and not view.received:
                self.server_stop = False  # e.g. transformers serve cannot apply stop strings to VLMs
                return self._generate(messages, prefix, max_tokens, stop, on_text)
            raise BackendError(f"stream from {self.base_url} broke off: {exc}") from None
        finally:
            response.close()
        finish, calls = reply.finish, reply.calls
        if calls and not self._tools:
            raise reply.malformed("tool calls, though the request declared no tools")
        text = view.finish()
        if view.stopped:
            finish = "stop"
        if calls:
            text = self._with_calls(prefix + text, [calls[i] for i in sorted(calls)], on_text)[len(prefix) :]
            finish = "stop" if finish == "tool_calls" else finish
        tokens = reply.prompt_tokens, reply.completion_tokens
        return Generation(text, finish, *tokens, time.perf_counter() - start)

    def _with_calls(self, answer: str, calls: list[tuple[str, str]], on_text: OnText | None) -> str:
        try:
            return _with_calls(answer, calls, on_text)
        except (ValueError, RecursionError) as exc:  # JSON that json cannot read: 5,000 digits, deep nesting
            raise BackendError(
                f"{self.base_url} sent a malformed reply: tool call arguments that do not read as JSON "
                f"({type(exc).__name__}: {str(exc)[:120]})"
            ) from None


def _guarded_transport(backend: OpenAIBackend):
    """The HTTP transport of ``backend``'s client: every response, the SDK's model list and error
    pages included (the SDK reads those whole, inflating what the server compressed), must come
    uncompressed, at most :data:`REPLY_BYTES_MAX` bytes for an event stream and
    :data:`REPLY_BYTES_MIN` for anything else, the whole exchange (status line, headers, body)
    within ``timeout_s`` of the request (:class:`~r3.http_guard.Deadline`); else a BackendError, which the SDK
    passes on as it is. Connections are not kept alive: the deadline cuts the one its request
    opened."""
    import httpx2

    url = backend.base_url

    class Body(httpx2.SyncByteStream):
        def __init__(self, stream, limit: int, deadline: Deadline) -> None:
            self.stream, self.limit, self.deadline = stream, limit, deadline

        def __iter__(self):
            size = 0
            try:
                for chunk in self.stream:
                    size += len(chunk)
                    if size > self.limit:
                        raise BackendError(too_long(url, self.limit))
                    yield chunk
            except Exception:
                if self.deadline.cut:
                    raise BackendError(self.deadline.reason(f"{size} bytes of its body so far")) from None
                raise
            if self.deadline.cut:  # a body that ends with the connection ends when it is cut
                raise BackendError(self.deadline.reason(f"{size} bytes of its body so far"))

        def close(self) -> None:
            self.deadline.end()
            self.stream.close()

    class Guarded(httpx2.BaseTransport):
        def __init__(self) -> None:
            self.inner = httpx2.HTTPTransport(
                limits=httpx2.Limits(max_keepalive_connections=0), proxy=environment_proxy(url)
            )

        def handle_request(self, request):
            deadline = Deadline(url, backend.timeout_s)
            request.extensions["trace"] = _watch(deadline)
            try:
                response = self.inner.handle_request(request)
            except Exception:
                deadline.end()
                if deadline.cut:
                    raise BackendError(deadline.reason("its status line and headers not yet whole")) from None
                raise
            if problem := encoding_problem(response.headers.get("content-encoding")):
                deadline.end()
                response.close()
                raise BackendError(
                    f"{url} sent a malformed reply: HTTP {response.status_code} with {problem}"
                )
            limit = REPLY_BYTES_MAX if _event_stream(response) else REPLY_BYTES_MIN
            body = Body(response.stream, limit, deadline)
            return httpx2.Response(
                response.status_code, headers=response.headers, stream=body, extensions=response.extensions
            )

        def close(self) -> None:
            self.inner.close()

    return Guarded()


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``http_proxy``, ``https_proxy``, ``all_proxy``,
    less ``no_proxy``), which the SDK's own client would take: httpx takes none from the environment
    for a client given a transport of its own."""
    from urllib.parse import urlsplit
    from urllib.request import getproxies_environment, proxy_bypass_environment

    parts, proxies = urlsplit(url), getproxies_environment()
    if proxy_bypass_environment(parts.hostname or "", proxies):
        return None
    return proxies.get(parts.scheme) or proxies.get("all")


#: The events of httpx2's ``trace`` request extension that hand over a socket the exchange opened.
_OPENED = ("connection.connect_tcp.complete", "connection.start_tls.complete")


def _watch(deadline: Deadline):
    """An httpx2 ``trace`` callback giving :class:`Deadline` the sockets as they are opened (the TLS
    one too)."""

    def trace(event: str, info: dict) -> None:
        if event in _OPENED:
            deadline.opened(info["return_value"].get_extra_info("socket"))

    return trace


class _ServerError(Exception):
    """The server reported an error inside the stream (an event with an "error" member)."""


class _Reply:
    """One streamed reply read off the wire: server-sent events, each a JSON object checked field by
    field; at most ``limit`` bytes (the transport holds the deadline)."""

    def __init__(self, url: str, limit: int) -> None:
        self.url, self.limit = url, limit
        self.finish, self.prompt_tokens, self.completion_tokens = "stop", None, None
        self.calls: dict[int, tuple[str, str]] = {}
        self.size = 0

    def malformed(self, what: str) -> BackendError:
        return BackendError(f"{self.url} sent a malformed reply: {what}")

    def read(self, response, view: _StopView) -> None:
        if not _event_stream(response):  # an HTML page, a whole JSON completion: no answer in it
            content_type = one_line(response.headers.get("content-type", ""), 80)
            raise self.malformed(
                f"HTTP {response.status_code} with Content-Type {content_type!r}, not the event stream "
                "(text/event-stream) that was asked for"
            )
        buffer, data, chunks = bytearray(), [], response.iter_raw()
        while True:
            try:
                chunk = next(chunks, None)
            except BackendError:  # the transport's deadline
                raise
            except Exception as exc:  # noqa: BLE001 - httpx's read errors and timeouts, whatever module they come from
                raise BackendError(f"stream from {self.url} broke off: {_describe(exc)}") from None
            if chunk is None:
                break
            self.size += len(chunk)
            if self.size > self.limit:
                raise BackendError(too_long(self.url, self.limit))
            searched = len(buffer)
            buffer.extend(chunk)
            begin = 0
            while (end := buffer.find(b"\n", searched)) >= 0:
                line = bytes(buffer[begin:end]).rstrip(b"\r")
                begin = searched = end + 1
                if self.line(line, data, view):
                    return
            del buffer[:begin]
        if buffer:
            self.line(bytes(buffer).rstrip(b"\r"), data, view)
        if data:
            self.line(b"", data, view)

    def line(self, line: bytes, data: list[str], view: _StopView) -> bool:
        """One line of the event stream; True at its end ("[DONE]")."""
        if line.startswith(b"data:"):
            value = line[5:].decode("utf-8", errors="replace")
            data.append(value.removeprefix(" "))
            return False
        if line or not data:  # a comment (": keep-alive"), another field, or a blank line between nothing
            return False
        text = "\n".join(data)
        data.clear()
        if text.strip() == "[DONE]":
            return True
        self.event(text, view)
        return False

    def event(self, text: str, view: _StopView) -> None:
        try:
            event = json.loads(text)
        except (ValueError, RecursionError) as exc:
            why = f"{type(exc).__name__}: {str(exc)[:80]}"
            raise self.malformed(f"an event that is not JSON ({why})") from None
        if not isinstance(event, dict):
            raise self.malformed(f"an event that is a JSON {type(event).__name__}, not an object")
        if event.get("error") is not None:
            error = event["error"]
            message = error.get("message") if isinstance(error, dict) else error
            raise _ServerError(one_line(str(message), 200))
        usage = event.get("usage")
        if usage is not None:
            if not isinstance(usage, dict):
                raise self.malformed(f"usage is a {type(usage).__name__}, not an object")
            self.prompt_tokens = token_count(usage.get("prompt_tokens"))
            self.completion_tokens = token_count(usage.get("completion_tokens"))
        choices = event.get("choices")
        choices = [] if choices is None else choices
        if not isinstance(choices, list):
            raise self.malformed(f"choices is a {type(choices).__name__}, not a list")
        for choice in choices:
            self.choice(choice, view)

    def choice(self, choice, view: _StopView) -> None:
        if not isinstance(choice, dict):
            raise self.malformed(f"a choice that is {_kind(choice)}, not an object")
        delta = choice.get("delta", {})
        if not isinstance(delta, dict):
            raise self.malformed(f"a choice's delta is {_kind(delta)}, not an object")
        content = delta.get("content")
        if content is not None and not isinstance(content, str):
            raise self.malformed(f"delta.content is {_kind(content)}, not a string")
        view.add(content or "")
        finish = choice.get("finish_reason")
        if finish is not None and not isinstance(finish, str):
            raise self.malformed(f"finish_reason is {_kind(finish)}, not a string")
        self.finish = finish or self.finish
        calls = delta.get("tool_calls")
        calls = [] if calls is None else calls
        if not isinstance(calls, list):
            raise self.malformed(f"delta.tool_calls is {_kind(calls)}, not a list")
        for call in calls:  # streamed in pieces, by index
            if not isinstance(call, dict):
                raise self.malformed(f"a tool call that is {_kind(call)}, not an object")
            index, fn = call.get("index"), call.get("function")
            fn = {} if fn is None else fn
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < 1024:
                raise self.malformed(f"a tool call's index is {_kind(index)}, not an integer in [0, 1024)")
            if not isinstance(fn, dict):
                raise self.malformed(f"a tool call's function is {_kind(fn)}, not an object")
            name, arguments = fn.get("name"), fn.get("arguments")
            for field, value in (("name", name), ("arguments", arguments)):
                if value is not None and not isinstance(value, str):
                    raise self.malformed(f"a tool call's {field} is {_kind(value)}, not a string")
            before_name, before_args = self.calls.get(index, ("", ""))
            if name == before_name:  # some servers send the whole name with every piece, not once
                name = None
            self.calls[index] = (before_name + (name or ""), before_args + (arguments or ""))


def _event_stream(response) -> bool:
    """Whether ``response`` says it is a stream of server-sent events."""
    return response.headers.get("content-type", "").strip().lower().startswith("text/event-stream")


def _kind(value) -> str:
    """What a JSON value is, for a message: "null", "a int 42"..."""
    if value is None:
        return "null"
    shown = repr(value)
    return f"a {type(value).__name__} {shown[:40]}{'...' if len(shown) > 40 else ''}"


def _status(exc) -> str:
    """One line for an HTTP error status; a redirect names where it pointed (it is not followed)."""
    code = exc.status_code
    if 300 <= code < 400:
        location = one_line(str(exc.response.headers.get("location", "")), 200)
        return f"HTTP {code}: a redirect to {location!r} (redirects are not followed)"
    return f"HTTP {code}: {one_line(str(exc.message), 300)}"


class _StopView:
    """The streamed text up to the first stop string, forwarded to ``on_text`` as it becomes
    certain (a possible partial stop string is held back). Servers that apply ``stop``
    themselves never send it; for the others this is where the answer is cut."""

    def __init__(self, stop: list[str] | None, on_text: OnText | None) -> None:
        self.stop, self.on_text = [s for s in stop or [] if s], on_text
        self.hold = max((len(s) for s in self.stop), default=0)
        self.parts: list[str] = []  # the text made certain (sent on), in pieces: joined once, at the end
        self.pending = ""  # the last ``hold`` characters received, which may begin a stop string
        self.received, self.stopped = False, False

    def add(self, delta: str) -> None:
        if not delta or self.stopped:
            return
        self.received = True
        window = self.pending + delta  # a stop string not seen before starts in here: linear time
        cuts = [i for i in (window.find(s) for s in self.stop) if i >= 0]
        if cuts:
            self._emit(window[: min(cuts)])
            self.pending, self.stopped = "", True
            return
        keep = min(self.hold, len(window))
        self._emit(window[: len(window) - keep])
        self.pending = window[len(window) - keep :]

    def _emit(self, text: str) -> None:
        if text:
            self.parts.append(text)
            if self.on_text is not None:
                self.on_text(text)

    def finish(self) -> str:
        self._emit(self.pending)
        self.pending = ""
        return "".join(self.parts)


def _with_calls(answer: str, calls: list[tuple[str, str]], on_text: OnText | None) -> str:
    """``answer`` with the server's tool calls written after it as text calls, the first after the
    "Tool call:" header (added unless the answer already ends with it), each further one on a line
    of its own."""
    header = ANSWER_HEADERS["tools"]
    texts = [function_call_text(name, args) for name, args in calls]
    ends_with_header = answer.rstrip().endswith(header)
    added = (" " if ends_with_header else ("\n" if answer.strip() else "") + f"{header} ") + "\n".join(texts)
    if on_text is not None:
        on_text(added)
    return (answer.rstrip() if ends_with_header else answer.rstrip("\n")) + added


def _describe(exc: Exception | None) -> str:
    """One line: the error and its root cause (openai wraps httpx errors)."""
    if exc is None:
        return "unknown error"
    cause = exc.__cause__ or exc.__context__
    text = f"{type(exc).__name__}: {exc}"
    if cause is not None and str(cause) and str(cause) not in text:
        text += f" ({type(cause).__name__}: {cause})"
    return one_line(text, 400)
