"""The OpenAI backend against a real ``transformers serve`` process serving a tiny model.

The server is started as ``transformers serve DIR --host 127.0.0.1 --port PORT --device cpu``:
the positional argument preloads the local directory, and requests name it as the model.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from serving import free_port

from r3.reasoning import BackendError, ReasonerInput, ReasoningBudget, ResponseError, decide, make_backend

pytestmark = pytest.mark.slow

IMAGE = np.random.default_rng(0).integers(0, 256, (96, 128, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def backend(server):
    url, model = server
    b = make_backend(f"openai:{url},model={model},key_env=R3_TEST_NO_KEY", max_new_tokens=16, timeout_s=60)
    b.load()
    yield b
    b.close()


def test_streamed_decision_step(backend):
    chunks: list[str] = []
    inp = ReasonerInput("language_table", "make a line", [IMAGE])
    step = decide(backend, inp, ReasoningBudget(None), on_text=chunks.append)
    out = step.output
    assert len(chunks) > 1 and "".join(chunks) == out.raw_text
    assert (
        out.prompt_tokens > 100
        and 0 < out.completion_tokens <= 16
        and out.finish_reason in ("stop", "length")
    )
    assert 0 < out.model_s <= out.latency_s and "@http://127.0.0.1:" in out.model_id
    assert step.valid or (isinstance(step.parsed, ResponseError) and step.parsed.reason)


@pytest.mark.parametrize("n", [0, 6])
def test_budgets_over_http(backend, n):
    step = decide(backend, ReasonerInput("packing", "pack the soup can", [IMAGE] * 3), ReasoningBudget(n, 6))
    out = step.output
    assert out.reasoning_tokens <= n and out.completion_tokens <= n + 6
    assert "Instruction:" in out.raw_text


def test_a_budget_beyond_the_backends_cap_is_held_to_the_cap(backend):
    """A RunTask goal's reasoning_budget comes from the network; 2^31 - 1 went to the server as
    max_tokens, for a model that never stops to write until memory ran out."""
    huge = ReasoningBudget(2**31 - 1, 2**31 - 1)
    out = decide(backend, ReasonerInput("language_table", "make a line", [IMAGE]), huge).output
    assert out.reasoning_tokens <= 16 and out.completion_tokens <= 32
    assert [backend.new_tokens(n) for n in (None, 0, 5, 2**31 - 1)] == [16, 0, 5, 16]


def test_unreachable_url_fails_fast_with_one_clear_line():
    port = free_port()  # nothing listens there
    b = make_backend(f"openai:http://127.0.0.1:{port}/v1,model=x", timeout_s=1, attempts=3)
    start = time.monotonic()
    with pytest.raises(BackendError) as info:
        b.load()
    message = str(info.value)
    assert message.startswith(f"cannot reach http://127.0.0.1:{port}/v1 after 3 attempts: ")
    assert "\n" not in message and time.monotonic() - start < 10
