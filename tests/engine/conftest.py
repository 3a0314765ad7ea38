"""Engine-test fixtures: stores with a fixed clock (T0), on each database or on SQLite only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from membrane_engine import Membrane

from tests.support.records import T0


@pytest.fixture
def mem(store_url: str) -> Iterator[Membrane]:
    """An empty store on each database whose clock stands still at T0."""
    m = Membrane.open(store_url, load_sample=False, clock=lambda: T0)
    yield m
    m.close()


@pytest.fixture
def lite(sqlite_url: str) -> Iterator[Membrane]:
    """An empty SQLite store at T0 (for rules that do not depend on the database)."""
    m = Membrane.open(sqlite_url, load_sample=False, clock=lambda: T0)
    yield m
    m.close()
