"""The tests that tests/conftest.py puts in its exclusive xdist group are still where it says: a
test moved or renamed would otherwise leave the group without a word."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def test_every_exclusive_entry_names_a_test_that_exists(request: pytest.FixtureRequest) -> None:
    root = next(p for p in request.config.pluginmanager.get_plugins()
                if getattr(p, "__file__", None) and Path(p.__file__).resolve() == TESTS / "conftest.py")
    assert root.EXCLUSIVE_TESTS
    for entry in root.EXCLUSIVE_TESTS:
        path, _, name = entry.partition("::")
        source = TESTS / path
        assert source.is_file(), f"{entry}: no {source}"
        pattern = rf"^def {re.escape(name)}\(" if name else r"^def test_"
        assert re.search(pattern, source.read_text(), re.M), f"{entry}: no such test in {path}"
