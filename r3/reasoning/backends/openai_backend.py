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
second call is a second line, refused as text after the call.
"""

from __future__ import annotations

import os
import time
from typing import ClassVar

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
)
from r3.reasoning.backends.spec import SAMPLING_OPTIONS, Option
from r3.reasoning.prompts import ANSWER_HEADERS, to_openai_content


class OpenAIBackend(ReasonerBackend):
    """``timeout_s`` bounds each HTTP request; a connection failure is retried ``attempts``
    times in all (not once text has started streaming) before :class:`BackendError`."""

    SPEC_OPTIONS: ClassVar[dict[str, Option]] = {
        "model": Option(str, "the model name the server serves", required=True),
        "key_env": Option(str, "environment variable holding the API key (default OPENAI_API_KEY)"),
        **SAMPLING_OPTIONS,
        "timeout_s": Option(float, "seconds each HTTP request may take"),
        "attempts": Option(int, "connection attempts in all before the backend gives up"),
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
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url={base_url!r}: expected http://... or https://...")
        if attempts < 1 or timeout_s <= 0:
            raise ValueError(f"attempts={attempts}, timeout_s={timeout_s}: both must be positive")
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
        )
        self._with_retries(lambda: self.client.models.list())

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
        try:
            stream = self._with_retries(lambda: self.client.chat.completions.create(**request))
        except openai.UnprocessableEntityError:
            if not (prefix and self.continue_final_message):
                raise BackendError(f"{self.base_url} refused the request (HTTP 422)") from None
            self.continue_final_message = False
            return self._generate(messages, prefix, max_tokens, stop, on_text)
        except openai.APIStatusError as exc:
            raise BackendError(
                f"{self.base_url} refused the request: HTTP {exc.status_code}: {exc.message}"
            ) from exc
        view = _StopView(stop, on_text)
        finish, usage, calls = "stop", None, {}
        try:
            for chunk in stream:
                usage = chunk.usage or usage
                for choice in chunk.choices:
                    view.add(choice.delta.content or "")
                    finish = choice.finish_reason or finish
                    for call in choice.delta.tool_calls or []:  # streamed in pieces, by index
                        fn, (name, args) = call.function, calls.get(call.index, ("", ""))
                        calls[call.index] = (
                            name + ((fn and fn.name) or ""),
                            args + ((fn and fn.arguments) or ""),
                        )
        except openai.APIError as exc:
            if "stop" in request and not view.received:
                self.server_stop = False  # e.g. transformers serve cannot apply stop strings to VLMs
                return self._generate(messages, prefix, max_tokens, stop, on_text)
            raise BackendError(f"stream from {self.base_url} broke off: {_describe(exc)}") from exc
        text = view.finish()
        if view.stopped:
            finish = "stop"
        if calls:
            text = _with_calls(prefix + text, [calls[i] for i in sorted(calls)], on_text)[len(prefix) :]
            finish = "stop" if finish == "tool_calls" else finish
        prompt_tokens = usage.prompt_tokens if usage else None
        completion_tokens = usage.completion_tokens if usage else None
        return Generation(text, finish, prompt_tokens, completion_tokens, time.perf_counter() - start)


class _StopView:
    """The streamed text up to the first stop string, forwarded to ``on_text`` as it becomes
    certain (a possible partial stop string is held back). Servers that apply ``stop``
    themselves never send it; for the others this is where the answer is cut."""

    def __init__(self, stop: list[str] | None, on_text: OnText | None) -> None:
        self.stop, self.on_text = stop or [], on_text
        self.hold = max((len(s) for s in self.stop), default=0)
        self.text, self.sent, self.received, self.stopped = "", 0, False, False

    def add(self, delta: str) -> None:
        if not delta or self.stopped:
            return
        self.received = True
        self.text += delta
        cuts = [i for i in (self.text.find(s) for s in self.stop) if i >= 0]
        if cuts:
            self.text, self.stopped = self.text[: min(cuts)], True
            self._emit(len(self.text))
        else:
            self._emit(len(self.text) - self.hold)

    def _emit(self, upto: int) -> None:
        if upto > self.sent:
            if self.on_text is not None:
                self.on_text(self.text[self.sent : upto])
            self.sent = upto

    def finish(self) -> str:
        self._emit(len(self.text))
        return self.text


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
    return " ".join(text.split())
