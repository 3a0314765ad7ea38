"""Shared fixtures: a fresh store on SQLite and, when MEMBRANE_TEST_POSTGRES_URL is set, on
PostgreSQL (each test in a schema of its own, so parallel runs never see each other)."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from membrane_engine import Membrane

POSTGRES_URL = os.environ.get("MEMBRANE_TEST_POSTGRES_URL", "")
SAMPLE = Path(__file__).resolve().parent.parent / "sample_data" / "membrane_sample.json"
SAMPLE_NOW = datetime(2026, 11, 20, 12, 0, tzinfo=timezone.utc)  # the sample store's "now"


def _with_search_path(url: str, schema: str) -> str:
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-csearch_path%3D{schema}"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A URL to an empty PostgreSQL schema of this test's own; skips without a server URL."""
    if not POSTGRES_URL:
        pytest.skip("MEMBRANE_TEST_POSTGRES_URL is not set")
    schema = "t_" + uuid.uuid4().hex[:12]
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield _with_search_path(POSTGRES_URL, schema)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'membrane.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request) -> str:
    """An empty store URL on each database."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url")
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def membrane(store_url: str) -> Iterator[Membrane]:
    """An empty Membrane on each database."""
    m = Membrane.open(store_url, load_sample=False)
    yield m
    m.close()


@pytest.fixture
def sample_membrane(store_url: str) -> Iterator[Membrane]:
    """The bundled sample store on each database."""
    m = Membrane.open(store_url, load_sample=False)
    m.import_file(SAMPLE)
    yield m
    m.close()



@pytest.fixture(autouse=True)
def console_signed_in_as_admin(monkeypatch: pytest.MonkeyPatch):
    """Every AppTest of the console starts signed in (SPEC 10): an admin with full clearance,
    as console/app.py's gate leaves a session after a sign-in. A test that needs someone else
    (or nobody) calls ``session_kit.sign_in(at, operator_or_None)`` after AppTest.from_file."""
    from streamlit.testing.v1 import AppTest

    from session_kit import TEST_ADMIN, sign_in

    made = AppTest.from_file.__func__

    def from_file(cls, *args, **kwargs):
        return sign_in(made(cls, *args, **kwargs), TEST_ADMIN)

    monkeypatch.setattr(AppTest, "from_file", classmethod(from_file))
    # A script run replaces sys.modules["__main__"] with the script (AppTest.from_function's is
    # a temporary file calling the function); a later test's spawned worker processes would run
    # it again as their main module.
    main = sys.modules.get("__main__")
    yield
    if main is not None:
        sys.modules["__main__"] = main
