"""Every ``>>>`` example in r3.rewards runs."""

import doctest
import importlib

import pytest

MODULES = ["terms", "plan", "result", "judge", "vlm", "functions", "agreement"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(f"r3.rewards.{name}")
    result = doctest.testmod(module)
    assert result.failed == 0 and result.attempted > 0
