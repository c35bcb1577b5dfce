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
from collections.abc import Mapping
from dataclasses import dataclass


class Registry:
    """The parts of one kind: built-in entries, then the entry points' (group ``r3.<kind>s``), then those
    :meth:`register` adds while r3 runs. Names are how users choose parts, so each names one part."""

    def __init__(self, kind: str, built_in: Mapping[str, str], group: str | None = None):
        #: The kind of part, singular ("backend"); it names the refusals and, unless ``group`` is given
        #: (a plural other than "-s": ``r3.policies``), the entry-point group.
        self.kind = kind
        self.group = group or f"r3.{kind}s"
        self._built_in = dict(built_in)
        for target in self._built_in.values():
            _check_target(target)
        self._targets: dict[str, importlib.metadata.EntryPoint | _Given] = {}

    def names(self) -> tuple[str, ...]:
        """Every name a part of this kind can be chosen by, built-in ones first."""
        return tuple(self._entries())

    def get(self, name: str):
        """The object ``name`` stands for (a class or a factory), imported now; an unknown name is
        refused with the known ones."""
        entries = self._entries()
        if name not in entries:
            raise ValueError(f"unknown {self.kind} {str(name)[:80]!r} (known: {', '.join(entries)})")
        return entries[name].load()

    def register(self, name: str, target: str | None = None, *, part: object = None) -> None:
        """Add ``name`` for ``target`` ("module:attr"), or for a ``part`` made at run time (a record
        with no import path); a name already taken is refused, since it would change what a user's
        choice means."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} name must be a non-empty string, got {name!r}")
        if (target is None) == (part is None):
            raise ValueError(f"{self.kind} {name!r}: give a target or a part, not {target!r} and {part!r}")
        if target is not None:
            _check_target(target)
        entries = self._entries()
        if name in entries:
            raise ValueError(f"{self.kind} {name!r} is already registered (as {entries[name].value})")
        given = importlib.metadata.EntryPoint(name, target, self.group) if target else _Given(part)
        entries[name] = given

    def reload(self) -> None:
        """Forget what :meth:`register` added and read the entry points again (after installing a
        package into a running process)."""
        _installed_entry_points.cache_clear()
        self._targets.clear()

    def _entries(self) -> dict[str, importlib.metadata.EntryPoint | _Given]:
        """The entries, filled on first use: the built-in ones, then each entry point's."""
        if not self._targets:
            for name, target in self._built_in.items():
                self._targets[name] = importlib.metadata.EntryPoint(name, target, self.group)
            for entry in _installed_entry_points().select(group=self.group):
                if entry.name in self._targets:
                    raise ValueError(
                        f"entry point {entry.name!r} of group {self.group!r} ({entry.value}) takes the name "
                        f"of {self.kind} {entry.name!r} ({self._targets[entry.name].value})"
                    )
                self._targets[entry.name] = entry
        return self._targets


@functools.cache
def _installed_entry_points() -> importlib.metadata.EntryPoints:
    """Every installed package's entry points, read once for all registries: each read scans every
    installed distribution (20-25 ms on this project's machines, at every process's start)."""
    return importlib.metadata.entry_points()


@dataclass(frozen=True)
class _Given:
    """A part handed to :meth:`Registry.register` itself; it loads as itself."""

    part: object

    @property
    def value(self) -> str:
        return f"a {type(self.part).__name__} given at run time"

    def load(self) -> object:
        return self.part


def _check_target(target: str) -> None:
    module, colon, attr = target.partition(":") if isinstance(target, str) else ("", "", "")
    if not (module and colon and attr):
        raise ValueError(f"target {target!r}: expected 'module:attr'")
