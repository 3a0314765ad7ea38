"""The column cache's freshness check through the store's probe (PostgreSQL) and ``answer``,
which works on the snapshot in hand while the check travels: every answer still sees each write
committed before the call, whoever made it; a stale snapshot's outcome, value or error, is
never the one returned; and the probe is only an accelerator (busy, lost or closed, the usual
path answers instead)."""

from __future__ import annotations

import threading
import uuid

import pytest
from sqlalchemy import create_engine, text

from membrane_engine import Membrane
from membrane_engine.retrieval import layered as retrieval
from membrane_engine.storage import probe as probe_module
from membrane_engine.errors import AccessDeniedError, NotFoundError

from tests.support.records import T0, rec, trust

POSTGRES_URL = __import__("os").environ.get("MEMBRANE_TEST_POSTGRES_URL", "")


def _with_app(url: str, app: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}application_name={app}"


def _backends(app: str) -> list[int]:
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            return list(conn.execute(text("SELECT pid FROM pg_stat_activity WHERE application_name = :app"),
                                     {"app": app}).scalars())
    finally:
        admin.dispose()


def _terminate(pid: int) -> None:
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    finally:
        admin.dispose()


def _pair(url: str):
    """Two Membranes on one store, as two processes would have: ``mine`` has its snapshot
    loaded (and its probe asked once), and ``other`` writes behind its back."""
    mine = Membrane.open(url, load_sample=False, clock=lambda: T0)
    mine.import_records([rec("a", sensitivity="low"), rec("b", sensitivity="low")])
    mine.columns.current()
    mine.columns.current()
    other = Membrane.open(url, load_sample=False, clock=lambda: T0)
    return mine, other


@pytest.fixture
def pair(store_url: str):
    mine, other = _pair(store_url)
    yield mine, other
    other.close()
    mine.close()


@pytest.fixture
def pg_pair(postgres_url: str):
    mine, other = _pair(postgres_url)
    yield mine, other
    other.close()
    mine.close()


def _counting(monkeypatch, module, name: str) -> list:
    calls: list = []
    original = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(args[1] if len(args) > 1 else None)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_an_answer_sees_a_write_committed_just_before_it(pair, monkeypatch):
    mine, other = pair
    low = trust("low")
    assert mine.explain("a", low).verdict.value == "full"
    other.import_records([rec("c", sensitivity="low")])
    other.reclassify("a", "op", "now secret", sensitivity="high")
    runs = _counting(monkeypatch, retrieval, "explanation_of")
    # The snapshot in hand knows no "c": its NotFoundError must not be the answer.
    assert mine.explain("c", low).verdict.value == "full"
    if mine.store.probe is not None:
        assert len(runs) == 2, "on the stale snapshot while the probe asked, then on the caught-up one"
    assert mine.explain("a", low).verdict.value == "hidden"
    with pytest.raises(AccessDeniedError):
        mine.retrieve_by_id("a", low)
    assert mine.retrieve_by_id("c", low).id == "c"
    other.delete("b", "op", "gone")
    with pytest.raises(NotFoundError):
        mine.explain("b", low)
    with pytest.raises(NotFoundError):
        mine.retrieve_by_id("b", low)


def test_nothing_new_is_answered_from_the_snapshot_in_one_run(pair, monkeypatch):
    mine, _ = pair
    runs = _counting(monkeypatch, retrieval, "explanation_of")
    for _ in range(3):
        assert mine.explain("a", trust("low")).verdict.value == "full"
    assert len(runs) == 3


def test_by_id_goes_by_the_labels_of_the_record_it_read(pair, monkeypatch):
    """The record read may be newer than the snapshot whose decision let it through (a
    reclassify committed in between): what its own labels deny does not go out."""
    mine, _ = pair
    original = retrieval.materialize

    def read_after_a_reclassify(store, ids, saliences):
        out = original(store, ids, saliences)
        for record in out.values():
            record.sensitivity = "hyper"
        return out

    monkeypatch.setattr(retrieval, "materialize", read_after_a_reclassify)
    with pytest.raises(AccessDeniedError) as info:
        mine.retrieve_by_id("a", trust("low"))
    assert "hyper" not in str(info.value)  # SPEC 4: the refusal names none of the record's labels
    assert mine.retrieve_by_id("a", trust("hyper")).id == "a"


@pytest.mark.postgres
def test_the_probe_answers_the_newest_change(postgres_url):
    app = "membrane-probe-" + uuid.uuid4().hex[:8]
    m = Membrane.open(_with_app(postgres_url, app), load_sample=False, clock=lambda: T0)
    other = Membrane.open(postgres_url, load_sample=False, clock=lambda: T0)
    try:
        m.import_records([rec("a")])
        probe = m.store.probe
        assert probe is not None

        def counter() -> int:
            with m.store.read() as conn:
                return m.store.change_counter(conn)

        assert probe.newest() == counter() > 0
        before = counter()
        other.reinforce("a", "op", "elsewhere")
        assert probe.newest() == counter() > before
        assert len(_backends(app)) == 2, "the pool's connection and the probe's own"
        m.close()
        assert _backends(app) == [], "closing the store closes the probe's connection too"
        assert probe.newest() == counter(), "a closed probe opens a connection again when asked"
    finally:
        other.close()
        m.close()


@pytest.mark.postgres
def test_a_lost_probe_connection_falls_back_then_reconnects(postgres_url, monkeypatch):
    app = "membrane-probe-" + uuid.uuid4().hex[:8]
    m = Membrane.open(_with_app(postgres_url, app), load_sample=False, clock=lambda: T0)
    other = Membrane.open(postgres_url, load_sample=False, clock=lambda: T0)
    try:
        m.import_records([rec("a", sensitivity="low")])
        m.columns.current()
        probe = m.store.probe
        assert probe.newest() is not None
        _terminate(probe._pgconn.backend_pid)
        other.reclassify("a", "op", "now secret", sensitivity="high")
        # The probe's question fails; the usual path answers, with the other's write in it.
        assert m.explain("a", trust("low")).verdict.value == "hidden"
        assert probe.newest() is None, "not reconnected at once"
        monkeypatch.setattr(probe_module, "RETRY_AFTER_S", 0.0)
        other.reclassify("a", "op", "low again", sensitivity="low")
        assert m.explain("a", trust("low")).verdict.value == "full"
        with m.store.read() as conn:
            assert probe.newest() == m.store.change_counter(conn)
    finally:
        other.close()
        m.close()


@pytest.mark.postgres
def test_a_busy_probe_lets_other_threads_through(pg_pair):
    """One thread at a time asks through the probe; another meanwhile takes the usual path
    instead of waiting, and still sees the newest writes."""
    mine, other = pg_pair
    probe = mine.store.probe
    assert probe.send()  # this thread holds the probe
    try:
        other.reclassify("a", "op", "now secret", sensitivity="high")
        seen: list = []
        worker = threading.Thread(target=lambda: seen.append(mine.explain("a", trust("low")).verdict.value))
        worker.start()
        worker.join(timeout=30)
        assert seen == ["hidden"]
    finally:
        assert probe.receive() is not None
    assert mine.explain("a", trust("low")).verdict.value == "hidden"


@pytest.mark.postgres
def test_a_refused_probe_statement_says_none_and_keeps_no_connection(postgres_url):
    """Where the probe's statement cannot be prepared (no change log in the schema it sees),
    the probe says it cannot tell, and the connection it opened for itself is closed."""
    app = "membrane-probe-" + uuid.uuid4().hex[:8]
    schema = "probe_empty_" + uuid.uuid4().hex[:8]
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    engine = create_engine(_with_app(POSTGRES_URL, app), connect_args={"options": f"-csearch_path={schema}"})
    try:
        probe = probe_module.ChangeProbe(engine)
        assert probe.newest() is None
        assert probe.send() is False, "not retried at once"
        engine.dispose()
        assert _backends(app) == [], "the refused connection is not kept"
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def test_sqlite_stores_have_no_probe(sqlite_url):
    m = Membrane.open(sqlite_url, load_sample=False)
    try:
        assert m.store.probe is None
    finally:
        m.close()
