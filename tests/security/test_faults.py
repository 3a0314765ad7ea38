"""Faults: a writer killed with SIGKILL in the middle of a large import or merge leaves the
store as it was before (or, for a merge that got to commit, as after: never in between); a
locked, read-only or vanished database and an unreachable server give a clear
StoreUnavailableError; a Membrane survives its PostgreSQL connections being terminated.

The worker (tests/support/fault_worker.py) is killed either where it pauses itself inside the
transaction, after rows were written ("paused"), or as soon as the test sees it holding the write
transaction ("polled": SQLite's write lock, PostgreSQL's pg_stat_activity)."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from membrane_engine import Membrane, RetrieveRequest, TrustContext
from membrane_engine.errors import MembraneError, StoreUnavailableError, ValidationError

from tests.support.security import FULL, POSTGRES_URL, T0, checksum, forget, pg_schema, simple

WORKER = "tests.support.fault_worker"
ROOT = Path(__file__).resolve().parents[2]
IMPORT_N = 50_000 if FULL else 12_000  # the import writes batches of 5,000: pausing after the first
MERGE_N = 2_000 if FULL else 400
DATABASES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


# --------------------------------------------------------------------------- helpers


def _app_url(url: str, app: str) -> str:
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}application_name={app}"


@pytest.fixture
def fault_url(request, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fault.db'}"
        return
    if not POSTGRES_URL:
        pytest.skip("MEMBRANE_TEST_POSTGRES_URL is not set")
    with pg_schema() as url:
        yield url


def _seed(url: str, records: list[dict]) -> None:
    m = Membrane.open(url, load_sample=False, clock=lambda: T0)
    m.import_records(records, actor="seed")
    m.close()


def _pg_backends(app: str) -> list[tuple]:
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            return conn.execute(text(
                "SELECT pid, state, xact_start FROM pg_stat_activity WHERE application_name = :app"
            ), {"app": app}).all()
    finally:
        admin.dispose()


def _in_write_transaction(url: str, app: str) -> bool:
    if url.startswith("sqlite"):
        probe = sqlite3.connect(url.split("///", 1)[1], timeout=0, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return False
        except sqlite3.OperationalError:  # "database is locked": the worker holds the write lock
            return True
        finally:
            probe.close()
    return any(state in ("active", "idle in transaction") and xact_start is not None
               for _pid, state, xact_start in _pg_backends(app))


def _run_and_kill(url: str, op: str, n: int, how: str) -> str:
    """Start the worker, kill -9 it inside its write transaction; returns what it last said
    ("PAUSED", "STARTED" or "DONE" if it finished before the kill)."""
    app = "membrane-fault-" + uuid.uuid4().hex[:8]
    worker_url = url if url.startswith("sqlite") else _app_url(url, app)
    args = [sys.executable, "-m", WORKER, op, worker_url, str(n)] + (["pause"] if how == "paused" else [])
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    last = ""
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            line = proc.stdout.readline().strip()
            if not line:
                if proc.poll() is not None:
                    raise AssertionError(f"worker exited {proc.returncode}: {proc.stderr.read()[-2000:]}")
                continue
            last = line
            if line == "PAUSED" or (line == "STARTED" and how == "polled"):
                break
        if how == "polled":
            while proc.poll() is None and not _in_write_transaction(url, app):
                time.sleep(0.002)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        else:
            last = "DONE"
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    if not url.startswith("sqlite"):
        # The server ends the dead client's backend (and its transaction) when it sees the socket
        # close; wait for that, so what follows never waits on the orphan's locks.
        for _ in range(200):
            if not _pg_backends(app):
                break
            time.sleep(0.05)
        assert not _pg_backends(app), "the killed worker's backend outlived it"
    return last


def _usable_after(url: str) -> Membrane:
    m = Membrane.open(url, load_sample=False, clock=lambda: T0)
    assert m.verify_audit() == []
    m.import_records([simple("after-the-crash-" + uuid.uuid4().hex[:6])], actor="after")  # no lock left behind
    return m


# --------------------------------------------------------------------------- kill -9


@pytest.mark.parametrize("fault_url", DATABASES, indirect=True)
@pytest.mark.parametrize("how", ["paused", "polled"])
def test_import_killed_mid_transaction_leaves_the_store_as_before(fault_url: str, how: str):
    _seed(fault_url, [simple(f"seed-{i}") for i in range(50)])
    before = checksum(fault_url)
    said = _run_and_kill(fault_url, "import", IMPORT_N, how)
    assert said in ("PAUSED", "STARTED"), f"the import finished before it could be killed ({said})"
    assert checksum(fault_url) == before
    m = _usable_after(fault_url)
    assert m.count() == 51 and not m.get("seed-3").redacted
    m.close()


@pytest.mark.parametrize("fault_url", DATABASES, indirect=True)
@pytest.mark.parametrize("how", ["paused", "polled"])
def test_merge_killed_mid_transaction_is_all_or_nothing(fault_url: str, how: str):
    sources = [simple(f"src-{i:05d}") for i in range(MERGE_N)]
    _seed(fault_url, sources)
    before = checksum(fault_url)
    said = _run_and_kill(fault_url, "merge", MERGE_N, how)
    after = checksum(fault_url)
    m = Membrane.open(fault_url, load_sample=False, clock=lambda: T0)
    assert m.verify_audit() == []
    if after == before:
        assert "merged-all" not in m.ids()
        assert all(m.get(f"src-{i:05d}").payload.revision is None for i in (0, MERGE_N // 2, MERGE_N - 1))
    else:
        # It committed before the kill landed: then all of it is there.
        assert how == "polled" and said in ("STARTED", "DONE"), said
        merged = m.get("merged-all")
        assert {r.target_id for r in merged.relations if r.predicate == "derived_from"} == {s["id"] for s in sources}
        for s in sources:
            rec = m.get(s["id"])
            assert rec.revision_status == "retracted" and m.audit_log(s["id"])[-1].action.value == "merge"
    if how == "paused":
        assert after == before, "a merge killed after writing rows must roll back"
    m.close()
    _usable_after(fault_url).close()


# --------------------------------------------------------------------------- unavailable databases


def _clear(exc: MembraneError) -> str:
    message = str(exc)
    assert message and "Traceback" not in message and len(message) < 1000, message
    return message


@pytest.fixture
def quick_locks(monkeypatch):
    monkeypatch.setenv("MEMBRANE_LOCK_TIMEOUT", "0.5")


def test_locked_sqlite_store(tmp_path: Path, quick_locks):
    url = f"sqlite:///{tmp_path / 'locked.db'}"
    _seed(url, [simple("a"), simple("b")])
    m = Membrane.open(url, load_sample=False, clock=lambda: T0)
    before = checksum(url)
    holder = sqlite3.connect(tmp_path / "locked.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        assert m.get("a").id == "a"  # readers are not blocked (WAL)
        for call in (lambda: m.import_records([simple("c")]), lambda: m.reinforce("a", "op", "why"),
                     lambda: m.delete("b", "op", "why")):
            with pytest.raises(StoreUnavailableError) as info:
                call()
            assert "locked" in _clear(info.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert checksum(url) == before
    m.reinforce("a", "op", "works again")
    m.close()


def test_read_only_sqlite_store(tmp_path: Path):
    path = tmp_path / "ro.db"
    _seed(f"sqlite:///{path}", [simple("a")])
    before = checksum(f"sqlite:///{path}")
    m = Membrane.open(f"sqlite:///file:{path}?mode=ro&uri=true", load_sample=False, clock=lambda: T0)
    assert m.get("a").id == "a" and m.count() == 1
    for call in (lambda: m.import_records([simple("c")]), lambda: m.reinforce("a", "op", "why")):
        with pytest.raises(StoreUnavailableError) as info:
            call()
        assert "read-only" in _clear(info.value)
    m.close()
    assert checksum(f"sqlite:///{path}") == before


def test_sqlite_store_whose_directory_is_deleted(tmp_path: Path):
    folder = tmp_path / "gone"
    folder.mkdir()
    url = f"sqlite:///{folder / 'g.db'}"
    m = Membrane.open(url, load_sample=False, clock=lambda: T0)
    m.import_records([simple("a")])
    shutil.rmtree(folder)
    for call in (m.count, lambda: m.get("a"), lambda: m.import_records([simple("b")]),
                 lambda: m.reinforce("a", "op", "why")):
        with pytest.raises(StoreUnavailableError) as info:
            call()
        assert "gone" in _clear(info.value)
    m.close()
    forget(url)


def test_store_path_that_cannot_exist(tmp_path: Path, monkeypatch):
    (tmp_path / "a-file").write_text("not a directory")
    with pytest.raises(StoreUnavailableError) as info:  # a store named by URL: its directory must exist
        Membrane.open(f"sqlite:///{tmp_path / 'a-file' / 'm.db'}")
    assert "does not exist" in _clear(info.value)
    monkeypatch.setenv("MEMBRANE_HOME", str(tmp_path / "a-file" / "home"))  # the default store makes its own
    monkeypatch.delenv("MEMBRANE_DB_URL", raising=False)
    with pytest.raises(StoreUnavailableError) as info:
        Membrane.open(load_sample=False)
    assert "cannot be created" in _clear(info.value)


@pytest.mark.parametrize("url, words", [
    ("postgresql+psycopg://postgres@127.0.0.1:1/test", "unreachable"),
    ("postgresql+psycopg://postgres@no-such-host.invalid:5432/test", "unreachable"),
    ("nosuchdriver://x@localhost/db", "cannot open store"),
    ("not a url at all", "cannot open store"),
])
def test_unreachable_or_unknown_database(url: str, words: str):
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as info:
        Membrane.open(url)
    assert words in _clear(info.value)
    assert time.monotonic() - started < 20


def test_a_store_from_a_newer_engine_is_refused(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'future.db'}"
    Membrane.open(url, load_sample=False).close()
    with sqlite3.connect(tmp_path / "future.db") as conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(StoreUnavailableError) as info:
        Membrane.open(url, load_sample=False)
    assert "schema version 999" in _clear(info.value)


# --------------------------------------------------------------------------- PostgreSQL connections lost


@pytest.mark.postgres
def test_membrane_survives_its_postgres_connections_being_terminated():
    """Its server connections are terminated (as by a server restart; only this Membrane's, by
    application_name, since other suites share the server): the next call works all the same.
    Reads in a transaction check a pooled connection before use; the cache's checks, reads by id
    and writes send their first statement unchecked and again on a checked connection when the
    first finds its connection gone (Store.peeking, Store.write)."""
    if not POSTGRES_URL:
        pytest.skip("MEMBRANE_TEST_POSTGRES_URL is not set")
    app = "membrane-restart-" + uuid.uuid4().hex[:8]
    with pg_schema() as url:
        m = Membrane.open(_app_url(url, app), load_sample=False, clock=lambda: T0)
        m.import_records([simple("a"), simple("b", "competence")])
        everything = TrustContext(max_sensitivity="hyper", authenticated=True, actor_id="op")
        calls = [lambda: m.count(), lambda: m.get("a"), lambda: m.reinforce("a", "op", "after a restart"),
                 lambda: m.import_records([simple("c-" + uuid.uuid4().hex[:6])]), lambda: m.verify_audit(),
                 lambda: m.retrieve_by_id("a", everything), lambda: m.explain("b", everything),
                 lambda: m.retrieve(RetrieveRequest(trust=everything, limit=5))]
        for round_ in range(3):
            for call in calls:
                assert _pg_backends(app), "the Membrane should hold a pooled connection"
                admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
                with admin.connect() as conn:
                    conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                      "WHERE application_name = :app AND pid <> pg_backend_pid()"), {"app": app})
                admin.dispose()
                call()
        assert m.verify_audit() == []
        m.close()


def test_write_errors_name_the_problem_not_the_driver(tmp_path: Path):
    """A value the database itself refuses is a ValidationError, never a driver exception
    (checked here on SQLite through a trigger standing in for a PostgreSQL refusal)."""
    url = f"sqlite:///{tmp_path / 'refuse.db'}"
    m = Membrane.open(url, load_sample=False, clock=lambda: T0)
    m.import_records([simple("a")])
    with sqlite3.connect(tmp_path / "refuse.db") as conn:
        conn.execute("CREATE TRIGGER no_b BEFORE INSERT ON records WHEN NEW.id = 'b' "
                     "BEGIN SELECT RAISE(ABORT, 'constraint failed: refused by trigger'); END")
    before = checksum(url)
    with pytest.raises(MembraneError) as info:
        m.import_records([simple("b")])
    assert isinstance(info.value, (ValidationError, StoreUnavailableError))
    _clear(info.value)
    assert checksum(url) == before
    m.close()
