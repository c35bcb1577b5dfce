"""The suite registry: every task suite is one :class:`Suite` record, and the rest of r3 asks it.

A suite is what an episode is about: its tasks, its instruction grammar, its defaults, its judge.
Modules never compare suite names; they look the record up (:func:`get_suite`) and read its fields.
The built-in suites build their records in their own modules (:mod:`r3.suites.language_table`,
:mod:`r3.suites.packing`) from the code that already exists; a user's package adds one without
editing r3 through the ``r3.suites`` entry-point group (:mod:`r3.plugins`, as for every swappable
part), each entry point loading a :class:`Suite` of its name::

    [project.entry-points."r3.suites"]
    toy = "toy_suite:SUITE"

Importing this module loads no simulator: the records' hooks import their code when called, so
r3.reasoning, r3.safety and r3.rewards can ask the registry at import time.

>>> get_suite("packing").default_history
'instruction'
>>> get_suite("chess")
Traceback (most recent call last):
...
ValueError: unknown suite 'chess' (known: language_table, packing)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType

from r3.files import bounded_repr
from r3.plugins import Registry

#: The suite a goal or a row means when it names none ("").
DEFAULT_SUITE = "language_table"


@dataclass(frozen=True)
class Suite:
    """One task suite, as the rest of r3 needs to know it.

    ``tasks_module`` and ``grammar_module`` are dotted module names, imported on first use: the
    first holds ``TASKS`` (name -> spec), ``get_task(name)`` and, when its tasks come in splits,
    ``SPLITS`` (split -> task names); the second is the instruction interface's grammar, with
    ``parse(text)`` and ``format_instruction(instruction)`` (``r3.reasoning.parsing``). A hook left
    None is something the suite does not have (:meth:`hook` says so).
    """

    name: str
    #: How reports name the suite ("Language Table").
    title: str
    tasks_module: str
    grammar_module: str
    #: The interfaces (``r3.safety.goals.INTERFACE_ANSWERS``) whose answers act on this suite.
    interfaces: tuple[str, ...]
    #: What the reasoner sees of its previous step unless told otherwise (R^3's choice per suite).
    default_history: str
    #: The split ``r3 collect`` draws from and the interface it collects, unless told otherwise;
    #: None: ``r3 collect`` does not run the suite (``r3.data.collect.CollectConfig``).
    collect_split: str | None = None
    collect_interface: str = "instruction"
    #: The task ``r3 run`` runs when none is named ("" = one must be named).
    run_task: str = ""
    #: The tasks ``r3 eval`` runs, and its scenes, trials and decision steps per episode when a run
    #: leaves them out (``r3.eval.runner.EvalConfig``); None: ``r3 eval`` does not run the suite.
    eval_tasks: Callable[[], tuple[str, ...]] | None = None
    eval_protocol: Mapping[str, int] | None = None
    #: Camera names by number of images; None: the suite shows one unnamed image.
    views: Mapping[int, tuple[str, ...]] | None = None
    #: The suite runs in an arm workcell (``r3.packing_episode.PackingCell``: camera views, call
    #: interfaces, turn folders, ERR's penalty) rather than on a pushing board (``r3.episode``).
    #: ``r3 collect`` and ``r3 eval`` run episodes with one of those two, so a suite of another kind
    #: leaves ``collect_split`` and ``eval_tasks`` None (they then refuse it).
    workcell: bool = False
    #: Its policy may see the scene through perception as well as the simulator
    #: (``r3.lowlevel.GROUNDINGS``); otherwise only through the simulator.
    grounding_choice: bool = False
    #: The compact prompt variant (``r3.reasoning.prompts.VARIANTS``, for ``r3 mini``) covers its
    #: instruction interface.
    compact_prompt: bool = False
    #: The VLM judge (``r3.rewards.vlm``) can grade its instructions.
    vlm_judged: bool = False
    #: The rule judge's simulator (``r3.rewards.semantic.OutcomeSimulator``) carries out its
    #: instructions: the semantic tier's rollouts and the graded outcome term
    #: (``r3.rewards.functions.OutcomeReward``) read its rows.
    outcome_simulated: bool = False
    #: ``prompt(inp)``: the text of its instruction interface's prompt for a ``ReasonerInput``
    #: (``r3.reasoning.prompts.prompt_text``; the call interfaces bring their own).
    prompt: Callable | None = None
    #: Every canonical instruction text of the grammar, sorted (constrained decoding).
    canonical_instructions: Callable[[], tuple[str, ...]] | None = None
    #: ``judge(candidate, reference, snapshot)``: the rule judge's text tiers
    #: (``r3.rewards.judge.RuleJudge.text_tiers``).
    judge: Callable | None = None
    #: ``claim_checker(state, task, previous)``: the checker of a reasoning trace's claims.
    claim_checker: Callable | None = None
    #: ``unchanged(state_a, state_b)``: the scene did not change between two decision states.
    unchanged: Callable | None = None
    #: ``make_env(**kwargs)``: the suite's Gymnasium env.
    make_env: Callable | None = None
    #: ``make_sim()``: the suite's simulator as ``r3.episode_loop.SuiteSim``, for a suite that brings
    #: its own: the in-process loop drives it through ``r3.episode_loop.SimulatedSuite`` and the graph
    #: through the generic simulator node (``r3_suite_sim_node``), with no code of the suite in r3.
    make_sim: Callable | None = None

    def tasks(self) -> ModuleType:
        """The module with the suite's ``TASKS`` and ``get_task``."""
        return importlib.import_module(self.tasks_module)

    def hook(self, name: str) -> Callable:
        """The hook ``name``; a ValueError when the suite has none (a toy suite has no judge)."""
        value = getattr(self, name)
        if value is None:
            raise ValueError(f"suite {self.name!r} has no {name} hook")
        return value


def lazy(target: str) -> Callable:
    """``"module:name"`` as a hook that imports the module when first called, so a record names its
    suite's code without loading it (the registry loads no simulator).

    >>> lazy("os.path:join")("a", "b")
    'a/b'
    """
    module, name = target.split(":")

    def hook(*args, **kwargs):
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    hook.__qualname__ = hook.__name__ = name
    return hook


def _suite_problem(name: str, part: object) -> str | None:
    """Why an entry point's ``part`` is not the suite it is named for."""
    if isinstance(part, Suite) and part.name == name:
        return None
    return f"must load a Suite named {name!r}, got {bounded_repr(part, 80)}"


#: suite name -> "module:SUITE"; the records are read when first asked for. More: ``r3.suites``.
SUITES = Registry(
    "suite",
    {"language_table": "r3.suites.language_table:SUITE", "packing": "r3.suites.packing:SUITE"},
    check=_suite_problem,
)


def register_suite(suite: Suite) -> Suite:
    """Add ``suite``; a second suite of the same name is refused (names are how goals pick suites)."""
    if not isinstance(suite, Suite):
        raise TypeError(f"register_suite takes a Suite, got {type(suite).__name__}")
    SUITES.register(suite.name, part=suite)
    return suite


def get_suite(name: str) -> Suite:
    """The record of suite ``name``; an unknown name is refused with the known ones, and an entry
    point that loads no Suite of its own name is refused when asked for."""
    return SUITES.get(name)


def suite_names() -> tuple[str, ...]:
    """Every registered suite's name whose record loads, built-in ones first (an installed package's
    broken suite is left out with its reason logged, so the commands that list suites still run)."""
    return SUITES.loaded_names()


def reload_suites() -> None:
    """Forget the registry, so the next question reads the built-in suites and the entry points
    again (after installing a suite's package into a running process)."""
    SUITES.reload()
