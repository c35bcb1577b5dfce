"""ZAP's data engine, first half: mine the successful episodes of a folder into the next SFT round.

The rules, stated once:

- **Success.** An episode counts when its record says it succeeded, it was not stopped by the safety
  guard, and its final snapshot, restored in a packing cell, still passes the task's success
  check (so a record that claims more than the state shows is rejected, as is a folder without one).
- **Deduplication.** Two episodes are the same when they start from the same task instance (goal,
  starting places and layout) and give the same sequence of canonical actions; the first in folder
  order is kept. (Not the snapshot's bytes: those also hold the data of inactive grasp welds, which
  the env's reset leaves as the previous episode set them.) Rejection sampling of a deterministic
  policy repeats whole episodes; keeping them all would weight a task by how often it was sampled.
- **Rows.** Every valid turn of a kept episode is one prompt-completion row: the prompt the reasoner
  saw at that turn (:func:`r3.train.multiturn.turn_row`, so it is the inference prompt) and, as the
  completion, the answer rewritten in its canonical form ("Reasoning: ...\\nAction: <call>"; the call
  alone in instruction-only mode). A refused turn in a successful episode teaches nothing and is left
  out.

The dataset is saved with ``datasets.Dataset.save_to_disk`` (TRL's SFTTrainer takes it as it is),
with ``r3_mined.json`` beside it holding the counts and the rules.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from r3.data.turns import StoredEpisode, Turn, load_episodes
from r3.files import bounded_repr, is_kind, json_value, mark_output, read_small_text, resumable_output
from r3.reasoning.parsing import ParsedResponse, parse_response
from r3.reasoning.prompts import (
    ANSWER_HEADERS,
    HISTORY_MODES,
    INTERFACES,
    MODES,
    REASONING_HEADER,
    PromptSettings,
)
from r3.train.rows import TEMPLATE_KWARGS

MANIFEST = "r3_mined.json"
#: What a mined folder holds, in its :data:`r3.files.OUTPUT_MARK`.
MINED = "mined dataset"


@dataclass
class MiningReport:
    episodes: int = 0
    successful: int = 0
    duplicates: int = 0
    rejected: dict[str, int] = field(default_factory=dict)  # why an episode was not mined -> count
    dropped_turns: int = 0  # refused turns of kept episodes
    rows: int = 0
    kept: list[str] = field(default_factory=list)

    def reject(self, reason: str) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1


def verified_success(episode: StoredEpisode, cell=None) -> str:
    """ "" when ``episode`` counts as a success (see the module docstring), else why not."""
    if not episode.success:
        return "failed"
    if episode.aborted:
        return "aborted"
    if not episode.final_snapshot.is_file():
        return "no_final_snapshot"
    if cell is None:
        from r3.packing_episode import PackingCell

        cell = PackingCell.build()
    cell.restore(episode.final_snapshot.read_bytes())
    return "" if cell.env.task_instance.success(cell.env.state()) else "not_successful_when_restored"


def episode_key(episode: StoredEpisode) -> tuple:
    """What makes two episodes the same: the task instance they start from and the canonical actions."""
    return json.dumps(episode.instance, sort_keys=True), episode.actions


def sft_completion(turn: Turn, mode: str) -> str | None:
    """The canonical answer of a valid turn (None for a refused one)."""
    parsed = parse_response(turn.raw_response, "packing", mode="instruction_only", interface=turn.interface)
    if not turn.valid or not isinstance(parsed, ParsedResponse):
        return None
    action = f"{ANSWER_HEADERS[turn.interface]} {parsed.instruction_text}"
    if mode == "instruction_only" or not parsed.reasoning.strip():
        return action
    return f"{REASONING_HEADER} {parsed.reasoning.strip()}\n{action}"


def mine(
    episode_root: str | Path, out: str | Path, mode: str = "reason", render: bool = False
) -> MiningReport:
    """Mine the successful episodes under ``episode_root`` into an SFT dataset at ``out``: a new or
    empty folder or an earlier mined one (:func:`r3.files.resumable_output`; a FileRefused, before any
    work, for a folder holding anything else)."""
    resumable_output(out, MINED, made_before_marks=is_mined)
    from datasets import Dataset, Image, Sequence
    from PIL import Image as PILImage

    from r3.episode_loop import BLANK_IMAGE
    from r3.packing_episode import PackingCell
    from r3.train.multiturn import VIEWS, turn_images, turn_row

    report, seen, turns, targets = MiningReport(), set(), [], []
    cell = PackingCell.build()
    for episode in load_episodes(episode_root):
        report.episodes += 1
        why = verified_success(episode, cell)
        if why:
            report.reject(why)
            continue
        report.successful += 1
        key = episode_key(episode)
        if key in seen:
            report.duplicates += 1
            continue
        seen.add(key)
        report.kept.append(episode.episode_id)
        for turn in episode.turns:
            completion = sft_completion(turn, mode)
            if completion is None:
                report.dropped_turns += 1
                continue
            turns.append(turn)
            targets.append(completion)
    kinds = sorted({t.history_kind for t in turns}) or ["instruction"]
    if len(kinds) > 1:
        raise ValueError(f"{episode_root}: episodes mix history kinds {kinds}; mine them separately")
    interfaces = sorted({t.interface for t in turns}) or ["semantic"]
    if len(interfaces) > 1:
        raise ValueError(f"{episode_root}: episodes mix interfaces {interfaces}; mine them separately")
    prompt = PromptSettings(mode, kinds[0])
    images = turn_images(turns) if render else [[BLANK_IMAGE] * VIEWS] * len(turns)
    rows = []
    for turn, target, views in zip(turns, targets, images):
        row = turn_row(turn, prompt, [PILImage.fromarray(a) for a in views])
        row["completion"] = [{"role": "assistant", "content": [{"type": "text", "text": target}]}]
        rows.append(row)
    report.rows = len(rows)
    out = mark_output(out, MINED)
    _drop_earlier_mining(out)
    if rows:
        Dataset.from_list(rows).cast_column("images", Sequence(Image())).save_to_disk(str(out))
    manifest = {"source": str(episode_root), "mode": mode, "history": kinds[0], "interface": interfaces[0]}
    manifest.update(asdict(report))
    manifest["rules"] = {
        "success": "recorded success, not aborted, final snapshot passes the task's success check",
        "deduplication": "same task instance (goal, layout) and same canonical actions: first kept",
        "rows": "every valid turn of a kept episode; refused turns dropped",
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return report


def _drop_earlier_mining(out: Path) -> None:
    """An earlier mining's manifest first, then its rows: mined again with no rows, the folder read
    the old rows (``datasets.load_from_disk``); stopped half way, it holds no manifest (no finished
    work), never an old manifest over new rows."""
    (out / MANIFEST).unlink(missing_ok=True)
    for name in ("state.json", "dataset_info.json"):
        (out / name).unlink(missing_ok=True)
    for shard in out.glob("data-*.arrow"):
        shard.unlink()


def is_mined(path: str | Path) -> bool:
    return (Path(path) / MANIFEST).is_file()


def read_manifest(path: str | Path) -> dict:
    """The :data:`MANIFEST` of the mined folder ``path``, its keys checked (``interface`` filled in as
    "semantic" for folders mined before it was recorded); a ValueError naming the file and the key
    otherwise."""
    file = Path(path) / MANIFEST
    try:
        manifest = json_value(read_small_text(file))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{file}: not readable as JSON: {getattr(exc, 'strerror', None) or exc}") from None
    if not isinstance(manifest, dict):
        raise ValueError(f"{file}: expected a JSON object, got {bounded_repr(manifest)}")  # noqa: TRY004
    manifest.setdefault("interface", "semantic")
    for key, known in (("mode", MODES), ("history", HISTORY_MODES), ("interface", INTERFACES)):
        if key not in manifest:
            raise ValueError(f"{file}: no {key!r} key; was it written by mining?")
        if not isinstance(manifest[key], str) or manifest[key] not in known:
            raise ValueError(f"{file}: {key}={bounded_repr(manifest[key])}, expected one of {known}")
    rows = manifest.get("rows")
    if not is_kind(rows, int) or rows < 0:
        raise ValueError(f"{file}: rows={bounded_repr(rows)}, expected a count (a whole number >= 0)")
    return manifest


def _completion_text(completion: object) -> str | None:
    """The text of a mined row's completion (one assistant message of one text part); None when it
    is not of that shape."""
    if not isinstance(completion, list) or len(completion) != 1 or not isinstance(completion[0], dict):
        return None
    content = completion[0].get("content")
    if not isinstance(content, list) or len(content) != 1 or not isinstance(content[0], dict):
        return None
    text = content[0].get("text")
    return text if isinstance(text, str) else None


def load_mined(
    path: str | Path,
    mode: str,
    thinking: bool,
    max_rows: int | None = None,
    reasoning_sentences: int | None = None,
):
    """The SFT rows of a mined dataset, as ``r3 train sft`` feeds them to TRL, and the checkpoint's
    :class:`PromptSettings`; each completion's reasoning is cut to its last ``reasoning_sentences``
    sentences as for any other dataset (:func:`r3.train.rows.shorten_reasoning`). Raises ValueError
    when the folder holds no rows or was mined for another answer mode (its completions would not
    match the prompts)."""
    from datasets import load_from_disk

    from r3.reasoning.backends.base import error_line
    from r3.train.rows import shorten_reasoning

    manifest = read_manifest(path)
    if manifest["mode"] != mode:
        raise ValueError(f"{path} was mined in mode {manifest['mode']!r}, the config says {mode!r}")
    if not manifest["rows"]:
        raise ValueError(f"{path}: the mined dataset has no rows (no successful episode)")
    try:
        rows = load_from_disk(str(path)).select_columns(["prompt", "completion", "images"])
    except Exception as exc:  # noqa: BLE001 -- a data file gone or torn, a column missing: each its own kind
        raise ValueError(f"{path}: the mined rows do not load: {error_line(exc)}") from None
    rows = rows.select(range(min(max_rows, len(rows)))) if max_rows else rows
    interface = manifest["interface"]

    def complete(row: dict) -> dict:
        text = _completion_text(row["completion"])
        if text is None:
            raise ValueError(
                f"{path}: a row's completion is {bounded_repr(row['completion'])}, "
                "expected one assistant message holding one text part"
            )
        text = shorten_reasoning(text, "packing", reasoning_sentences, interface)
        completion = [{"role": "assistant", "content": [{"type": "text", "text": text}]}]
        return {"completion": completion, TEMPLATE_KWARGS: {"enable_thinking": thinking}}

    rows = rows.map(complete)
    return rows, PromptSettings(mode, manifest["history"], thinking)
