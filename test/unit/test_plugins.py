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
    with pytest.raises(ValueError, match=r"'nope:x': unknown backend 'nope' \(known: transformers, openai"):
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
    ("name", "target"),
    [
        ("", "os.path:join"),
        ("--x", "os.path:join"),
        ("x", "os.path"),
        ("x", ":join"),
        ("x", "a:b:c"),
        ("x", 3),
    ],
)
def test_a_malformed_registration_is_refused(name, target):
    with pytest.raises(
        ValueError, match="a name is 1-64 ASCII|expected 'module:attr'|give a target or a part"
    ):
        Registry("tool", {}).register(name, target)


def test_a_part_made_at_run_time_registers_as_itself():
    tools, part = Registry("tool", {}), object()
    tools.register("mine", part=part)
    assert tools.get("mine") is part
    with pytest.raises(ValueError, match="give a target or a part"):
        tools.register("both", "os.path:join", part=part)


def test_register_backend_adds_a_scheme_until_reload(fresh_registries):
    register_backend("again", "r3.reasoning.backends.replay:ReplayBackend")
    assert BACKENDS.names()[-1] == "again" and BACKENDS.get("again") is BACKENDS.get("replay")
    BACKENDS.reload()
    assert "again" not in BACKENDS.names()


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


def test_an_entry_point_that_takes_a_built_in_name_is_left_out_and_the_registry_stays_whole(
    tmp_path, monkeypatch, caplog, fresh_registries
):
    """r3's own part keeps its name, the package's other parts stay choices, and every read of the
    registry is the same (it once raised, and the next read returned the part read before the raise)."""
    fake_distribution(tmp_path, "r3.executors", "sim = os.path:join\nmine = os.path:join", name="takes_sim")
    monkeypatch.syspath_prepend(str(tmp_path))
    EXECUTORS.reload()
    assert EXECUTORS.names() == ("sim", "moveit", "mine")
    assert EXECUTORS.names() == ("sim", "moveit", "mine")
    assert EXECUTORS.get("sim").__name__ == "SimExecutor"
    said = "r3: executor 'sim' (r3.executors entry point 'os.path:join' of package 'takes_sim') is refused: "
    assert caplog.messages == [said + "the name of r3's own executor (r3.execution.sim:SimExecutor)"]


BROKEN_MODULES = {
    "ModuleNotFoundError: No module named 'no_such_module'": "import no_such_module\n",
    "SyntaxError: invalid syntax": "def (:\n",
    "RuntimeError: no GPU here": "raise RuntimeError('no GPU here')\n",
    "AttributeError: module 'broken' has no attribute 'Backend'": "",
    "loads 3, which has no from_spec, has no SPEC_OPTIONS": "Backend = 3\n",
    "loads <function Backend at 0x[0-9a-f]+>, which has no from_spec": "def Backend(argument):\n    pass\n",
}


@pytest.mark.parametrize("reason", sorted(BROKEN_MODULES))
def test_a_part_that_cannot_be_loaded_is_refused_when_chosen(reason, tmp_path, monkeypatch, fresh_registries):
    fake_distribution(
        tmp_path, "r3.backends", "bad = broken:Backend", "broken", BROKEN_MODULES[reason], "shaky"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "broken", raising=False)
    BACKENDS.reload()
    assert BACKENDS.names()[-1] == "bad"  # listed: its module is imported only when chosen
    said = r"backend 'bad' \(r3.backends entry point 'broken:Backend' of package 'shaky'\): "
    for _ in range(2):  # the same refusal at each choice
        with pytest.raises(
            ValueError, match=said + (reason if reason[0] == "l" else "cannot be imported: " + reason)
        ):
            make_backend("bad:x")
    assert type(make_backend("expert")).__name__ == "LanguageTableExpert"  # the other parts are untouched


@pytest.mark.parametrize(
    ("line", "name", "reason"),
    [
        ("--x = os.path:join", "--x", "a name is 1-64 ASCII letters"),
        ("../etc = os.path:join", "../etc", "a name is 1-64 ASCII letters"),
        ("sp ace = os.path:join", "sp ace", "a name is 1-64 ASCII letters"),
        ("café = os.path:join", "café", "a name is 1-64 ASCII letters"),
        ("esc\x1b[31m = os.path:join", "esc\x1b[31m", "a name is 1-64 ASCII letters"),
        ("x" * 10_000 + " = os.path:join", "x" * 10_000, "a name is 1-64 ASCII letters"),
        (" = os.path:join", "", "a name is 1-64 ASCII letters"),
        ("bad = os", "bad", "target 'os': expected 'module:attr'"),
        ("bad = a:b:c", "bad", "target 'a:b:c': expected 'module:attr'"),
        ("bad =", "bad", "target '': expected 'module:attr'"),
    ],
)
def test_an_entry_point_that_cannot_be_a_choice_is_left_out_with_its_reason(
    line, name, reason, tmp_path, monkeypatch, caplog, fresh_registries
):
    fake_distribution(tmp_path, "r3.policies", f"{line}\ngood = os.path:join", name="hostile")
    monkeypatch.syspath_prepend(str(tmp_path))
    POLICIES.reload()
    assert POLICIES.names() == ("scripted", "good")
    assert NODE_PARAMETERS["r3_lowlevel_node"]["policy"].check(name) is not None
    with pytest.raises(ValueError, match=re.escape(reason)) as refusal:
        POLICIES.get(name)
    assert len(str(refusal.value)) < 500 and str(refusal.value).isprintable()
    (message,) = caplog.messages  # named once, on one line that shows what the name holds
    assert message.startswith("r3: policy ") and "of package 'hostile'" in message and message.isprintable()


def test_a_name_two_packages_give_is_refused_naming_both(tmp_path, monkeypatch, fresh_registries):
    fake_distribution(tmp_path, "r3.segmenters", "mine = os.path:join", name="first")
    fake_distribution(tmp_path, "r3.segmenters", "mine = os.path:split", name="second")
    monkeypatch.syspath_prepend(str(tmp_path))
    SEGMENTERS.reload()
    assert "mine" not in SEGMENTERS.names()
    with pytest.raises(ValueError, match=r"segmenter 'mine' is given by 2 packages .*'first'.*'second'"):
        make_segmenter("mine")


def test_a_backend_left_out_is_refused_with_the_registrys_reason(tmp_path, monkeypatch, fresh_registries):
    """`--reasoner mine` got the generic "SCHEME one of [...]"; the reason was only in a log line."""
    fake_distribution(tmp_path, "r3.backends", "mine = os.path:join", name="first")
    fake_distribution(tmp_path, "r3.backends", "mine = os.path:split", name="second")
    monkeypatch.syspath_prepend(str(tmp_path))
    BACKENDS.reload()
    with pytest.raises(
        ValueError, match=r"backend spec 'mine:x': backend 'mine' is given by 2 packages .*'first'.*'second'"
    ):
        make_backend("mine:x")


#: A part of the right kind whose call does not bind (what it takes -> how r3 calls it): the builder
#: that calls it, the part's entry point and code, and the refusal.
UNBINDABLE = {
    "policy": (
        lambda: make_policy("mine"),
        "r3.policies",
        "Policy",
        "class Policy:\n    def __init__(self, arm):\n        pass\n",
        r"'Policy' cannot be called with no arguments: missing a required argument: 'arm'",
    ),
    "backend": (
        lambda: make_backend("mine:x"),
        "r3.backends",
        "Backend",
        "class Backend:\n    SPEC_OPTIONS = {}\n    @classmethod\n    def from_spec(cls, url, model): ...\n",
        r"'Backend.from_spec' cannot be called with 1 positional argument: missing a required .* 'model'",
    ),
    "segmenter": (
        lambda: make_segmenter("mine", {"device": "cpu"}),
        "r3.segmenters",
        "segmenter",
        "def segmenter():\n    pass\n",
        r"'segmenter' cannot be called with 1 positional argument: too many positional arguments",
    ),
    "executor": (
        lambda: make_executor("mine", box=None),
        "r3.executors",
        "Executor",
        "class Executor:\n    def __init__(self, env):\n        pass\n",
        r"'Executor' cannot be called with box=: missing a required argument: 'env'",
    ),
}


#: A part that binds its call but builds what is not of its kind: the builder that calls it, the
#: part's entry point and code, and the refusal.
WRONGLY_BUILT = {
    "policy": (
        lambda: make_policy("mine"),
        "r3.policies",
        "Policy",
        "class Policy:\n    def reset(self, instruction, state, rng):\n        pass\n",
        r"builds <wrongly_built.Policy object at 0x[0-9a-f]+>, which has no act$",
    ),
    "segmenter": (
        lambda: make_segmenter("mine", {"device": "cpu"}),
        "r3.segmenters",
        "segmenter",
        "def segmenter(options):\n    return 3\n",
        r"builds 3, which has no text_queries, .* has no set_frame, has no segment_point, .*segment_labels$",
    ),
    "executor": (
        lambda: make_executor("mine", box=None),
        "r3.executors",
        "Executor",
        "class Executor:\n    def __init__(self, box):\n        self.box = box\n    set_gripper = print\n",
        r"builds <wrongly_built.Executor object at .*>, which has no move_to_pose, has no target_refusal, "
        + "has no reach_refusal, has no move_to_joints$",
    ),
}


#: The module each table's parts are written into (one per table: a test leaves its module imported).
REFUSED_AT_THE_CALL = {"unbindable": UNBINDABLE, "wrongly_built": WRONGLY_BUILT}


@pytest.mark.parametrize(
    ("module", "kind"),
    [(module, kind) for module, parts in REFUSED_AT_THE_CALL.items() for kind in sorted(parts)],
)
def test_a_part_refused_at_its_call_is_refused_naming_its_package(
    module, kind, tmp_path, monkeypatch, fresh_registries
):
    """A call that did not bind ended in the TypeError's traceback, which named neither the part nor
    its package; a part that built what is not of its kind was built, and the node it started failed
    later, in a callback, with an AttributeError."""
    build, group, attr, code, reason = REFUSED_AT_THE_CALL[module][kind]
    fake_distribution(tmp_path, group, f"mine = {module}:{attr}", module, code, "odd")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    REGISTRIES[kind].reload()
    said = rf"^{kind} 'mine' \({group} entry point '{module}:{attr}' of package 'odd'\): "
    with pytest.raises(ValueError, match=said + reason):
        build()


def test_r3s_own_parts_build_what_their_kind_needs():
    from r3.execution.sim import SimExecutor
    from r3.sim.packing.env import PackingEnv

    built = {
        "policy": make_policy("scripted"),
        "segmenter": make_segmenter("sim"),
        "executor": SimExecutor(PackingEnv(width=32, height=24)),
    }
    for kind, part in built.items():
        assert REGISTRIES[kind]._built(kind, part) is None


@pytest.mark.parametrize(
    ("spec_options", "shown"),
    [("3", "3"), ("{'loud': bool}", "{'loud': <class 'bool'>}"), ("{1: None}", "{1: None}")],
)
@pytest.mark.parametrize("spec", ["mine:x", "mine:x,loud=true"])
def test_a_backend_whose_spec_options_are_no_options_is_refused_when_chosen(
    spec_options, shown, spec, tmp_path, monkeypatch, fresh_registries
):
    """Its spec ended in a TypeError or AttributeError inside spec parsing, naming neither backend nor
    package."""
    code = (
        f"class Backend:\n    SPEC_OPTIONS = {spec_options}\n"
        "    @classmethod\n    def from_spec(cls, argument, **options):\n        return cls()\n"
    )
    fake_distribution(tmp_path, "r3.backends", "mine = odd_options:Backend", "odd_options", code, "odd")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "odd_options", raising=False)
    BACKENDS.reload()
    said = (
        f"backend spec {spec!r}: backend 'mine' (r3.backends entry point 'odd_options:Backend' of package "
        f"'odd'): loads <class 'odd_options.Backend'>, whose SPEC_OPTIONS {shown} is no mapping of key to "
        "Option"
    )
    with pytest.raises(ValueError, match=re.escape(said)):
        make_backend(spec)


def test_a_type_error_inside_a_part_that_binds_is_its_own(tmp_path, monkeypatch, fresh_registries):
    """Only a call that does not bind is refused: the part's own TypeError is not renamed."""
    code = "class Policy:\n    def __init__(self):\n        len(3)\n"
    fake_distribution(tmp_path, "r3.policies", "mine = inner_type_error:Policy", "inner_type_error", code)
    monkeypatch.syspath_prepend(str(tmp_path))
    POLICIES.reload()
    with pytest.raises(TypeError, match="object of type 'int' has no len"):
        make_policy("mine")


def test_a_package_whose_entry_points_cannot_be_read_is_skipped(
    tmp_path, monkeypatch, caplog, fresh_registries
):
    """A malformed entry_points.txt of any installed package made every registry raise."""
    fake_distribution(tmp_path, "r3.policies", "mine = os.path:join", name="fine")
    fake_distribution(tmp_path, "console_scripts", "no equals sign here", name="malformed")
    monkeypatch.syspath_prepend(str(tmp_path))
    POLICIES.reload()
    assert POLICIES.names() == ("scripted", "mine")
    (message,) = caplog.messages
    assert message.startswith("r3: skipped the installed package 'malformed': TypeError: ")


def test_r3_commands_run_beside_broken_packages(tmp_path):
    """Every command that lists parts (help, node parameter choices) runs; each refusal is one line."""
    fake_distribution(tmp_path / "a", "r3.groundings", "perception = os.path:join", name="takes_perception")
    fake_distribution(tmp_path / "b", "r3.suites", "broken = no_such_module:SUITE", name="broken_suite")
    fake_distribution(tmp_path / "c", "r3.segmenters", "sp ace = os.path:join", name="hostile")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [*(str(tmp_path / d) for d in "abc"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    for command in (["eval", "run", "--help"], ["judge", "--help"], ["launch", "--check"], ["run", "--help"]):
        done = subprocess.run(
            [sys.executable, "-m", "r3.cli", *command],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0 and "Traceback" not in done.stderr, (command, done.stderr)
        for line in done.stderr.splitlines():
            assert line.startswith("r3: ") and done.stderr.count(line) == 1, (command, done.stderr)


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
