"""Fixtures for the curation tests: a Membrane with a settable clock on each database and raw SQL
access that bypasses the engine."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from membrane_engine import Membrane
from tests.support.curation import Clock, Raw


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def m(store_url: str, clock: Clock) -> Iterator[Membrane]:
    """An empty Membrane on each database, on a fixed, settable clock."""
    mem = Membrane.open(store_url, load_sample=False, clock=clock)
    yield mem
    mem.close()


@pytest.fixture
def raw(store_url: str) -> Raw:
    return Raw(store_url)
