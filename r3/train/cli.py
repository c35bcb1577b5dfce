"""``r3 train``: sft | rl | impute from a YAML config, and export (merge a LoRA adapter).

Every job validates its config and dataset first and stops with one line naming the problem
(exit 2) before any model loads. ``--check`` stops there and prints what would reach TRL.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from pathlib import Path

from r3.cli_args import checked_path, folder
from r3.files import FileRefused, folder_problem, mark_output, resumable_output
from r3.numerals import says_its_digits
from r3.train.args import is_first_process
from r3.train.config import ConfigError, ImputeConfig, RLConfig, SFTConfig, load_config
from r3.train.rows import DatasetError
from r3.urls import shown_url

JOBS = {"sft": SFTConfig, "rl": RLConfig, "impute": ImputeConfig}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="r3 train", description="Train the reasoner (R^3 Stage I SFT, Stage II RL)."
    )
    sub = p.add_subparsers(dest="job", required=True, metavar="JOB")
    helps = {
        "sft": "Stage I mid-training on TRL's SFTTrainer",
        "rl": (
            "Stage II RL on TRL's GRPOTrainer: single-step (Dr. GRPO; GSPO by config), or turn-level "
            "GSPO from stored episodes (interface: semantic)"
        ),
        "impute": "sample the mid-trained model to fill in missing previous-step reasoning for RL rows",
    }
    for job, help_text in helps.items():
        j = sub.add_parser(job, help=help_text, description=help_text)
        j.add_argument(
            "--config",
            type=checked_path,
            required=True,
            help=f"YAML file, e.g. config/train/{job}_language_table.yaml",
        )
        j.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="override one config key (VALUE is read as YAML); repeatable",
        )
        j.add_argument(
            "--check",
            action="store_true",
            help="validate the config and dataset, print the rows and TRL arguments, load no model",
        )
    export_help = "merge a LoRA adapter checkpoint into its base model"
    e = sub.add_parser(
        "export",
        help=export_help,
        description=f"{export_help[0].upper()}{export_help[1:]}: a plain checkpoint in a new folder, with "
        "the run's prompt settings and record, for `r3 run --reasoner transformers:OUT` or vLLM.",
    )
    e.add_argument(
        "--adapter",
        type=checked_path,
        required=True,
        help="adapter directory (e.g. OUTPUT_DIR/checkpoint-500)",
    )
    e.add_argument(
        "--base", type=checked_path, required=True, help="the base model directory the run started from"
    )
    e.add_argument("--out", type=folder, required=True, help="new folder for the merged checkpoint")
    return p


def _overrides(pairs: list[str]) -> dict:
    import yaml

    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {pair!r}: expected KEY=VALUE")
        try:
            out[key] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise ConfigError(f"--set {pair!r}: VALUE is not YAML: {str(exc).splitlines()[0]}") from None
        if not says_its_digits(out[key], value):  # 010 stays text, for the config's type check to name
            out[key] = value
    return out


#: The folders a job reads, which its output must stay out of.
INPUT_KEYS = ("model", "dataset", "eval_dataset")


def _refuse_output_in_inputs(key: str, output: Path, cfg) -> None:
    """A ConfigError when ``output`` is one of the folders ``cfg`` reads, inside one or holding one:
    training wrote its checkpoints into the model or dataset it was reading, and TRL's rotation of
    checkpoints deletes a model read from one of them."""
    for name in INPUT_KEYS:
        folder = getattr(cfg, name, None)
        if not folder:
            continue
        if output.resolve().is_relative_to(Path(folder).resolve()):
            raise ConfigError(f"{key} {output}: inside the {name} it reads, {folder}")
        if Path(folder).resolve().is_relative_to(output.resolve()):
            raise ConfigError(f"{key} {output}: holds the {name} it reads, {folder}")


def _preflight(job: str, cfg) -> None:
    """What a job needs on disk, checked before anything loads (``--check`` included): the model
    folder, a backend spec that builds, an output that is not a file."""
    from r3.reasoning.backends import check_backend
    from r3.reasoning.backends.transformers_backend import model_dir_problem
    from r3.reasoning.prompts import PROMPT_FILE

    if job == "impute":
        try:
            check_backend(cfg.backend)
        except ValueError as exc:
            raise ConfigError(f"backend {shown_url(cfg.backend)}: {exc}") from None
        output = Path(cfg.output)
        if output.is_dir():
            raise ConfigError(f"output {cfg.output}: a folder, expected a JSONL file to write")
        if problem := folder_problem(output.parent):  # found after all the sampling, before
            raise ConfigError(f"output {cfg.output}: {problem}")
        _refuse_output_in_inputs("output", output, cfg)  # it wrote over the manifest
        _refuse_an_unknown_impute_output(output)
        return
    if problem := model_dir_problem(Path(cfg.model)):
        raise ConfigError(f"model: {problem}")
    if cfg.device == "cuda":  # torch only then: "auto" and "cpu" always resolve
        from r3.train.checkpoint import resolve_device

        try:
            resolve_device(cfg.device)
        except RuntimeError as exc:
            raise ConfigError(f"device: {exc}") from None
    if problem := folder_problem(cfg.output_dir):
        raise ConfigError(f"output_dir: {problem}")
    _refuse_output_in_inputs("output_dir", Path(cfg.output_dir), cfg)
    if (Path(cfg.output_dir) / "final" / PROMPT_FILE).is_file():  # save_final writes it last
        raise ConfigError(
            f"output_dir: {cfg.output_dir} holds a finished run (final/); a new run would delete its "
            "checkpoints and write over its final model: choose another output_dir"
        )
    try:  # TRL deletes the checkpoints it rotates out and writes its README.md over any
        resumable_output(cfg.output_dir, TRAINING_RUN, made_before_marks=_is_earlier_run)
    except FileRefused as exc:
        raise ConfigError(f"output_dir: {exc}") from None
    from r3.train.checkpoint import resume_checkpoint

    resume_checkpoint(cfg)  # checkpoints of a run of another config: refused before anything loads


#: What a training run's output_dir holds, in its :data:`r3.files.OUTPUT_MARK`.
TRAINING_RUN = "training run"


def _is_earlier_run(out: Path) -> bool:
    """Whether ``out`` holds a run r3 train began before outputs were marked: a checkpoint TRL wrote
    (its trainer_state.json) or a final model."""
    return any(out.glob("checkpoint-*/trainer_state.json")) or (out / "final" / "config.json").is_file()


def _refuse_an_unknown_impute_output(output: Path) -> None:
    """A ConfigError when ``output`` exists and is no earlier ``r3 train impute`` output, which a run
    would replace whole (a user's own file of that name was written over)."""
    from r3.train.rows import load_history_file

    if not output.exists() and not output.is_symlink():
        return
    if not output.is_file():
        raise ConfigError(f"output {output}: not a regular file, expected a JSONL file to write")
    try:
        load_history_file(output)
    except DatasetError as exc:
        raise ConfigError(
            f"output {output} exists and is no earlier `r3 train impute` output ({exc}); choose another"
        ) from None


def train_main(argv: list[str] | None = None) -> int:
    """Entry point of ``r3 train``; 0 on success, 2 on a bad config or dataset."""
    args = _parser().parse_args(argv)
    if args.job == "export":
        from r3.train.checkpoint import export_problem, merge_adapter

        if problem := export_problem(Path(args.adapter), Path(args.base), args.out):
            print(f"r3 train export: {problem}", file=sys.stderr)
            return 2
        try:
            print(merge_adapter(args.adapter, args.base, args.out))
        except (ConfigError, OSError) as exc:  # a base or adapter that transformers or peft cannot load
            print(f"r3 train export: {exc}", file=sys.stderr)
            return 2
        return 0
    try:
        cfg = load_config(args.config, JOBS[args.job], _overrides(args.set))
        _preflight(args.job, cfg)
        if args.check:
            return _check(args.job, cfg)
        if args.job == "impute":
            from r3.train.impute import run_impute

            result = run_impute(cfg)
        else:  # refused before its folder is made, which is marked before TRL writes anything there
            prepared = _prepared(args.job, cfg)
            made = not Path(cfg.output_dir).exists()
            mark_output(cfg.output_dir, TRAINING_RUN, hold=is_first_process())
            try:
                result = {"checkpoint": _train(args.job, cfg, prepared)}
            except (ConfigError, DatasetError, FileRefused):
                if made and is_first_process():  # a model that cannot load: refused before any training
                    _unmake(Path(cfg.output_dir))
                raise
    except (ConfigError, DatasetError, FileRefused) as err:
        print(f"r3 train {args.job}: {err}", file=sys.stderr)
        return 2
    print(json.dumps(result, default=str))
    return 0


def _unmake(out: Path) -> None:
    """Remove the output folder a refused run made, if it holds only what the run writes first (its
    mark and its config): a run refused on a model that cannot load left an empty marked folder."""
    from r3.files import OUTPUT_MARK
    from r3.train.checkpoint import RUN_CONFIG_FILE

    with contextlib.suppress(OSError):  # a cleanup that fails leaves the folder; the refusal stands
        if {p.name for p in out.iterdir()} <= {OUTPUT_MARK, RUN_CONFIG_FILE}:
            for name in (OUTPUT_MARK, RUN_CONFIG_FILE):
                (out / name).unlink(missing_ok=True)
            out.rmdir()


def _prepared(job: str, cfg) -> tuple:
    """Everything a job reads and sets up before a model loads, each problem refused here (for
    ``--check``, and for a run before its output folder is made): sft's (rows, TRL arguments, prompt
    settings, held-out rows), rl's (rows, reward functions, TRL arguments, prompt settings), impute's
    (rows, no arguments, no prompt settings)."""
    if job == "sft":
        from r3.train.sft import held_out_rows, prepare_sft

        rows, arguments, prompt = prepare_sft(cfg)
        return rows, arguments, prompt, held_out_rows(cfg, prompt)
    if job == "rl":
        from r3.train.grpo import prepare_rl
        from r3.train.multiturn import prepare_turn_rl

        return (prepare_rl if cfg.interface == "instruction" else prepare_turn_rl)(cfg)
    from r3.train.rows import RL_COLUMNS, open_dataset

    return open_dataset(cfg.dataset, cfg.splits, RL_COLUMNS, cfg.max_rows), {}, None


def _check(job: str, cfg) -> int:
    prepared = _prepared(job, cfg)
    if job == "sft":
        rows, arguments, prompt, _ = prepared
    elif job == "rl":
        rows, _, arguments, prompt = prepared
    else:
        rows, arguments, prompt = prepared
    prompt = dataclasses.asdict(prompt) if prompt else None
    print(json.dumps({"rows": len(rows), "prompt": prompt, "arguments": arguments}, indent=1, default=str))
    return 0


def _train(job: str, cfg, prepared: tuple) -> Path:
    """Train ``job`` (sft or rl) on what :func:`_prepared` made; the final checkpoint's path."""
    if job == "sft":
        from r3.train.sft import train_sft

        return train_sft(cfg, *prepared)
    from r3.train.grpo import train_grpo

    return train_grpo(cfg, *prepared)
