"""Reasoner backend that runs a local model directory with transformers
(spec "transformers:DIR[,device=auto|cpu|cuda|cuda:N][,dtype=...][,temperature=...]...", see SPEC_OPTIONS).

Loads with ``local_files_only=True`` always: the reasoner never downloads weights. The prompt is
rendered with the model's own chat template (thinking switched off where the template knows
``enable_thinking``), an assistant prefix is appended to the rendered text, and the processor
turns text + images into model inputs. A folder written by ``r3 train`` declares how the model was
prompted in training (``r3_prompt.json``: mode, history, thinking, prompt variant, constrained
decoding); every input is recast to it, so
the reasoner node, ``r3 eval`` and ``r3 collect`` prompt a checkpoint as it was trained, with no flags.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import ClassVar

from r3.files import bounded_repr, is_kind, json_value, path_problem, read_small_text
from r3.reasoning.backends.base import BackendError, Generation, OnText, ReasonerBackend, error_line
from r3.reasoning.backends.spec import SAMPLING_OPTIONS, Option
from r3.reasoning.constrained import InstructionConstraint
from r3.reasoning.prompts import PromptSettings, ReasonerInput

DTYPES = ("auto", "float32", "bfloat16", "float16")


def model_dir_problem(model_dir: Path) -> str | None:
    """Why ``model_dir`` is no model folder to load, or None (checked before anything loads: by the
    backend, and by ``r3 train`` before it trains from the folder or exports it)."""
    if problem := path_problem(model_dir):  # a spec's DIR is a path as --out is: no OSError, no escape
        return f"model directory {problem}"
    if not model_dir.is_dir():
        return f"model directory not found: {model_dir}"
    if not (model_dir / "config.json").is_file():
        return f"not a model directory (no config.json): {model_dir}"
    return config_size_problem(model_dir) or generation_config_problem(model_dir)


#: The config.json fields that count a tower's layers and give its width, as the architectures spell
#: them, and the most of each a real model has by far (Llama 3.1 405B: 126 layers, 16,384 wide).
LAYER_FIELDS = ("num_hidden_layers", "depth", "num_layers", "n_layer")
WIDTH_FIELDS = ("hidden_size", "embed_dim", "d_model", "n_embd")
MAX_LAYERS, MAX_WIDTH = 1024, 65536


def _towers(config: dict, where: str = "", depth: int = 0):
    """(where, sub-config) for ``config`` and each sub-config in it (text_config, vision_config, ...)."""
    yield where, config
    if depth < 4:
        for key, value in config.items():
            if isinstance(value, dict):
                yield from _towers(value, f"{where}{key}.", depth + 1)


#: config.json fields that count a mixture-of-experts tower's routed experts (Qwen2/3-MoE, Mixtral,
#: DeepSeek-V2/V3), one of which an MoE config sets.
EXPERT_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts")


def _positive(tower: dict, name: str) -> int:
    value = tower.get(name)
    return value if is_kind(value, int) and value > 0 else 0


def _mlp_widths(tower: dict, inner: int) -> tuple[int, int]:
    """The summed intermediate width of every MLP of one layer of ``tower`` (every expert's, routed
    and shared: the parameters a model holds, not the ones a token uses), and how many first layers
    are dense ones of width ``inner`` instead (DeepSeek's first_k_dense_replace)."""
    experts = next((_positive(tower, k) for k in EXPERT_FIELDS if _positive(tower, k)), 0)
    if not experts:
        return inner, 0
    expert = _positive(tower, "moe_intermediate_size") or inner  # Mixtral: intermediate_size per expert
    shared = (
        _positive(tower, "shared_expert_intermediate_size") or _positive(tower, "n_shared_experts") * expert
    )
    return experts * expert + shared, _positive(tower, "first_k_dense_replace")


def estimated_parameters(config: dict) -> int:
    """About how many parameters a model of ``config`` has: per tower with a layer count and a width
    h, layers x (4 h^2 attention + 3 h x intermediate MLP) plus 2 x vocabulary x h embeddings, the
    MLP of a mixture-of-experts layer every expert's (:func:`_mlp_widths`). A rough figure
    (Qwen2.5-VL-3B: about 4.3 billion; Mixtral-8x7B: about 47.5 against its 46.7), meant to tell a
    model that fits from an absurd one."""
    total = 0
    for _, tower in _towers(config):
        layers = next((tower[k] for k in LAYER_FIELDS if is_kind(tower.get(k), int)), 0)
        width = next((tower[k] for k in WIDTH_FIELDS if is_kind(tower.get(k), int)), 0)
        inner = _positive(tower, "intermediate_size") or 4 * width
        if layers > 0 and width > 0:
            mlp, dense = _mlp_widths(tower, inner)
            dense = min(dense, layers)
            mlps = dense * inner + (layers - dense) * mlp
            total += (
                layers * 4 * width * width + 3 * width * mlps + 2 * _positive(tower, "vocab_size") * width
            )
    return total


def memory_bytes() -> int | None:
    """This machine's physical memory, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None


def config_size_problem(model_dir: Path) -> str | None:
    """Why the model ``model_dir``'s config.json declares cannot fit, or None: a layer count or width
    past any real model's (:data:`MAX_LAYERS`, :data:`MAX_WIDTH`), or more parameters than this
    machine's memory holds at 2 bytes each. Checked before from_pretrained, which builds every
    module, and allocates its weights, before it looks at the checkpoint."""
    path = model_dir / "config.json"
    try:
        config = json_value(read_small_text(path))
    except (OSError, ValueError):
        return None  # transformers says what is wrong with it, without allocating
    if not isinstance(config, dict):
        return None
    for where, tower in _towers(config):
        for fields, most in ((LAYER_FIELDS, MAX_LAYERS), (WIDTH_FIELDS, MAX_WIDTH)):
            for name in fields:
                value = tower.get(name)
                if is_kind(value, int) and value > most:
                    shown = f"{where}{name}={bounded_repr(value)}"
                    return f"{path}: {shown}: more than any model that fits ({most} at most)"
    need, have = 2 * estimated_parameters(config), memory_bytes()
    if have and need > have:
        return (
            f"{path}: declares about {need / 2e9:.3g} billion parameters, {need / 1e9:.3g} GB at 2 bytes "
            f"each, more than this machine's {have / 1e9:.3g} GB of memory"
        )
    return None


#: The file of a model folder's decoding defaults, which generate() reads for every decision.
GENERATION_CONFIG = "generation_config.json"


#: generation_config.json's sampling fields that transformers takes at load and refuses only at the
#: first decision (its logits processors check them there), each with the values it takes; null
#: leaves one unset. Temperature and top_p are ranged as a backend spec's (and r3_prompt.json's).
GENERATION_FIELDS = {
    "temperature": SAMPLING_OPTIONS["temperature"],
    "top_p": SAMPLING_OPTIONS["top_p"],
    "top_k": Option(int, "tokens sampling keeps (0: off)", low=0),
    "min_p": Option(float, "least probability kept, relative to the top token's", low=0, high=1),
    "typical_p": Option(float, "typical sampling mass", above=0, high=1),
    "repetition_penalty": Option(float, "repetition penalty (1: none)", above=0),
    "encoder_repetition_penalty": Option(float, "prompt repetition penalty (1: none)", above=0),
    "no_repeat_ngram_size": Option(int, "n-gram size never repeated (0: off)", low=0),
}


def generation_config_problem(model_dir: Path) -> str | None:
    """Why ``model_dir``'s :data:`GENERATION_CONFIG` would fail a decision, or None (no file: the
    model's defaults): it is no JSON object, or a field of :data:`GENERATION_FIELDS` is out of range.
    Checked with the folder (:func:`model_dir_problem`), before any weight: transformers loads
    ``repetition_penalty: 0`` and refuses it at the first decision (of the reasoner, or of an RL run
    sampling from the checkpoint; an export would copy it into the merged folder)."""
    path = model_dir / GENERATION_CONFIG
    if not path.exists() and not path.is_symlink():
        return None
    try:
        config = json_value(read_small_text(path))
    except OSError as exc:
        return f"{path}: not readable ({exc.strerror or exc})"
    except ValueError as exc:
        return f"{path}: not JSON ({exc})"
    if not isinstance(config, dict):
        return f"{path}: not a JSON object"
    for name, option in GENERATION_FIELDS.items():
        value = config.get(name)
        if value is not None and (problem := option.value_problem(value)):
            return f"{path}: {name}={bounded_repr(value)}: {problem}"
    return None


def load_weights(model_dir: Path, dtype):
    """The vision-language model in ``model_dir`` in ``dtype`` (never downloaded); a ValueError when its
    weights lack some that its config.json declares, which transformers would start at random (a
    config of 3,000 layers over a checkpoint of 2 loaded as a mostly random model)."""
    from transformers import AutoModelForImageTextToText

    if problem := config_size_problem(model_dir):  # from_pretrained would allocate it first
        raise ValueError(problem)
    model, info = AutoModelForImageTextToText.from_pretrained(
        model_dir, local_files_only=True, dtype=dtype, output_loading_info=True
    )
    if missing := info["missing_keys"]:
        raise ValueError(
            f"config.json declares {len(missing)} weight(s) that the checkpoint lacks, "
            f"{bounded_repr(min(missing), 80)} first"
        )
    return model


def resolve_device(device: str) -> str:
    """ "auto" -> "cuda" when torch sees a GPU, else "cpu"; a CUDA device this machine does not
    have is refused here, when the backend is built, so `r3 run` says so before the graph starts."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        return device
    if not re.fullmatch(r"cuda(:\d+)?", device):
        raise ValueError(f"device={device!r}: expected auto, cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        build = f"torch {torch.__version__}" + ("" if torch.version.cuda else ", a build without CUDA")
        raise ValueError(
            f"device={device}: CUDA is not available on this machine ({build}); use device=cpu or auto"
        )
    index, count = int(device.partition(":")[2] or 0), torch.cuda.device_count()
    if index >= count:
        raise ValueError(f"device={device}: this machine has {count} CUDA device(s)")
    return device


#: A message every chat template must render: a model folder's template is tried on it when loaded.
PROBE_MESSAGES = [{"role": "user", "content": [{"type": "text", "text": "?"}]}]


def template_kwargs(processor, thinking: bool) -> dict:
    """What ``processor``'s chat template is given for ``thinking``: ``enable_thinking`` only when the
    template reads it (Qwen3's do, Qwen2.5-VL's and idefics3's do not); transformers logs a warning
    for every prompt rendered with a keyword its template does not read."""
    template = getattr(processor, "chat_template", None)
    text = json.dumps(template) if isinstance(template, dict) else str(template or "")
    return {"enable_thinking": thinking} if "enable_thinking" in text else {}


def chat_text(processor, messages, thinking: bool = False, *, where) -> str:
    """``messages`` through ``processor``'s chat template (of the folder ``where``), generation prompt
    added; a BackendError when it has none or it fails (a template is a program: a syntax error or a
    raise_exception shows only when it runs)."""
    try:
        return processor.apply_chat_template(
            messages,
            add_generation_prompt=True,
            tokenize=False,
            **template_kwargs(processor, thinking),
        )
    except Exception as exc:  # jinja's and transformers' errors alike
        raise BackendError(f"the chat template of {where} fails: {error_line(exc)}") from exc


class TransformersBackend(ReasonerBackend):
    """``device``: "auto" (default: cuda when available), "cpu", "cuda" or "cuda:N".
    ``dtype``: one of :data:`DTYPES` ("auto" = float32 on cpu, bfloat16 on cuda).
    ``temperature`` 0 means greedy decoding; ``seed`` makes sampling repeatable per call.
    ``thinking``, ``constrained`` and ``temperature`` None follow the folder's prompt settings
    (without them: thinking and the constraint off, temperature 1)."""

    SPEC_OPTIONS: ClassVar[dict[str, Option]] = {
        "device": Option(str, "auto (CUDA when available), cpu, cuda or cuda:N"),
        "dtype": Option(str, f"one of {', '.join(DTYPES)} (auto: bfloat16 on CUDA, float32 on cpu)"),
        "constrained": Option(
            bool,
            "true: after 'Instruction:' only a canonical instruction of the suite may be decoded "
            "(default: what the folder's r3_prompt.json says, else false)",
        ),
        **SAMPLING_OPTIONS,
    }

    def __init__(
        self,
        model_dir: str | Path,
        device: str = "auto",
        dtype: str = "auto",
        temperature: float | None = None,
        top_p: float = 1.0,
        max_new_tokens: int = 1024,
        seed: int | None = 0,
        thinking: bool | None = None,
        constrained: bool | None = None,
    ) -> None:
        if dtype not in DTYPES:
            raise ValueError(f"dtype={dtype!r}: expected one of {DTYPES}")
        if (temperature is not None and temperature < 0) or not 0 < top_p <= 1 or max_new_tokens < 1:
            raise ValueError(
                f"bad sampling options: temperature={temperature}, top_p={top_p}, "
                f"max_new_tokens={max_new_tokens}"
            )
        self.model_dir = Path(model_dir)
        self.model_id = str(self.model_dir)
        self.device, self.dtype = resolve_device(device), dtype
        self.temperature, self.top_p, self.max_new_tokens, self.seed = (
            None if temperature is None else float(temperature),  # transformers needs a float
            top_p,
            max_new_tokens,
            seed,
        )
        self.thinking = thinking
        self.constrained = constrained
        self._constraints: dict[str, InstructionConstraint] = {}  # by suite, built on first use
        self._suite = ""  # of the input being decided, for the constraint
        self.model = self.processor = None
        self.prompt: PromptSettings | None = None

    @classmethod
    def from_spec(cls, rest: str, **options) -> TransformersBackend:
        if not rest:
            raise ValueError("transformers backend spec: expected 'transformers:DIR'")
        return cls(rest, **options)

    def load_problem(self) -> str | None:
        return model_dir_problem(self.model_dir)

    def load(self) -> None:
        import torch
        from transformers import AutoProcessor

        if problem := model_dir_problem(self.model_dir):
            raise BackendError(problem)
        try:
            prompt = PromptSettings.load(self.model_dir)
        except ValueError as exc:
            raise BackendError(str(exc)) from exc
        device = self.device
        dtype = self.dtype
        if dtype == "auto":
            dtype = "bfloat16" if device.startswith("cuda") else "float32"
        try:
            processor = AutoProcessor.from_pretrained(self.model_dir, local_files_only=True)
        except Exception as exc:
            raise BackendError(f"cannot load the processor of {self.model_dir}: {error_line(exc)}") from exc
        if getattr(processor, "image_processor", None) is None:
            raise BackendError(
                f"{self.model_dir} has no image processor; the reasoner needs a vision-language model"
            )
        chat_text(processor, PROBE_MESSAGES, where=self.model_dir)  # a broken template fails here, not later
        try:
            model = load_weights(self.model_dir, getattr(torch, dtype))
        except Exception as exc:
            raise BackendError(f"cannot load the model in {self.model_dir}: {error_line(exc)}") from exc
        beams = model.generation_config.num_beams  # None: not set, one
        if beams not in (None, 1):  # generate() would keep that many copies of every prompt, images and all
            raise BackendError(
                f"{self.model_dir / 'generation_config.json'}: num_beams={bounded_repr(beams)}: the "
                "reasoner decodes one answer by sampling or greedily, not by beam search; set it to 1"
            )
        self.processor, self.model, self.prompt = processor, model.to(device).eval(), prompt

    def close(self) -> None:
        self.model = self.processor = self.prompt = None

    def prompt_input(self, inp: ReasonerInput) -> ReasonerInput:
        self._suite = inp.suite
        if self.prompt is None:
            return inp
        try:
            return self.prompt.apply(inp)
        except ValueError as exc:
            raise BackendError(f"{self.model_dir}: {exc}") from exc

    def _generate(self, messages, prefix, max_tokens, stop, on_text: OnText | None) -> Generation:
        import torch

        if self.model is None:
            raise BackendError(f"backend for {self.model_dir} is not loaded: call load() first")
        thinking = (
            self.thinking if self.thinking is not None else self.prompt is not None and self.prompt.thinking
        )
        text = chat_text(self.processor, messages, thinking, where=self.model_dir)
        images = [
            c["image"]
            for m in messages
            if isinstance(m["content"], list)
            for c in m["content"]
            if c["type"] == "image"
        ]
        inputs = self.processor(
            text=[text + prefix], images=[images] if images else None, return_tensors="pt"
        )
        inputs = inputs.to(self.model.device)
        max_new = self.new_tokens(max_tokens)
        temperature = self.temperature
        if temperature is None:  # the folder's temperature, else 1
            temperature = getattr(self.prompt, "temperature", None)
            temperature = 1.0 if temperature is None else temperature
        kwargs = {"max_new_tokens": max_new, "do_sample": temperature > 0}
        if temperature > 0:
            kwargs.update(temperature=temperature, top_p=self.top_p)
        if stop:
            kwargs.update(stop_strings=stop, tokenizer=self.processor.tokenizer)
        if on_text is not None:
            kwargs["streamer"] = _CallbackStreamer(self.processor.tokenizer, on_text, stop)
        constrained = self.constrained
        if constrained is None:
            constrained = self.prompt is not None and self.prompt.constrained
        if constrained:
            kwargs["logits_processor"] = [self._constraint().start(inputs["input_ids"].shape[1], prefix)]
        if self.seed is not None:
            torch.manual_seed(self.seed)
        start = time.perf_counter()
        with torch.inference_mode():
            out = self.model.generate(**inputs, **kwargs)
        model_s = time.perf_counter() - start
        prompt_len = inputs["input_ids"].shape[1]
        new = out[0, prompt_len:]
        eos = self.model.generation_config.eos_token_id
        eos = set(eos if isinstance(eos, list) else [eos])
        ended = len(new) > 0 and int(new[-1]) in eos
        answer = self.processor.tokenizer.decode(new, skip_special_tokens=True)
        cut = _cut(answer, stop)
        finish = "stop" if ended or cut != answer or len(new) < max_new else "length"
        return Generation(cut, finish, int(prompt_len), len(new), model_s)

    def _constraint(self) -> InstructionConstraint:
        if self._suite not in self._constraints:
            self._constraints[self._suite] = InstructionConstraint(
                self.processor.tokenizer, self._suite, self.model.generation_config.eos_token_id
            )
        return self._constraints[self._suite]


def _cut(text: str, stop: list[str] | None) -> str:
    """``text`` up to the first stop string (transformers keeps the stop string; the API does not)."""
    for s in stop or ():
        i = text.find(s)
        if i >= 0:
            text = text[:i]
    return text


class _CallbackStreamer:
    """Feeds decoded text to ``on_text`` as tokens arrive, holding back a possible stop string."""

    def __init__(self, tokenizer, on_text: OnText, stop: list[str] | None) -> None:
        self.tokenizer, self.on_text, self.stop = tokenizer, on_text, stop
        self.ids: list[int] = []
        self.sent = 0
        self.prompt_seen = False

    def put(self, value) -> None:
        if not self.prompt_seen:  # generate() first passes the prompt
            self.prompt_seen = True
            return
        self.ids.extend(int(v) for v in value.reshape(-1))
        text = _cut(self.tokenizer.decode(self.ids, skip_special_tokens=True), self.stop)
        hold = max((len(s) for s in self.stop or ()), default=0)
        ready = len(text) - hold if len(text) >= hold else 0
        if ready > self.sent:
            self.on_text(text[self.sent : ready])
            self.sent = ready

    def end(self) -> None:
        text = _cut(self.tokenizer.decode(self.ids, skip_special_tokens=True), self.stop)
        if len(text) > self.sent:
            self.on_text(text[self.sent :])
        self.sent = len(text)
