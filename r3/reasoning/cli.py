"""`r3 model tiny`: build a tiny random VLM directory for tests and demos (no network)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from r3.cli_args import folder, integer, seed
from r3.reasoning.tiny import (
    ARCHS,
    HIDDEN_UNIT,
    MAX_HIDDEN,
    MAX_VOCAB,
    NEEDS_TORCHVISION,
    check_vocab_size,
    least_vocab_size,
)


def tiny_model_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="r3 model tiny",
        description="Build a tiny randomly initialised vision-language model on disk, with a tokenizer "
        "trained on r3's own prompts. It loads with transformers (local_files_only) and can be served "
        "with 'transformers serve DIR'. Its answers are random: use it to test plumbing, not quality.",
    )
    parser.add_argument(
        "--arch",
        choices=ARCHS,
        default="idefics3",
        help="architecture (default: idefics3, the SmolVLM v1 family). The Qwen archs "
        f"({', '.join(sorted(NEEDS_TORCHVISION))}) need torchvision to load their processor.",
    )
    parser.add_argument(
        "--out",
        type=folder,
        required=True,
        help="output directory: a new or empty one (a folder with anything in it is refused, so that no "
        "trained checkpoint is overwritten); written whole or not at all",
    )
    parser.add_argument("--seed", type=seed, default=0, help="seed of the random weights (default: 0)")
    parser.add_argument(
        "--hidden",
        type=integer(HIDDEN_UNIT, MAX_HIDDEN),
        default=64,
        help=f"hidden size of the language model, a multiple of {HIDDEN_UNIT} (default: 64)",
    )
    parser.add_argument(
        "--vocab-size",
        type=integer(1, MAX_VOCAB),
        default=1024,
        help="most tokens of the BPE vocabulary (default: 1024), at least the arch's special tokens and "
        f"byte alphabet ({', '.join(f'{a} {least_vocab_size(a)}' for a in ARCHS)}); training stops "
        "earlier when r3's prompts give no more merges (about 1,000 tokens): the command says how many "
        "it built",
    )
    args = parser.parse_args(argv)
    if args.hidden % HIDDEN_UNIT:
        parser.error(f"argument --hidden: expected a multiple of {HIDDEN_UNIT}, got {args.hidden}")
    try:
        check_vocab_size(args.arch, args.vocab_size)
    except ValueError as exc:
        parser.error(f"argument --vocab-size: {exc}")
    out = Path(args.out)
    if out.is_dir() and any(out.iterdir()):  # a trained checkpoint there would become random weights
        parser.error(f"argument --out: {out} is not empty; a tiny model goes into a new or empty folder")
    from r3.files import FileRefused, replaced_output
    from r3.reasoning.tiny import build_tiny_model

    start = time.perf_counter()
    try:
        with replaced_output(out, (), overwrite=False, what="a tiny model") as staging:  # whole or nothing
            build_tiny_model(
                args.arch, staging, seed=args.seed, hidden=args.hidden, vocab_size=args.vocab_size
            )
    except FileRefused as exc:
        parser.error(f"argument --out: {exc}")
    size = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    vocab = json.loads((out / "r3_tiny.json").read_text())["vocab_size"]
    print(
        f"{args.arch} tiny model in {out} (vocabulary of {vocab} tokens, {size / 1e6:.1f} MB, "
        f"{time.perf_counter() - start:.1f} s)"
    )
    return 0


def model_main(argv: list[str] | None = None) -> int:
    """`r3 model SUBCOMMAND`: model utilities (today: `tiny`)."""
    argv = list(argv or [])
    if not argv or argv[0] in ("-h", "--help") or argv[0] != "tiny":
        print("usage: r3 model tiny [--help]\n\n  tiny   build a tiny random VLM directory (no network)")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return tiny_model_main(argv[1:])
