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
    constrain_generate,
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


class _ForceText:
    """A logits processor that writes ``ids`` first, as a trained model writes its reasoning."""

    def __init__(self, ids: list[int], prompt_length: int):
        self.ids, self.prompt_length = ids, prompt_length

    def __call__(self, input_ids, scores):
        step = input_ids.shape[1] - self.prompt_length
        if step < len(self.ids):
            scores[:] = float("-inf")
            scores[:, self.ids[step]] = 0.0
        return scores


def test_a_wrapped_generate_constrains_every_call_as_a_trainer_makes_it(tmp_path):
    """TRL's GRPOTrainer calls ``model.generate(input_ids=..., ...)`` with no logits processor;
    after ``constrain_generate`` each of its calls (a batch of sampled rows, then another) writes a
    valid instruction after the marker, and a processor the caller passes still runs first."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from r3.reasoning.tiny import build_tiny_model

    folder = build_tiny_model("idefics3", tmp_path / "m")
    processor = AutoProcessor.from_pretrained(folder, local_files_only=True)
    model = AutoModelForImageTextToText.from_pretrained(folder, local_files_only=True).eval()
    tok = processor.tokenizer
    eos = model.generation_config.eos_token_id
    constrain_generate(model, InstructionConstraint(tok, "language_table", eos))
    reasoning = tok.encode(f"Reasoning: one more step.\n{MARKER}", add_special_tokens=False)
    for call in range(2):
        inputs = processor(text=[f"User: step {call}.\nAssistant:"], return_tensors="pt")
        length = inputs["input_ids"].shape[1]
        torch.manual_seed(call)
        with torch.inference_mode():
            out = model.generate(
                input_ids=inputs["input_ids"],
                attention_mask=inputs["attention_mask"],
                max_new_tokens=40,
                do_sample=True,
                temperature=1.0,
                num_return_sequences=3,
                logits_processor=[_ForceText(reasoning, length)],
            )
        answers = tok.batch_decode(out[:, length:], skip_special_tokens=True)
        for answer in answers:
            assert answer.startswith("Reasoning: one more step."), answer
            assert not isinstance(parse_response(answer, "language_table"), ResponseError), answer


def test_stage_two_constrains_its_rollouts_for_the_one_suite_of_its_rows(tiny):
    from r3.train.grpo import constrain_rollouts

    processor, model = tiny
    with pytest.raises(ValueError, match="one suite"):
        constrain_rollouts(model, processor, [{"suite": "language_table"}, {"suite": "packing"}])
    assert "generate" not in vars(model)
    constrain_rollouts(model, processor, [{"suite": "packing"}] * 2)
    assert vars(model)["generate"].__name__ == "constrained"
    del model.generate  # the module-scoped model serves the other tests unwrapped
