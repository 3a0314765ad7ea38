"""Security-suite fixtures: the canary and hostile stores, loaded once per module and database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from membrane_engine import Membrane

from tests.support import canaries, hostile
from tests.support.security import open_loaded


def _loaded(db: str, tmp_path_factory, records) -> Iterator[Membrane]:
    yield from open_loaded(db, tmp_path_factory, records)


DATABASES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


# One unparametrized fixture per database, so a module builds each store once however its
# tests are parametrized (tests pick one with request.getfixturevalue(f"canary_{db}")).
@pytest.fixture(scope="module")
def canary_sqlite(tmp_path_factory) -> Iterator[Membrane]:
    yield from _loaded("sqlite", tmp_path_factory, canaries.build_canary_records())


@pytest.fixture(scope="module")
def canary_postgres(tmp_path_factory) -> Iterator[Membrane]:
    yield from _loaded("postgres", tmp_path_factory, canaries.build_canary_records())


@pytest.fixture(scope="module")
def hostile_sqlite(tmp_path_factory) -> Iterator[Membrane]:
    yield from _loaded("sqlite", tmp_path_factory, hostile.build_hostile_records())


@pytest.fixture(scope="module")
def hostile_postgres(tmp_path_factory) -> Iterator[Membrane]:
    yield from _loaded("postgres", tmp_path_factory, hostile.build_hostile_records())


@pytest.fixture(params=DATABASES)
def canary_membrane(request) -> Membrane:
    """The canary store (see tests/support/canaries.py) on each database, built once per module."""
    return request.getfixturevalue(f"canary_{request.param}")


@pytest.fixture(params=DATABASES)
def hostile_membrane(request) -> Membrane:
    """The hostile-content store (see tests/support/hostile.py) on each database, built once per module."""
    return request.getfixturevalue(f"hostile_{request.param}")
