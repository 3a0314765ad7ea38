"""Fixtures for the curation tests: a Membrane with a settable clock on each database and raw SQL
access that bypasses the engine."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # curation_helpers, curation_workers (spawned too)

from curation_helpers import Clock, Raw  # noqa: E402

from membrane_engine import Membrane  # noqa: E402


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
