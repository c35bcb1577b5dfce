"""Training end to end on a tiny random idefics3 model over a small collected dataset (CPU).

idefics3 is the tiny arch that runs fully here: the Qwen archs' processors need torchvision,
which this machine lacks. The SFT test trains long enough for the model to learn its few training
rows, so the reloaded checkpoint answers a training prompt with a valid step; the RL tests start
from the random model and assert the pipeline (rewards logged, checkpoints reload, a learnable toy
reward rises), never quality.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from transformers import AutoTokenizer

from r3.reasoning import ParsedResponse, decide, make_backend, parse_response
from r3.reasoning.prompts import PromptSettings, prompt_text
from r3.reasoning.tiny import build_tiny_model
from r3.rewards.functions import RewardComposer
from r3.train.cli import train_main
from r3.train.config import RLConfig, SFTConfig, load_config
from r3.train.rows import open_dataset, reasoner_input, shorten_reasoning

pytestmark = pytest.mark.slow

CONFIGS = Path(__file__).resolve().parents[2] / "config" / "train"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Three expert episodes (64x64 images) built into an sft and an rl dataset, plus a tiny model."""
    from r3.data.build import build_dataset, find_bags
    from r3.data.collect import CollectConfig, plan, run_one

    root = tmp_path_factory.mktemp("train")
    collect = CollectConfig(out=str(root / "bags"), scenes=1, trials=1, width=64, height=64, max_steps=6)
    for spec in plan(collect)[:3]:
        run_one(spec, collect)
    bags = find_bags([root / "bags"])
    build_dataset(bags, root / "sft", "sft")
    build_dataset(bags, root / "rl", "rl")
    return {"root": root, "model": build_tiny_model("idefics3", root / "tiny", seed=0)}


def _losses(checkpoint: Path, key: str) -> list[float]:
    history = json.loads((checkpoint / "r3_train.json").read_text())["log_history"]
    return [h[key] for h in history if key in h]


def _decide(checkpoint: Path, dataset: Path, max_new_tokens: int = 16):
    """Greedy decision of the checkpoint on the dataset's first row (with its real images)."""
    row = open_dataset(dataset, None, ("images",))[0]
    images = [np.asarray(Image.open(p).convert("RGB")) for p in row["images"]]
    backend = make_backend(f"transformers:{checkpoint}", max_new_tokens=max_new_tokens, temperature=0)
    backend.load()
    try:
        return decide(backend, reasoner_input(row, images=images))
    finally:
        backend.close()


def _train_argv(job: str, dataset, model, output_dir, *sets: str) -> list[str]:
    """``r3 train JOB`` on the tiny CPU config with these paths and ``--set`` pairs."""
    argv = [job, "--config", str(CONFIGS / f"{job}_tiny_cpu.yaml")]
    for pair in (f"dataset={dataset}", f"model={model}", f"output_dir={output_dir}", *sets):
        argv += ["--set", pair]
    return argv


def test_sft_loss_falls_and_the_checkpoint_answers_a_valid_step(data):
    """SFT on 4 collected expert rows (last reasoning sentence + instruction, 60 steps at 5e-3);
    the checkpoint, reloaded by the reasoner backend, answers the first row with the expert's step."""
    from r3.train.sft import run_sft

    over = {
        "model": str(data["model"]),
        "dataset": str(data["root"] / "sft"),
        "output_dir": str(data["root"] / "sft_out"),
        "max_rows": 4,
    }
    cfg = load_config(CONFIGS / "sft_tiny_cpu.yaml", SFTConfig, over)
    checkpoint = run_sft(cfg)
    losses = _losses(checkpoint, "loss")
    print(f"\nSFT loss: first {losses[0]:.3f}, last {losses[-1]:.3f} over {len(losses)} steps")
    assert len(losses) == cfg.max_steps and losses[-1] < 0.3 and losses[-1] < losses[0] - 3, losses

    step = _decide(checkpoint, data["root"] / "sft", max_new_tokens=96)
    print(f"decoded step: {step.output.raw_text!r}")
    assert step.output.finish_reason == "stop", step.output
    assert isinstance(step.parsed, ParsedResponse), step.parsed
    row = open_dataset(data["root"] / "sft", None, ("response",))[0]
    expert = parse_response(
        shorten_reasoning(row["response"], row["suite"], cfg.reasoning_sentences), row["suite"]
    )
    assert step.parsed.instruction_text == expert.instruction_text, (step.parsed, expert)


def test_reasoning_regions_open_each_reasoning_with_where_the_goal_blocks_are(data):
    """``reasoning_regions``: each Stage I answer's reasoning opens with the board region of every
    block its goal names, in the goal's order, read from the row's snapshot; the rest of the answer
    is unchanged, and the instruction-only baseline's targets get no sentence."""
    from r3.sim.language_table.env import LanguageTableEnv
    from r3.tasks.language_table.board import BLOCKS, region_name
    from r3.train.sft import prepare_sft

    over = {"model": str(data["model"]), "dataset": str(data["root"] / "sft"), "output_dir": "unused"}
    plain = load_config(CONFIGS / "sft_tiny_cpu.yaml", SFTConfig, over)
    regions = load_config(CONFIGS / "sft_tiny_cpu.yaml", SFTConfig, {**over, "reasoning_regions": True})
    sources = open_dataset(plain.dataset, None, ("goal", "snapshot"))
    env = LanguageTableEnv(task=None, render_mode=None)
    checked = 0
    for before, after, source in zip(prepare_sft(plain)[0], prepare_sft(regions)[0], sources):
        old, new = (r["completion"][0]["content"][0]["text"] for r in (before, after))
        named = sorted((source["goal"].find(b), b) for b in BLOCKS if b in source["goal"])
        if not named:
            assert new == old
            continue
        env.restore(Path(source["snapshot"]).read_bytes())
        where = ", ".join(f"the {b} {region_name(env.state().xy(b))}" for _, b in named)
        assert new == old.replace("Reasoning: ", f"Reasoning: Where they are: {where}. ", 1), (new, old)
        checked += 1
    env.close()
    assert checked >= 3
    baseline = {**over, "reasoning_regions": True, "mode": "instruction_only"}
    rows = prepare_sft(load_config(CONFIGS / "sft_tiny_cpu.yaml", SFTConfig, baseline))[0]
    assert all(r["completion"][0]["content"][0]["text"].startswith("Instruction: ") for r in rows)


def test_freeze_vision_keeps_the_image_tower_as_loaded_and_trains_the_rest(data):
    """``freeze_vision``: after SFT steps the vision tower's weights are those of the base model, and
    the connector and language model have moved."""
    from safetensors.torch import load_file

    from r3.train.sft import run_sft

    over = {
        "model": str(data["model"]),
        "dataset": str(data["root"] / "sft"),
        "output_dir": str(data["root"] / "frozen"),
        "max_rows": 4,
        "max_steps": 3,
        "freeze_vision": True,
    }
    checkpoint = run_sft(load_config(CONFIGS / "sft_tiny_cpu.yaml", SFTConfig, over))
    before = load_file(data["model"] / "model.safetensors")
    after = load_file(checkpoint / "model.safetensors")
    tower = [k for k in before if ".vision_model." in k]
    assert tower and all((before[k] == after[k]).all() for k in tower)
    rest = [k for k in before if ".vision_model." not in k]
    assert any((before[k] != after[k]).any() for k in rest if ".connector." in k)
    assert any((before[k] != after[k]).any() for k in rest if ".text_model." in k)


def test_instruction_only_checkpoint_trains_on_and_is_prompted_with_the_instruction_alone(data):
    """R^3's imitation baseline: the target is "Instruction: ..." alone, and the reloaded checkpoint is
    prompted in instruction-only mode by the backend, though its caller asks for the default reasoning."""
    from r3.train.sft import prepare_sft, run_sft

    over = {
        "model": str(data["model"]),
        "dataset": str(data["root"] / "sft"),
        "output_dir": str(data["root"] / "il"),
        "mode": "instruction_only",
        "max_rows": 4,
        "max_steps": 2,
    }
    cfg = load_config(CONFIGS / "sft_tiny_cpu.yaml", SFTConfig, over)
    rows, _, _ = prepare_sft(cfg)
    tokenizer = AutoTokenizer.from_pretrained(data["model"])
    for row, source in zip(rows, open_dataset(cfg.dataset, None, ("instruction",), 4)):
        target = row["completion"][0]["content"][0]["text"]
        assert target == f"Instruction: {source['instruction']}" and len(tokenizer(target).input_ids) < 32
    checkpoint = run_sft(cfg)
    assert PromptSettings.load(checkpoint) == PromptSettings("instruction_only", "response", False)

    row = open_dataset(cfg.dataset, None, ("images",))[1]  # step 1: a previous response to show
    images = [np.asarray(Image.open(p).convert("RGB")) for p in row["images"]]
    asked = reasoner_input(row, images=images)
    assert asked.mode == "reason" and "Reasoning:" in asked.history_text
    backend = make_backend(f"transformers:{checkpoint}", max_new_tokens=4, temperature=0)
    backend.load()
    prompts = []
    generate = backend._generate
    backend._generate = lambda messages, *rest: (
        prompts.append(messages[0]["content"][-1]["text"]) or generate(messages, *rest)
    )
    try:
        decide(backend, asked)
    finally:
        backend.close()
    expected = prompt_text(reasoner_input(row, PromptSettings("instruction_only", "response"), images))
    assert prompts == [expected] and "Answer with this single line and nothing else." in expected
    assert "Reasoning:" not in expected


def test_grpo_with_the_real_rewards_logs_every_term_and_saves(data):
    from r3.train.grpo import run_rl

    over = {
        "model": str(data["model"]),
        "dataset": str(data["root"] / "rl"),
        "output_dir": str(data["root"] / "rl_out"),
    }
    checkpoint = run_rl(load_config(CONFIGS / "rl_tiny_cpu.yaml", RLConfig, over))
    history = json.loads((checkpoint / "r3_train.json").read_text())["log_history"]
    logged = set().union(*history)
    for key in (
        "rewards/judge/mean",
        "rewards/length/mean",
        "reward",
        "completions/mean_length",
        "response/words",
        "response/valid_fraction",
        "response/repeated_instruction_fraction",
    ):
        assert key in logged, key
    assert sum("loss" in h for h in history) == 3
    assert (checkpoint / "model.safetensors").is_file() and (checkpoint / "chat_template.jinja").is_file()
    assert _decide(checkpoint, data["root"] / "rl").output.model_id == str(checkpoint)


class LowIdShare:
    """Toy reward a random model can learn fast: the share of completion tokens with id < ``limit``."""

    def __init__(self, limit: int):
        self.limit, self.__name__ = limit, "low_ids"

    def __call__(self, completions, completion_ids, **kwargs):
        return [sum(i < self.limit for i in ids) / max(len(ids), 1) for ids in completion_ids]


def test_grpo_raises_a_learnable_toy_reward(data):
    from r3.train.grpo import run_rl

    over = {
        "model": str(data["model"]),
        "dataset": str(data["root"] / "rl"),
        "output_dir": str(data["root"] / "toy"),
        "max_steps": 8,
        "learning_rate": 0.05,
        "max_rows": 4,
    }
    cfg = load_config(CONFIGS / "rl_tiny_cpu.yaml", RLConfig, over)
    checkpoint = run_rl(cfg, RewardComposer({"low_ids": LowIdShare(128)}, {"low_ids": 1.0}))
    rewards = _losses(checkpoint, "reward")
    assert np.mean(rewards[-3:]) > np.mean(rewards[:3]) + 0.05, rewards


@pytest.mark.parametrize(
    ("job", "dataset", "extra", "named"),
    [
        ("sft", "missing", [], "not an r3 dataset"),
        ("sft", "rl", [], "missing column(s) ['response']"),
        ("rl", "rl", ["splits=[T_O]"], "no rows in split(s) ['T_O']"),
        ("rl", "rl", ["lerning_rate=1"], "unknown key(s) ['lerning_rate']"),
    ],
)
def test_bad_config_fails_before_any_model_loads(data, monkeypatch, capsys, job, dataset, extra, named):
    def no_model(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(f"r3.train.{'sft' if job == 'sft' else 'grpo'}.load_model", no_model)
    argv = _train_argv(job, data["root"] / dataset, data["model"], data["root"] / "bad", *extra)
    assert train_main(argv) == 2
    assert named in capsys.readouterr().err


def _broken(model: Path, folder: Path, how: str) -> Path:
    import shutil

    shutil.copytree(model, folder)
    if how == "no chat template":
        (folder / "chat_template.jinja").unlink()
    elif how == "a template that does not compile":
        (folder / "chat_template.jinja").write_text("{% for x in %}")
    elif how == "a template that raises":
        (folder / "chat_template.jinja").write_text("{{ raise_exception('this template refuses') }}")
    elif how == "no tokenizer":
        (folder / "tokenizer.json").unlink()
    elif how == "a config that is no JSON":
        (folder / "config.json").write_text("garbage")
    elif how == "torn weights":
        (folder / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes()[:1000])
    elif how == "more layers than its weights":
        config = json.loads((folder / "config.json").read_text())
        config["text_config"]["num_hidden_layers"] = 40
        (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("no chat template", "does not have a chat template"),
        ("a template that does not compile", "TemplateSyntaxError"),
        ("a template that raises", "this template refuses"),
        ("no tokenizer", "ValueError: Couldn't instantiate the backend tokenizer"),
        ("a config that is no JSON", "JSONDecodeError"),
        ("torn weights", "SafetensorError"),
        ("more layers than its weights", "config.json declares 342 weight(s) that the checkpoint lacks"),
    ],
)
def test_a_broken_model_folder_is_refused_in_one_line_by_training_and_by_the_reasoner(
    data, capsys, how, says
):
    """Found by a hostile user: ``r3 train sft`` with such a folder as ``model`` ended in a traceback
    (the chat template's only in the first training step, after the output folder was made), and
    the reasoner loaded a folder without a working chat template and failed at its first decision.
    A config.json of more layers than the weights hold trained and reasoned with the rest random."""
    from r3.reasoning.backends.base import BackendError

    folder = _broken(data["model"], data["root"] / f"broken {how}", how)
    out = data["root"] / f"out {how}"
    assert train_main(_train_argv("sft", data["root"] / "sft", folder, out)) == 2
    err = capsys.readouterr().err
    refusal = err.strip().splitlines()[-1]  # after the datasets' progress bars
    assert refusal.startswith("r3 train sft: model: ") and says in refusal and "Traceback" not in err, err
    assert not (out / "final").exists()
    if how in ("no chat template", "a template that does not compile", "a template that raises"):
        with pytest.raises(BackendError, match=f"the chat template of .* fails: .*{says}"):
            make_backend(f"transformers:{folder},device=cpu").load()
    if how == "more layers than its weights":  # loaded as a model of 38 random layers
        with pytest.raises(BackendError, match=re.escape(says)):
            make_backend(f"transformers:{folder},device=cpu").load()


def test_a_lora_run_exported_later_keeps_how_it_wants_to_be_prompted(data, capsys):
    """Found by a hostile user: ``r3 train export`` of a ``lora.merge: false`` run wrote the merged
    weights without the run's r3_prompt.json, so the reasoner prompted an instruction-only,
    constrained, greedy checkpoint as an untrained model (reasoning mode, no constraint,
    temperature 1). An adapter of another base was a RuntimeError traceback. Found by a first-time
    user: so did the export of an intermediate ``checkpoint-N``, docs/training.md's own example,
    since only ``final`` held the run's r3_prompt.json."""
    out = data["root"] / "lora"
    argv = _train_argv(
        "sft",
        data["root"] / "sft",
        data["model"],
        out,
        "max_steps=2",
        "save_steps=1",
        "mode=instruction_only",
        "constrained_decoding=true",
        "inference_temperature=0",
        "lora={r: 2, alpha: 4, merge: false}",
    )
    assert train_main(argv) == 0, capsys.readouterr().err
    adapter = out / "final"
    assert (adapter / "adapter_config.json").is_file()
    merged = data["root"] / "lora merged"
    assert (
        train_main(["export", "--adapter", str(adapter), "--base", str(data["model"]), "--out", str(merged)])
        == 0
    )
    assert PromptSettings.load(merged) == PromptSettings.load(adapter)
    early = data["root"] / "lora checkpoint-1 merged"
    intermediate = ["--adapter", str(out / "checkpoint-1"), "--base", str(data["model"])]
    assert train_main(["export", *intermediate, "--out", str(early)]) == 0
    assert PromptSettings.load(early) == PromptSettings.load(adapter)
    assert PromptSettings.load(merged) == PromptSettings(
        "instruction_only", "response", constrained=True, temperature=0.0
    )
    assert json.loads((merged / "r3_train.json").read_text()) == json.loads(
        (adapter / "r3_train.json").read_text()
    )
    backend = make_backend(f"transformers:{merged},device=cpu")
    backend.load()
    assert backend.prompt == PromptSettings.load(adapter)

    other = build_tiny_model("idefics3", data["root"] / "wider base", hidden=128, seed=0)
    wrong = data["root"] / "lora on another base"
    capsys.readouterr()
    assert train_main(["export", "--adapter", str(adapter), "--base", str(other), "--out", str(wrong)]) == 2
    err = capsys.readouterr().err
    assert "r3 train export: cannot merge" in err and "RuntimeError" in err and "Traceback" not in err, err


@pytest.mark.parametrize("job, dataset", [("sft", "sft"), ("rl", "rl")])
def test_a_dataset_missing_an_image_fails_the_check_not_the_run(data, tmp_path, capsys, job, dataset):
    """Found by a hostile user: ``r3 train sft --check`` passed on a dataset with one episode's
    images deleted; the run then failed at that row's step with FileNotFoundError, after the model
    had loaded and the output folder was made."""
    import shutil

    copy = tmp_path / "dataset"
    shutil.copytree(data["root"] / dataset, copy)
    shutil.rmtree(next((copy / "images").iterdir()))
    assert train_main([*_train_argv(job, copy, data["model"], tmp_path / "o"), "--check"]) == 2
    err = capsys.readouterr().err
    assert "images files are not there, e.g. " in err and "Traceback" not in err, err
    assert not (tmp_path / "o").exists()
