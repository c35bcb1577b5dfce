"""Grammar-constrained decoding of the instruction: after the instruction marker, only tokens that
continue some canonical instruction of the suite (and then the end of the answer) may be sampled.

Why: a reasoner's instruction must parse, or the robot holds still. Large VLMs learn the grammar
from a prompt; a small model trained from scratch spends its capacity on it, and a random tiny model
never hits it. Constraining the decoder makes every finished answer's instruction valid by
construction while leaving the reasoning free, so the model's job becomes *choosing* the
instruction. The same processor serves a real VLM through transformers (``constrained=true`` in
a model folder's prompt settings or a backend option); vLLM users get the same effect from its
guided decoding with :func:`instruction_regex`.

Canonical instructions are enumerated from each suite's grammar (a few thousand strings), tokenised
once, and stored as a token trie. The processor watches the decoded continuation: once the marker
(``Instruction:``) has been written, the tokens after it must walk the trie; at a leaf only the
end-of-sequence token is allowed. Answers cut by the token budget before the marker are not
touched (the parser refuses them as usual).

>>> len(canonical_instructions("packing"))  # 10 items x (3 pack + 3 remove + 6 transfer)
120
>>> "move the red moon up slightly" in canonical_instructions("language_table")
True
"""

from __future__ import annotations

import functools
import itertools
import re

MARKER = "Instruction:"


@functools.cache
def canonical_instructions(suite: str) -> tuple[str, ...]:
    """Every canonical instruction text of ``suite``'s grammar, sorted."""
    from r3.suites import get_suite

    return get_suite(suite).hook("canonical_instructions")()


def packing_instructions() -> tuple[str, ...]:
    """Every canonical packing instruction (``r3.instructions.packing``), sorted."""
    from r3.instructions.packing import (
        ITEMS,
        TRAYS,
        PackingInstruction,
        PackingInstructionType,
        format_instruction,
    )

    out = set()
    for kind, item, tray, to_tray in itertools.product(PackingInstructionType, ITEMS, TRAYS, (None, *TRAYS)):
        try:
            out.add(format_instruction(PackingInstruction(kind, item, tray, to_tray)))
        except ValueError:
            continue
    return tuple(sorted(out))


def language_table_instructions() -> tuple[str, ...]:
    """Every canonical Language Table instruction (``r3.instructions.language_table``), sorted."""
    from r3.instructions import language_table as lt

    out = set()
    for kind, components in lt._COMPONENTS.items():
        domains = [
            lt._VALID_VALUES[c]
            if c != "direction" or kind is not lt.InstructionType.BLOCK_TO_SIDE
            else lt.SIDE_DIRECTIONS
            for c in components
        ]
        for values in itertools.product(*domains):
            for adverb in (None, *lt.ADVERBS):
                try:
                    instr = lt.Instruction(kind, **dict(zip(components, values)), adverb=adverb)
                except ValueError:
                    continue
                out.add(lt.format_instruction(instr))
    return tuple(sorted(out))


def instruction_regex(suite: str) -> str:
    """A regular expression of the whole instruction line, for servers with regex-guided decoding."""
    return "(?:" + "|".join(re.escape(s) for s in canonical_instructions(suite)) + ")"


class TokenTrie:
    """Token-id sequences of the canonical instructions, as nested dicts; ``END`` marks a leaf."""

    END = -1

    def __init__(self, sequences):
        self.root: dict = {}
        for seq in sequences:
            node = self.root
            for token in seq:
                node = node.setdefault(int(token), {})
            node[self.END] = {}

    def node(self, prefix) -> dict | None:
        node = self.root
        for token in prefix:
            node = node.get(int(token))
            if node is None:
                return None
        return node


class InstructionConstraint:
    """A transformers logits processor (``generate(logits_processor=[...])``) for one suite.

    ``prompt_length``: tokens of the prompt in ``input_ids`` (set per call with :meth:`start`);
    ``prefix``: text already written before generation starts (the assistant prefix), so a prefix
    that ends with the marker constrains from the first generated token.
    """

    def __init__(self, tokenizer, suite: str, eos_token_id: int | list[int] | None = None):
        self.tokenizer = tokenizer
        eos = tokenizer.eos_token_id if eos_token_id is None else eos_token_id
        self.eos = [eos] if isinstance(eos, int) else list(eos or [])
        if not self.eos:
            raise ValueError("the tokenizer has no end-of-sequence token to finish a constrained instruction")
        self.trie = TokenTrie(
            tokenizer.encode(" " + text, add_special_tokens=False) for text in canonical_instructions(suite)
        )
        self.start(0)

    def start(self, prompt_length: int, prefix: str = "") -> InstructionConstraint:
        self.prompt_length, self.prefix = int(prompt_length), prefix
        self._marker_at: dict[int, int] = {}
        return self

    def allowed(self, generated: list[int], row: int = 0) -> list[int] | None:
        """Token ids allowed next after ``generated`` (None: unconstrained, before the marker)."""
        at = self._marker_at.get(row)
        if at is None:
            text = self.prefix + self.tokenizer.decode(generated, skip_special_tokens=True)
            if not text.rstrip().endswith(MARKER):
                return None
            at = self._marker_at[row] = len(generated)
        node = self.trie.node(generated[at:])
        if node is None:  # left the trie (cannot happen while constrained): only the end remains
            return self.eos
        nxt = [t for t in node if t != TokenTrie.END]
        return nxt + self.eos if TokenTrie.END in node else nxt

    def __call__(self, input_ids, scores):
        import torch

        for row in range(input_ids.shape[0]):
            allowed = self.allowed(input_ids[row, self.prompt_length :].tolist(), row)
            if allowed is not None:
                mask = torch.full_like(scores[row], float("-inf"))
                mask[allowed] = 0.0
                scores[row] = scores[row] + mask
        return scores


def constrain_generate(model, constraint: InstructionConstraint) -> None:
    """Make every ``model.generate`` call decode its instruction under ``constraint``.

    For a trainer that generates by calling ``model.generate(input_ids=..., ...)`` itself and takes
    no logits processor (TRL's GRPOTrainer without vLLM): Stage II then samples the way the
    checkpoint answers at inference, so no rollout is lost to an instruction outside the grammar.
    The policy-gradient terms still use the model's unconstrained log-probabilities, as any
    trainer does that masks tokens at sampling time (the masked tokens have zero probability of
    being sampled, so their logits only enter through the softmax's normaliser).
    """
    generate = model.generate

    def constrained(*args, **kwargs):
        ids = kwargs["input_ids"] if "input_ids" in kwargs else args[0]
        processors = list(kwargs.pop("logits_processor", None) or [])
        return generate(*args, logits_processor=[*processors, constraint.start(ids.shape[1])], **kwargs)

    model.generate = constrained
