"""A training run started again in its output_dir goes on from the earlier run's last whole checkpoint,
and only when it is the same run (the same config)."""

from __future__ import annotations

import json
import sys
import types

import pytest

from r3.reasoning.prompts import PROMPT_FILE, PromptSettings
from r3.train.checkpoint import RUN_CONFIG_FILE, _config_record
from r3.train.config import ConfigError, SFTConfig


class Stopped(Exception):
    """Raised by the stand-in trainer once it is told where to resume from."""


@pytest.fixture
def stopped_run(tmp_path):
    """An output_dir as a run killed after checkpoint-8 left it: checkpoint-12 was torn mid-save."""
    out = tmp_path / "run"
    for step in (4, 8):
        (out / f"checkpoint-{step}").mkdir(parents=True)
        for name in ("trainer_state.json", PROMPT_FILE):
            (out / f"checkpoint-{step}" / name).write_text("{}")
    (out / "checkpoint-12").mkdir()
    (out / "checkpoint-12" / "trainer_state.json").write_text("{}")
    (out / "checkpoint-x").mkdir()
    return out


@pytest.fixture
def sft(monkeypatch):
    """r3.train.sft with a stand-in model and trainer; ``sft.resumed`` lists where each run resumed."""
    from r3.train import sft

    resumed, loaded = [], []

    class Trainer:
        def __init__(self, **kwargs):
            pass

        def train(self, resume_from_checkpoint=None):
            resumed.append(resume_from_checkpoint)
            raise Stopped

    monkeypatch.setattr(sft, "load_model", lambda model: loaded.append(model) or (None, None))
    monkeypatch.setattr(sft, "template_kwargs", lambda processor, thinking: {"enable_thinking": thinking})
    monkeypatch.setattr(sft, "prompt_on_every_checkpoint", lambda prompt: None)
    monkeypatch.setitem(sys.modules, "trl", types.SimpleNamespace(SFTTrainer=Trainer, SFTConfig=dict))
    return types.SimpleNamespace(train=sft.train_sft, resumed=resumed, loaded=loaded)


def _train(sft, cfg):
    return sft.train(cfg, [], {}, PromptSettings("reason", "instruction"), None)


def test_a_rerun_resumes_from_the_last_whole_checkpoint_not_over_it(stopped_run, sft):
    """Found by a hostile user: ``r3 train sft`` killed after checkpoint-8 and started again began at
    step 0 and saved its own checkpoint-4 and -8 over the earlier run's; killed again while saving,
    it left the good checkpoint-8 half overwritten."""
    cfg = SFTConfig(model="m", dataset="d", output_dir=str(stopped_run))
    (stopped_run / RUN_CONFIG_FILE).write_text(json.dumps(_config_record(cfg)))
    with pytest.raises(Stopped):
        _train(sft, cfg)
    assert sft.resumed == [str(stopped_run / "checkpoint-8")]


def test_a_fresh_run_records_its_config_and_its_rerun_resumes(tmp_path, sft):
    cfg = SFTConfig(model="m", dataset="d", output_dir=str(tmp_path / "run"))
    with pytest.raises(Stopped):
        _train(sft, cfg)
    for name in ("trainer_state.json", PROMPT_FILE):  # what the trainer and its callback save
        (tmp_path / "run" / "checkpoint-2").mkdir(exist_ok=True)
        (tmp_path / "run" / "checkpoint-2" / name).write_text("{}")
    with pytest.raises(Stopped):
        _train(sft, cfg)
    assert sft.resumed == [None, str(tmp_path / "run" / "checkpoint-2")]


@pytest.mark.parametrize("record", ["other dataset", "none", "unreadable"])
def test_checkpoints_of_another_run_are_refused_before_the_model_loads(stopped_run, sft, record):
    """Going on from another config's checkpoint (another dataset here) would train neither run."""
    cfg = SFTConfig(model="m", dataset="d", output_dir=str(stopped_run))
    if record == "other dataset":
        (stopped_run / RUN_CONFIG_FILE).write_text(
            json.dumps(_config_record(SFTConfig(**{**vars(cfg), "dataset": "e"})))
        )
        why = "holds checkpoint-8 of a run of another config \\(dataset: 'e' then, 'd' now\\)"
    elif record == "unreadable":
        (stopped_run / RUN_CONFIG_FILE).write_bytes(b"\xff{")
        why = "holds checkpoint-8 of a run whose config r3 cannot read"
    else:
        why = "holds checkpoint-8 of a run whose config r3 cannot read"
    before = sorted(p.name for p in stopped_run.iterdir())
    with pytest.raises(ConfigError, match=why):
        _train(sft, cfg)
    assert sft.loaded == [] and sft.resumed == []
    assert sorted(p.name for p in stopped_run.iterdir()) == before


def test_a_stopped_run_moved_to_another_folder_goes_on_there(stopped_run, sft, tmp_path):
    cfg = SFTConfig(model="m", dataset="d", output_dir=str(stopped_run))
    (stopped_run / RUN_CONFIG_FILE).write_text(json.dumps(_config_record(cfg)))
    moved = stopped_run.rename(tmp_path / "moved")
    with pytest.raises(Stopped):
        _train(sft, SFTConfig(model="m", dataset="d", output_dir=str(moved)))
    assert sft.resumed == [str(moved / "checkpoint-8")]
