"""Tiny randomly initialised VLMs, built on disk with no network, for tests of the model code.

A tiny model has the real architecture (the same config class, processor and chat-template
contract as the full checkpoint) at toy size, so the transformers backend, the OpenAI backend
against ``transformers serve``, and the training code run end to end on a laptop CPU in seconds.
Its output is random text: tests assert plumbing, never quality.

The tokenizer is a byte-level BPE trained on the project's own text (our prompts and instruction
phrasings), with the special tokens each processor looks up by name, and a chat template of our
own that renders images as the processor's placeholders.

Archs: "idefics3" (the SmolVLM v1 family), "qwen2_5_vl" and "qwen3_5" (Qwen3.5, thinking off by
the chat template). transformers 5.x constructs the Qwen processors only where torchvision is
installed (they insist on a video processor); the project's requirements install it, and without it
the Qwen models still build and generate text but their processor does not load.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from r3.files import write_text_atomically

ARCHS: tuple[str, ...] = ("qwen2_5_vl", "qwen3_5", "idefics3")
#: Archs whose transformers processor insists on a video processor, which needs torchvision
#: (transformers 5.x). Without torchvision they still build, but their processor cannot load.
NEEDS_TORCHVISION: frozenset[str] = frozenset({"qwen2_5_vl", "qwen3_5"})

#: Special tokens (Qwen names) the Qwen processors and our chat template rely on.
QWEN_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<think>",
    "</think>",
)
#: Special tokens the Idefics3 (SmolVLM v1) processor looks up, including its 6x6 tile tags.
IDEFICS3_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<end_of_utterance>",
    "<fake_token_around_image>",
    "<image>",
    "<global-img>",
    *(f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)),
)

#: Our Qwen-style chat template. With ``enable_thinking=False`` it closes an empty think block,
#: which is how Qwen3-family templates switch thinking off.
QWEN_CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for item in message['content'] -%}"
    "{%- if item['type'] in ['image', 'image_url'] -%}{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif item['type'] == 'text' -%}{{- item['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and not enable_thinking -%}"
    "{{- '<think>\\n\\n</think>\\n\\n' -}}{%- endif -%}"
    "{%- endif -%}"
)
#: Our SmolVLM-style chat template ("User:" / "Assistant:" turns, ``<image>`` placeholders).
IDEFICS3_CHAT_TEMPLATE = (
    "{{- '<|im_start|>' -}}"
    "{%- for message in messages -%}"
    "{{- message['role'] | capitalize + ':' -}}"
    "{%- if message['content'] is string -%}{{- ' ' + message['content'] -}}"
    "{%- else -%}{%- for item in message['content'] -%}"
    "{%- if item['type'] in ['image', 'image_url'] -%}{{- '<image>' -}}"
    "{%- elif item['type'] == 'text' -%}{{- ' ' + item['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<end_of_utterance>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- 'Assistant:' -}}{%- endif -%}"
)


def _corpus() -> list[str]:
    """Project text the tokenizer learns from: prompts of both suites and many instruction strings."""
    import numpy as np

    from r3.instructions import language_table, packing
    from r3.reasoning.prompts import ReasonerInput, prompt_text

    image = np.zeros((8, 8, 3), np.uint8)
    texts = []
    for mode, history in itertools.product(
        ("reason", "instruction_only"), ("response", "instruction", "none")
    ):
        texts.append(
            prompt_text(
                ReasonerInput(
                    "language_table", "make a line with the blue blocks", [image], mode=mode, history=history
                )
            )
        )
        texts.append(
            prompt_text(
                ReasonerInput(
                    "packing",
                    "pack the soup can into the small tray",
                    [image] * 3,
                    mode=mode,
                    history=history,
                )
            )
        )
    rng = np.random.default_rng(0)
    for _ in range(400):
        instr = language_table.sample_instruction(rng)
        texts += [
            f"Instruction: {language_table.format_instruction(instr)}",
            language_table.paraphrase(instr, rng),
        ]
    for item, tray in itertools.product(packing.ITEMS, packing.TRAYS):
        texts += [f"Pack the {item} into the {tray} tray.", f"Remove the {item} from the {tray} tray."]
    return texts


def _train_tokenizer(vocab_size: int, special_tokens: tuple[str, ...], eos: str):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=eos,
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        model_max_length=8192,
    )


def _text_config(tok, hidden: int, eos: int, layers: int = 2) -> dict:
    return {
        "vocab_size": len(tok),
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 8192,
        "eos_token_id": eos,
        "pad_token_id": tok.pad_token_id,
        "bos_token_id": None,
        "tie_word_embeddings": True,
    }


def _qwen_parts(arch: str, tok, hidden: int):
    """Config and image processor for the Qwen archs (images capped at 4x4 merged patches = 16 tokens)."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    ids = {
        name: tok.convert_tokens_to_ids(t)
        for name, t in (
            ("image_token_id", "<|image_pad|>"),
            ("video_token_id", "<|video_pad|>"),
            ("vision_start_token_id", "<|vision_start|>"),
            ("vision_end_token_id", "<|vision_end|>"),
        )
    }
    text = _text_config(tok, hidden, tok.convert_tokens_to_ids("<|im_end|>"))
    head_dim = hidden // text["num_attention_heads"]
    # Multimodal RoPE splits half a head's rotary dims over (time, height, width).
    half = head_dim // 2
    mrope = [half - 2 * (half // 3), half // 3, half // 3]
    vision = {
        "depth": 2,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 2,
        "out_hidden_size": hidden,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    }
    if arch == "qwen2_5_vl":
        from transformers import Qwen2_5_VLConfig

        patch = 14
        text["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": mrope}
        vision.update(patch_size=patch, window_size=56, fullatt_block_indexes=[1])
        config = Qwen2_5_VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=True, **ids)
    else:
        from transformers import Qwen3_5Config

        patch = 16
        text.update(
            head_dim=head_dim,
            layer_types=["linear_attention", "full_attention"],
            linear_key_head_dim=16,
            linear_value_head_dim=16,
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 10000.0,
                "partial_rotary_factor": 1.0,
                "mrope_section": mrope,
                "mrope_interleaved": True,
            },
        )
        vision.update(patch_size=patch, num_position_embeddings=64)
        config = Qwen3_5Config(text_config=text, vision_config=vision, tie_word_embeddings=True, **ids)
    unit = 2 * patch  # one merged image token covers unit x unit pixels
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=patch,
        merge_size=2,
        temporal_patch_size=2,
        size={"shortest_edge": unit * unit, "longest_edge": 16 * unit * unit},
    )
    return config, image_processor, {}


#: Pixels per side of an idefics3 image patch; the connector merges 2 x 2 patches into one token.
IDEFICS3_PATCH = 16


def _idefics3_parts(tok, hidden: int, layers: int, image_size: int, vision: tuple[int, int, int]):
    """Config and image processor for Idefics3 / SmolVLM v1: one tile of ``image_size`` pixels, a
    token per 32 x 32 pixels (64: 4 image tokens); ``vision`` is the image tower's width, layers and
    attention heads."""
    from transformers import Idefics3Config
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    patch, scale = IDEFICS3_PATCH, 2
    config = Idefics3Config(
        text_config={
            **_text_config(tok, hidden, tok.convert_tokens_to_ids("<end_of_utterance>"), layers),
            "model_type": "llama",
        },
        vision_config={
            "hidden_size": vision[0],
            "intermediate_size": 2 * vision[0],
            "num_hidden_layers": vision[1],
            "num_attention_heads": vision[2],
            "image_size": image_size,
            "patch_size": patch,
        },
        scale_factor=scale,
        image_token_id=tok.convert_tokens_to_ids("<image>"),
        tie_word_embeddings=True,
    )
    image_processor = Idefics3ImageProcessorPil(
        do_image_splitting=False,
        size={"longest_edge": image_size},
        max_image_size={"longest_edge": image_size},
    )
    return config, image_processor, {"image_seq_len": (image_size // patch) ** 2 // scale**2}


#: The language model's width is a multiple of this: its attention heads split it evenly, and each
#: head's rotary dimensions split again over time, height and width (the Qwen archs).
HIDDEN_UNIT = 32


#: A tiny model's sizes at most: larger ones are no longer tiny (a CPU builds them for minutes, and a
#: hidden size of a million asks for terabytes).
MAX_HIDDEN, MAX_VOCAB = 2048, 65_536
#: The byte-level BPE alphabet (one token per byte) every tiny tokenizer starts from.
BYTE_ALPHABET = 256


def least_vocab_size(arch: str) -> int:
    """The fewest tokens a tokenizer of ``arch`` has: its special tokens and the byte alphabet."""
    return len(QWEN_SPECIAL_TOKENS if arch in NEEDS_TORCHVISION else IDEFICS3_SPECIAL_TOKENS) + BYTE_ALPHABET


def check_vocab_size(arch: str, vocab_size: int) -> None:
    """Refuse a vocabulary the tokenizer of ``arch`` cannot have: fewer tokens than
    :func:`least_vocab_size` (BPE would build those anyway) or more than :data:`MAX_VOCAB`. BPE
    training stops early when r3's prompts give no more merges, so a large size is an upper bound."""
    least = least_vocab_size(arch)
    if (
        isinstance(vocab_size, bool)
        or not isinstance(vocab_size, int)
        or not least <= vocab_size <= MAX_VOCAB
    ):
        raise ValueError(
            f"vocab_size={vocab_size!r}: expected {least}..{MAX_VOCAB} for {arch} (at least its "
            f"{least - BYTE_ALPHABET} special tokens and the {BYTE_ALPHABET}-byte alphabet)"
        )


def check_sizes(
    arch: str, hidden: int, layers: int, image_size: int, vision: tuple[int, int, int], vocab_size: int
) -> None:
    """Refuse sizes :func:`build_tiny_model` cannot build, with the reason (before any work)."""
    sizes = {"hidden": hidden, "layers": layers, "image_size": image_size}
    sizes.update(zip(("vision_hidden", "vision_layers", "vision_heads"), vision, strict=True))
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r}: expected a whole number >= 1")
    if hidden > MAX_HIDDEN:
        raise ValueError(f"hidden={hidden}: at most {MAX_HIDDEN} for a tiny model")
    if arch not in ARCHS:
        raise ValueError(f"arch={arch!r}: expected one of {ARCHS}")
    if hidden < HIDDEN_UNIT or hidden % HIDDEN_UNIT:
        raise ValueError(f"hidden={hidden}: must be a positive multiple of {HIDDEN_UNIT}")
    if arch in NEEDS_TORCHVISION and (layers, image_size, vision) != (2, 64, (32, 2, 2)):
        raise ValueError(f"layers, image_size and vision_* are idefics3 options; {arch} keeps its own")
    if min(vision) < 1 or vision[0] % vision[2]:
        raise ValueError(f"vision_hidden={vision[0]} must split evenly into vision_heads={vision[2]}")
    if image_size % (2 * IDEFICS3_PATCH):
        raise ValueError(f"image_size={image_size}: must be a multiple of {2 * IDEFICS3_PATCH}")
    check_vocab_size(arch, vocab_size)


def build_tiny_model(
    arch: str,
    out_dir: str | Path,
    seed: int = 0,
    hidden: int = 64,
    vocab_size: int = 1024,
    layers: int = 2,
    image_size: int = 64,
    vision_hidden: int = 32,
    vision_layers: int = 2,
    vision_heads: int = 2,
) -> Path:
    """Build a tiny random ``arch`` VLM and save model + processor files to ``out_dir``; returns the path.

    ``layers`` and ``image_size`` (the idefics3 tile, a multiple of 32) size the language model and
    the image, ``vision_*`` the idefics3 image tower; ``r3 mini`` trains such a model from scratch.
    ``vocab_size`` bounds the tokenizer's vocabulary (:func:`check_vocab_size`); ``r3_tiny.json``
    records the size built, written last (``r3 mini`` takes it to mean the model is whole).

    The result loads with ``AutoProcessor`` / ``AutoModelForImageTextToText.from_pretrained(out_dir,
    local_files_only=True)`` and ``transformers serve`` serves it (Qwen archs: where torchvision is
    installed, see :data:`NEEDS_TORCHVISION`). Same arguments, same files.
    """
    import torch
    from transformers import AutoModelForImageTextToText

    vision = (vision_hidden, vision_layers, vision_heads)
    check_sizes(arch, hidden, layers, image_size, vision, vocab_size)
    qwen = arch in NEEDS_TORCHVISION
    special = QWEN_SPECIAL_TOKENS if qwen else IDEFICS3_SPECIAL_TOKENS
    eos = "<|im_end|>" if qwen else "<end_of_utterance>"
    template = QWEN_CHAT_TEMPLATE if qwen else IDEFICS3_CHAT_TEMPLATE
    tok = _train_tokenizer(vocab_size, special, eos)
    config, image_processor, processor_kwargs = (
        _qwen_parts(arch, tok, hidden) if qwen else _idefics3_parts(tok, hidden, layers, image_size, vision)
    )
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config)
    model.generation_config.eos_token_id = config.text_config.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    _save_processor(arch, out, tok, image_processor, template, processor_kwargs)
    record = {"arch": arch, "seed": seed, "hidden": hidden, "layers": layers, "image_size": image_size}
    record["vocab_size"] = len(tok)  # what BPE built: at most the vocab_size asked for
    if not qwen:
        record |= {
            "vision_hidden": vision_hidden,
            "vision_layers": vision_layers,
            "vision_heads": vision_heads,
        }
    write_text_atomically(out / "r3_tiny.json", json.dumps(record, indent=1))  # the last file: whole or none
    return out


def _save_processor(
    arch: str, out: Path, tok, image_processor, template: str, processor_kwargs: dict
) -> None:
    """Save the processor; without torchvision, write the same files part by part.

    transformers' Qwen-VL processor classes refuse to be constructed without a video processor,
    which needs torchvision; their on-disk format is still just these parts, so a machine that
    has torchvision loads what we write here.
    """
    import importlib.util

    import transformers

    cls = {
        "qwen2_5_vl": "Qwen2_5_VLProcessor",
        "qwen3_5": "Qwen3VLProcessor",
        "idefics3": "Idefics3Processor",
    }[arch]
    if arch in NEEDS_TORCHVISION and importlib.util.find_spec("torchvision") is None:
        tok.save_pretrained(out)
        image_processor.save_pretrained(out)
        (out / "chat_template.jinja").write_text(template)
        (out / "processor_config.json").write_text(
            json.dumps({"processor_class": cls, **processor_kwargs}, indent=1)
        )
        return
    parts = {"image_processor": image_processor, "tokenizer": tok, "chat_template": template}
    if arch in NEEDS_TORCHVISION:  # a video processor with the image processor's geometry
        video_cls = "Qwen3VLVideoProcessor" if arch == "qwen3_5" else "Qwen2VLVideoProcessor"
        parts["video_processor"] = getattr(transformers, video_cls)(
            patch_size=image_processor.patch_size,
            merge_size=image_processor.merge_size,
            temporal_patch_size=image_processor.temporal_patch_size,
            size=dict(image_processor.size),
        )
    processor = getattr(transformers, cls)(**parts, **processor_kwargs)
    processor.save_pretrained(out)
