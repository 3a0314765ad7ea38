"""Browser-test fixtures: one console server per store and one Chromium per test session.

- ``sample_server``: the console on a SQLite copy of sample_data/membrane_sample.json
- ``canary_server`` / ``hostile_server``: the console on the canary and hostile stores
  (tests/support/canaries.py, hostile.py)
- ``browser``: Chromium (Debian's /usr/bin/chromium) driven by Playwright; missing -> the tests
  fail (CI installs it), they never skip
- ``console`` / ``new_console``: a fresh browser context (a fresh Streamlit session) on a server

When a test fails, the tail of every server's log and the tab's JavaScript errors are added to
its report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from membrane_engine import Membrane
from tests.support import canaries, hostile
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, ROOT, SERVERS, Console, ConsoleServer

SAMPLE = ROOT / "sample_data" / "membrane_sample.json"

_OPEN_CONSOLES: list[Console] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and report.when in ("setup", "call"):
        for server in SERVERS:
            report.sections.append((f"console server {server.name!r} ({server.log_path})", server.log_tail()))
        for con in _OPEN_CONSOLES:
            noise = con.page_errors + con.console_errors
            if noise:
                report.sections.append((f"browser errors ({con.page.url})", "\n".join(noise[-40:])))


# ------------------------------------------------------------------------------ stores


def build_store(path: Path, records: list | None = None, json_file: Path | None = None) -> str:
    """A SQLite store at ``path`` filled from ``records`` (dicts or MemoryRecords) or a JSON file."""
    url = f"sqlite:///{path}"
    m = Membrane.open(url, load_sample=False)
    try:
        if json_file is not None:
            m.import_file(json_file)
        if records is not None:
            m.import_records([r if isinstance(r, dict) else r.model_dump(mode="json") for r in records])
    finally:
        m.close()
    return url


def _serve(name: str, url: str, tmp: Path, **options) -> Iterator[ConsoleServer]:
    """A started server (``options``: ConsoleServer's launcher, operators, extra_args, env)."""
    server = ConsoleServer(name, url, tmp, **options)
    try:
        server.start()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def sample_store_url(tmp_path_factory) -> str:
    if not SAMPLE.exists():
        pytest.fail(f"{SAMPLE} is missing: the browser tests run on the sample store", pytrace=False)
    tmp = tmp_path_factory.mktemp("e2e-sample")
    return build_store(tmp / "membrane.db", json_file=SAMPLE)


@pytest.fixture(scope="session")
def sample_server(sample_store_url, tmp_path_factory) -> Iterator[ConsoleServer]:
    yield from _serve("sample", sample_store_url, tmp_path_factory.mktemp("e2e-sample-server"))


@pytest.fixture(scope="session")
def canary_records() -> list:
    return list(canaries.build_canary_records())


@pytest.fixture(scope="session")
def canary_store_url(canary_records, tmp_path_factory) -> str:
    return build_store(tmp_path_factory.mktemp("e2e-canary") / "membrane.db", records=canary_records)


@pytest.fixture(scope="session")
def canary_server(canary_store_url, tmp_path_factory) -> Iterator[ConsoleServer]:
    yield from _serve("canary", canary_store_url, tmp_path_factory.mktemp("e2e-canary-server"))


@pytest.fixture(scope="session")
def hostile_records() -> list:
    return list(hostile.build_hostile_records())


@pytest.fixture(scope="session")
def hostile_store_url(hostile_records, tmp_path_factory) -> str:
    return build_store(tmp_path_factory.mktemp("e2e-hostile") / "membrane.db", records=hostile_records)


@pytest.fixture(scope="session")
def hostile_server(hostile_store_url, tmp_path_factory) -> Iterator[ConsoleServer]:
    yield from _serve("hostile", hostile_store_url, tmp_path_factory.mktemp("e2e-hostile-server"))


# ------------------------------------------------------------------------------ browser


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: the browser tests need Debian's chromium "
                    "(apt-get install chromium; .ci/run installs it)", pytrace=False)
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    try:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
    except Exception as exc:
        pw.stop()
        pytest.fail(f"Chromium at {CHROMIUM} did not start: {exc}", pytrace=False)
    yield chromium
    chromium.close()
    pw.stop()


@pytest.fixture
def new_console(browser) -> Iterator[Callable[..., Console]]:
    """Open a fresh tab (own browser context, own Streamlit session) on a server."""
    made: list[Console] = []

    def make(server: ConsoleServer, **kwargs) -> Console:
        con = Console.new(browser, server, **kwargs)
        made.append(con)
        _OPEN_CONSOLES.append(con)
        return con

    yield make
    for con in made:
        _OPEN_CONSOLES.remove(con)
        con.close()


@pytest.fixture
def console(new_console, sample_server) -> Console:
    """A fresh tab on the sample store's console."""
    return new_console(sample_server)


@pytest.fixture
def sample_membrane(sample_store_url) -> Iterator[Membrane]:
    """A Membrane of the test's own on the sample server's store (to compute expectations and
    to check what the console wrote). Overrides tests/conftest.py's fixture of the same name."""
    m = Membrane.open(sample_store_url, load_sample=False)
    yield m
    m.close()
