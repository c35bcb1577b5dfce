"""Grammar-constrained decoding: every canonical instruction is enumerated once and parses back
equal, and a random tiny model constrained after the marker always writes a valid instruction."""

from __future__ import annotations

import re

import numpy as np
import pytest

from r3.instructions import language_table, packing
from r3.reasoning.constrained import (
    MARKER,
    InstructionConstraint,
    TokenTrie,
    canonical_instructions,
    instruction_regex,
)
from r3.reasoning.parsing import ResponseError, parse_response


@pytest.mark.parametrize("suite, grammar", [("language_table", language_table), ("packing", packing)])
def test_every_canonical_instruction_parses_back_to_itself(suite, grammar):
    texts = canonical_instructions(suite)
    assert len(texts) == len(set(texts)) > 100
    for text in texts:
        parsed = grammar.parse(text)
        assert not isinstance(parsed, language_table.ParseError), text
        assert grammar.format_instruction(parsed) == text


def test_the_enumeration_covers_what_the_sampler_draws():
    rng = np.random.default_rng(0)
    texts = set(canonical_instructions("language_table"))
    for _ in range(500):
        assert language_table.format_instruction(language_table.sample_instruction(rng)) in texts


def test_the_regex_accepts_exactly_the_canonical_instructions():
    pattern = re.compile(instruction_regex("packing"))
    assert pattern.fullmatch("Pack the sugar box into the medium tray.")
    assert not pattern.fullmatch("Pack the sugar box into the huge tray.")


def test_trie_walks_prefixes_and_marks_leaves():
    trie = TokenTrie([[1, 2, 3], [1, 2], [4]])
    assert set(trie.node([1])) == {2}
    assert TokenTrie.END in trie.node([1, 2]) and 3 in trie.node([1, 2])
    assert trie.node([2]) is None


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from r3.reasoning.tiny import build_tiny_model

    folder = build_tiny_model("idefics3", tmp_path_factory.mktemp("tiny") / "m")
    torch.manual_seed(0)
    return (
        AutoProcessor.from_pretrained(folder, local_files_only=True),
        AutoModelForImageTextToText.from_pretrained(folder, local_files_only=True).eval(),
    )


def _generate(processor, model, prefix: str, constraint: InstructionConstraint | None, seed: int) -> str:
    import torch

    inputs = processor(text=["User: choose the next step.\nAssistant: " + prefix], return_tensors="pt")
    length = inputs["input_ids"].shape[1]
    kwargs = {"logits_processor": [constraint.start(length, prefix)]} if constraint else {}
    torch.manual_seed(seed)
    with torch.inference_mode():
        out = model.generate(**inputs, max_new_tokens=32, do_sample=True, temperature=1.0, **kwargs)
    return prefix + processor.tokenizer.decode(out[0, length:], skip_special_tokens=True)


@pytest.mark.parametrize("suite", ["language_table", "packing"])
def test_a_random_tiny_model_writes_valid_instructions_only_when_constrained(tiny, suite):
    processor, model = tiny
    constraint = InstructionConstraint(processor.tokenizer, suite, model.generation_config.eos_token_id)
    prefix = f"Reasoning: the goal needs one more step.\n{MARKER}"
    constrained = [_generate(processor, model, prefix, constraint, seed) for seed in range(4)]
    free = [_generate(processor, model, prefix, None, seed) for seed in range(4)]
    assert all(not isinstance(parse_response(a, suite), ResponseError) for a in constrained), constrained
    assert all(isinstance(parse_response(a, suite), ResponseError) for a in free), free


def test_the_reasoning_before_the_marker_is_left_free(tiny):
    processor, model = tiny
    tok = processor.tokenizer
    constraint = InstructionConstraint(tok, "packing", model.generation_config.eos_token_id).start(0, "")
    assert (
        constraint.allowed(tok.encode("Reasoning: the sugar box is on the table.", add_special_tokens=False))
        is None
    )
    after = constraint.allowed(tok.encode("Reasoning: go.\nInstruction:", add_special_tokens=False))
    assert after and set(after) == set(constraint.trie.root)
