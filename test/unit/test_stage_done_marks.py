"""The file that says a training stage is done (a checkpoint's r3_prompt.json, a pretraining stage's
record) is never left cut short by a run stopped while writing it. `r3 mini` skips a stage whose file
is there: written in place, a kill in the middle of that write left a stage skipped as done whose
model no later run could load (its prompt settings were no JSON), and every rerun failed on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from r3.reasoning.prompts import PROMPT_FILE, PromptSettings
from r3.reasoning.tiny import build_tiny_model
from r3.train.vision import save_pretrained_stage


@pytest.fixture
def killed_while_writing(monkeypatch):
    """Makes the next text file written stop halfway, as a run killed in the middle of that write."""
    real_write = Path.write_text

    def halfway(path, text, *args, **kwargs):
        real_write(path, text[: len(text) // 2], *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", halfway)
    return monkeypatch


def test_a_checkpoint_stopped_while_its_prompt_settings_are_written_is_not_done(
    tmp_path, killed_while_writing
):
    with pytest.raises(KeyboardInterrupt):
        PromptSettings("reason", "response").save(tmp_path)
    killed_while_writing.undo()
    assert not (tmp_path / PROMPT_FILE).exists()
    PromptSettings("reason", "response").save(tmp_path)
    assert PromptSettings.load(tmp_path) == PromptSettings("reason", "response")


class _Saved:
    """A model or processor that saves one file."""

    def __init__(self, name: str):
        self.name = name

    def save_pretrained(self, folder):
        (Path(folder) / self.name).write_bytes(b"weights")


def test_a_pretraining_stage_stopped_while_its_record_is_written_is_not_done(tmp_path, killed_while_writing):
    model_dir, out = tmp_path / "model", tmp_path / "vision"
    model_dir.mkdir()
    with pytest.raises(KeyboardInterrupt):
        save_pretrained_stage(
            _Saved("model.bin"), _Saved("processor.json"), model_dir, out, "r3_vision.json", {"a": 1}
        )
    killed_while_writing.undo()
    assert not (out / "r3_vision.json").exists()
    save_pretrained_stage(
        _Saved("model.bin"), _Saved("processor.json"), model_dir, out, "r3_vision.json", {"a": 1}
    )
    assert json.loads((out / "r3_vision.json").read_text()) == {"a": 1}


def test_a_tiny_model_stopped_while_its_record_is_written_is_not_done(tmp_path, monkeypatch):
    """Found by the interruption sweep: r3_tiny.json, written last and taken by `r3 mini` to mean its
    model stage is done, was written in place, so a full disk or a kill in that write left the
    stage done with a record that is no JSON."""
    real_write = Path.write_text

    def halfway_at_the_record(path, text, *args, **kwargs):
        if not path.name.startswith("r3_tiny.json"):
            return real_write(path, text, *args, **kwargs)
        real_write(path, text[: len(text) // 2], *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", halfway_at_the_record)
    with pytest.raises(KeyboardInterrupt):
        build_tiny_model("idefics3", tmp_path, hidden=32, vocab_size=300, layers=1)
    assert not (tmp_path / "r3_tiny.json").exists()
