"""A minimal third suite, all in this folder: a marker on a number line that must reach a goal cell.

It exists to show what a suite is (issue 16, acceptance 3): a :class:`r3.suites.Suite` record
(:data:`SUITE`) pointing at its grammar (:mod:`.grammar`), its tasks and env (:mod:`.line`), and its
part of the one episode loop (:class:`.line.LineSuite`). A test registers it once
(``r3.suites.register_suite(SUITE)``); nothing else in r3 knows it.
"""

from __future__ import annotations

from r3.suites import Suite


def _make_env(**kwargs):
    from .line import LineEnv

    return LineEnv(**kwargs)


SUITE = Suite(
    name="toy_line",
    title="Number line",
    tasks_module=f"{__name__}.line",
    grammar_module=f"{__name__}.grammar",
    interfaces=("instruction",),
    default_history="response",
    make_env=_make_env,
)
