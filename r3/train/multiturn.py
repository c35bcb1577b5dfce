"""Stage II for the multi-turn interfaces: ERR's turn-level GSPO, action-grouped, on TRL's GRPOTrainer.

A row is one turn of a stored episode (:mod:`r3.data.turns`): its decision-time snapshot, the goal,
the history the model saw at that turn, and the prompt the reasoner would see there, built by
:func:`r3.train.rows.prompt_messages` for the row's interface (so training and inference prompts
cannot drift apart). TRL samples ``num_generations`` completions per row, so the K completions of a
group share one snapshot: advantages compare actions taken from the same state (ERR's action-grouped
turns). Each completion is scored by the turn terms of :mod:`r3.rewards.turn` (the snapshot restored
in a simulator worker, the answer carried out by the packing cell, ERR's checkers read), which TRL
logs one by one as ``rewards/<term>/mean``. The GSPO configs set ``importance_sampling_level:
sequence`` (one length-normalised importance ratio and one clipping decision per completion).
"""

from __future__ import annotations

from pathlib import Path

from r3.data import schema as S
from r3.data.turns import Turn, load_episodes, load_turn_dataset
from r3.episode_loop import BLANK_IMAGE
from r3.reasoning.prompts import PromptSettings
from r3.rewards.functions import RewardComposer
from r3.rewards.semantic import load_snapshot
from r3.rewards.turn import TurnSimulator, turn_rewards
from r3.sim.packing.env import read_snapshot
from r3.train.args import grpo_arguments, world_size
from r3.train.checkpoint import resolve_device
from r3.train.config import RLConfig
from r3.train.rows import DatasetError, prompt_messages, prompt_settings

#: The packing prompt shows the base and the wrist view.
VIEWS = 2


def turn_row(turn: Turn, prompt: PromptSettings, images: list) -> dict:
    """One TRL row for ``turn``: prompt messages (image placeholders), its ``images``, and the columns
    the turn reward reads (``snapshot``) or logs carry."""
    source = {
        "suite": "packing",
        "goal": turn.goal,
        "images": [None] * VIEWS,
        "note": turn.note,
        "history": turn.history,
        "history_kind": turn.history_kind,
        "step": turn.step,
        "interface": turn.interface,
    }
    return {
        "prompt": prompt_messages(source, prompt),
        "images": images,
        "snapshot": turn.snapshot,
        "expert_action": turn.action,
        "episode_id": turn.episode_id,
        "task": turn.task,
        "step": turn.step,
    }


def turn_images(turns: list[Turn]) -> list[list]:
    """The base and wrist views at each turn, rendered from its snapshot (as the suite shows them)."""
    from r3.packing_episode import PackingCell

    cell = PackingCell.build()
    out = []
    for turn in turns:
        cell.restore(turn.snapshot_bytes())
        out.append(cell.images(True))
    return out


def open_turns(path: str | Path, max_rows: int | None = None) -> list[Turn]:
    """The turns (the first ``max_rows``) of a ``turns`` dataset at ``path`` or of the stored episodes
    under it; a folder that holds none is a :class:`DatasetError`, so a bad config fails before any
    model loads."""
    try:
        if (Path(path) / S.MANIFEST).is_file():
            turns = load_turn_dataset(path)
        else:
            turns = [t for e in load_episodes(path) for t in e.turns]
    except (ValueError, FileNotFoundError, KeyError) as err:  # EpisodeFolderError and a manifest's own
        raise DatasetError(f"{path}: {err}") from None
    if not turns:
        raise DatasetError(f"{path}: the stored episodes have no turns")
    turns = turns[:max_rows] if max_rows else turns
    for snapshot in dict.fromkeys(t.snapshot for t in turns):  # each once, before any model loads
        try:
            read_snapshot(load_snapshot(snapshot))
        except (OSError, ValueError) as err:
            why = err.strerror if isinstance(err, OSError) and err.strerror else err
            raise DatasetError(f"{path}: snapshot {snapshot}: {why}") from None
    return turns


def turn_dataset(turns: list[Turn], prompt: PromptSettings, render: bool = False):
    """TRL prompt-only rows (``datasets.Dataset``) for ``turns``."""
    from datasets import Dataset, Image, Sequence
    from PIL import Image as PILImage

    images = turn_images(turns) if render else [[BLANK_IMAGE] * VIEWS] * len(turns)
    rows = [turn_row(t, prompt, [PILImage.fromarray(a) for a in i]) for t, i in zip(turns, images)]
    return Dataset.from_list(rows).cast_column("images", Sequence(Image()))


def turn_reward_terms(cfg: RLConfig) -> RewardComposer:
    """The configured turn terms with their weights, on one shared simulator."""
    simulator = TurnSimulator(cfg.interface, workers=cfg.sim_workers, ray_address=cfg.ray_address)
    return turn_rewards(simulator, cfg.rewards, cfg.mode)


def prepare_turn_rl(cfg: RLConfig, rewards: RewardComposer | None = None):
    """Everything that can fail without a model. Returns (TRL rows, reward functions,
    ``trl.GRPOConfig`` keywords, the checkpoint's :class:`PromptSettings`)."""
    _, cuda = resolve_device(cfg.device)
    unused = [k for k in ("splits", "history_file") if getattr(cfg, k) is not None]
    if unused:
        raise DatasetError(f"{unused}: single-step keys; turn rows come from stored episodes and take none")
    turns = open_turns(cfg.dataset, cfg.max_rows)
    wrong = sorted({t.interface for t in turns} - {cfg.interface})
    if wrong:
        raise DatasetError(f"{cfg.dataset}: turns of interface(s) {wrong}, the config says {cfg.interface!r}")
    prompt = prompt_settings([t.history_kind for t in turns], cfg.mode, cfg.thinking)
    rewards = rewards or turn_reward_terms(cfg)
    arguments = grpo_arguments(cfg, world_size(), cuda, rewards.trl_reward_weights())
    return turn_dataset(turns, prompt, cfg.render_images), rewards.trl_reward_funcs(), arguments, prompt


def run_turn_rl(cfg: RLConfig, rewards: RewardComposer | None = None) -> Path:
    """Train and save the final checkpoint to ``cfg.output_dir``/final; returns its path.

    ``rewards`` replaces the configured terms (tests use a toy term that a tiny model can learn).
    """
    from r3.train.grpo import train_grpo

    return train_grpo(cfg, *prepare_turn_rl(cfg, rewards))
