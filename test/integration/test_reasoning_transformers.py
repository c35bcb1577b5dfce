"""The transformers backend on tiny random models built on disk: plumbing, costs, typed errors.

A random model writes gibberish, so these tests assert the pipeline (image in, tokens counted,
latency split, invalid text reported as a typed error), never the quality of the instruction.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from r3.reasoning import BackendError, ReasonerInput, ReasoningBudget, ResponseError, decide, make_backend
from r3.reasoning.tiny import NEEDS_TORCHVISION, build_tiny_model

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return build_tiny_model("idefics3", tmp_path_factory.mktemp("tiny") / "idefics3", seed=0)


@pytest.fixture(scope="module")
def backend(tiny_dir):
    b = make_backend(f"transformers:{tiny_dir}", max_new_tokens=24, seed=0)
    b.load()
    yield b
    b.close()


def _scene() -> np.ndarray:
    """A rendered board when the simulator is installed, else a synthetic RGB frame."""
    if importlib.util.find_spec("mujoco") is not None:
        from r3.sim.language_table.env import LanguageTableEnv

        env = LanguageTableEnv(width=160, height=120)
        try:
            env.reset(seed=0)
            return env.render()
        finally:
            env.close()
    return np.random.default_rng(0).integers(0, 256, (120, 160, 3), dtype=np.uint8)


def test_decision_step_end_to_end(backend, tiny_dir):
    inp = ReasonerInput("language_table", "make a vertical line with the blue blocks", [_scene()])
    chunks: list[str] = []
    step = decide(backend, inp, ReasoningBudget(None), on_text=chunks.append)
    out = step.output
    assert out.prompt_tokens > 100 and 0 < out.completion_tokens <= 24
    assert 0 < out.model_s <= out.latency_s and out.model_id == str(tiny_dir)
    assert out.finish_reason in ("stop", "length") and "".join(chunks) == out.raw_text
    assert step.valid or (isinstance(step.parsed, ResponseError) and step.parsed.reason)


def test_same_seed_same_answer(backend):
    inp = ReasonerInput("packing", "pack the soup can into the small tray", [_scene()] * 2)
    assert backend.decide(inp).raw_text == backend.decide(inp).raw_text


@pytest.mark.parametrize("n", [0, 8, 16])
def test_budgets_cap_reasoning_tokens(backend, n):
    inp = ReasonerInput("language_table", "make a line", [_scene()])
    step = decide(backend, inp, ReasoningBudget(n, instruction_tokens=6))
    out = step.output
    assert out.reasoning_tokens <= n and out.completion_tokens <= n + 6
    assert out.raw_text.count("\nInstruction:") + out.raw_text.startswith("Instruction:") >= 1
    reasoning = out.raw_text.partition("Instruction:")[0]  # the reasoning stage stops at the header
    if n == 0:  # no reasoning stage: the answer opens with the forced header
        assert (reasoning, out.stages, out.reasoning_tokens) == ("", 1, 0), out
    else:  # a random model never writes the header itself: the cap ended its reasoning, n tokens in
        assert out.stages == 2 and out.reasoning_truncated and out.reasoning_tokens == n, out
        uncapped = backend.decide(inp).raw_text  # the same sampling (same seed) without a budget
        cut = reasoning.rstrip().rstrip("\ufffd")  # a character cut mid-way decodes as U+FFFD
        assert cut.strip() and uncapped.startswith(cut) and len(cut) < len(uncapped.rstrip()), (out, uncapped)


def test_missing_directory_names_the_path(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(BackendError, match=str(missing)):
        make_backend(f"transformers:{missing}").load()


def test_text_only_model_is_refused(tmp_path, tiny_dir):
    import shutil

    from transformers import AutoTokenizer

    text_only = tmp_path / "text-only"
    shutil.copytree(tiny_dir, text_only)
    for name in ("processor_config.json", "preprocessor_config.json"):
        (text_only / name).unlink(missing_ok=True)
    AutoTokenizer.from_pretrained(text_only, local_files_only=True)  # still a loadable tokenizer
    with pytest.raises(BackendError, match="image processor"):
        make_backend(f"transformers:{text_only}").load()


def test_a_folder_asking_for_beam_search_is_refused_at_load(tmp_path, tiny_dir):
    """Found by a hostile user: a generation_config.json with num_beams 100000 loaded, and the first
    decision asked for 100,000 copies of the prompt (a DefaultCPUAllocator failure, or the OOM killer)."""
    import json
    import shutil

    folder = tmp_path / "beams"
    shutil.copytree(tiny_dir, folder)
    path = folder / "generation_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "num_beams": 100_000}))
    with pytest.raises(
        BackendError, match="generation_config.json: num_beams=100000: the reasoner decodes one"
    ):
        make_backend(f"transformers:{folder},device=cpu").load()
    for beams in (None, 1):  # unset or one: loads
        path.write_text(json.dumps({**json.loads(path.read_text()), "num_beams": beams}))
        make_backend(f"transformers:{folder},device=cpu").load()


@pytest.mark.parametrize("arch", sorted(NEEDS_TORCHVISION))
def test_qwen_tiny_models_build_and_generate(tmp_path, arch):
    """The Qwen archs build anywhere; their processor needs torchvision, so without it only
    the language side is exercised here."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoTokenizer

    out = build_tiny_model(arch, tmp_path / arch)
    assert sum(p.stat().st_size for p in out.iterdir()) < 20e6
    model = AutoModelForImageTextToText.from_pretrained(out, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(out, local_files_only=True)
    chat = [{"role": "user", "content": "touch the red moon"}]
    assert tok.apply_chat_template(
        chat, add_generation_prompt=True, tokenize=False, enable_thinking=False
    ).endswith("<think>\n\n</think>\n\n")
    ids = tok.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.inference_mode():
        gen = model.generate(**ids, max_new_tokens=5, do_sample=False)
    assert gen.shape[1] > ids["input_ids"].shape[1]
    if importlib.util.find_spec("torchvision") is not None:
        backend = make_backend(f"transformers:{out}", max_new_tokens=8)
        backend.load()
        step = decide(backend, ReasonerInput("language_table", "make a line", [_scene()]))
        assert step.output.prompt_tokens > 100


@pytest.mark.parametrize("suite, images", [("language_table", 1), ("packing", 2)])
def test_a_constrained_spec_makes_the_random_model_answer_validly(tiny_dir, suite, images):
    """`constrained=true` in the spec: every decision of the random tiny model parses;
    without it none does."""
    inp = ReasonerInput(
        suite, "make a line" if suite == "language_table" else "pack the soup can", [_scene()] * images
    )
    answers = {}
    for constrained in ("true", "false"):
        b = make_backend(f"transformers:{tiny_dir},constrained={constrained},max_new_tokens=24,device=cpu")
        b.load()
        answers[constrained] = [
            decide(b, inp, ReasoningBudget(12, instruction_tokens=24)).valid for _ in range(3)
        ]
        b.close()
    assert answers == {"true": [True] * 3, "false": [False] * 3}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("repetition_penalty", 0),
        ("repetition_penalty", -1.5),
        ("repetition_penalty", "high"),
        ("temperature", -0.5),
        ("top_p", 1.5),
        ("top_p", 0),
        ("top_k", -1),
        ("top_k", 2.5),
        ("min_p", 2),
        ("no_repeat_ngram_size", True),
    ],
)
def test_a_sampling_setting_generate_refuses_is_refused_at_load(tmp_path, tiny_dir, field, value):
    """Found by a review: a generation_config.json with repetition_penalty 0 (or negative, or no
    number) loaded, and the first decision failed in transformers' logits processors."""
    import json
    import shutil

    folder = tmp_path / "sampling"
    shutil.copytree(tiny_dir, folder)
    path = folder / "generation_config.json"
    saved = json.loads(path.read_text())
    path.write_text(json.dumps({**saved, field: value}))
    backend = make_backend(f"transformers:{folder},device=cpu")
    with pytest.raises(BackendError, match=f"generation_config.json: {field}=") as caught:
        backend.load()
    assert "\n" not in str(caught.value) and backend.model is None


def test_a_folder_with_ordinary_sampling_settings_loads(tmp_path, tiny_dir):
    import json
    import shutil

    folder = tmp_path / "ordinary"
    shutil.copytree(tiny_dir, folder)
    path = folder / "generation_config.json"
    ordinary = {"repetition_penalty": 1.05, "temperature": 0.7, "top_p": 0.8, "top_k": 20, "min_p": None}
    path.write_text(json.dumps({**json.loads(path.read_text()), **ordinary}))
    backend = make_backend(f"transformers:{folder},device=cpu")
    backend.load()
    backend.close()


@pytest.mark.parametrize(
    ("tower", "field", "value", "said"),
    [
        ("text_config", "num_hidden_layers", 1_000_000, "text_config.num_hidden_layers=1000000: more than"),
        ("text_config", "hidden_size", 10**6, "text_config.hidden_size=1000000: more than"),
        ("text_config", "intermediate_size", 10**12, "billion parameters"),
        ("vision_config", "num_hidden_layers", 1000, "billion parameters"),
    ],
)
def test_a_config_of_an_absurd_size_is_refused_before_anything_is_built(
    tmp_path, tiny_dir, monkeypatch, tower, field, value, said
):
    """Found by a review: config.json asking for a million layers (or a million-wide model) went to
    from_pretrained, which builds every module and allocates its weights before it finds the
    checkpoint has none of them: the backend and `r3 train` ran out of memory instead of refusing."""
    import json
    import shutil

    import transformers

    from r3.train.checkpoint import load_model
    from r3.train.config import ConfigError

    folder = tmp_path / "absurd"
    shutil.copytree(tiny_dir, folder)
    path = folder / "config.json"
    config = json.loads(path.read_text())
    config[tower][field] = value
    if field == "num_hidden_layers" and value == 1000:  # 1,000 layers, each 65,536 wide: ~17 trillion
        config[tower]["hidden_size"] = 65536
    path.write_text(json.dumps(config))

    def never(*args, **kwargs):
        raise AssertionError("from_pretrained was called")

    monkeypatch.setattr(transformers.AutoModelForImageTextToText, "from_pretrained", never)
    backend = make_backend(f"transformers:{folder},device=cpu")
    assert said in backend.load_problem() and "\n" not in backend.load_problem()
    with pytest.raises(BackendError, match=said):
        backend.load()
    with pytest.raises(ConfigError, match=said):
        load_model(folder)


def test_real_vlm_configs_are_not_refused_for_their_size():
    """The size check passes the 2-4B VLMs R^3 trains (their config.json's size fields)."""
    from r3.reasoning.backends import transformers_backend as tb

    qwen25_vl_3b = {
        "hidden_size": 2048,
        "intermediate_size": 11008,
        "num_hidden_layers": 36,
        "vocab_size": 151936,
        "vision_config": {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420},
    }
    smolvlm = {
        "text_config": {
            "hidden_size": 2048,
            "intermediate_size": 8192,
            "num_hidden_layers": 24,
            "vocab_size": 49155,
        },
        "vision_config": {"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27},
    }
    qwen3_vl_4b = {
        "text_config": {
            "hidden_size": 2560,
            "intermediate_size": 9728,
            "num_hidden_layers": 36,
            "vocab_size": 151936,
        },
        "vision_config": {"depth": 24, "hidden_size": 1024, "intermediate_size": 4096},
    }
    for config, billions in ((qwen25_vl_3b, (3, 5)), (smolvlm, (1.5, 3)), (qwen3_vl_4b, (4, 6))):
        assert billions[0] < tb.estimated_parameters(config) / 1e9 < billions[1], config


#: Text-tower config.json size fields of published mixture-of-experts models, with their total
#: parameter counts (billions) as published.
MOE_CONFIGS = {
    "Qwen3-30B-A3B": (
        {"hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128}
        | {"num_experts_per_tok": 8, "num_hidden_layers": 48, "vocab_size": 151936},
        30.5,
    ),
    "Mixtral-8x7B": (
        {"hidden_size": 4096, "intermediate_size": 14336, "num_local_experts": 8, "num_experts_per_tok": 2}
        | {"num_hidden_layers": 32, "vocab_size": 32000},
        46.7,
    ),
    "Qwen1.5-MoE-A2.7B": (
        {"hidden_size": 2048, "intermediate_size": 5632, "moe_intermediate_size": 1408, "num_experts": 60}
        | {"shared_expert_intermediate_size": 5632, "num_hidden_layers": 24, "vocab_size": 151936},
        14.3,
    ),
    "DeepSeek-V3": (
        {"hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048}
        | {"n_routed_experts": 256, "n_shared_experts": 1, "first_k_dense_replace": 3}
        | {"num_hidden_layers": 61, "vocab_size": 129280},
        671,
    ),
}


@pytest.mark.parametrize("name", MOE_CONFIGS)
def test_a_mixture_of_experts_config_counts_every_expert(name):
    """Found by a review: the size estimate counted one MLP per layer, so an MoE model came out at a
    fraction of its size (Qwen3-30B-A3B at about 3 billion). Every expert counts (the total, not the
    parameters a token uses), within 15 % of the published totals."""
    from r3.reasoning.backends import transformers_backend as tb

    config, billions = MOE_CONFIGS[name]
    assert abs(tb.estimated_parameters(config) / 1e9 / billions - 1) < 0.15, tb.estimated_parameters(config)
    assert abs(tb.estimated_parameters({"text_config": config}) / 1e9 / billions - 1) < 0.15


def test_a_mixture_of_experts_config_of_an_absurd_size_is_refused(tmp_path):
    """Found by a review, as above: Qwen3-30B-A3B's config with 100,000 experts (about 23 million
    billion parameters) passed the size check and went to from_pretrained."""
    import json

    from r3.reasoning.backends import transformers_backend as tb

    config, _ = MOE_CONFIGS["Qwen3-30B-A3B"]
    (tmp_path / "config.json").write_text(json.dumps({"text_config": {**config, "num_experts": 10**5}}))
    problem = tb.model_dir_problem(tmp_path)
    assert problem is not None and "config.json: declares about" in problem, problem
    assert "billion parameters" in problem and "\n" not in problem
