"""A training run started again in its output_dir goes on from the earlier run's last whole checkpoint."""

from __future__ import annotations

import sys
import types

import pytest

from r3.reasoning.prompts import PROMPT_FILE, PromptSettings
from r3.train.config import SFTConfig


class Stopped(Exception):
    """Raised by the stand-in trainer once it is told where to resume from."""


def test_a_rerun_resumes_from_the_last_whole_checkpoint_not_over_it(tmp_path, monkeypatch):
    """Found by a hostile user: ``r3 train sft`` killed after checkpoint-8 and started again began at
    step 0 and saved its own checkpoint-4 and -8 over the earlier run's; killed again while saving,
    it left the good checkpoint-8 half overwritten. checkpoint-12 here was torn by a kill mid-save."""
    from r3.train import sft

    out = tmp_path / "run"
    for step, files in ((4, ("trainer_state.json", PROMPT_FILE)), (8, ("trainer_state.json", PROMPT_FILE))):
        (out / f"checkpoint-{step}").mkdir(parents=True)
        for name in files:
            (out / f"checkpoint-{step}" / name).write_text("{}")
    (out / "checkpoint-12").mkdir()
    (out / "checkpoint-12" / "trainer_state.json").write_text("{}")
    (out / "checkpoint-x").mkdir()
    resumed = []

    class Trainer:
        def __init__(self, **kwargs):
            pass

        def train(self, resume_from_checkpoint=None):
            resumed.append(resume_from_checkpoint)
            raise Stopped

    monkeypatch.setattr(sft, "load_model", lambda model: (None, None))
    monkeypatch.setattr(sft, "template_kwargs", lambda processor, thinking: {"enable_thinking": thinking})
    monkeypatch.setattr(sft, "prompt_on_every_checkpoint", lambda prompt: None)
    monkeypatch.setitem(sys.modules, "trl", types.SimpleNamespace(SFTTrainer=Trainer, SFTConfig=dict))
    cfg = SFTConfig(model="m", dataset="d", output_dir=str(out))
    with pytest.raises(Stopped):
        sft.train_sft(cfg, [], {}, PromptSettings("reason", "instruction"), None)
    assert resumed == [str(out / "checkpoint-8")]
