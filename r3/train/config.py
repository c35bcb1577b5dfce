"""Training configs: one dataclass per job, each validating itself and naming the bad key or value.

YAML files map one to one onto these dataclasses (:func:`load_config`); an unknown key, a value of
the wrong type or out of range raises :class:`ConfigError` before any dataset or model is touched.
Defaults are the paper's (R^3 Appendix A.6): Table 8 for :class:`SFTConfig`, Table 9 with Dr. GRPO
for :class:`RLConfig`. Which field reaches which TRL argument is written in :mod:`r3.train.sft` and
:mod:`r3.train.grpo`, next to the code that passes it.

This module imports neither torch nor TRL, so checking a config is instant.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

from r3.files import FileRefused, bounded_repr, is_control, path_problem, read_yaml_mapping
from r3.reasoning.backends.spec import TEMPERATURES
from r3.reasoning.prompts import MODES, VARIANTS, temperature_problem
from r3.rewards.turn import TURN_TERMS
from r3.workers import check_ray_address


class ConfigError(ValueError):
    """A config that cannot run; the message names the file, the key and what was expected."""


PRECISIONS = ("auto", "bf16", "fp32")
DEVICES = ("auto", "cpu", "cuda")
SCHEDULERS = ("cosine", "linear", "constant", "constant_with_warmup")
LOSS_TYPES = ("dr_grpo", "grpo", "dapo", "bnpo")
SCALE_REWARDS = ("none", "group", "batch")
IMPORTANCE_LEVELS = ("token", "sequence")
VLLM_MODES = ("colocate", "server")
#: The reward terms each action interface's RL job can weight: R^3's single-step terms for
#: instructions (plus the graded simulator outcome and the simulated task progress,
#: ``r3.rewards.functions.OutcomeReward`` / ``ProgressReward``), ERR's turn checkers for the
#: semantic interface (:mod:`r3.rewards.turn`).
REWARD_TERMS: dict[str, tuple[str, ...]] = {
    "instruction": ("judge", "length", "outcome", "progress"),
    "semantic": TURN_TERMS,
}
#: The terms a config without ``rewards`` weights at 1: the papers' rewards (R^3: judge + length).
DEFAULT_REWARD_TERMS: dict[str, tuple[str, ...]] = {
    "instruction": ("judge", "length"),
    "semantic": TURN_TERMS,
}


def _check_seed(seed: int) -> None:
    _check(0 <= seed < 2**32, f"seed={seed}: must be in [0, 2**32) (numpy's and torch's seeds)")


def _check_sampling_temperature(temperature: float) -> None:
    """A temperature that rollouts and imputation sample at: the reasoner's temperatures
    (:func:`temperature_problem`) but 0, which is greedy decoding, no sampling."""
    high = TEMPERATURES[1]
    _check(
        temperature > 0 and temperature_problem(temperature) is None,
        f"temperature={temperature}: must be a finite number in (0, {high:g}] (it samples)",
    )


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


@dataclass
class LoraSettings:
    """PEFT LoRA adapters instead of a full fine-tune; ``merge`` folds them into the saved model."""

    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: str | list[str] = "all-linear"
    merge: bool = True

    def __post_init__(self) -> None:
        _check(self.r >= 1, f"lora.r={self.r}: must be >= 1")
        _check(self.alpha >= 1, f"lora.alpha={self.alpha}: must be >= 1")
        _check(0 <= self.dropout < 1, f"lora.dropout={self.dropout}: must be in [0, 1)")
        modules = [self.target_modules] if isinstance(self.target_modules, str) else self.target_modules
        _check(
            bool(modules) and all(isinstance(m, str) and m for m in modules),
            f"lora.target_modules={bounded_repr(self.target_modules, 80)}: "
            "must name modules or be 'all-linear'",
        )


@dataclass
class _Common:
    """Fields every training job shares."""

    model: str = ""  # local model directory (never downloaded)
    dataset: str = ""  # dataset directory written by `r3 dataset build`
    output_dir: str = ""
    splits: list[str] | None = None  # task splits to train on (T_M, T_R, T_O); None = every row
    max_rows: int | None = None  # use only the first N rows (smoke tests, quick looks)
    mode: str = "reason"  # "reason" or "instruction_only" (the no-think IL baseline)
    thinking: bool = False  # passed to the chat template as enable_thinking, as the reasoner backend does
    prompt_variant: str = "full"  # "compact": goal, previous step, answer format (models from scratch)
    constrained_decoding: bool = False  # the checkpoint's instruction is decoded under the grammar constraint
    inference_temperature: float | None = None  # the checkpoint's sampling temperature (None: backend's)
    lora: LoraSettings | None = None
    freeze_vision: bool = False  # the image tower keeps its loaded weights (e.g. pretrained on the sim)
    learning_rate: float = 1e-6
    num_train_epochs: float = 2.0
    max_steps: int = -1  # > 0 overrides the epochs
    lr_scheduler_type: str = "cosine"
    warmup_ratio: float = 0.1
    weight_decay: float = 0.0
    per_device_train_batch_size: int = 1
    gradient_checkpointing: bool = True
    precision: str = "auto"  # "auto" = bf16 on a GPU, fp32 on CPU
    device: str = "auto"
    seed: int = 0
    logging_steps: int = 1
    save_steps: int = 500
    save_total_limit: int | None = 2
    report_to: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for key in ("model", "dataset", "output_dir"):
            _check(bool(getattr(self, key)), f"{key}: required")
        _check(self.mode in MODES, f"mode={self.mode!r}: expected one of {MODES}")
        _check(
            self.prompt_variant in VARIANTS,
            f"prompt_variant={self.prompt_variant!r}: expected one of {VARIANTS}",
        )
        _check(self.max_rows is None or self.max_rows >= 1, f"max_rows={self.max_rows}: must be >= 1")
        _check(self.learning_rate > 0, f"learning_rate={self.learning_rate}: must be > 0")
        _check(self.num_train_epochs > 0, f"num_train_epochs={self.num_train_epochs}: must be > 0")
        _check(self.max_steps == -1 or self.max_steps >= 1, f"max_steps={self.max_steps}: -1 or >= 1")
        _check(
            self.lr_scheduler_type in SCHEDULERS,
            f"lr_scheduler_type={self.lr_scheduler_type!r}: expected one of {SCHEDULERS}",
        )
        _check(0 <= self.warmup_ratio < 1, f"warmup_ratio={self.warmup_ratio}: must be in [0, 1)")
        _check(self.weight_decay >= 0, f"weight_decay={self.weight_decay}: must be >= 0")
        _check(
            self.per_device_train_batch_size >= 1,
            f"per_device_train_batch_size={self.per_device_train_batch_size}: must be >= 1",
        )
        _check(self.precision in PRECISIONS, f"precision={self.precision!r}: expected one of {PRECISIONS}")
        _check(self.device in DEVICES, f"device={self.device!r}: expected one of {DEVICES}")
        _check(self.logging_steps >= 1 and self.save_steps >= 1, "logging_steps and save_steps: must be >= 1")
        _check(
            self.save_total_limit is None or self.save_total_limit >= 1,
            f"save_total_limit={self.save_total_limit}: must be >= 1 (or null to keep every checkpoint)",
        )
        _check(
            all(isinstance(name, str) and name for name in self.report_to),
            f"report_to={bounded_repr(self.report_to)}: expected a list of integrations, e.g. [tensorboard]",
        )
        _check_seed(self.seed)
        t = self.inference_temperature
        _check(
            t is None or not temperature_problem(t),
            f"inference_temperature={t}: {temperature_problem(t)} or null",
        )
        if isinstance(self.lora, dict):
            self.lora = _build(LoraSettings, self.lora, "lora")


@dataclass
class SFTConfig(_Common):
    """Stage I mid-training (R^3 Table 8): next-token loss on the response only.

    ``global_batch_size`` is split as per-device batch x GPUs x gradient accumulation.
    """

    global_batch_size: int = 128
    max_length: int | None = None  # prompt + response tokens; longer rows are truncated
    # Keep only the last N sentences of each response's reasoning (the ones that name the chosen
    # move), still "Reasoning: ...\nInstruction: ..."; None = the whole response (the paper).
    reasoning_sentences: int | None = None
    # Open each answer's reasoning with where each block the goal names is, its board region read
    # from the row's snapshot ("Where they are: the red moon top right, ..."; Language Table rows):
    # the sentence grounding pretraining (r3.train.grounding) teaches the model to read from the image.
    reasoning_regions: bool = False
    # Held-out rows (a dataset of the same kind): their loss is logged every eval_steps and before the
    # first step, as eval_loss in the checkpoint's log history. None: no held-out loss.
    eval_dataset: str | None = None
    eval_steps: int = 50

    def __post_init__(self) -> None:
        super().__post_init__()
        _check(self.global_batch_size >= 1, f"global_batch_size={self.global_batch_size}: must be >= 1")
        _check(
            self.max_length is None or self.max_length >= 16, f"max_length={self.max_length}: must be >= 16"
        )
        _check(
            self.reasoning_sentences is None or self.reasoning_sentences >= 1,
            f"reasoning_sentences={self.reasoning_sentences}: must be >= 1 (or null for the whole reasoning)",
        )
        _check(self.eval_steps >= 1, f"eval_steps={self.eval_steps}: must be >= 1")


@dataclass
class RLConfig(_Common):
    """Stage II single-step RL (R^3 Table 9) with Dr. GRPO on TRL's GRPOTrainer.

    ``prompts_per_step`` is Table 9's train batch size: prompts per optimizer step, each sampled
    ``num_generations`` times, so one step sees ``prompts_per_step * num_generations`` responses.
    ``rewards`` weights the named terms of :func:`r3.rewards.instruction_rewards`.

    ``interface: semantic`` makes it multi-turn (:mod:`r3.train.multiturn`, ERR's turn-level GSPO):
    ``dataset`` is then a folder of stored episodes (:mod:`r3.data.turns`), a row is one turn, and
    ``rewards`` weights the turn terms of :mod:`r3.rewards.turn`, scored on ``sim_workers`` simulator
    processes (0 or 1: in the trainer's process; ``ray_address``: Ray actors instead).
    """

    learning_rate: float = 2e-6
    num_train_epochs: float = 4.0
    lr_scheduler_type: str = "constant"
    warmup_ratio: float = 0.0
    prompts_per_step: int = 32
    num_generations: int = 12
    temperature: float = 1.0
    top_p: float = 1.0
    max_completion_length: int = 1024
    loss_type: str = "dr_grpo"
    scale_rewards: str = "none"
    beta: float = 0.0
    epsilon: float = 0.2
    epsilon_high: float = 0.3
    importance_sampling_level: str = "token"  # "sequence" is GSPO
    num_iterations: int = 1
    mask_truncated_completions: bool = False
    interface: str = "instruction"
    rewards: dict[str, float] | None = None  # None: the interface's DEFAULT_REWARD_TERMS at weight 1
    sim_workers: int = 0
    ray_address: str | None = None
    render_images: bool = True  # turn rows: render the views from each snapshot (False: blank images)
    length_target_words: int = 80
    history_file: str | None = None  # imputed previous-step context from `r3 train impute`
    use_vllm: bool = False
    vllm_mode: str = "colocate"
    vllm_server_base_url: str | None = None
    vllm_gpu_memory_utilization: float = 0.3
    vllm_tensor_parallel_size: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        _check(self.prompts_per_step >= 1, f"prompts_per_step={self.prompts_per_step}: must be >= 1")
        _check(self.num_generations >= 2, f"num_generations={self.num_generations}: GRPO needs >= 2")
        _check_sampling_temperature(self.temperature)
        _check(0 < self.top_p <= 1, f"top_p={self.top_p}: must be in (0, 1]")
        _check(
            self.max_completion_length >= 1,
            f"max_completion_length={self.max_completion_length}: must be >= 1",
        )
        _check(self.loss_type in LOSS_TYPES, f"loss_type={self.loss_type!r}: expected one of {LOSS_TYPES}")
        _check(
            self.scale_rewards in SCALE_REWARDS,
            f"scale_rewards={self.scale_rewards!r}: expected one of {SCALE_REWARDS}",
        )
        _check(self.beta >= 0, f"beta={self.beta}: must be >= 0")
        _check(0 < self.epsilon < 1, f"epsilon={self.epsilon}: must be in (0, 1)")
        _check(0 < self.epsilon_high < 1, f"epsilon_high={self.epsilon_high}: must be in (0, 1)")
        _check(
            self.epsilon_high >= self.epsilon,
            f"epsilon_high={self.epsilon_high}: must be >= epsilon={self.epsilon} (the upper clip)",
        )
        _check(
            self.importance_sampling_level in IMPORTANCE_LEVELS,
            (
                f"importance_sampling_level={self.importance_sampling_level!r}: "
                f"expected one of {IMPORTANCE_LEVELS}"
            ),
        )
        _check(self.num_iterations >= 1, f"num_iterations={self.num_iterations}: must be >= 1")
        _check(
            self.interface in REWARD_TERMS,
            f"interface={self.interface!r}: RL runs for the interfaces {tuple(REWARD_TERMS)}",
        )
        terms = REWARD_TERMS[self.interface]
        if self.rewards is None:
            self.rewards = dict.fromkeys(DEFAULT_REWARD_TERMS[self.interface], 1.0)
        unknown = sorted(set(self.rewards) - set(terms))
        _check(
            not unknown,
            f"rewards: unknown term(s) {unknown} for interface {self.interface!r}; expected some of {terms}",
        )
        _check(bool(self.rewards), f"rewards: name at least one of {terms}")
        for term, weight in self.rewards.items():
            number = isinstance(weight, int | float) and not isinstance(weight, bool)
            _check(
                number and math.isfinite(weight),
                f"rewards.{term}={bounded_repr(weight)}: must be a finite number",
            )
        _check(
            any(weight != 0 for weight in self.rewards.values()),
            f"rewards: every weight is 0 ({self.rewards}), so no answer would be rewarded over another",
        )
        _check(self.sim_workers >= 0, f"sim_workers={self.sim_workers}: must be >= 0")
        try:  # the address only: how many workers this machine runs is checked when they start
            check_ray_address(self.ray_address)
        except ValueError as exc:
            raise ConfigError(f"ray_address: {exc}") from None
        _check(self.length_target_words >= 1, f"length_target_words={self.length_target_words}: must be >= 1")
        _check(self.vllm_mode in VLLM_MODES, f"vllm_mode={self.vllm_mode!r}: expected one of {VLLM_MODES}")
        _check(
            not (self.use_vllm and self.vllm_mode == "server" and not self.vllm_server_base_url),
            "vllm_server_base_url: required when use_vllm and vllm_mode is 'server'",
        )
        _check(
            0 < self.vllm_gpu_memory_utilization <= 1,
            f"vllm_gpu_memory_utilization={self.vllm_gpu_memory_utilization}: must be in (0, 1]",
        )
        _check(
            self.vllm_tensor_parallel_size >= 1,
            f"vllm_tensor_parallel_size={self.vllm_tensor_parallel_size}: must be >= 1",
        )


@dataclass
class ImputeConfig:
    """Reasoning-context imputation (R^3 section 3.3) for RL rows whose previous step lacks reasoning.

    ``backend`` is any reasoner backend spec ("transformers:DIR" for the mid-trained model, or
    "openai:URL,model=NAME" for the same model behind vLLM); ``samples`` responses per step (R^3: 48).
    """

    backend: str = ""
    dataset: str = ""
    output: str = ""  # JSONL of (episode_id, step, history, history_kind, imputed)
    splits: list[str] | None = None
    samples: int = 48
    temperature: float = 1.0
    max_new_tokens: int = 1024
    device: str = "auto"
    seed: int = 0
    max_rows: int | None = None

    def __post_init__(self) -> None:
        for key in ("backend", "dataset", "output"):
            _check(bool(getattr(self, key)), f"{key}: required")
        _check(self.samples >= 1, f"samples={self.samples}: must be >= 1")
        _check_sampling_temperature(self.temperature)
        _check(self.max_new_tokens >= 1, f"max_new_tokens={self.max_new_tokens}: must be >= 1")
        _check(self.device in DEVICES, f"device={self.device!r}: expected one of {DEVICES}")
        _check_seed(self.seed)
        _check(self.max_rows is None or self.max_rows >= 1, f"max_rows={self.max_rows}: must be >= 1")


def _allowed(tp) -> tuple[type, ...]:
    """Python types a YAML value may have for a field annotated ``tp``."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return tuple(t for a in typing.get_args(tp) for t in _allowed(a))
    if tp is float:
        return (int, float)
    if tp is type(None):
        return (type(None),)
    if dataclasses.is_dataclass(tp):
        return (dict,)
    return (origin or tp,)


#: A number in exponent form without a dot (``5e-3``), which PyYAML (YAML 1.1) reads as a string.
_EXPONENT_FORM = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)[eE][-+]?[0-9]+")


def _number(text: str):
    """A float field's value that PyYAML left as text: the number it spells when it is in exponent
    form (YAML 1.1 reads 5e-3, no dot, and 5.0e3, no sign, as text), else the text itself (a quoted
    "0.2" is refused by the type check)."""
    return float(text) if _EXPONENT_FORM.fullmatch(text) else text


def _control_character(value) -> str | None:
    """The first control character (:func:`r3.files.is_control`) in a config value's text: a
    string, a list's strings, a mapping's keys. A NUL in a path ended a run in a traceback, and an
    escape would reach the terminal through every message naming the value."""
    texts = [value] if isinstance(value, str) else value if isinstance(value, list | dict) else []
    return next((c for text in texts if isinstance(text, str) for c in text if is_control(c)), None)


#: The keys whose value is a path (a folder or file to read or write), checked as every command's
#: paths are (:func:`r3.files.path_problem`): a tab or newline in them is no text, a 300-byte name none
#: Linux takes.
_PATH_KEYS = frozenset({"model", "dataset", "output_dir", "eval_dataset", "history_file", "output"})


def _build(cls, values: dict, where: str):
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(values).__name__}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; known keys: {names}")
    values = dict(values)
    for key, value in values.items():
        allowed = _allowed(hints[key])
        if isinstance(value, str) and float in allowed and str not in allowed:
            value = values[key] = _number(value)  # YAML 1.1 reads 5e-3 as a string
        if isinstance(value, bool) and bool not in allowed or not isinstance(value, allowed):
            expected = " or ".join(t.__name__ for t in allowed)
            raise ConfigError(f"{where}.{key}={bounded_repr(value)}: expected {expected}")
        declared = typing.get_args(hints[key]) or (hints[key],)
        if type(value) is int and float in declared and int not in declared:
            try:  # a float field's whole number (temperature: 2) is a float to the libraries it goes to
                value = values[key] = float(value)
            except OverflowError:
                value = math.inf
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{where}.{key}={value!r}: expected a finite number")
        if type(value) is int and not -(2**63) <= value < 2**63:  # the libraries' int64
            raise ConfigError(
                f"{where}.{key}={bounded_repr(value)}: expected a whole number in [-2**63, 2**63)"
            )
        if control := _control_character(value):
            raise ConfigError(
                f"{where}.{key}={bounded_repr(value)}: holds the control character U+{ord(control):04X}"
            )
        if key in _PATH_KEYS and isinstance(value, str) and (problem := path_problem(value)):
            raise ConfigError(f"{where}.{key}: {problem}")
    try:
        return cls(**values)
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from None


def config_from(values: dict, cls, where: str):
    """``values`` (key -> value, as a config file holds them) as ``cls``, refused as
    :func:`load_config` refuses a file's; ``where`` names them in the refusal (a file, or a file and
    its section: ``my.yaml: sft``)."""
    return _build(cls, values, where)


def load_config(path: str | Path, cls, overrides: dict | None = None):
    """Read YAML ``path`` into ``cls`` (one of :class:`SFTConfig`, :class:`RLConfig`,
    :class:`ImputeConfig`); ``overrides`` (key -> value) win over the file.

    Relative paths in ``model``, ``dataset``, ``output_dir``, ``output`` and ``history_file``
    stay relative to the working directory, as on the command line.
    """
    try:
        values = read_yaml_mapping(path)
    except FileRefused as exc:
        raise ConfigError(str(exc)) from None
    values.update(overrides or {})
    return _build(cls, values, str(path))
