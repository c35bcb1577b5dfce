"""Column names and on-disk layout of r3 datasets (built by ``r3 dataset build``).

One row per decision step of a recorded episode (``sft``, ``rl``: from bags) or per turn of a stored
multi-turn packing episode (``turns``: from the episode folders of :mod:`r3.data.turns`). A dataset
directory holds::

    DIR/
      r3_dataset.json                      kind (sft | rl), columns, row counts, source and skipped bags
      data/train-00000-of-0000N.parquet    the rows (Parquet shards, columns below)
      images/<episode_id>/step_000_0.png   camera images of a step (RGB PNG), referenced from IMAGES
      snapshots/<episode_id>/step_000.npz  simulator snapshot at the step, as LanguageTableEnv.snapshot()
                                           wrote it (``env.restore(path.read_bytes())``); turns: the
                                           cell snapshot (``PackingCell.restore``)

A source whose episode id an earlier source of the build took (two collections name their episodes
alike) files its images and snapshots under ``<episode_id>-2`` (``-3`` ...); its rows keep the id.
Paths inside rows are relative to DIR. Load with :func:`load_r3_dataset` (paths resolved to
absolute ones), or with ``datasets.load_dataset("parquet", data_files="DIR/data/*.parquet")`` when
relative paths suit you. Both kinds share the columns below except that ``sft`` has REASONING and
RESPONSE (the training target) and ``rl`` has EXPERT_INSTRUCTION (the reference for the reward)
and no reasoning at all; rl rows whose instruction repeats the previous step's are left out (R^3
section 3.3). ``turns`` rows keep every turn, refused answers included (what a model was told after
one is part of the next turn's history), with no images: render them from the snapshot.
"""

from __future__ import annotations

from pathlib import Path

from r3.files import json_value, read_small_text

IMAGES = "images"  # list[str]: PNG paths, one per camera view
GOAL = "goal"  # long-horizon goal text
NOTE = "note"  # task-specific note for the prompt ("" when unknown)
TASK = "task"  # task id, e.g. "V"
SPLIT = "split"  # "T_M" | "T_R" | "T_O" ("" for tasks outside the splits)
SUITE = "suite"  # "language_table" | "packing"
HISTORY = "history"  # previous response or previous instruction; "" at step 0
HISTORY_KIND = "history_kind"  # "response" | "instruction" | "none"
REASONING = "reasoning"  # sft only: the expert's reasoning
INSTRUCTION = "instruction"  # canonical instruction text of this step
RESPONSE = "response"  # sft only: "Reasoning: ...\nInstruction: ...", the training target
EXPERT_INSTRUCTION = "expert_instruction"  # rl only: the reference instruction
STEP = "step"  # decision step within the episode, from 0
EPISODE_ID = "episode_id"
EPISODE_SUCCESS = "episode_success"
EPISODE_PROGRESS = "episode_progress"
SNAPSHOT = "snapshot"  # path of the step's snapshot (.npz bytes)
SEED = "seed"  # the episode's seed
INTERFACE = "interface"  # turns: how the answer acts (semantic, tools, plan)
RAW_RESPONSE = "raw_response"  # turns: the answer as given
VALID = "valid"  # turns: whether the answer passed its grammar (then INSTRUCTION is its canonical call)
OUTCOME = "outcome"  # turns: the result line the next turn's history carries
TURN_PROGRESS = "turn_progress"  # turns: the episode's progress after this turn

HISTORY_KINDS = ("response", "instruction", "none")
KINDS = ("sft", "rl")  # built from bags
TURNS = "turns"  # built from multi-turn episode folders
MANIFEST = "r3_dataset.json"
DATA_DIR, IMAGES_DIR, SNAPSHOTS_DIR = "data", "images", "snapshots"
STATS_JSON, STATS_PLOT = "stats.json", "stats.png"  # what `r3 dataset stats` adds

_COMMON_BEFORE = (IMAGES, GOAL, NOTE, TASK, SPLIT, SUITE, HISTORY, HISTORY_KIND)
_COMMON_AFTER = (STEP, EPISODE_ID, EPISODE_SUCCESS, EPISODE_PROGRESS, SNAPSHOT, SEED)
#: Columns of each dataset kind, in file order.
COLUMNS: dict[str, tuple[str, ...]] = {
    "sft": (*_COMMON_BEFORE, REASONING, INSTRUCTION, RESPONSE, *_COMMON_AFTER),
    "rl": (*_COMMON_BEFORE, INSTRUCTION, EXPERT_INSTRUCTION, *_COMMON_AFTER),
    TURNS: (
        *_COMMON_BEFORE[1:],
        INTERFACE,
        RAW_RESPONSE,
        VALID,
        INSTRUCTION,
        OUTCOME,
        TURN_PROGRESS,
        *_COMMON_AFTER,
    ),
}
_TYPES = {
    IMAGES: "list",
    STEP: "int32",
    EPISODE_SUCCESS: "bool",
    EPISODE_PROGRESS: "float64",
    SEED: "int64",
    VALID: "bool",
    TURN_PROGRESS: "float64",
}


def format_response(reasoning: str, instruction: str) -> str:
    """The sft training target.

    >>> format_response("The cube is left.", "move the blue cube right")
    'Reasoning: The cube is left.\\nInstruction: move the blue cube right'
    """
    return f"Reasoning: {reasoning}\nInstruction: {instruction}"


def features(kind: str):
    """The ``datasets.Features`` of a dataset kind (their Arrow schema is the Parquet schema)."""
    import datasets

    if kind not in COLUMNS:
        raise ValueError(f"dataset kind must be one of {(*KINDS, TURNS)}, got {kind!r}")
    spec = {}
    for name in COLUMNS[kind]:
        dtype = _TYPES.get(name, "string")
        spec[name] = datasets.List(datasets.Value("string")) if dtype == "list" else datasets.Value(dtype)
    return datasets.Features(spec)


def read_manifest(path: str | Path) -> dict:
    """The manifest of the dataset in ``path``; a ValueError saying what is wrong with it."""
    file = Path(path) / MANIFEST
    try:
        manifest = json_value(read_small_text(file))
    except FileNotFoundError:
        raise ValueError(f"{path} has no {MANIFEST}: not an r3 dataset") from None
    except (OSError, ValueError) as exc:
        raise ValueError(f"{file} is not readable JSON: {exc}") from None
    kind = manifest.get("kind") if isinstance(manifest, dict) else None
    if not isinstance(kind, str) or kind not in COLUMNS:  # a list or object for the kind is no key
        raise ValueError(f"{file}: expected an object with a kind of {(*KINDS, TURNS)}, got kind {kind!r}")
    return manifest


def load_r3_dataset(path: str | Path):
    """The dataset in ``path`` as a ``datasets.Dataset``, with IMAGES (where it has them) and SNAPSHOT
    made absolute; a step recorded without a simulator snapshot (a real arm's) keeps "" there."""
    import datasets
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    root = Path(path).resolve()
    files = sorted((root / DATA_DIR).glob("*.parquet"))
    if not files:
        raise FileNotFoundError(f"{root} holds no {DATA_DIR}/*.parquet: not an r3 dataset")
    table = pa.concat_tables(pq.read_table(f) for f in files)
    prefix = f"{root}/"
    if IMAGES in table.column_names:
        images = table.column(IMAGES).combine_chunks()
        resolved = pa.ListArray.from_arrays(
            images.offsets, pc.binary_join_element_wise(prefix, images.flatten(), "")
        )
        table = table.set_column(table.schema.get_field_index(IMAGES), IMAGES, resolved)
    column = table.column(SNAPSHOT)
    snapshots = pc.if_else(pc.equal(column, ""), column, pc.binary_join_element_wise(prefix, column, ""))
    table = table.set_column(table.schema.get_field_index(SNAPSHOT), SNAPSHOT, snapshots)
    return datasets.Dataset(table)
