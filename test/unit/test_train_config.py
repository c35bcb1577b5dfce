"""Training configs: the paper's values reach TRL, and bad configs fail before any model loads."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from r3.train.args import grpo_arguments, sft_arguments
from r3.train.config import ConfigError, ImputeConfig, RLConfig, SFTConfig, load_config

CONFIGS = Path(__file__).resolve().parents[2] / "config" / "train"


def test_sft_config_reproduces_table_8():
    cfg = load_config(CONFIGS / "sft_language_table.yaml", SFTConfig)
    args = sft_arguments(cfg, world=8, cuda=True)
    assert args["learning_rate"] == 1e-6 and args["num_train_epochs"] == 2
    assert args["lr_scheduler_type"] == "cosine" and args["warmup_steps"] == 0.1
    assert args["per_device_train_batch_size"] * 8 * args["gradient_accumulation_steps"] == 128
    assert args["bf16"] is True and args["completion_only_loss"] is True and cfg.lora is None
    assert sft_arguments(cfg, world=1, cuda=False)["bf16"] is False  # bf16 on GPU only


@pytest.mark.parametrize("world", [1, 8])
def test_rl_config_reproduces_table_9_with_dr_grpo(world):
    cfg = load_config(CONFIGS / "rl_language_table.yaml", RLConfig)
    args = grpo_arguments(cfg, world=world, cuda=True, reward_weights=[1.0, 1.0, 0.0])
    expected = {
        "loss_type": "dr_grpo",
        "scale_rewards": "none",
        "beta": 0.0,
        "epsilon": 0.2,
        "epsilon_high": 0.3,
        "num_generations": 12,
        "temperature": 1.0,
        "max_completion_length": 1024,
        "learning_rate": 2e-6,
        "num_train_epochs": 4,
        "importance_sampling_level": "token",
        "num_iterations": 1,
    }
    assert {k: args[k] for k in expected} == expected
    assert args["per_device_train_batch_size"] * world * args["gradient_accumulation_steps"] == 32 * 12
    assert cfg.rewards == {"judge": 1.0, "length": 1.0} and cfg.length_target_words == 80


def test_the_values_are_valid_trl_arguments(tmp_path):
    from trl import GRPOConfig
    from trl import SFTConfig as TRLSFTConfig

    over = {"output_dir": str(tmp_path)}
    sft = load_config(CONFIGS / "sft_language_table.yaml", SFTConfig, over)
    assert TRLSFTConfig(**sft_arguments(sft, 1, cuda=False)).completion_only_loss is True
    rl = load_config(CONFIGS / "rl_language_table.yaml", RLConfig, over)
    trl = GRPOConfig(**grpo_arguments(rl, 1, cuda=False, reward_weights=[1.0, 1.0, 0.0]))
    assert (
        trl.loss_type,
        trl.scale_rewards,
        trl.beta,
        trl.epsilon,
        trl.epsilon_high,
        trl.num_generations,
    ) == ("dr_grpo", "none", 0.0, 0.2, 0.3, 12)
    assert trl.generation_batch_size == 384 and trl.steps_per_generation == trl.gradient_accumulation_steps


def test_gspo_preset_uses_sequence_level_ratios():
    cfg = load_config(CONFIGS / "rl_language_table_gspo.yaml", RLConfig)
    args = grpo_arguments(cfg, world=8, cuda=True, reward_weights=[1.0, 1.0, 0.0])
    assert args["importance_sampling_level"] == "sequence" and args["beta"] == 0.0
    assert (args["epsilon"], args["epsilon_high"]) == (3e-4, 4e-4)


def test_every_shipped_config_loads():
    jobs = {"sft": SFTConfig, "rl": RLConfig, "impute": ImputeConfig}
    paths = sorted(CONFIGS.glob("*.yaml"))
    loaded = {path.name: load_config(path, jobs[path.name.split("_")[0]]) for path in paths}
    assert {name.split("_")[0] for name in loaded} == set(jobs), sorted(loaded)  # each job ships a config
    for name, cfg in loaded.items():
        assert isinstance(cfg, jobs[name.split("_")[0]]), name


def _write(tmp_path, values) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


BASE = {"model": "m", "dataset": "d", "output_dir": "o"}
IMPUTE = {"backend": "expert", "dataset": "d", "output": "o.jsonl"}


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({**BASE, "learning_rte": 1e-6}, "learning_rte"),
        ({**BASE, "loss_type": "ppo"}, "loss_type='ppo'"),
        ({**BASE, "num_generations": 1}, "num_generations=1"),
        ({**BASE, "epsilon": "0.2"}, "epsilon='0.2'"),
        ({**BASE, "rewards": {"judge": 1.0, "format": 0.2}}, "format"),
        ({**BASE, "lora": {"rank": 8}}, "rank"),
        ({**BASE, "use_vllm": True, "vllm_mode": "server"}, "vllm_server_base_url"),
        ({"dataset": "d", "output_dir": "o"}, "model: required"),
        # Found by a hostile user: each passed --check and ended the run in a traceback.
        ({**BASE, "seed": -1}, "seed=-1: must be in [0, 2**32)"),
        (
            {**BASE, "inference_temperature": -3},
            "inference_temperature=-3.0: must be a finite number in [0, 10]",
        ),
        (
            {**BASE, "inference_temperature": 11},
            "inference_temperature=11.0: must be a finite number in [0, 10]",
        ),
        ({**BASE, "inference_temperature": 10**400}, "inference_temperature=inf: expected a finite number"),
        ({**BASE, "rewards": {"judge": float("nan")}}, "rewards.judge='.nan': must be a finite number"),
        ({**BASE, "lora": {"target_modules": [1, 2]}}, "lora.target_modules=[1, 2]: must name modules"),
        # Found by a hostile user: each passed --check, and failed in TRL or trained on nothing.
        ({**BASE, "save_total_limit": 0}, "save_total_limit=0: must be >= 1"),
        ({**BASE, "save_total_limit": -5}, "save_total_limit=-5: must be >= 1"),
        ({**BASE, "report_to": [[1]]}, "report_to=[[1]]: expected a list of integrations"),
        ({**BASE, "vllm_tensor_parallel_size": 0}, "vllm_tensor_parallel_size=0: must be >= 1"),
        ({**BASE, "ray_address": "nonsense"}, "Ray address 'nonsense': expected local, auto"),
        ({**BASE, "rewards": {"judge": 0, "length": 0}}, "rewards: every weight is 0"),
    ],
)
def test_bad_rl_config_names_the_problem(tmp_path, values, named):
    with pytest.raises(ConfigError, match=None) as err:
        load_config(_write(tmp_path, values), RLConfig)
    assert named in str(err.value)


@pytest.mark.parametrize("job", [RLConfig, ImputeConfig])
@pytest.mark.parametrize("temperature", [0, 11, 1e30])
def test_a_sampling_job_takes_only_a_reasoners_sampling_temperature(tmp_path, job, temperature):
    """Found by a hostile tester: RL rollouts and imputation took ``temperature: 1e30`` (any
    number above 0), where every other sampling temperature r3 takes is in [0, 10]."""
    values = {**(BASE if job is RLConfig else IMPUTE), "temperature": temperature}
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, values), job)
    assert f"temperature={float(temperature)}: must be a finite number in (0, 10]" in str(err.value)


@pytest.mark.parametrize("key", ["mode", "rewards.judge", "lora.target_modules"])
def test_a_config_of_nested_aliases_is_refused_without_expanding_them(tmp_path, key):
    """A few hundred bytes of nested YAML aliases make a list of billions of items: the refusal
    quoting it built its whole repr (tens of gigabytes here) before cutting it, or did not cut it."""
    bomb = ["x"] * 9
    for _ in range(9):
        bomb = [bomb] * 9
    section, _, name = key.rpartition(".")
    values = {**BASE, section: {name: bomb}} if section else {**BASE, name: bomb}
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, values), RLConfig)
    assert f"{key}=[[[[...], [...]" in str(err.value) and len(str(err.value)) < 400


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("output_dir", "out\0put", "output_dir='out\\x00put'"),
        ("dataset", "d\x1b[2J", "dataset='d\\x1b[2J'"),
        ("splits", ["T_M\u202e"], "splits=['T_M\\u202e']"),
    ],
)
def test_a_control_character_in_a_config_text_is_refused_naming_the_key(tmp_path, key, value, shown):
    """Found by a hostile user: ``output_dir: "out\\0put"`` passed the config's checks and ended
    ``r3 train sft`` in a "ValueError: embedded null byte" traceback."""
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, {**BASE, key: value}), SFTConfig)
    assert f"{shown}: holds the control character U+" in str(err.value)


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("model", "m\tx", "model: 'm\\tx' holds the control character U+0009 at 1"),
        ("dataset", "d\nx", "dataset: 'd\\nx' holds the control character U+000A at 1"),
        (
            "output_dir",
            "runs/a\u200bb",
            "output_dir: 'runs/a\\u200bb' holds the control character U+200B at 6",
        ),
        ("output_dir", "o" * 300, "is 300 bytes long; at most 255"),
    ],
)
def test_a_path_in_a_config_is_refused_as_a_commands_path_is(tmp_path, key, value, says):
    """Found by trying the training configs' paths: a tab, newline or zero-width space passed (a text
    may hold the first two), and a model folder named with a newline was refused later by a "not found"
    line split in two."""
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, {**BASE, key: value}), SFTConfig)
    assert says in str(err.value)


def test_a_whole_number_for_a_float_setting_is_a_float(tmp_path):
    """Found by a hostile user: ``inference_temperature: 2`` (or the rollouts' ``temperature: 2``)
    passed --check and stayed an int, which transformers' sampling refuses ("has to be a strictly
    positive float") at the first generation: the rl run, and every later use of the checkpoint."""
    config = load_config(_write(tmp_path, {**BASE, "temperature": 2, "inference_temperature": 2}), RLConfig)
    assert type(config.temperature) is float and type(config.inference_temperature) is float
    assert config.temperature == config.inference_temperature == 2.0


def test_global_batch_must_split_over_gpus():
    cfg = SFTConfig(**BASE, global_batch_size=128, per_device_train_batch_size=3)
    with pytest.raises(ConfigError, match="global_batch_size=128"):
        sft_arguments(cfg, world=8, cuda=True)


def test_the_shipped_cpu_config_trains_on_every_row():
    """Test-only limits (the 4 rows a smoke test overfits) belong to the test, not to the config a user
    copies."""
    assert load_config(CONFIGS / "sft_tiny_cpu.yaml", SFTConfig).max_rows is None


def test_rewards_default_to_the_papers_terms_and_the_simulated_terms_are_opt_in(tmp_path):
    from r3.train.grpo import instruction_reward_terms

    assert load_config(_write(tmp_path, BASE), RLConfig).rewards == {"judge": 1.0, "length": 1.0}
    chosen = {"judge": 1.0, "length": 1.0, "outcome": 0.5, "progress": 2.0}
    cfg = load_config(_write(tmp_path, {**BASE, "rewards": chosen}), RLConfig)
    assert cfg.rewards == chosen
    terms = instruction_reward_terms(cfg).terms
    assert terms["outcome"].judge is terms["judge"].judge is terms["progress"].judge  # one simulator
    semantic = load_config(_write(tmp_path, {**BASE, "interface": "semantic", "sim_workers": 0}), RLConfig)
    assert "outcome" not in semantic.rewards  # ERR's turn terms (its own "progress": the turn's gain)


def test_report_to_names_an_integration_that_is_installed():
    """Found by a hostile user: ``report_to: [foo]`` (or an integration not installed, such as
    wandb) passed ``--check`` and ended ``r3 train sft`` in a traceback from the trainer."""
    from transformers.integrations import get_available_reporting_integrations
    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK

    with pytest.raises(ConfigError, match="report_to: 'foo' is no integration transformers knows: azure_ml"):
        sft_arguments(SFTConfig(**BASE, report_to=["foo"]), world=1, cuda=False)
    missing = min(set(INTEGRATION_TO_CALLBACK) - set(get_available_reporting_integrations()))
    with pytest.raises(ConfigError, match=f"report_to: '{missing}' is not installed here"):
        sft_arguments(SFTConfig(**BASE, report_to=[missing]), world=1, cuda=False)
    assert sft_arguments(SFTConfig(**BASE, report_to=["all"]), world=1, cuda=False)["report_to"] == ["all"]
