"""Turn-level GSPO end to end on a tiny random idefics3 model over stored semantic expert episodes (CPU).

As in test_train_tiny, the model starts random: the tests assert the pipeline (every turn term logged,
groups that share a snapshot, a checkpoint the reasoner backend loads, a learnable toy reward that
rises), never quality.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from r3.data.turns import load_episodes, record_packing_episode
from r3.episode_loop import BLANK_IMAGE
from r3.reasoning import make_backend
from r3.reasoning.prompts import PromptSettings, ReasonerInput
from r3.reasoning.reasoner import decide
from r3.reasoning.tiny import build_tiny_model
from r3.rewards.functions import RewardComposer
from r3.rewards.turn import TURN_TERMS
from r3.train.cli import train_main
from r3.train.config import RLConfig, load_config

pytestmark = pytest.mark.slow

CONFIGS = Path(__file__).resolve().parents[2] / "config" / "train"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Two stored semantic expert episodes (tasks 1 and 7) and a tiny model."""
    root = tmp_path_factory.mktemp("multiturn")
    expert = make_backend("expert")
    for task in ("1", "7"):
        record_packing_episode(task, 0, expert, root / "episodes")
    return {"root": root, "model": build_tiny_model("idefics3", root / "tiny", seed=0)}


def _config(data, name: str, **over) -> RLConfig:
    values = {
        "model": str(data["model"]),
        "dataset": str(data["root"] / "episodes"),
        "output_dir": str(data["root"] / name),
        **over,
    }
    return load_config(CONFIGS / "rl_semantic_tiny_cpu.yaml", RLConfig, values)


class SnapshotGroups:
    """Zero-weight observer: records the ``snapshot`` column of every batch TRL scores."""

    def __init__(self):
        self.batches, self.__name__ = [], "snapshot_groups"

    def __call__(self, completions, snapshot, **kwargs):
        self.batches.append(list(snapshot))
        return [0.0] * len(completions)


def test_turn_gspo_with_the_simulator_rewards_logs_every_term_and_saves(data):
    from r3.train.multiturn import run_turn_rl, turn_reward_terms

    cfg = _config(data, "turn_out")
    real = turn_reward_terms(cfg)
    groups = SnapshotGroups()
    rewards = RewardComposer(
        {**real.terms, "snapshot_groups": groups}, {**real.weights, "snapshot_groups": 0.0}
    )
    checkpoint = run_turn_rl(cfg, rewards)
    history = json.loads((checkpoint / "r3_train.json").read_text())["log_history"]
    logged = set().union(*history)
    for key in [*(f"rewards/{t}/mean" for t in TURN_TERMS), "reward", "completions/mean_length"]:
        assert key in logged, key
    assert sum("loss" in h for h in history) == cfg.max_steps
    # Action-grouped: each batch is whole groups of num_generations completions at one snapshot.
    k = cfg.num_generations
    assert groups.batches
    for batch in groups.batches:
        assert len(batch) % k == 0
        assert all(len(set(batch[i : i + k])) == 1 for i in range(0, len(batch), k)), batch

    assert (checkpoint / "model.safetensors").is_file()
    assert PromptSettings.load(checkpoint) == PromptSettings("reason", "instruction", False)
    turn = load_episodes(data["root"] / "episodes")[0].turns[1]
    backend = make_backend(f"transformers:{checkpoint}", max_new_tokens=8, temperature=0)
    backend.load()
    try:
        step = decide(
            backend,
            ReasonerInput(
                "packing",
                turn.goal,
                [BLANK_IMAGE, BLANK_IMAGE],
                history_text=turn.history,
                history="instruction",
                interface="semantic",
            ),
        )
    finally:
        backend.close()
    assert step.output.model_id == str(checkpoint)


def test_mined_successes_train_by_sft_and_then_earn_simulator_rewards(data):
    """ZAP's loop on a tiny scale: mine the stored successes, SFT on them through `r3 train sft`, then
    turn-level GSPO from that checkpoint, whose answers are valid actions the simulator scores."""
    from r3.train.config import SFTConfig
    from r3.train.mining import mine
    from r3.train.multiturn import run_turn_rl
    from r3.train.sft import run_sft

    report = mine(data["root"] / "episodes", data["root"] / "mined", mode="instruction_only")
    assert report.rows > 4 and report.kept
    sft = load_config(
        CONFIGS / "sft_tiny_cpu.yaml",
        SFTConfig,
        {
            "model": str(data["model"]),
            "dataset": str(data["root"] / "mined"),
            "output_dir": str(data["root"] / "mined_sft"),
            "mode": "instruction_only",
            "max_rows": 4,
        },
    )
    checkpoint = run_sft(sft)
    assert PromptSettings.load(checkpoint) == PromptSettings("instruction_only", "instruction", False)

    cfg = _config(
        data, "mined_rl", model=str(checkpoint), mode="instruction_only", max_rows=4, max_completion_length=32
    )
    final = run_turn_rl(cfg)
    history = json.loads((final / "r3_train.json").read_text())["log_history"]
    steps = [h for h in history if "rewards/validity/mean" in h]
    print("\n" + "\n".join(f"{ {t: round(h[f'rewards/{t}/mean'], 3) for t in TURN_TERMS} }" for h in steps))
    assert len(steps) == cfg.max_steps
    assert max(h["rewards/validity/mean"] for h in steps) > -1  # some answers were valid actions
    assert any(h["rewards/progress/mean"] != 0 for h in steps)  # and the simulator scored them


class LowIdShare:
    """Toy reward a random model can learn fast: the share of completion tokens with id < ``limit``."""

    def __init__(self, limit: int):
        self.limit, self.__name__ = limit, "low_ids"

    def __call__(self, completions, completion_ids, **kwargs):
        return [sum(i < self.limit for i in ids) / max(len(ids), 1) for ids in completion_ids]


def test_turn_gspo_raises_a_learnable_toy_reward(data):
    from r3.train.multiturn import run_turn_rl

    cfg = _config(data, "toy", max_steps=8, learning_rate=0.05, max_rows=4)
    checkpoint = run_turn_rl(cfg, RewardComposer({"low_ids": LowIdShare(128)}, {"low_ids": 1.0}))
    history = json.loads((checkpoint / "r3_train.json").read_text())["log_history"]
    rewards = [h["reward"] for h in history if "reward" in h]
    print(f"\ntoy reward per step: {[round(r, 3) for r in rewards]}")
    assert np.mean(rewards[-3:]) > np.mean(rewards[:3]) + 0.05, rewards


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["dataset=nowhere"], "episode folder not found"),
        (["rewards={judge: 1.0}"], "unknown term(s) ['judge'] for interface 'semantic'"),
        (["interface=tools"], "RL runs for the interfaces"),
        (["splits=[T_M]"], "['splits']: single-step keys"),
    ],
)
def test_bad_turn_config_fails_before_any_model_loads(data, monkeypatch, capsys, extra, named):
    monkeypatch.setattr("r3.train.grpo.load_model", lambda *a, **k: pytest.fail("a model was loaded"))
    argv = ["rl", "--config", str(CONFIGS / "rl_semantic_tiny_cpu.yaml")]
    for pair in [
        f"dataset={data['root'] / 'episodes'}",
        f"model={data['model']}",
        f"output_dir={data['root'] / 'bad'}",
        *extra,
    ]:
        argv += ["--set", pair]
    assert train_main(argv) == 2
    assert named in capsys.readouterr().err
