"""Backend specs: one parser for every caller; typed, declared keys; clear errors before anything runs."""

from __future__ import annotations

import re

import pytest

from r3.data.collect import CollectConfig
from r3.eval.runner import EvalConfig, EvalError, evaluate
from r3.reasoning.backends import BackendError, make_backend
from r3.reasoning.backends.openai_backend import OpenAIBackend
from r3.reasoning.backends.spec import parse_spec
from r3.reasoning.backends.transformers_backend import TransformersBackend

URL = "http://127.0.0.1:8000/v1"


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def test_a_spec_splits_into_scheme_argument_and_pairs():
    spec = parse_spec("openai:http://h:1/v1, model=qwen:7b ,temperature=0.7")
    assert (spec.scheme, spec.argument, spec.pairs) == (
        "openai",
        "http://h:1/v1",
        (("model", "qwen:7b"), ("temperature", "0.7")),
    )
    assert parse_spec("expert") == parse_spec("expert:")


def test_spaces_around_the_scheme_are_not_part_of_it():
    """Found by a hostile user: the space rule held for the argument and the options but not the
    scheme, so "expert :" and "replay :FILE" named the unknown scheme 'expert '."""
    assert parse_spec(" expert :") == parse_spec("expert")
    assert make_backend("expert :").model_id == make_backend("expert").model_id


def test_options_reach_the_constructor_typed():
    backend = make_backend(
        f"openai:{URL},model=m,temperature=0.25,max_new_tokens=64,thinking=true,attempts=2"
    )
    assert isinstance(backend, OpenAIBackend)
    assert (backend.temperature, backend.max_new_tokens, backend.thinking, backend.attempts) == (
        0.25,
        64,
        True,
        2,
    )
    tf = make_backend(
        "transformers:/models/x,device=cpu,dtype=bfloat16,temperature=0.7,max_new_tokens=512,seed=4"
    )
    assert isinstance(tf, TransformersBackend)
    assert (tf.device, tf.dtype, tf.temperature, tf.max_new_tokens, tf.seed) == (
        "cpu",
        "bfloat16",
        0.7,
        512,
        4,
    )


def test_the_spec_wins_over_the_callers_defaults():
    assert make_backend(f"openai:{URL},model=m,max_new_tokens=8", max_new_tokens=99).max_new_tokens == 8
    assert make_backend(f"openai:{URL},model=m", max_new_tokens=99).max_new_tokens == 99


def test_device_defaults_to_auto():
    expected = "cuda" if cuda_available() else "cpu"
    assert make_backend("transformers:/models/x").device == expected


@pytest.mark.parametrize(
    "spec, message",
    [
        (
            "transformers:/m,colour=red",
            (
                "unknown key 'colour'; valid keys: device, dtype, constrained, temperature, top_p, "
                "max_new_tokens, seed, thinking"
            ),
        ),
        (
            f"openai:{URL},model=m,device=cuda",
            "unknown key 'device'; valid keys: model, key_env, temperature",
        ),
        ("expert,device=cuda", "unknown key 'device'; expert takes no options"),
        ("replay:/x.jsonl,seed=1", "unknown key 'seed'; replay takes no options"),
        ("transformers:/m,max_new_tokens=many", "max_new_tokens='many': expected an integer"),
        ("transformers:/m,temperature=hot", "temperature='hot': expected a number"),
        ("transformers:/m,thinking=maybe", "thinking='maybe': expected true or false"),
        ("transformers:/m,seed=1,seed=2", "seed is given twice"),
        ("transformers:/m,cuda", "'cuda' is not KEY=VALUE"),
        (f"openai:{URL}", "model= is required"),
        ("transformers:/m,dtype=int4", "dtype='int4': expected one of"),
        ("transformers:/m,device=tpu", "device='tpu': expected auto, cpu, cuda or cuda:N"),
        # Found by a hostile user: each of these URLs ended in the HTTP client's InvalidURL traceback.
        ("openai:http://127.0.0.1:abc/v1,model=x", "port 'abc' is not a number in [0, 65535]"),
        ("openai:http://[::1/v1,model=x", "Invalid IPv6 URL"),
        ("openai:http://:80/v1,model=x", "names no host"),
        ("openai:http://a\nb/v1,model=x", "holds a space or a control character"),
    ],
)
def test_bad_specs_fail_with_a_clear_error(spec, message):
    with pytest.raises(ValueError) as info:
        make_backend(spec)
    assert message in str(info.value)


@pytest.mark.skipif("cuda_available()", reason="checks the error on a machine without CUDA")
def test_a_cuda_device_without_cuda_is_refused_in_one_line():
    with pytest.raises(ValueError) as info:
        make_backend("transformers:/m,device=cuda:0")
    assert "device=cuda:0: CUDA is not available on this machine" in str(info.value)
    assert "\n" not in str(info.value)


def test_eval_refuses_a_bad_spec_before_any_episode(tmp_path):
    with pytest.raises(EvalError, match="unknown key 'colour'"):
        evaluate(EvalConfig(reasoner="expert,colour=red", tasks=("V",), scenes=1, trials=1), tmp_path)
    assert not (tmp_path / "episodes.jsonl").exists() or not (tmp_path / "episodes.jsonl").read_text()


def test_collect_refuses_a_bad_spec_in_its_config(tmp_path):
    with pytest.raises(ValueError, match="unknown key 'colour'"):
        CollectConfig(out=str(tmp_path), backend="transformers:/m,colour=red")


@pytest.mark.parametrize(
    "source", ["an empty folder", "a folder of bags", "a bag without its stream", "a torn bag"]
)
def test_a_replay_source_that_is_no_bag_is_refused_in_one_line(source, tmp_path):
    """Found by a hostile user: ``replay:DIR`` of a folder that is no bag (or a bag cut short) ended
    ``r3 sim demo`` and ``r3 eval`` in rosbags' traceback."""
    from r3.data.bags import EpisodeBagWriter, EpisodeInfo

    folder = tmp_path / "source"
    if source == "an empty folder":
        folder.mkdir()
    else:
        root = folder if source == "a folder of bags" else tmp_path
        bag = EpisodeBagWriter(root, EpisodeInfo("ep" if source == "a folder of bags" else "source")).close(
            success=True, progress=1.0, steps=0, reason="done"
        )
        stream = next(bag.glob("*.mcap"))
        if source == "a bag without its stream":
            stream.unlink()
        elif source == "a torn bag":
            stream.write_bytes(stream.read_bytes()[:20])
    with pytest.raises(BackendError, match=f"replay source {folder} is not a readable bag: "):
        make_backend(f"replay:{folder}").load()


@pytest.mark.parametrize(
    "line, says",
    [
        ('{"text": null}', "text=None is no text"),
        ('{"text": 5}', "text=5 is no text"),
        ('{"text": "ok", "finish_reason": null}', "finish_reason=None is no text"),
        ("[1, 2]", "got [1, 2]"),
    ],
)
def test_a_replay_line_whose_text_is_no_text_is_refused_naming_the_line(line, says, tmp_path):
    """Found by an outside tester: ``{"text": null}`` in a replay file replayed as the answer "None"
    (any JSON value was turned into text)."""
    source = tmp_path / "answers.jsonl"
    source.write_text('{"text": "Reasoning: a.\\nInstruction: b"}\n' + line + "\n")
    with pytest.raises(
        BackendError, match=re.escape(f"{source}:2: expected a JSON object with 'text': {says}") + "$"
    ):
        make_backend(f"replay:{source}").load()


@pytest.mark.parametrize(
    "line",
    [
        '{"text": ' + "[" * 100_000 + "]" * 100_000 + "}",  # nested past the recursion limit
        "[" * 100_000 + "]" * 100_000,
        '{"text": null}',  # was replayed as the answer "None"
        '{"text": ["Reasoning: r", "Action: home()"]}',
        '{"text": "Reasoning: r\\nAction: home()", "finish_reason": 7}',
    ],
    ids=["deep_text", "deep_line", "null_text", "list_text", "number_finish_reason"],
)
def test_a_replay_file_line_that_is_no_recorded_answer_is_refused_in_one_line(line, tmp_path):
    """Found by a hostile sweep: JSON nested deeper than Python's recursion limit ended `r3 packing
    demo --reasoner replay:FILE` in a RecursionError traceback, and a text that is no string was
    replayed as its Python repr."""
    source = tmp_path / "answers.jsonl"
    source.write_text('{"text": "Reasoning: r\\nAction: home()"}\n' + line + "\n")
    with pytest.raises(
        BackendError, match=rf"^{re.escape(str(source))}:2: expected a JSON object with 'text': "
    ) as info:
        make_backend(f"replay:{source}").load()
    assert "\n" not in str(info.value)
