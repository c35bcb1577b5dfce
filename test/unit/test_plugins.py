"""One way to choose every swappable part (issue 16, build 3): each kind is one :class:`r3.plugins.Registry`
that refuses unknown and taken names with reasons, takes parts from a user's installed package through
its ``r3.<kind>s`` entry points, imports nothing until a part is chosen, and is the only list of names."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fake_packages import fake_distribution

from r3.execution.base import EXECUTORS, make_executor
from r3.graph.node_params import NODE_PARAMETERS
from r3.lowlevel import GROUNDINGS, POLICIES, make_policy
from r3.perception.owlv2 import Owlv2Sam2Config
from r3.perception.sam2_backend import Sam2Config
from r3.perception.segmenters import SEGMENTERS, make_segmenter
from r3.plugins import Registry
from r3.reasoning.backends import BACKENDS, make_backend, register_backend
from r3.reasoning.parsing import GRAMMARS, answer_grammar
from r3.suites import SUITES

ROOT = Path(__file__).resolve().parents[2]
REGISTRIES = {
    "backend": BACKENDS,
    "executor": EXECUTORS,
    "segmenter": SEGMENTERS,
    "grounding": GROUNDINGS,
    "suite": SUITES,
    "grammar": GRAMMARS,
    "policy": POLICIES,
}


@pytest.fixture
def fresh_registries():
    """Every registry read again before and after the test, so what a test adds stays there."""
    for registry in REGISTRIES.values():
        registry.reload()
    yield
    for registry in REGISTRIES.values():
        registry.reload()


def name_lists(root: Path, names: tuple[str, ...]) -> list[str]:
    """Every line of r3's code that writes two different ``names`` side by side in a literal
    (``("sim", "perception")``): a copy of a registry's names."""
    quoted = "|".join(re.escape(n) for n in names)
    pair = re.compile(rf"""["']({quoted})["'] *, *(?!["']\1["'])["']({quoted})["']""")
    return [
        f"{path.relative_to(root)}:{number}: {line.strip()}"
        for folder in [root / "r3", root / "bench", root / "scripts", *root.glob("r3_*")]
        for path in folder.rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pair.search(line)
    ]


@pytest.mark.parametrize("kind", sorted(REGISTRIES))
def test_an_unknown_name_is_refused_with_the_known_ones(kind):
    registry = REGISTRIES[kind]
    known = re.escape(", ".join(registry.names()))
    with pytest.raises(ValueError, match=rf"unknown {kind} 'lidar' \(known: {known}\)"):
        registry.get("lidar")


def test_the_builders_refuse_unknown_names():
    with pytest.raises(ValueError, match=r"unknown executor 'ur5' \(known: sim, moveit"):
        make_executor("ur5")
    with pytest.raises(ValueError, match=r"unknown segmenter 'sam3' \(known: sim, sam2, owlv2\+sam2"):
        make_segmenter("sam3")
    with pytest.raises(ValueError, match=r"SCHEME one of \['transformers', 'openai'"):
        make_backend("nope:x")
    with pytest.raises(ValueError, match=r"unknown policy 'learned' \(known: scripted"):
        make_policy("learned")


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("segmenter", "sim"),
        ("grounding", "perception"),
        ("backend", "expert"),
        ("suite", "packing"),
        ("grammar", "tools"),
        ("policy", "scripted"),
    ],
)
def test_a_taken_name_is_refused_and_keeps_its_part(kind, name, fresh_registries):
    registry = REGISTRIES[kind]
    before = registry.get(name)
    with pytest.raises(ValueError, match=rf"{kind} '{re.escape(name)}' is already registered \(as r3\."):
        registry.register(name, "os.path:join")
    assert registry.get(name) == before  # the same part (a bound classmethod is made anew per get)


@pytest.mark.parametrize(
    ("name", "target"), [("", "os.path:join"), ("x", "os.path"), ("x", ":join"), ("x", 3), ("x", None)]
)
def test_a_malformed_registration_is_refused(name, target):
    with pytest.raises(ValueError, match="non-empty string|expected 'module:attr'|give a target or a part"):
        Registry("tool", {}).register(name, target)


def test_a_part_made_at_run_time_registers_as_itself():
    tools, part = Registry("tool", {}), object()
    tools.register("mine", part=part)
    assert tools.get("mine") is part
    with pytest.raises(ValueError, match="give a target or a part"):
        tools.register("both", "os.path:join", part=part)


def test_register_backend_adds_a_scheme_until_reload(fresh_registries):
    register_backend("joiner", "os.path:join")
    assert BACKENDS.names()[-1] == "joiner" and BACKENDS.get("joiner") is __import__("os").path.join
    BACKENDS.reload()
    assert "joiner" not in BACKENDS.names()


def test_an_entry_point_adds_a_segmenter_built_from_the_perception_nodes_options(
    tmp_path, monkeypatch, fresh_registries
):
    assert "blank" not in SEGMENTERS.names()
    fake_distribution(
        tmp_path,
        "r3.segmenters",
        "blank = blank_segmenter:BlankSegmenter.from_options",
        "blank_segmenter",
        "from r3.perception.segmenters import SimSegmenter\n"
        "class BlankSegmenter(SimSegmenter):\n"
        "    def __init__(self, device):\n"
        "        super().__init__()\n"
        "        self.device = device\n"
        "    @classmethod\n"
        "    def from_options(cls, options):\n"
        "        return cls(options['device'])\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "blank" not in SEGMENTERS.names()  # the entry points are read once, before the package was there
    SEGMENTERS.reload()
    assert SEGMENTERS.names() == ("sim", "sam2", "owlv2+sam2", "blank")
    segmenter = make_segmenter("blank", node_defaults("r3_perception_node") | {"device": "cuda:3"})
    assert type(segmenter) is sys.modules["blank_segmenter"].BlankSegmenter and segmenter.device == "cuda:3"
    assert segmenter.reads_sim_instances  # a SimSegmenter: the node gives it the instance masks


def node_defaults(node: str) -> dict[str, object]:
    """A node's parameters at their defaults, as the node passes them to the parts it builds."""
    return {spec.name: spec.default for spec in NODE_PARAMETERS[node].parameters}


def test_the_built_in_segmenters_read_their_options_from_the_perception_nodes_parameters():
    params = node_defaults("r3_perception_node") | {
        "device": "cuda:1",
        "sam2_checkpoint": "sam.pt",
        "sam2_image_size": 512,
        "detector": "owl",
    }
    sam2 = Sam2Config.from_options(params)
    assert sam2 == Sam2Config(params["sam2_model_config"], "sam.pt", device="cuda:1", image_size=512)
    owl = Owlv2Sam2Config.from_options(params)
    assert (owl.detector, owl.device, owl.sam2) == ("owl", "cuda:1", sam2)
    assert Sam2Config.from_options({}) == Sam2Config()  # missing options keep the defaults
    with pytest.raises(ValueError, match="owlv2\\+sam2 needs `detector`"):
        make_segmenter("owlv2+sam2", node_defaults("r3_perception_node"))


def test_an_entry_point_adds_a_low_level_policy(tmp_path, monkeypatch, fresh_registries):
    fake_distribution(
        tmp_path,
        "r3.policies",
        "careful = careful_policy:CarefulPolicy",
        "careful_policy",
        "class CarefulPolicy:\n"
        "    def reset(self, instruction, state, rng):\n"
        "        pass\n"
        "    def act(self, state):\n"
        "        return None\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    POLICIES.reload()
    assert POLICIES.names() == ("scripted", "careful")
    assert type(make_policy("careful")) is sys.modules["careful_policy"].CarefulPolicy
    assert type(make_policy("scripted")).__name__ == "ScriptedPushingPolicy"


def test_an_entry_point_adds_an_interfaces_grammar(tmp_path, monkeypatch, fresh_registries):
    fake_distribution(
        tmp_path,
        "r3.grammars",
        "echo = echo_grammar:GRAMMAR",
        "echo_grammar",
        "import types\nGRAMMAR = types.SimpleNamespace(parse=str.upper, format_instruction=str.lower)\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    GRAMMARS.reload()
    assert GRAMMARS.names() == ("semantic", "tools", "plan", "echo")
    assert answer_grammar("echo", "packing") is sys.modules["echo_grammar"].GRAMMAR
    assert answer_grammar("semantic", "language_table").__name__ == "r3.instructions.semantic"
    assert answer_grammar("instruction", "language_table").__name__ == "r3.instructions.language_table"


@pytest.mark.parametrize(
    ("group", "node", "parameter", "known"),
    [
        ("r3.segmenters", "r3_perception_node", "backend", "sim, sam2, owlv2+sam2, mine"),
        ("r3.policies", "r3_lowlevel_node", "policy", "scripted, mine"),
    ],
)
def test_an_entry_points_part_is_a_choice_of_the_nodes_parameter(group, node, parameter, known, tmp_path):
    """In a process where the package is installed (a node's), its part can be chosen by the parameter,
    and an unknown name is refused with every known one."""
    fake_distribution(tmp_path, group, "mine = os.path:join", "unused", "")
    code = (
        "from r3.graph.node_params import NODE_PARAMETERS\n"
        f"spec = NODE_PARAMETERS[{node!r}][{parameter!r}]\n"
        "print(spec.check('mine'), spec.check('learned'), sep='\\n')"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["None", f"{parameter}: 'learned' is not one of {known}"]


def test_an_entry_point_adds_a_backend_with_a_spec(tmp_path, monkeypatch, fresh_registries):
    fake_distribution(
        tmp_path,
        "r3.backends",
        "echo = echo_backend:EchoBackend",
        "echo_backend",
        "from r3.reasoning.backends.spec import Option\n"
        "class EchoBackend:\n"
        "    SPEC_OPTIONS = {'loud': Option(bool, 'shout')}\n"
        "    def __init__(self, argument, loud=False):\n"
        "        self.argument, self.loud = argument, loud\n"
        "    @classmethod\n"
        "    def from_spec(cls, argument, **options):\n"
        "        return cls(argument, **options)\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    BACKENDS.reload()
    backend = make_backend("echo:hello,loud=true")
    assert (type(backend).__name__, backend.argument, backend.loud) == ("EchoBackend", "hello", True)


def test_an_entry_point_that_takes_a_built_in_name_is_refused(tmp_path, monkeypatch, fresh_registries):
    fake_distribution(tmp_path, "r3.executors", "sim = os.path:join", "unused", "")
    monkeypatch.syspath_prepend(str(tmp_path))
    EXECUTORS.reload()
    with pytest.raises(ValueError, match=r"entry point 'sim' of group 'r3.executors' \(os.path:join\) takes"):
        EXECUTORS.names()


def test_listing_the_names_imports_no_part():
    code = (
        "import sys, r3.graph.node_params\n"
        "from r3.reasoning.backends import BACKENDS\n"
        "from r3.execution.base import EXECUTORS\n"
        "from r3.lowlevel import POLICIES\n"
        "for r in (BACKENDS, EXECUTORS, POLICIES): r.names()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mujoco', 'torch', 'openai')\n"
        "      or m in ('r3.execution.sim', 'r3.lowlevel.grounding', 'r3.lowlevel.pushing',\n"
        "               'r3.perception.sam2_backend', 'r3.perception.owlv2',\n"
        "               'r3.reasoning.backends.transformers_backend', 'r3.reasoning.expert')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("kind", ["grounding", "segmenter", "executor"])
def test_no_module_writes_a_registrys_names_again(kind):
    assert name_lists(ROOT, REGISTRIES[kind].names()) == []


@pytest.mark.parametrize(
    "line",
    [
        'GROUNDINGS = ("sim", "perception")',
        "BACKENDS = ('sim', 'sam2', 'owlv2+sam2')",
        'choices=["perception", "sim"],',
    ],
)
def test_the_copy_check_finds_a_written_out_list(line, tmp_path):
    (tmp_path / "r3").mkdir()
    (tmp_path / "r3" / "m.py").write_text(f"{line}\n")
    assert name_lists(tmp_path, ("sim", "perception", "sam2", "owlv2+sam2")) == [f"r3/m.py:1: {line}"]


def test_the_copy_check_leaves_single_names_and_repeats_alone(tmp_path):
    (tmp_path / "r3").mkdir()
    code = 'grounding = "sim"\nprobe("sam2", "sam2")\n{"sim": "a:b", "sam2": "c:d"}\n'
    (tmp_path / "r3" / "m.py").write_text(code)
    assert name_lists(tmp_path, ("sim", "sam2")) == []
