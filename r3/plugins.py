"""One way to choose a swappable part: a :class:`Registry` per kind of part (reasoner backends,
executors, segmenters, low-level policies, packing groundings, interface grammars, suites), holding
names and "module:attr" targets.

A target is imported only when its part is chosen, so listing the names (CLI choices, node parameter
choices) loads no model and no simulator. A user's own installed package adds a part without editing
r3 through the entry-point group ``r3.<kind>s`` (``r3.policies`` for policies); the
installed entry points are read once per process, at the first registry's first use
(:meth:`Registry.reload` reads them again)::

    [project.entry-points."r3.backends"]
    mine = "my_package.backend:MyBackend"

An installed package is someone else's code, so what is wrong with one of its entry points breaks
only the choice of that part: an entry point that cannot be a choice (a malformed name or target, a
name r3's own part has, a name two packages give) is left out of the names with its reason logged
once, and choosing it, or one whose part cannot be imported or is not of its kind, is a ValueError
that names the package and says why; so is calling a package's part with arguments its signature
does not take (:meth:`Registry.call`), or a call that builds what is not of its kind (``built=``:
a policy without ``act``), refused when the part is built, at a node's start, not in its first callback.

>>> tools = Registry("tool", {"join": "os.path:join"})
>>> tools.get("join")("a", "b")
'a/b'
>>> tools.get("split")
Traceback (most recent call last):
...
ValueError: unknown tool 'split' (known: join)
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from r3.files import bounded_repr, one_line

log = logging.getLogger(__name__)

#: What a name may be: it is typed on command lines, in node parameters and backend specs (no ':', ','
#: or '='), and shown in every message that names the part.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")
#: "module:attr", dotted names each side (an entry point's optional "[extras]" aside).
TARGET = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\s*:\s*[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(\s*\[[^\]]*\])?")

#: Why a loaded part, or what it built, is not one of the registry's kind (``(name, part)``), or None
#: when it is.
PartCheck = Callable[[str, object], "str | None"]


class Registry:
    """The parts of one kind: built-in entries, then the entry points' (group ``r3.<kind>s``), then those
    :meth:`register` adds while r3 runs. Names are how users choose parts, so each names one part."""

    def __init__(
        self,
        kind: str,
        built_in: Mapping[str, str],
        group: str | None = None,
        check: PartCheck | None = None,
        built: PartCheck | None = None,
    ):
        #: The kind of part, singular ("backend"); it names the refusals and, unless ``group`` is given
        #: (a plural other than "-s": ``r3.policies``), the entry-point group.
        self.kind = kind
        self.group = group or f"r3.{kind}s"
        #: What every part of this kind must be (:func:`having`), checked when it is chosen.
        self._check = check
        #: What every object a part of this kind builds must be (:func:`built_as`), checked when built.
        self._built = built
        self._built_in = dict(built_in)
        for name, target in self._built_in.items():
            if problem := _name_problem(name) or _target_problem(target):
                raise ValueError(f"{kind} {bounded_repr(name, 80)}: {problem}")
        self._targets: dict[str, importlib.metadata.EntryPoint | _Given] | None = None
        #: name -> why choosing it is refused: an entry point left out of the names, or one whose part
        #: failed to load.
        self._refused: dict[str, str] = {}

    def names(self) -> tuple[str, ...]:
        """Every name a part of this kind can be chosen by, built-in ones first."""
        return tuple(self._entries())

    def loaded_names(self) -> tuple[str, ...]:
        """:meth:`names` less those whose part fails to load or is not of this kind, each imported now;
        each of those is logged once with its reason (for callers that read every part's record)."""
        loaded = []
        for name in self.names():
            told = name in self._refused
            try:
                self.get(name)
            except ValueError as exc:
                if not told:
                    log.warning("r3: skipped %s", exc)
            else:
                loaded.append(name)
        return tuple(loaded)

    def get(self, name: str):
        """The object ``name`` stands for (a class or a factory), imported now; an unknown name is
        refused with the known ones, an entry point's part that cannot be imported or is not of this
        kind with why (the same reason at each later choice, its module not run again)."""
        entries = self._entries()
        if name in self._refused:
            raise ValueError(self._refused[name])
        if name not in entries:
            raise ValueError(
                f"unknown {self.kind} {bounded_repr(str(name), 80)} (known: {', '.join(entries)})"
            )
        entry = entries[name]
        try:
            part = entry.load()
        except Exception as exc:
            if name in self._built_in:  # r3's own part: its failure is r3's, with its traceback
                raise
            problem = f"cannot be imported: {type(exc).__name__}: {exc}"
        else:
            problem = self._check and self._check(name, part)
            if not problem:
                return part
        self._refused[name] = one_line(f"{self.kind} {name!r} ({_origin(entry)}): {problem}", 400)
        raise ValueError(self._refused[name])

    def build(self, name: str, /, *args, **kwargs):
        """The part ``name`` stands for (a class or a factory), called with ``args`` and ``kwargs``
        (:meth:`get`, then :meth:`call`)."""
        return self.call(name, self.get(name), *args, **kwargs)

    def call(self, name: str, factory: Callable, /, *args, **kwargs):
        """``factory(*args, **kwargs)``, ``factory`` being the part ``name`` stands for or one of its
        methods (a backend's ``from_spec``). A package's part whose signature does not take these
        arguments is refused with why, before it is called, and so is what it returns when it is not
        what this kind's parts build (``built``); a TypeError raised inside the call is the part's own
        and passes on, as one raised by r3's own parts does."""
        if name in self._built_in:
            return factory(*args, **kwargs)
        problem = _binding_problem(factory, args, kwargs)
        if not problem:
            made = factory(*args, **kwargs)
            if not (problem := self._built and self._built(name, made)):
                return made
        origin = _origin(self._entries()[name])
        raise ValueError(one_line(f"{self.kind} {name!r} ({origin}): {problem}", 400))

    def register(self, name: str, target: str | None = None, *, part: object = None) -> None:
        """Add ``name`` for ``target`` ("module:attr"), or for a ``part`` made at run time (a record
        with no import path); a name already taken is refused, since it would change what a user's
        choice means."""
        if problem := _name_problem(name):
            raise ValueError(f"{self.kind} name {bounded_repr(name, 80)}: {problem}")
        if (target is None) == (part is None):
            raise ValueError(f"{self.kind} {name!r}: give a target or a part, not {target!r} and {part!r}")
        if target is not None and (problem := _target_problem(target)):
            raise ValueError(f"{self.kind} {name!r}: {problem}")
        entries = self._entries()
        if name in entries:
            raise ValueError(f"{self.kind} {name!r} is already registered (as {entries[name].value})")
        given = importlib.metadata.EntryPoint(name, target, self.group) if target else _Given(part)
        entries[name] = given
        self._refused.pop(name, None)

    def reload(self) -> None:
        """Forget what :meth:`register` added and read the entry points again (after installing a
        package into a running process)."""
        _installed_entry_points.cache_clear()
        self._targets = None
        self._refused = {}

    def _entries(self) -> dict[str, importlib.metadata.EntryPoint | _Given]:
        """The entries, filled on first use: the built-in ones, then each entry point that can be a
        choice; the others are refused (their reason logged once) and the built-in ones keep theirs."""
        if self._targets is None:
            targets = {
                name: importlib.metadata.EntryPoint(name, target, self.group)
                for name, target in self._built_in.items()
            }
            given: dict[str, list[importlib.metadata.EntryPoint]] = {}
            for entry in _installed_entry_points().select(group=self.group):
                given.setdefault(entry.name, []).append(entry)
            refused = {}
            for name, entries in given.items():
                if problem := self._entry_problem(name, entries, targets):
                    message = one_line(f"{self.kind} {bounded_repr(name, 80)} {problem}", 400)
                    log.warning("r3: %s", message)
                    if name not in targets:  # r3's own part keeps its name
                        refused[name] = message
                else:
                    targets[name] = entries[0]
            self._targets, self._refused = targets, refused
        return self._targets

    def _entry_problem(self, name: str, entries: list, taken: Mapping) -> str | None:
        """Why the entry points ``entries``, all of ``name``, cannot make it a choice; None if they can."""
        origins = "; ".join(_origin(entry) for entry in entries[:3])
        if len(entries) > 1:
            return f"is given by {len(entries)} packages ({origins}): uninstall all but one"
        problem = _name_problem(name) or _target_problem(entries[0].value)
        if not problem and name in taken:
            problem = f"the name of r3's own {self.kind} ({taken[name].value})"
        return f"({origins}) is refused: {problem}" if problem else None


def having(*attributes: str, verb: str = "loads") -> PartCheck:
    """A check that a part has ``attributes`` ("__call__": that it is called), for a registry of parts
    used through them; ``verb`` says how the part came ("builds": made by a part's call)."""

    def problem(name: str, part: object) -> str | None:
        if missing := [a for a in attributes if not hasattr(part, a)]:
            lacks = ", ".join("is not callable" if a == "__call__" else f"has no {a}" for a in missing)
            return f"{verb} {bounded_repr(part, 60)}, which {lacks}"
        return None

    return problem


def built_as(contract: type) -> PartCheck:
    """A check that what a part builds has every public member of the instances of ``contract`` (a
    Protocol or an ABC: its methods and annotated attributes, not its classmethods, which build), so
    that the contract is the one list of what its users call.

    >>> from typing import Protocol
    >>> class Shape(Protocol):
    ...     sides: int
    ...     def area(self) -> float: ...
    >>> built_as(Shape)("square", 3)
    'builds 3, which has no sides, has no area'
    """
    members = [
        name
        for name, member in {**inspect.get_annotations(contract), **vars(contract)}.items()
        if not name.startswith("_") and not isinstance(member, (classmethod, staticmethod))
    ]
    return having(*members, verb="builds")


def _binding_problem(factory: Callable, args: tuple, kwargs: dict) -> str | None:
    """Why ``factory`` cannot be called with ``args`` and ``kwargs``, from its signature; None when it
    can, or when it has no signature to read (some built-in callables: the call itself then says)."""
    try:
        inspect.signature(factory).bind(*args, **kwargs)
    except TypeError as exc:
        given = [f"{len(args)} positional argument" + "s" * (len(args) != 1)] if args else []
        given += [f"{key}=" for key in kwargs]
        called = bounded_repr(getattr(factory, "__qualname__", factory), 80)
        return f"{called} cannot be called with {', '.join(given) or 'no arguments'}: {exc}"
    except ValueError:
        pass
    return None


@functools.cache
def _installed_entry_points() -> importlib.metadata.EntryPoints:
    """Every installed package's entry points, read once for all registries: each read scans every
    installed distribution (20-25 ms on this project's machines, at every process's start). One
    package whose entry points cannot be read (a malformed or non-UTF-8 entry_points.txt) fails the
    whole read; they are then read package by package, that one skipped with its reason logged."""
    try:
        return importlib.metadata.entry_points()
    except Exception:  # noqa: BLE001 - whatever one package's file makes the parser raise
        return importlib.metadata.EntryPoints(_each_packages_entry_points())


def _each_packages_entry_points() -> list[importlib.metadata.EntryPoint]:
    """The entry points of every installed package whose own can be read (of packages found under
    one name, the first, as ``importlib.metadata.entry_points`` takes); slower, since each package's
    metadata is read for its name."""
    entries, seen = [], set()
    for dist in importlib.metadata.distributions():
        name = "whose name cannot be read"
        try:
            name = bounded_repr(dist.name, 80)
            if (key := re.sub(r"[-_.]+", "-", dist.name).lower()) in seen:
                continue
            seen.add(key)
            entries.extend(dist.entry_points)
        except Exception as exc:  # noqa: BLE001 - whatever one package's file makes the parser raise
            log.warning(
                "r3: skipped the installed package %s: %s",
                name,
                one_line(f"{type(exc).__name__}: {exc}", 400),
            )
    return entries


def _origin(entry: importlib.metadata.EntryPoint | _Given) -> str:
    """Where an entry comes from, for a refusal: the package and the entry point, or run time."""
    if isinstance(entry, _Given):
        return entry.value
    dist = getattr(entry, "dist", None)
    if dist is None:
        return f"{bounded_repr(entry.value, 120)}, registered at run time"
    return (
        f"{entry.group} entry point {bounded_repr(entry.value, 120)} of package {bounded_repr(dist.name, 80)}"
    )


@dataclass(frozen=True)
class _Given:
    """A part handed to :meth:`Registry.register` itself; it loads as itself."""

    part: object

    @property
    def value(self) -> str:
        return f"a {type(self.part).__name__} given at run time"

    def load(self) -> object:
        return self.part


def _name_problem(name: object) -> str | None:
    if isinstance(name, str) and NAME.fullmatch(name):
        return None
    return "a name is 1-64 ASCII letters, digits, '_', '.', '+' or '-', starting with a letter or digit"


def _target_problem(target: object) -> str | None:
    if isinstance(target, str) and TARGET.fullmatch(target.strip()):
        return None
    return f"target {bounded_repr(target, 120)}: expected 'module:attr'"
