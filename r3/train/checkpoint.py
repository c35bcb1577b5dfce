"""Model loading for training, and checkpoints the reasoner backend and vLLM both load.

A checkpoint is a plain transformers model directory: ``config.json``, safetensors weights,
the processor files (tokenizer, image processor, chat template) and ``generation_config.json``,
plus ``r3_train.json`` saying how it was made and ``r3_prompt.json`` saying how it was prompted
(:class:`r3.reasoning.prompts.PromptSettings`, which the reasoner backend applies). LoRA runs save
merged weights unless told not to (``lora.merge: false``); an adapter directory merges later with
:func:`merge_adapter` (``r3 train export``). ``make_backend("transformers:DIR")`` and
``vllm serve DIR`` take the result.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

from r3.files import bounded_repr, json_value, read_small_text, write_text_atomically
from r3.reasoning.backends.base import BackendError, error_line
from r3.reasoning.backends.transformers_backend import PROBE_MESSAGES, chat_text, load_weights
from r3.reasoning.prompts import PROMPT_FILE, PromptSettings
from r3.train.config import ConfigError


def resolve_device(device: str) -> tuple[str, bool]:
    """("cuda" | "cpu", whether bf16 is the "auto" precision) for a config's ``device``."""
    import torch

    cuda = torch.cuda.is_available() and device != "cpu"
    if device == "cuda" and not cuda:
        raise RuntimeError("device='cuda' but torch sees no GPU")
    return ("cuda" if cuda else "cpu"), cuda


def load_model(model_dir: str | Path, dtype: str = "float32"):
    """Processor and model from a local directory (never downloads).

    Training loads float32 master weights and computes in bf16 under autocast (``bf16=True``):
    at R^3's learning rates (1e-6, 2e-6) an update is far below bf16's resolution of a weight,
    so pure-bf16 weights would barely move. ``dtype="auto"`` keeps the checkpoint's own dtype.
    """
    import torch
    from transformers import AutoProcessor

    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(f"not a model directory (no config.json): {model_dir}")
    try:
        processor = AutoProcessor.from_pretrained(model_dir, local_files_only=True)
        model = load_weights(model_dir, dtype if dtype == "auto" else getattr(torch, dtype))
    except Exception as exc:  # a missing tokenizer, a garbage config, torn weights: each its own kind
        raise ConfigError(f"model: cannot load {model_dir}: {error_line(exc)}") from exc
    try:  # every row goes through the chat template: a broken one fails here, not in the first step
        chat_text(processor, PROBE_MESSAGES, where=model_dir)
    except BackendError as exc:
        raise ConfigError(f"model: {exc}") from None
    return processor, model


#: Where each architecture keeps its image tower (idefics3; the Qwen VLs).
VISION_TOWERS = ("vision_model", "visual")


def freeze_vision_tower(model) -> None:
    """Keep the image tower's weights as loaded (``freeze_vision``)."""
    inner = getattr(model, "model", model)
    tower = next((getattr(inner, name) for name in VISION_TOWERS if hasattr(inner, name)), None)
    if tower is None:
        raise ValueError(f"freeze_vision: {type(model).__name__} has no image tower named {VISION_TOWERS}")
    tower.requires_grad_(False)


def save_final(
    trainer,
    processor,
    base_model: str | Path,
    out_dir: str | Path,
    info: dict,
    merge: bool,
    prompt: PromptSettings,
) -> Path:
    """Save the trained model as a checkpoint at ``out_dir`` (all processes call this).

    ``trainer.save_model`` gathers sharded weights (DeepSpeed ZeRO-3, FSDP). A LoRA run with
    ``merge`` saves its adapter next to ``out_dir`` and the main process merges it into the base.
    """
    out = Path(out_dir)
    main = trainer.accelerator.is_main_process
    if merge and hasattr(trainer.model, "peft_config"):
        adapter = out.with_name(out.name + "_adapter")
        trainer.save_model(str(adapter))
        if main:
            merge_adapter(adapter, base_model, out)
    else:
        trainer.save_model(str(out))
        if main:
            processor.save_pretrained(out)
    if main:
        (out / "r3_train.json").write_text(json.dumps(info, indent=1, default=str))
        prompt.save(out)
    trainer.accelerator.wait_for_everyone()
    return out


def prompt_on_every_checkpoint(prompt: PromptSettings):
    """A trainer callback that writes ``prompt`` into every ``checkpoint-N`` the trainer saves, as
    :func:`save_final` does into ``final``: an intermediate checkpoint, loaded by the reasoner or
    merged by ``r3 train export``, is then prompted as it was trained, not as an untrained model."""
    from transformers import TrainerCallback
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    class PromptOnCheckpoints(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                prompt.save(Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")

    return PromptOnCheckpoints()


#: The config a training run was started with, in its output_dir: a rerun resumes only the same run.
RUN_CONFIG_FILE = "r3_train_config.json"


def _config_record(cfg) -> dict:
    """``cfg`` as :data:`RUN_CONFIG_FILE` keeps it (JSON's types: tuples as lists), but for its
    output_dir: a run's folder moved elsewhere holds the same run."""
    record = json.loads(json.dumps(dataclasses.asdict(cfg), default=str))
    record.pop("output_dir", None)
    return record


def resume_checkpoint(cfg) -> str | None:
    """The latest ``checkpoint-N`` in ``cfg.output_dir`` that a run of this same config saved whole
    (its :data:`PROMPT_FILE`, which :func:`prompt_on_every_checkpoint` writes after the trainer's
    files, is there), to go on from; None when there is none. Writes nothing.

    Started afresh, a run wrote its own ``checkpoint-N`` over the earlier run's, so a run stopped again
    while saving left a good checkpoint half overwritten (and the trainer's rotation deleted the
    earlier ones). A torn one (stopped mid-save) is passed over. Checkpoints of a run of another
    config (another model, dataset, any setting), or of one whose config was not recorded, are a
    ConfigError naming what differs: going on from them would train neither run."""
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    out = Path(cfg.output_dir)
    steps = {}
    for folder in out.glob(f"{PREFIX_CHECKPOINT_DIR}-*"):
        step = folder.name.removeprefix(f"{PREFIX_CHECKPOINT_DIR}-")
        if step.isdigit() and (folder / "trainer_state.json").is_file() and (folder / PROMPT_FILE).is_file():
            steps[int(step)] = folder
    if not steps:
        return None
    latest = steps[max(steps)]
    record = out / RUN_CONFIG_FILE
    try:
        earlier = json_value(read_small_text(record)) if record.is_file() else None
    except (OSError, ValueError):
        earlier = None
    if not isinstance(earlier, dict):
        raise ConfigError(
            f"output_dir: {out} holds {latest.name} of a run whose config r3 cannot read ({record.name}); "
            "going on from it could train another run: choose another output_dir"
        )
    now = _config_record(cfg)
    if differ := sorted(k for k in now.keys() | earlier.keys() if now.get(k) != earlier.get(k)):
        pairs = ((k, bounded_repr(earlier.get(k), 50), bounded_repr(now.get(k), 50)) for k in differ[:3])
        shown = "; ".join(f"{k}: {then} then, {later} now" for k, then, later in pairs)
        raise ConfigError(
            f"output_dir: {out} holds {latest.name} of a run of another config ({shown}); run that config "
            "again to go on from it, or choose another output_dir"
        )
    return str(latest)


def start_run(cfg) -> str | None:
    """The checkpoint a training run of ``cfg`` goes on from (:func:`resume_checkpoint`: None for a
    fresh run, a ConfigError for another run's checkpoints), called before the model loads; the
    main process then keeps ``cfg`` in the output_dir (:data:`RUN_CONFIG_FILE`) for the next rerun."""
    from r3.train.args import is_first_process

    resume = resume_checkpoint(cfg)
    if is_first_process():
        out = Path(cfg.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        write_text_atomically(out / RUN_CONFIG_FILE, json.dumps(_config_record(cfg), indent=1) + "\n")
    return resume


def export_problem(adapter_dir: Path, base_model: Path, out_dir: Path) -> str | None:
    """Why ``r3 train export`` cannot merge ``adapter_dir`` into ``base_model`` at ``out_dir``, or
    None. The merged checkpoint goes to a new or empty folder, so it can never overwrite the base,
    the adapter or anything else. Missing adapter weights are named here: peft, not finding them,
    would ask the network for them."""
    from r3.reasoning.backends.transformers_backend import model_dir_problem

    config = adapter_dir / "adapter_config.json"
    if not config.is_file():
        return f"--adapter {adapter_dir}: no adapter_config.json (not a LoRA adapter checkpoint)"
    try:
        if not isinstance(json.loads(config.read_text()), dict):
            return f"--adapter: {config} is not a JSON object"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"--adapter: {config} does not read as JSON: {exc}"
    if problem := model_dir_problem(base_model):
        return f"--base: {problem}"
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        return f"--out {out_dir} exists and is not an empty folder: the merged checkpoint goes to a new one"
    if not any((adapter_dir / name).is_file() for name in ADAPTER_WEIGHTS):
        return f"--adapter {adapter_dir}: no {ADAPTER_WEIGHTS[0]} (the adapter's weights)"
    if problem := run_files_problem(adapter_dir):
        return f"--adapter: {problem}"
    return None


#: The files peft reads an adapter's weights from, the one it saves first.
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")

#: What a training run writes beside its weights: how it was made and how it wants to be prompted.
RUN_FILES = ("r3_train.json", PROMPT_FILE)


def run_files_problem(adapter_dir: Path) -> str | None:
    """Why the :data:`RUN_FILES` of ``adapter_dir`` cannot go into a merged checkpoint, or None: each
    there is a regular file (a symlink's target, such as /etc/shadow, is never copied), a JSON
    object, and the prompt settings read as the reasoner backend reads them (an export the backend
    then refuses to load helps no one)."""
    for name in RUN_FILES:
        path = adapter_dir / name
        if path.is_symlink() or (path.exists() and not path.is_file()):
            return f"{path} is not a regular file; only regular run files are copied into the export"
        if not path.exists():
            continue
        try:
            if not isinstance(json_value(read_small_text(path)), dict):
                return f"{path} is not a JSON object"
        except (OSError, ValueError) as exc:
            return f"{path} does not read as JSON: {getattr(exc, 'strerror', None) or exc}"
    try:
        PromptSettings.load(adapter_dir)
    except ValueError as exc:
        return str(exc)
    return None


def merge_adapter(adapter_dir: str | Path, base_model: str | Path, out_dir: str | Path) -> Path:
    """Fold a saved LoRA adapter into ``base_model`` and save a plain checkpoint at ``out_dir``, with
    the adapter's :data:`RUN_FILES` (without its prompt settings, the reasoner would prompt the
    merged model as an untrained one: reasoning mode, no constraint, temperature 1)."""
    from peft import PeftModel

    processor, model = load_model(base_model, dtype="auto")
    try:
        merged = PeftModel.from_pretrained(model, str(adapter_dir), local_files_only=True).merge_and_unload()
    except Exception as exc:  # an adapter of another base (shapes), a config peft cannot read
        raise ConfigError(f"cannot merge {adapter_dir} into {base_model}: {error_line(exc)}") from exc
    out = Path(out_dir)
    merged.save_pretrained(out, safe_serialization=True)
    processor.save_pretrained(out)
    for name in RUN_FILES:
        source = Path(adapter_dir) / name
        if source.is_file() and not source.is_symlink():  # export_problem refused any other
            shutil.copyfile(source, out / name)
    return out
