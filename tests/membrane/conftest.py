"""Fixtures of the ported Membrane tests: stores on each database with a clock standing at T0."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from membrane_engine import Membrane

from membrane_kit import T0


@pytest.fixture
def mem(store_url: str) -> Iterator[Membrane]:
    """An empty store on each database whose clock stands still at T0."""
    m = Membrane.open(store_url, load_sample=False, clock=lambda: T0)
    yield m
    m.close()

