"""Shared fixtures: a fresh store on SQLite and, when MEMBRANE_TEST_POSTGRES_URL is set, on
PostgreSQL (each test in a schema of its own, so parallel runs never see each other). Helpers
shared by the test folders live in tests/support."""

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
from tests.support.records import T0, Clock

POSTGRES_URL = os.environ.get("MEMBRANE_TEST_POSTGRES_URL", "")
TESTS = Path(__file__).resolve().parent
SAMPLE = TESTS.parent / "sample_data" / "membrane_sample.json"
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


@pytest.fixture
def clock() -> Clock:
    """The clock ``mem`` reads: at T0 until a test moves it (``clock.at(days)``)."""
    return Clock()


@pytest.fixture
def mem(store_url: str, clock: Clock) -> Iterator[Membrane]:
    """An empty store on each database whose clock stands at T0 until the test moves it."""
    m = Membrane.open(store_url, load_sample=False, clock=clock)
    yield m
    m.close()


@pytest.fixture
def lite(sqlite_url: str) -> Iterator[Membrane]:
    """An empty SQLite store at T0, for rules that do not depend on the database."""
    m = Membrane.open(sqlite_url, load_sample=False, clock=lambda: T0)
    yield m
    m.close()



# ------------------------------------------------------------------------------ parallel runs
#
# .ci/run runs the suite on two pytest-xdist workers with --dist loadgroup (pyproject's addopts):
# the tests of one xdist_group run on one worker, and every other test goes to whichever worker
# is free. Each worker has its own basetemp (so tmp_path and tmp_path_factory never collide), its
# own $MEMBRANE_HOME (below), its own session fixtures (a Chromium, the e2e servers) and free
# ports; PostgreSQL tests each have a schema of their own (postgres_url).
#
# Grouped by module: the tests of a module that share a module- or class-scoped fixture (a
# generated store, a console server), so it is built once rather than on each worker; in
# MODULE_GROUPED folders every module, as their stores are module fixtures that tests request
# by name at run time (tests/security/conftest.py), which a fixture closure does not show.
MODULE_GROUPED = ("security",)
# One group for tests that must not overlap one another, run one after another on one worker
# while the other goes on with the rest: the browser benchmarks and the load test (several
# browser sessions) keep both cores busy for half a minute or more; the memory probe imports
# 50 MB in a process of its own; the prewarm tests time quiet windows of a second between
# threads, which a benchmark running beside them could stretch. tests/test_parallel_groups.py
# checks that every entry still names a test.
EXCLUSIVE = "exclusive"
EXCLUSIVE_TESTS = (
    "e2e/test_pages_bench.py",
    "e2e/test_browser_bench.py",
    "e2e/test_load.py",
    "console/test_upload_memory.py",
    "console/test_cli.py::test_prewarm_loads_the_rest_once_the_first_page_is_drawn",
    "console/test_cli.py::test_waiting_for_quiet_gives_up_after_its_timeout",
)
# Folders whose ungrouped tests include the longest single ones (a store of 10,000 records, a
# browser journey): under xdist they are handed out first, so none is left to run alone at the end.
LONG_FIRST = ("e2e", "scale")


def _rel(item: pytest.Item) -> Path | None:
    try:
        return Path(item.path).resolve().relative_to(TESTS)
    except ValueError:
        return None


def _module_group(item: pytest.Item) -> str | None:
    rel = _rel(item)
    if rel is None:
        return None
    name = getattr(item, "originalname", item.name)  # a parametrized test's cases go together
    if rel.as_posix() in EXCLUSIVE_TESTS or f"{rel.as_posix()}::{name}" in EXCLUSIVE_TESTS:
        return EXCLUSIVE
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    shared = any(fd.scope in ("package", "module", "class") for fds in defs.values() for fd in fds[-1:])
    return rel.as_posix() if shared or rel.parts[0] in MODULE_GROUPED else None


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            group = _module_group(item)
            if group is not None:
                item.add_marker(pytest.mark.xdist_group(group))
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the same order on every worker, as xdist requires
        items.sort(key=_later)


def _later(item: pytest.Item) -> bool:
    rel = _rel(item)
    return rel is None or rel.parts[0] not in LONG_FIRST


@pytest.fixture(scope="session", autouse=True)
def _own_membrane_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No test reaches ~/.membrane: the default store and server stores' column snapshots live
    under $MEMBRANE_HOME, which is this session's (this worker's) own. Tests that want another
    set it themselves."""
    mp = pytest.MonkeyPatch()
    mp.setenv("MEMBRANE_HOME", str(tmp_path_factory.mktemp("membrane-home")))
    yield
    mp.undo()


@pytest.fixture(autouse=True)
def console_signed_in_as_admin(monkeypatch: pytest.MonkeyPatch):
    """Every AppTest of the console starts signed in (SPEC 10): an admin with full clearance,
    as console/app.py's gate leaves a session after a sign-in. A test that needs someone else
    (or nobody) calls ``sign_in(at, operator_or_None)`` (tests/support/sessions.py) after
    AppTest.from_file."""
    from streamlit.testing.v1 import AppTest

    from tests.support.sessions import TEST_ADMIN, sign_in

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
