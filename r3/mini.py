"""``r3 mini``: the whole R^3 recipe at laptop scale, from nothing to R^3's Table 2, in one command.

Stages (each reuses the command that does it alone, and is skipped when its output is complete, so a
stopped run continues where it was):

1. ``collect``: expert episodes (:func:`r3.data.collect.collect`) of T_M and T_R: per task of T_M,
   ``scenes`` for Stage I and ``rl_scenes`` more for Stage II; per task of T_R, ``scenes`` for Stage II
   (R^3's Stage II uses all nine tasks of T_M and T_R); then ``held_out_scenes`` more per task whose
   states are kept out of training (they give the SFT held-out loss and the judge reward on held-out
   states). :meth:`MiniRun.scene_part` says which part a scene is.
2. ``datasets``: :func:`r3.data.build.build_dataset` into ``sft`` (T_M's Stage I scenes),
   ``sft_held_out`` (T_M held-out scenes), ``rl`` (the Stage II scenes of T_M and T_R) and ``states``
   (the held-out scenes of both, rl kind: the expert's instruction and a snapshot per state), all with
   history = previous instruction.
3. ``model``: a small idefics3 VLM built from scratch (:func:`r3.reasoning.tiny.build_tiny_model`),
   then ``vision``: its image tower and connector pretrained on block positions in rendered layouts
   (:func:`r3.train.vision.pretrain_vision`; ``vision: null`` skips it), then ``grounding``: its
   language model taught to write each named block's board region from the image tokens
   (:func:`r3.train.grounding.pretrain_grounding`; ``grounding: null`` skips it).
4. ``sft`` and ``il``: Stage I (:func:`r3.train.sft.run_sft`) with reasoning, and R^3's imitation
   baseline (``mode: instruction_only``) on the same rows.
5. ``rl``: Stage II, Dr. GRPO with the rubric judge (:func:`r3.train.grpo.run_rl`) from the SFT model.
6. ``states``: every reasoner answers the held-out states (``states.rows`` of them, spread evenly over
   both splits' held-out scenes, or all of them for null); the rubric judge
   (:class:`r3.rewards.functions.JudgeReward`, simulator tier included) scores it against the expert.
7. ``eval``: :func:`r3.eval.runner.evaluate` of every reasoner on held-out scenes of T_M, T_R, T_O.
8. ``report``: ``table.md`` / ``table.csv`` in the form of R^3's Table 2, ``learning_curves.png``,
   ``success_per_task.png`` and ``summary.json``.

Each training stage's config is written to ``OUT/configs/*.yaml`` and run through
:func:`r3.train.config.load_config`, so ``r3 train sft --config OUT/configs/sft.yaml`` repeats it by
hand. Sizes live in ``config/mini/*.yaml``; ``OUT/mini.json`` records the config a folder was made
with, and a folder made with another config is refused rather than mixed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import yaml

from r3.cli_args import checked_path, folder, integer
from r3.files import (
    FileRefused,
    bounded_repr,
    is_kind,
    json_value,
    mark_output,
    read_small_text,
    read_yaml_mapping,
    resumable_output,
    save_figure,
    write_text_atomically,
)
from r3.workers import check_workers

#: The rows of the table, in R^3 Table 2's order: (name, reasoner spec or the model stage it comes from).
ROWS: tuple[tuple[str, str], ...] = (
    ("random valid instruction", "random_valid"),
    ("random goal-block instruction", "random_goal_block"),
    ("instruction-only IL", "il"),
    ("SFT with reasoning", "sft"),
    ("SFT + RL", "rl"),
    ("expert (ceiling)", "expert"),
)
MODEL_STAGES = ("sft", "il", "rl")
#: Stages between the model built from scratch and Stage I, in order, and what each teaches; stage
#: ``s`` is ``r3.train.s``'s ``pretrain_s`` with its ``SPretrainConfig``.
PRETRAINING_STAGES = {
    "vision": "the image tower where the blocks are",
    "grounding": "the language model to read each block's region from the image tokens",
}
#: The stage sizes that come with r3 (config/mini in the source tree).
CONFIGS = Path(__file__).resolve().parents[1] / "config" / "mini"
SPLITS = ("T_M", "T_R", "T_O")
#: What an ``r3 mini`` folder holds, in its :data:`r3.files.OUTPUT_MARK`: ``--out`` is a new or empty
#: folder or one an earlier run marked (or, from before there were marks, its :data:`RECORD`).
MINI_RUN = "r3 mini run"
#: The config a run's folder was made with (all but ``workers``).
RECORD = "mini.json"
CONFIG_KEYS = ("workers", "collect", "model", "vision", "grounding", "sft", "il", "rl", "states", "eval")


class MiniError(RuntimeError):
    """A run that cannot go on as asked; the message says why."""


#: The keys of the collect section, each a count: at least 1, but ``rl_scenes`` may be 0.
COLLECT_KEYS = ("scenes", "rl_scenes", "held_out_scenes", "trials", "max_steps")
#: The sections that are a mapping of keyword arguments or config keys, and what they hold.
SECTION_MAPPINGS = {
    "model": "build_tiny_model's sizes (r3 model tiny)",
    "sft": "r3 train sft's config keys",
    "il": "r3 train sft's config keys, over the sft section's",
    "rl": "r3 train rl's config keys",
}
#: The keys of the states section: held-out states answered (null: all), tokens per answer.
STATES_KEYS = ("rows", "max_new_tokens")
#: The keys of the eval section: tasks per split (null: every task), and three counts.
EVAL_KEYS = ("tasks", "scenes", "trials", "max_steps")


def _whole(value, least: int) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and value >= least


def _check_keys(path: Path, name: str, section, keys: tuple[str, ...]) -> None:
    """A MiniError unless config section ``name`` is a mapping of exactly ``keys``."""
    if not isinstance(section, dict):
        raise MiniError(f"{path}: {name}: expected the keys {keys}, got {section!r}")
    missing = [key for key in keys if key not in section]
    unknown = sorted((key for key in section if key not in keys), key=str)
    if missing or unknown:
        what = "; ".join(f"{w} {ks}" for w, ks in (("missing", missing), ("unknown", unknown)) if ks)
        raise MiniError(f"{path}: {name}: expected the keys {keys}: {what}")


def load_mini_config(path: str | Path) -> dict:
    """The YAML config at ``path``, its sections checked for presence, and the keys and kinds of the
    collect, states and eval sections checked here (:class:`MiniRun` checks the values in the range
    of the functions each goes to, and each training stage checks its own keys)."""
    path = Path(path)
    try:
        cfg = read_yaml_mapping(path)
    except FileRefused as exc:
        raise MiniError(f"{exc} (an r3 mini config has the sections {CONFIG_KEYS})") from None
    missing = [k for k in CONFIG_KEYS if k not in cfg]
    unknown = sorted(set(cfg) - set(CONFIG_KEYS))
    if missing or unknown:
        raise MiniError(f"{path}: missing section(s) {missing}, unknown {unknown}; expected {CONFIG_KEYS}")
    for name, holds in SECTION_MAPPINGS.items():
        if not isinstance(cfg[name], dict):
            raise MiniError(f"{path}: {name}: expected a mapping of {holds}, got {cfg[name]!r}")
    collect = cfg["collect"]
    _check_keys(path, "collect", collect, COLLECT_KEYS)
    for key in COLLECT_KEYS:
        value, least = collect[key], 0 if key == "rl_scenes" else 1
        if not _whole(value, least):
            raise MiniError(f"{path}: collect.{key}: expected a whole number >= {least}, got {value!r}")
    states = cfg["states"]
    _check_keys(path, "states", states, STATES_KEYS)
    if states["rows"] is not None and not _whole(states["rows"], 1):
        raise MiniError(
            f"{path}: states.rows: expected a whole number >= 1 or null (all), got {states['rows']!r}"
        )
    from r3.reasoning.backends.spec import SAMPLING_OPTIONS

    tokens = SAMPLING_OPTIONS["max_new_tokens"]  # it goes into each model's backend spec
    if not _whole(states["max_new_tokens"], 1) or states["max_new_tokens"] > tokens.high:
        raise MiniError(
            f"{path}: states.max_new_tokens: expected a whole number in [1, {tokens.high:.0f}], "
            f"got {states['max_new_tokens']!r}"
        )
    _check_eval_section(path, cfg["eval"])
    return cfg


def _check_eval_section(path: Path, section) -> None:
    """The eval section's keys and kinds: ``tasks`` null or, per split, null (every task of the split)
    or a list of the split's tasks; whole-number counts (their ranges are ``EvalConfig``'s)."""
    from r3.tasks.language_table.tasks import SPLITS as TASK_SPLITS

    _check_keys(path, "eval", section, EVAL_KEYS)
    for key in EVAL_KEYS[1:]:
        if not _whole(section[key], 1):
            raise MiniError(f"{path}: eval.{key}: expected a whole number >= 1, got {section[key]!r}")
    tasks = section["tasks"]
    if tasks is None:
        return
    if not isinstance(tasks, dict) or not set(tasks) <= set(SPLITS):
        raise MiniError(
            f"{path}: eval.tasks: expected null or a mapping of the splits {SPLITS} to their tasks, "
            f"got {tasks!r}"
        )
    for split, names in tasks.items():
        known = TASK_SPLITS[split]
        if names is not None and (
            not isinstance(names, list) or not names or any(name not in known for name in names)
        ):
            raise MiniError(
                f"{path}: eval.tasks.{split}: expected null (every task) or a list of {split}'s tasks "
                f"({', '.join(known)}), got {names!r}"
            )


def _say(text: str) -> None:
    print(f"[r3 mini] {text}", file=sys.stderr, flush=True)


class MiniRun:
    """One ``r3 mini`` folder: where each stage writes, and whether it is done."""

    def __init__(self, out: str | Path, cfg: dict, source: str | Path = "the r3 mini config"):
        """A run of ``cfg`` (read from ``source``, which refusals name) into folder ``out``: every
        section and the folder are checked here, and nothing is written until :meth:`run`."""
        self.out, self.cfg, self.source = Path(out), cfg, str(source)
        self.model_config()
        try:
            if check_workers(cfg["workers"]) < 1:  # collect and eval run on worker processes
                raise ValueError(f"workers must be >= 1, got {cfg['workers']}")
        except ValueError as exc:
            raise MiniError(f"{self.source}: workers: {exc}") from None
        for stage in PRETRAINING_STAGES:
            self.pretraining_config(stage)
        for stage in MODEL_STAGES:
            self.stage_config(stage)
        self.collect_configs()
        self.eval_config("expert")
        try:  # never into the current folder, /, or a folder holding anything but an earlier run
            resumable_output(self.out, MINI_RUN, made_before_marks=lambda out: (out / RECORD).is_file())
        except FileRefused as exc:
            raise MiniError(str(exc)) from None
        record = self.out / RECORD
        if record.exists() or record.is_symlink():
            try:
                held = json_value(read_small_text(record))
            except (OSError, ValueError) as exc:
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                raise MiniError(
                    f"{record} does not read as the config of the run in {self.out} ({why}); "
                    "expected the JSON r3 mini writes there: choose another --out"
                ) from None
            if held != self.sizes():
                raise MiniError(f"{self.out} holds a run of another config ({record}); choose another --out")

    def sizes(self) -> dict:
        """What :data:`RECORD` keeps of the config: all of it but ``workers``, which changes no outcome."""
        return {k: v for k, v in self.cfg.items() if k != "workers"}

    def claim(self) -> None:
        """Mark the folder as this run's and record its config: the first thing a run writes."""
        mark_output(self.out, MINI_RUN)
        write_text_atomically(self.path(RECORD), json.dumps(self.sizes(), indent=1, sort_keys=True) + "\n")

    def path(self, *parts: str) -> Path:
        return self.out.joinpath(*parts)

    def checkpoint(self, stage: str) -> Path:
        return self.path(stage, "final")

    def spec(self, row: str) -> str:
        """The reasoner spec of a table row: a model stage's checkpoint on this machine's CPU, with the
        config's cap on generated tokens (an untrained model rarely stops by itself)."""
        if row not in MODEL_STAGES:
            return row
        cap = self.cfg["states"]["max_new_tokens"]
        return f"transformers:{self.checkpoint(row)},device=cpu,max_new_tokens={cap}"

    # ----------------------------------------------------------------------------- stages
    def training_scenes(self, split: str) -> int:
        """Scenes per task of ``split`` that training sees: T_M's Stage I and Stage II scenes, T_R's
        Stage II scenes; the held-out scenes come after them."""
        c = self.cfg["collect"]
        return c["scenes"] + (c["rl_scenes"] if split == "T_M" else 0)

    def scene_part(self, split: str, scene: int) -> str:
        """What a collected scene of ``split`` is for: "sft", "rl" or "held_out"."""
        if scene >= self.training_scenes(split):
            return "held_out"
        return "sft" if split == "T_M" and scene < self.cfg["collect"]["scenes"] else "rl"

    def collect_configs(self) -> dict:
        """The collection of each split (T_M, T_R): a ``CollectConfig``, which checks the values."""
        from r3.data.collect import CollectConfig

        c = self.cfg["collect"]
        try:
            return {
                split: CollectConfig(
                    out=str(self.path("episodes", split)),
                    split=split,
                    scenes=self.training_scenes(split) + c["held_out_scenes"],
                    trials=c["trials"],
                    workers=self.cfg["workers"],
                    max_steps=c["max_steps"],
                )
                for split in ("T_M", "T_R")
            }
        except ValueError as exc:
            raise MiniError(f"{self.source}: collect: {exc}") from None

    def collect(self) -> None:
        from r3.data.collect import collect

        for split, config in self.collect_configs().items():
            _say(f"collect: expert episodes of {split}")
            collect(config)

    def datasets(self) -> None:
        from tqdm import tqdm

        from r3.data import schema as S
        from r3.data.build import build_dataset, find_bags

        def bags(split: str, part: str) -> list[Path]:
            found = find_bags([self.path("episodes", split)])
            return [b for b in found if self.scene_part(split, _scene_of(b.name)) == part]

        plan = {
            "sft": ("sft", bags("T_M", "sft")),
            "sft_held_out": ("sft", bags("T_M", "held_out")),
            "rl": ("rl", bags("T_M", "rl") + bags("T_R", "rl")),
            "states": ("rl", bags("T_M", "held_out") + bags("T_R", "held_out")),
        }
        for name, (kind, found) in plan.items():
            out = self.path("datasets", name)
            if (out / S.MANIFEST).is_file():
                continue
            with tqdm(total=len(found), unit="bag", desc=f"build {name}", file=sys.stderr) as bar:
                report = build_dataset(
                    found, out, kind, history="instruction", overwrite=True, on_bag=lambda _: bar.update(1)
                )
            if not report.rows:
                raise MiniError(f"dataset {name}: no rows from {len(found)} bags ({report.skipped})")

    def model_config(self) -> dict:
        """The model section: keyword arguments of ``build_tiny_model`` (checked by name here)."""
        import inspect

        from r3.reasoning.tiny import build_tiny_model, check_sizes

        m = self.cfg["model"]
        try:
            bound = inspect.signature(build_tiny_model).bind("idefics3", self.path("model"), **m)
            bound.apply_defaults()
            a = bound.arguments
            vision = (a["vision_hidden"], a["vision_layers"], a["vision_heads"])
            check_sizes("idefics3", a["hidden"], a["layers"], a["image_size"], vision, a["vocab_size"])
        except (TypeError, ValueError) as err:
            raise MiniError(f"{self.source}: model: {err}") from None
        return m

    def model(self) -> None:
        from r3.reasoning.tiny import build_tiny_model

        out = self.path("model")
        if (out / "r3_tiny.json").is_file():
            return
        m = self.model_config()
        _say(f"model: idefics3 from scratch, {m}")
        try:
            build_tiny_model("idefics3", out, **m)
        except ValueError as err:
            raise MiniError(f"model: {err}") from None

    def pretraining_config(self, stage: str):
        """The sizes of pretraining ``stage`` (vision, grounding); None when its section is null and
        the stage is skipped."""
        values = self.cfg[stage]
        if values is None:
            return None
        if not isinstance(values, dict):
            raise MiniError(f"{self.source}: {stage}: expected a mapping of sizes or null, got {values!r}")
        try:
            return getattr(_pretraining_module(stage), f"{stage.capitalize()}PretrainConfig")(**values)
        except (TypeError, ValueError) as err:
            raise MiniError(f"{self.source}: {stage}: {err}") from None

    def pretrain(self, stage: str) -> None:
        """Run pretraining ``stage`` on the model the stage before it made, unless it is done."""
        module, cfg = _pretraining_module(stage), self.pretraining_config(stage)
        if cfg is None or (self.path(stage) / module.RECORD).is_file():
            return
        _say(f"{stage}: pretraining {PRETRAINING_STAGES[stage]}, {self.cfg[stage]}")
        getattr(module, f"pretrain_{stage}")(self.model_before(stage), self.path(stage), cfg)

    def model_before(self, stage: str) -> Path:
        """The model stage ``stage`` starts from: the last of model, vision, grounding before it whose
        section is not null (Stage I starts from the last of all three)."""
        order = ("model", *PRETRAINING_STAGES)
        earlier = order[: order.index(stage)] if stage in order else order
        return self.path(next(s for s in reversed(earlier) if s == "model" or self.cfg[s] is not None))

    def stage_config(self, stage: str, write: bool = False):
        """The training config of ``stage`` (sft, il, rl), a bad key or value refused with the config
        file's section (il's keys go over sft's, and sft's are checked first); with ``write``, written
        to ``OUT/configs/STAGE.yaml`` and read back by :func:`r3.train.config.load_config`."""
        from r3.train.args import integrations
        from r3.train.config import ConfigError, RLConfig, SFTConfig, config_from, load_config

        values = {**self.cfg["sft"], **self.cfg["il"]} if stage == "il" else dict(self.cfg[stage])
        data = self.path("datasets")
        values.update(output_dir=str(self.path(stage)))
        if stage == "rl":
            values.update(model=str(self.checkpoint("sft")), dataset=str(data / "rl"))
        else:
            values.update(
                model=str(self.model_before(stage)),
                dataset=str(data / "sft"),
                eval_dataset=str(data / "sft_held_out"),
                mode="reason" if stage == "sft" else "instruction_only",
            )
        cls = RLConfig if stage == "rl" else SFTConfig
        config = config_from(values, cls, f"{self.source}: {stage}")
        try:  # a reporter that is not installed: refused now, not when its stage starts after collection
            integrations(config.report_to)
        except ConfigError as exc:
            raise ConfigError(f"{self.source}: {stage}: {exc}") from None
        if not write:
            return config
        path = self.path("configs", f"{stage}.yaml")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(values, sort_keys=False))
        return load_config(path, cls)

    def train(self, stage: str) -> None:
        from r3.reasoning.prompts import PROMPT_FILE

        if (self.checkpoint(stage) / PROMPT_FILE).is_file():  # written last by save_final
            return
        cfg = self.stage_config(stage, write=True)
        job = "rl" if stage == "rl" else "sft"
        _say(f"{stage}: r3 train {job} --config {self.path('configs', stage + '.yaml')}")
        if stage == "rl":
            from r3.train.grpo import run_rl

            run_rl(cfg)
        else:
            from r3.train.sft import run_sft

            run_sft(cfg)

    def states(self) -> None:
        """Every reasoner (and the untrained model, and the SFT model without its grammar constraint)
        on the held-out states: ``OUT/states/NAME.jsonl``, one line per state."""
        specs = {row: self.spec(row) for _, row in ROWS if row != "expert"}
        specs["untrained"] = self.spec("sft").replace(str(self.checkpoint("sft")), str(self.path("model")))
        specs["sft_unconstrained"] = f"{self.spec('sft')},constrained=false"
        for name, spec in specs.items():
            out = self.path("states", f"{name}.jsonl")
            if not out.is_file():
                _say(f"states: {name} answers the held-out states")
                answer_states(spec, self.path("datasets", "states"), out, self.cfg["states"]["rows"])

    def eval_config(self, row: str):
        """The evaluation of a table row's reasoner: an ``EvalConfig``, which checks the values."""
        from r3.eval.runner import EvalConfig, EvalError

        e = self.cfg["eval"]
        try:
            return EvalConfig(
                self.spec(row),
                tasks=eval_tasks(e["tasks"]),
                scenes=e["scenes"],
                trials=e["trials"],
                max_steps=e["max_steps"],
            )
        except EvalError as exc:
            raise MiniError(f"{self.source}: eval: {exc}") from None

    def evaluate(self) -> None:
        from tqdm import tqdm

        from r3.eval.runner import evaluate

        for _, row in ROWS:
            config = self.eval_config(row)
            with tqdm(unit="episode", desc=f"eval {row}", file=sys.stderr) as bar:

                def progress(done: int, total: int, bar=bar) -> None:
                    bar.total, bar.n = total, done
                    bar.refresh()

                evaluate(config, self.path("eval", row), self.cfg["workers"], on_progress=progress)

    def eval_records(self, row: str) -> list[dict]:
        """The episodes of a row's evaluation, as ``r3 eval`` counts them (its grid's); the lines that
        are no episode record are named."""
        from r3.eval.runner import evaluation_records, unread_note

        unread: list[int] = []
        records = evaluation_records(self.path("eval", row), self.eval_config(row), unread)
        if unread:
            _say(f"report: {row}: {unread_note(self.path('eval', row), unread)}")
        return records

    def report(self) -> dict:
        records = {row: self.eval_records(row) for _, row in ROWS}
        states = {
            name: read_states(self.path("states", f"{name}.jsonl"))
            for name in (*(row for _, row in ROWS if row != "expert"), "untrained", "sft_unconstrained")
        }
        rows = [table_row(name, records[row], states.get(row)) for name, row in ROWS]
        differences = judge_differences(states)
        write_text_atomically(
            self.path("table.md"),
            f"{self._header(len(states['sft']))}\n\n{markdown(rows)}\n\n{differences_line(differences)}\n",
        )
        write_text_atomically(self.path("table.csv"), to_csv(rows))
        curves = learning_curves(
            {s: self.checkpoint(s) for s in MODEL_STAGES}, self.path("learning_curves.png")
        )
        success_per_task({name: records[row] for name, row in ROWS}, self.path("success_per_task.png"))
        summary = {
            "rows": rows,
            "held_out_loss": curves,
            "valid_rate_without_constraint": {
                name: _valid_rate(states[name]) for name in ("untrained", "sft_unconstrained")
            },
            "judge_by_split": {name: judge_by_split(answers) for name, answers in states.items()},
            "judge_paired_differences": differences,
        }
        vision = self.path("vision", "r3_vision.json")
        if vision.is_file():  # the held-out block position error before and after pretraining
            summary["vision"] = json.loads(vision.read_text())["held_out_error_cm"]
        grounding = self.path("grounding", "r3_grounding.json")
        if grounding.is_file():  # held-out blocks whose region the model reads, before and after
            record = json.loads(grounding.read_text())
            summary["grounding"] = {
                **record["held_out_blocks_read"],
                "after_with_another_image": record["held_out_blocks_read_with_another_image"],
            }
        write_text_atomically(self.path("summary.json"), json.dumps(summary, indent=1) + "\n")
        return summary

    def _header(self, judged: int) -> str:
        c, e, m = self.cfg["collect"], self.cfg["eval"], self.cfg["model"]
        return (
            f"R^3 in miniature (`r3 mini`, {self.out.name}): a {m['layers']}-layer {m['hidden']}-wide "
            f"idefics3 trained from scratch; Stage I on {c['scenes']} x {c['trials']} expert episodes per "
            f"task of T_M, Stage II on {c['rl_scenes']} x {c['trials']} more per task of T_M and "
            f"{c['scenes']} x {c['trials']} per task of T_R. "
            f"Valid answers over every decision step of the evaluation; judge reward (rubric, 0-1) on "
            f"{judged} held-out states of T_M and T_R; success and progress on "
            f"{e['scenes']} held-out scene(s) x {e['trials']} trial(s) per task, at most {e['max_steps']} "
            f"instructions; 95 % intervals (Wilson for rates, t for means), in points (judge: in reward)."
        )

    def run(self) -> dict:
        start = time.perf_counter()
        self.claim()  # every section was checked on construction
        for stage in MODEL_STAGES:
            self.stage_config(stage, write=True)  # r3 train --config repeats a stage by hand
        self.collect()
        self.datasets()
        self.model()
        for stage in PRETRAINING_STAGES:
            self.pretrain(stage)
        for stage in ("sft", "il", "rl"):
            self.train(stage)
        self.states()
        self.evaluate()
        summary = self.report()
        _say(f"done in {time.perf_counter() - start:.0f} s: {self.path('table.md')}")
        return summary


def _pretraining_module(stage: str):
    import importlib

    return importlib.import_module(f"r3.train.{stage}")


def _scene_of(episode_id: str) -> int:
    """The scene number of a collected episode's id ("group-sc0003-t0-s30" -> 3)."""
    return int(episode_id.split("-sc", 1)[1].split("-", 1)[0])


def eval_tasks(tasks: dict | None) -> tuple[str, ...] | None:
    """The evaluated tasks: per split a list (null: the split's every task); None for every task."""
    from r3.tasks.language_table.tasks import SPLITS as TASK_SPLITS

    if tasks is None:
        return None
    return tuple(t for split in SPLITS for t in (tasks.get(split) or TASK_SPLITS[split]))


#: What the report reads of a held-out state's line (:func:`answer_states`), besides its judge score.
STATE_FIELDS = {"episode_id": str, "split": str, "step": int, "valid": bool}


def read_states(path: Path) -> list[dict]:
    """The held-out states file ``path`` (:func:`answer_states`'); a MiniError naming the first line
    that is no state's answer (a field missing or of another type, a judge score that is no finite
    number or null), or saying that the file holds none."""
    states = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            state = json_value(line)
        except ValueError:
            state = None
        judge = state.get("judge") if isinstance(state, dict) else None
        if not (
            isinstance(state, dict)
            and all(is_kind(state.get(k), t) for k, t in STATE_FIELDS.items())
            and (judge is None or is_kind(judge, float))
        ):
            raise MiniError(
                f"{path}, line {number}: no held-out state's answer ({', '.join(STATE_FIELDS)} and a "
                "judge score, a finite number or null); delete the file to answer the states again"
            )
        states.append(state)
    if not states:
        raise MiniError(f"{path} holds no held-out state; delete it to answer the states again")
    return states


#: Pairs of reasoners whose judge rewards on the same held-out states ``summary.json`` compares.
JUDGE_COMPARISONS = (
    ("sft", "random_valid"),
    ("sft", "random_goal_block"),
    ("rl", "sft"),
    ("sft", "il"),
    ("rl", "il"),
)


def paired_difference(a: list[dict], b: list[dict]):
    """Mean of ``a``'s judge reward minus ``b``'s on the same held-out states, with its paired t
    interval: a sharper test than two separate intervals, since both answered every state."""
    from r3.eval.metrics import mean

    keys_a = [(s["episode_id"], s["step"]) for s in a]
    if keys_a != [(s["episode_id"], s["step"]) for s in b]:
        raise MiniError("paired judge difference: the two states files hold different states")
    return mean(
        x["judge"] - y["judge"] for x, y in zip(a, b) if x["judge"] is not None and y["judge"] is not None
    )


#: Why a pair of answers to one held-out state can be left out of a paired difference.
UNSCORED_WHY = "the judge gave no score to one answer or both (a judge failure, skipped)"


def unscored_pairs(a: list[dict], b: list[dict]) -> dict:
    """How many pairs :func:`paired_difference` leaves out (``left_out``) and why (``left_out_why``,
    present when some are): a pair counts only when both answers have a judge score."""
    left_out = sum(x["judge"] is None or y["judge"] is None for x, y in zip(a, b))
    return {"left_out": left_out} | ({"left_out_why": UNSCORED_WHY} if left_out else {})


def judge_differences(states: dict[str, list[dict]]) -> dict[str, dict]:
    """summary.json's ``judge_paired_differences``: per pair of :data:`JUDGE_COMPARISONS`, the paired
    difference and the pairs it left out (:func:`unscored_pairs`)."""
    return {
        f"{a} - {b}": _est(paired_difference(states[a], states[b])) | unscored_pairs(states[a], states[b])
        for a, b in JUDGE_COMPARISONS
    }


def differences_line(differences: dict[str, dict]) -> str:
    """The paired judge differences as one sentence under the table; each names the pairs it left out."""
    cells = "; ".join(
        f"{pair}: {_cell(e, False)}"
        + (f" ({e['left_out']} pair(s) left out: {UNSCORED_WHY})" if e.get("left_out") else "")
        for pair, e in differences.items()
    )
    return f"Judge reward, paired differences on the same held-out states (95 % t intervals): {cells}."


def judge_by_split(states: list[dict]) -> dict[str, dict]:
    """The mean judge reward per split of the held-out states, with its interval and count."""
    from r3.eval.metrics import mean

    scored = [s for s in states if s["judge"] is not None]
    splits = sorted({s.get("split", "") for s in scored})
    return {split: _est(mean(s["judge"] for s in scored if s.get("split", "") == split)) for split in splits}


def _valid_rate(states: list[dict]) -> float:
    return sum(s["valid"] for s in states) / len(states)


def spread(total: int, limit: int | None) -> list[int]:
    """``limit`` row indices spread evenly over ``range(total)`` (all of them for None or a limit of at
    least ``total``), so a sample of held-out states covers every task, not the first ones.

    >>> spread(10, 4), spread(3, 5), spread(3, None)
    ([0, 3, 6, 9], [0, 1, 2], [0, 1, 2])
    """
    if limit is None or limit >= total:
        return list(range(total))
    return [round(i * (total - 1) / (limit - 1)) for i in range(limit)] if limit > 1 else [0]


def answer_states(spec: str, dataset: Path, out: Path, limit: int | None) -> None:
    """``spec`` answers ``limit`` states of the rl-kind ``dataset`` spread evenly over it (all for
    None); each line of ``out`` holds the answer, whether it parses in the model's mode, and the
    rubric judge's score against the expert."""
    import numpy as np
    from PIL import Image
    from tqdm import tqdm

    from r3.reasoning import make_backend
    from r3.reasoning.parsing import ParsedResponse, parse_response
    from r3.rewards.functions import JudgeReward
    from r3.train.rows import RL_COLUMNS, open_dataset, reasoner_input

    table = open_dataset(dataset, None, RL_COLUMNS)
    table = table.select(spread(len(table), limit))
    backend = make_backend(spec)
    backend.load()
    lines = []
    try:
        for row in tqdm(table, desc=f"states {out.stem}", unit="state", file=sys.stderr):
            images = [np.asarray(Image.open(p).convert("RGB")) for p in row["images"]]
            inp = reasoner_input(row, images=images)
            inp.extra["seed"] = int(row.get("seed") or 0)
            answer = backend.decide(inp)
            mode = backend.prompt_input(inp).mode
            valid = isinstance(
                parse_response(answer.raw_text, inp.suite, mode, answer.finish_reason), ParsedResponse
            )
            lines.append(
                {
                    "episode_id": row["episode_id"],
                    "split": row["split"],
                    "step": row["step"],
                    "answer": answer.raw_text,
                    "valid": valid,
                    "expert": row["expert_instruction"],
                    "snapshot": row["snapshot"],
                }
            )
    finally:
        backend.close()
    judge = JudgeReward()
    scores = judge(
        [line["answer"] for line in lines],
        expert_instruction=[line["expert"] for line in lines],
        suite=["language_table"] * len(lines),
        snapshot=[line["snapshot"] for line in lines],
    )
    judge.judge.simulator.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(
        out, "".join(json.dumps({**line, "judge": score}) + "\n" for line, score in zip(lines, scores))
    )


def table_row(name: str, records: list[dict], states: list[dict] | None) -> dict:
    """One row of the table: valid answers over every decision step, the judge on held-out states,
    success and progress per split; each an (value, low, high) in [0, 1]."""
    from r3.eval.metrics import mean, rate
    from r3.eval.runner import completed, split_of

    done = completed(records)
    for r in done:
        invalid = r.get("invalid_steps")
        if not (is_kind(invalid, int) and 0 <= invalid <= r["decision_steps"]):
            raise MiniError(
                f"{name}: the episode of {r['task']}, scene {r['scene']}, trial {r['trial']} has"
                f" invalid_steps {bounded_repr(invalid)}, not a count of its"
                f" {r['decision_steps']} decision steps"
            )
    steps = [
        flag
        for r in done
        for flag in [True] * (r["decision_steps"] - r["invalid_steps"]) + [False] * r["invalid_steps"]
    ]
    row = {"reasoner": name, "valid": _est(rate(steps))}
    scores = [s["judge"] for s in states or () if s["judge"] is not None]
    row["judge"] = _est(mean(scores)) if scores else None
    for split in SPLITS:
        these = [r for r in done if split_of(r["task"]) == split]  # a record's own "split" is unchecked
        row[f"{split} success"] = _est(rate(r["success"] for r in these))
        row[f"{split} progress"] = _est(mean(r["progress"] for r in these))
    return row


def _est(e) -> dict:
    """An estimate for summary.json: null value and ends over no sample (a NaN, which JSON lacks, and
    a Wilson interval of all [0, 1] that says nothing)."""
    ends = {"value": e.value, "low": e.low, "high": e.high}
    return {k: v if e.n and math.isfinite(v) else None for k, v in ends.items()} | {"n": e.n}


COLUMNS = ("valid", "judge", *(f"{s} {m}" for s in SPLITS for m in ("success", "progress")))


def _cell(e: dict | None, points: bool) -> str:
    from r3.eval.metrics import interval_text

    if e is None or e["n"] == 0:
        return "—"
    scale, digits = (100, 1) if points else (1, 3)
    if e["low"] is None:  # a mean of one value: no interval
        return f"{scale * e['value']:.{digits}f} (n=1)"
    return interval_text(e["value"], e["low"], e["high"], scale=scale, digits=digits)


def markdown(rows: list[dict]) -> str:
    head = [
        "reasoner",
        "valid %",
        "judge reward",
        *(f"{s} {m} %" for s in SPLITS for m in ("success", "progress")),
    ]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    for r in rows:
        lines.append("| " + " | ".join([r["reasoner"], *(_cell(r[c], c != "judge") for c in COLUMNS)]) + " |")
    return "\n".join(lines)


def to_csv(rows: list[dict]) -> str:
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["reasoner", *(f"{c} {k}" for c in COLUMNS for k in ("value", "low", "high", "n"))])
    for r in rows:
        cells = [r["reasoner"]]
        for c in COLUMNS:
            # none, or over no episode (a NaN rate, a Wilson interval of all [0, 1]): empty cells
            e = r[c] if r[c] and r[c]["n"] else {"value": "", "low": "", "high": "", "n": 0}
            cells += [e["value"], e["low"], e["high"], e["n"]]
        writer.writerow(cells)
    return buffer.getvalue()


def training_log(checkpoint: Path) -> list[dict]:
    """The ``log_history`` of a checkpoint's ``r3_train.json``: a MiniError naming the file when it
    does not read as one (a list of objects)."""
    path = checkpoint / "r3_train.json"
    try:
        log = json_value(read_small_text(path)).get("log_history")
    except (OSError, ValueError, AttributeError) as exc:  # AttributeError: JSON that is no object
        raise MiniError(f"{path} does not read as a training record ({exc})") from None
    if not isinstance(log, list) or not all(isinstance(e, dict) for e in log):
        raise MiniError(f"{path} has no log_history (a list of objects)")
    return log


def logged_points(log: list[dict], key: str) -> tuple[list, int]:
    """The [step, value] points of ``key`` in a training log, and how many entries of it were left out
    for a value (or step) that is no finite number.

    >>> logged_points([{"step": 1, "loss": 2.0}, {"step": 2, "loss": float("nan")}, {"loss": "x"}], "loss")
    ([[1, 2.0]], 2)
    """
    entries = [e for e in log if key in e]
    points = [
        [e.get("step", 0), e[key]]
        for e in entries
        if all(is_kind(v, float) for v in (e[key], e.get("step", 0)))
    ]
    return points, len(entries) - len(points)


def learning_curves(checkpoints: dict[str, Path], path: Path) -> dict[str, list]:
    """Training loss and held-out loss of the SFT stages, reward of the RL stage, from each checkpoint's
    ``r3_train.json``; returns the held-out loss as [step, loss] points per SFT stage. Logged values
    that are no finite number are left out and counted (said, and written on the plot); a panel with
    no curve says so."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    logs = {s: training_log(c) for s, c in checkpoints.items()}
    left_out = {}

    def series(stage: str, key: str) -> list:
        points, dropped = logged_points(logs[stage], key)
        if dropped:
            left_out[f"{stage} {key}"] = dropped
        return points

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.4), dpi=120)
    held_out = {}
    for stage in ("sft", "il"):
        for key, style in (("loss", "-"), ("eval_loss", "o--")):
            points = series(stage, key)
            if points:
                ax1.plot(
                    *zip(*points), style, label=f"{stage} {'held-out' if key == 'eval_loss' else 'train'}"
                )
        held_out[stage] = series(stage, "eval_loss")
    for key in ("rewards/judge/mean", "reward"):
        points = series("rl", key)
        if points:
            ax2.plot(*zip(*points), label=key)
    for ax, title, what in ((ax1, "Stage I", "loss"), (ax2, "Stage II (Dr. GRPO)", "reward")):
        ax.set_xlabel("step")
        ax.set_ylabel(what)
        ax.set_title(title, fontsize=9)
        if ax.lines:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, f"no {what} logged", transform=ax.transAxes, ha="center", va="center")
    if left_out:
        note = "left out, no finite number: " + ", ".join(f"{n} {k}" for k, n in left_out.items())
        _say(f"report: learning curves: {note}")
        fig.text(0.01, 0.01, note, fontsize=6)
    fig.tight_layout()
    save_figure(fig, path)
    return held_out


def success_per_task(records: dict[str, list[dict]], path: Path) -> Path:
    """Grouped bars: success per task for every reasoner; a reasoner with no finished episode of a task
    has its place marked (:data:`r3.eval.plots.NO_EPISODES`), not a bar of 0 % or none."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from r3.eval.metrics import rate
    from r3.eval.plots import NO_EPISODES
    from r3.eval.runner import completed

    tasks = list(dict.fromkeys(r["task"] for rs in records.values() for r in completed(rs)))
    width = 0.8 / max(1, len(records))
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(tasks) + 2), 3.6), dpi=120)
    for i, (name, rs) in enumerate(records.items()):
        rates = [rate(r["success"] for r in completed(rs) if r["task"] == t) for t in tasks]
        places = [k + i * width for k in range(len(tasks))]
        ax.bar(places, [100 * e.value if e.n else 0.0 for e in rates], width, label=name)
        for place, e in zip(places, rates):
            if not e.n:
                ax.text(place, 2, NO_EPISODES, rotation=90, ha="center", va="bottom", fontsize=5)
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(tasks))], tasks, rotation=45, ha="right")
    ax.set_ylabel("success %")
    ax.set_ylim(0, 110)
    ax.legend(fontsize=6, ncol=3)
    fig.tight_layout()
    save_figure(fig, path)
    return path


def mini_main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="r3 mini",
        description="The whole R^3 recipe at laptop scale on CPU: collect expert episodes (T_M for SFT, "
        "T_R for RL),"
        " build datasets, build a small VLM from scratch and pretrain its image tower on the simulator's"
        " block positions and its language model on where named blocks are, Stage I SFT with reasoning "
        "and the instruction-only imitation baseline, Stage II Dr. GRPO with the rubric judge, then the "
        "judge reward on held-out states and r3 eval of every model and baseline on held-out scenes of "
        "T_M, T_R and T_O, written as a table in the form of R^3's Table 2 (table.md, table.csv) with "
        "learning curves and success per task (PNG). Resumable: a stage whose output is complete is "
        "skipped.",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="toy sizes (config/mini/quick.yaml, a few minutes; what CI runs) instead of the full run",
    )
    p.add_argument(
        "--config",
        type=checked_path,
        default=None,
        help="stage sizes (default: config/mini/full.yaml, with --quick config/mini/quick.yaml)",
    )
    p.add_argument(
        "--out",
        type=folder,
        default=None,
        help="output folder, new or empty or an earlier run's, which is continued (default: runs/mini, "
        "with --quick runs/mini_quick)",
    )
    p.add_argument("--workers", type=integer(1), default=None, help="worker processes (default: config's)")
    args = p.parse_args(argv)
    from r3.eval.runner import EvalError
    from r3.train.config import ConfigError
    from r3.train.rows import DatasetError

    config = Path(args.config) if args.config else CONFIGS / ("quick.yaml" if args.quick else "full.yaml")
    out = args.out or Path("runs") / ("mini_quick" if args.quick else "mini")
    try:
        cfg = load_mini_config(config)
        if args.workers is not None:
            cfg["workers"] = args.workers
        summary = MiniRun(out, cfg, config).run()
    except (MiniError, ConfigError, DatasetError, EvalError, ValueError) as exc:
        print(f"r3 mini: {exc}", file=sys.stderr)
        return 2
    print(out.joinpath("table.md").read_text())
    print(json.dumps({k: summary[k] for k in ("held_out_loss", "valid_rate_without_constraint")}))
    return 0
