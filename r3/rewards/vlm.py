"""The VLM-judge backend, for data recorded without a simulator snapshot (real robots).

The judge sends our rubric prompt (:func:`build_judge_prompt`) and, when there is one, the scene
image to any OpenAI-compatible ``/chat/completions`` endpoint (vLLM, SGLang, a hosted API), then
parses and validates the JSON verdict. Every way this can go wrong raises :class:`JudgeFailure`
with a ``kind``; a failure is never turned into a score of 0, because a silent 0 would teach the
policy that a correct instruction was wrong.

It speaks HTTP through the standard library so that ``r3.rewards`` stays importable with the core
requirements only (the ``openai`` client is an ML extra). The server is not trusted, as the
reasoner's is not (:mod:`r3.http_guard`): the whole exchange, status line and headers included,
must end within ``timeout_s``, the reply may take at most :func:`~r3.http_guard.reply_bytes` bytes
and come uncompressed, and a redirect is not followed (it would carry the prompt and the key to
another host); each is a :class:`JudgeFailure` of one line naming the server.
"""

from __future__ import annotations

import base64
import http.client
import io
import json
import re
import urllib.error
import urllib.request

from r3.files import one_line
from r3.http_guard import Deadline, encoding_problem, reply_bytes, too_long
from r3.instructions import language_table
from r3.reasoning.backends.openai_backend import OpenAIBackend
from r3.reasoning.backends.spec import SAMPLING_OPTIONS
from r3.rewards.result import SCORE_CLASSES, JudgeResult, Tier, parse_pair
from r3.tasks.language_table.board import BLOCKS
from r3.urls import shown_url, url_problem

_SCORE_TIERS = {1.0: Tier.LINGUISTIC, 0.5: Tier.ADVERB_MISMATCH, 0.25: Tier.SEMANTIC, 0.0: Tier.NO_MATCH}

_PROMPT = """\
You grade instructions for a robot that pushes blocks around a table with a small round pusher.
Compare the CANDIDATE instruction with the REFERENCE instruction, which an expert chose for the
same moment, and score the candidate.

Blocks are always named by colour and shape: {blocks}.

The robot follows only these forms of instruction:
  A. a block to a place on the board: "move the <block> to the <place>"
     (places: the four corners, top/bottom center, center left/right, the center)
  B. a block beside another block: "move the <block> to the <left|right|top|bottom> side of the <block>"
  C. a block into another block: "push the <block> into the <block>"
  D. a block in a direction: "move the <block> <direction>" (up, down, left, right or a diagonal
     such as "up and left"), possibly softened with "slightly" or "a bit"
  E. "separate the <block> from the <block>"
  F. "touch the <block>"
  G. "move your arm to the <place>"

How to score:
Step 1, the wording. Find each instruction's form and its parts: the blocks, the place, the side or
direction, and the adverb. The two agree in wording when the form and every part are the same.
These differences do not count:
  - the verb, provided it is one of move, push, slide, place;
  - other ways to say the same place or direction ("up" / "upwards", "left" / "to the left" /
    "towards the left side", "top left corner" / "left top of the board");
  - articles, and prepositions with the same meaning here ("to" / "into" / "towards").
If they agree in wording and carry the same adverb, or neither carries one, the score is 1.0.
"Slightly", "a bit" and "a little" count as the same adverb. If they agree except that one
carries an adverb and the other does not, the score is 0.5. In both cases stop here.
Step 2, the outcome. Only when the wording does not agree: picture the result of each instruction
in the scene (use the image when one is attached). Score 0.25 when both would push the same block
and leave every block in the same place on the board, even though they say it differently;
otherwise 0.0. Instructions that swap the roles of two blocks ("push X into Y" against "push Y
into X") move different blocks and score 0.0. Without an image, give 0.25 only when the outcomes
would be the same in any scene.
A candidate that fits none of the forms scores 0.0.

Reply with one JSON object and nothing else:
{{"analysis": "<your step-by-step comparison>", "score": <1.0, 0.5, 0.25 or 0.0>}}

CANDIDATE: {candidate}
REFERENCE: {reference}
"""


class JudgeFailure(RuntimeError):
    """The VLM judge gave no usable verdict.

    ``kind`` is one of ``"transport"`` (no answer from the server), ``"http"`` (an error status),
    ``"protocol"`` (not a chat-completions response) or ``"answer"`` (no valid JSON verdict).
    """

    def __init__(self, kind: str, detail: str):
        super().__init__(f"VLM judge failure ({kind}): {detail}")
        self.kind = kind
        self.detail = detail


def build_judge_prompt(candidate: str, reference: str) -> str:
    """The rubric prompt for one pair (our wording of R^3 Appendix D.2)."""
    return _PROMPT.format(blocks=", ".join(BLOCKS), candidate=candidate, reference=reference)


def _image_url(image: bytes) -> str:
    """``image`` as a data URL; a ValueError unless it is a whole PNG or JPEG image, so no server is
    asked about a scene it cannot see."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(image)) as decoded:
            kind = decoded.format
            decoded.load()
    except (UnidentifiedImageError, Image.DecompressionBombError, OSError, SyntaxError) as err:
        raise ValueError(f"the image is not a readable PNG or JPEG image: {err}") from None
    if kind not in ("PNG", "JPEG"):
        raise ValueError(f"the image is {kind}, not PNG or JPEG")
    return f"data:image/{kind.lower()};base64,{base64.b64encode(image).decode('ascii')}"


def parse_verdict(text: str) -> tuple[float, str]:
    """``(score, analysis)`` from the model's reply; the last JSON object with a ``score`` wins.

    Tolerates a ``<think>`` block, a code fence or prose around the object, since reasoning
    models add them; rejects scores outside the rubric.

    >>> parse_verdict('<think>hmm</think> ```json\\n{"analysis": "same block", "score": 0.25}\\n```')
    (0.25, 'same block')
    """
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL)
    decoder = json.JSONDecoder()
    verdict = None
    for match in re.finditer(r"\{", text):
        try:
            obj, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and "score" in obj:
            verdict = obj
    if verdict is None:
        raise JudgeFailure("answer", f"no JSON object with a 'score' in the reply: {text[:200]!r}")
    raw = verdict["score"]
    try:
        score = float(raw)
    except (TypeError, ValueError):
        raise JudgeFailure("answer", f"score is not a number: {raw!r}") from None
    if isinstance(raw, bool) or score not in SCORE_CLASSES:
        raise JudgeFailure("answer", f"score {raw!r} is not one of {SCORE_CLASSES}")
    return score, str(verdict.get("analysis", "")).strip()


#: The server `r3 judge --backend vlm` asks when neither --vlm-url nor R3_JUDGE_URL names one: a
#: local vLLM or `transformers serve` on their usual port.
DEFAULT_URL = "http://127.0.0.1:8000/v1"
#: The environment variable holding the judge server's API key, if it needs one.
KEY_ENV = "R3_JUDGE_API_KEY"


#: The judge's numbers, checked by the rules of the reasoner's openai backend, which asks the same kind of
#: server: seconds in (0, 86400], tokens in [1, 1000000].
NUMBERS = {
    "timeout_s": OpenAIBackend.SPEC_OPTIONS["timeout_s"],
    "max_tokens": SAMPLING_OPTIONS["max_new_tokens"],
}


class VLMJudge:
    """Rubric judge backed by an OpenAI-compatible chat server.

    Picklable (it holds only settings), so a TRL reward function can carry it into workers.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        max_tokens: int = 1024,
    ):
        if problem := url_problem(base_url, KEY_ENV):
            raise ValueError(f"base_url={shown_url(base_url)}: {problem}")
        if not model:
            raise ValueError("model must name the served model")
        for key, value in (("timeout_s", timeout_s), ("max_tokens", max_tokens)):
            if problem := NUMBERS[key].value_problem(value):
                raise ValueError(f"{key}={value!r}: {problem}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens

    def _complete(self, prompt: str, image: bytes | None) -> str:
        content: list[dict] = [{"type": "text", "text": prompt}]
        if image is not None:
            content.insert(0, {"type": "image_url", "image_url": {"url": _image_url(image)}})
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": content}],
            "temperature": 0.0,
            "max_tokens": self.max_tokens,
        }
        headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(
            f"{self.base_url}/chat/completions", json.dumps(body).encode(), headers, method="POST"
        )
        payload = self._exchange(request)
        try:
            message = json.loads(payload)["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as err:
            raise JudgeFailure("protocol", f"not a chat completion: {payload[:200]!r}") from err
        if not isinstance(message, str):
            raise JudgeFailure("protocol", f"message content is not text: {message!r}")
        return message

    def _exchange(self, request: urllib.request.Request) -> bytes:
        """The body of the server's reply to ``request``, read within one :class:`Deadline`."""
        url, limit = self.base_url, reply_bytes(self.max_tokens)
        deadline, so_far = Deadline(url, self.timeout_s), "its status line and headers not yet whole"
        try:
            with _opener(deadline).open(request, timeout=self.timeout_s) as response:
                so_far = "its body not yet whole"
                if problem := encoding_problem(response.headers.get("Content-Encoding")):
                    raise JudgeFailure("protocol", f"{url} sent HTTP {response.status} with {problem}")
                payload = response.read(limit + 1)
        except urllib.error.HTTPError as err:
            if 300 <= err.code < 400:
                where = shown_url(err.headers.get("Location", ""))
                raise JudgeFailure(
                    "http",
                    f"{url} answered HTTP {err.code}: a redirect to {where[:200]} "
                    "(redirects are not followed)",
                ) from None
            try:
                page = one_line(err.read(200).decode("utf-8", errors="replace"), 200)
            except (OSError, http.client.HTTPException):
                page = "(its page broke off)"
            raise JudgeFailure("http", f"{url} answered HTTP {err.code}: {page}") from None
        except (OSError, http.client.HTTPException) as err:  # URLError, timeouts, resets, bad status lines
            if deadline.cut:
                raise JudgeFailure("transport", deadline.reason(so_far)) from None
            raise JudgeFailure("transport", f"{url} gave no reply: {one_line(str(err), 200)}") from None
        finally:
            deadline.end()
        if deadline.cut:  # a body that ends with the connection ends when it is cut
            raise JudgeFailure("transport", deadline.reason(f"{len(payload)} bytes of its body so far"))
        if len(payload) > limit:
            raise JudgeFailure("protocol", too_long(url, limit))
        return payload

    def judge(self, candidate: str, reference: str, image: bytes | None = None) -> JudgeResult:
        """Score ``candidate`` against ``reference`` (Language Table); raises :class:`JudgeFailure`.

        A candidate outside the grammar scores 0.0 without a server call, and a reference outside it
        is a ValueError, as in the rule judge.
        """
        if isinstance(parsed := parse_pair(language_table, candidate, reference), JudgeResult):
            return parsed
        score, analysis = parse_verdict(self._complete(build_judge_prompt(candidate, reference), image))
        return JudgeResult(_SCORE_TIERS[score], f"VLM judge: {analysis}" if analysis else "VLM judge")


def _opener(deadline: Deadline) -> urllib.request.OpenerDirector:
    """urllib's opener (the environment's proxies included) whose connections give ``deadline``
    their sockets as they are opened (the TCP one, then the TLS one over it), and which follows no
    redirect."""

    def watched(connection_class):
        class Watched(connection_class):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                create = self._create_connection
                self._create_connection = lambda *a, **k: deadline.opened(create(*a, **k))

            def connect(self):
                super().connect()
                deadline.opened(self.sock)

        return Watched

    class Http(urllib.request.HTTPHandler):
        def do_open(self, http_class, req, **kwargs):
            return super().do_open(watched(http_class), req, **kwargs)

    class Https(urllib.request.HTTPSHandler):
        def do_open(self, http_class, req, **kwargs):
            return super().do_open(watched(http_class), req, **kwargs)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    return urllib.request.build_opener(Http, Https, NoRedirect)
