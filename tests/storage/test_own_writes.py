"""A write's own changes reach this process's column cache without being read back (when they
are the very next changes after its snapshot), and never when the write did not commit; the
connections a write borrows go back to the pool as they came."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from membrane_engine import Membrane
from membrane_engine.storage.columns import ColumnCache
from membrane_engine.errors import StoreUnavailableError

from tests.support.records import T0, rec


def _row(snap, record_id: str) -> tuple:
    i = snap.row_of[record_id]
    d = snap.decay
    # repr: a never-reinforced record's last_reinforced_at is NaN, which equals nothing
    return (float(d.anchor_salience[i]), float(d.anchor_at[i]), repr(float(snap.last_reinforced_at[i])),
            int(snap.sens_level[i]), snap.scope_names[snap.scope_code[i]])


def _all_rows(snap) -> dict[str, tuple]:
    return {str(rid): _row(snap, str(rid)) for rid, alive in zip(snap.ids, snap.alive) if alive}


def _spy_reads(m: Membrane, monkeypatch) -> list:
    """What each freshness check of ``m``'s cache read from the change log."""
    reads: list = []
    original = m.store.changes_with_rows

    def spy(conn, seq, limit):
        out = original(conn, seq, limit)
        reads.append(out)
        return out

    monkeypatch.setattr(m.store, "changes_with_rows", spy)
    return reads


@pytest.fixture
def two(mem: Membrane) -> Membrane:
    mem.import_records([rec("a", "semantic", salience=0.4), rec("b", "semantic", salience=0.5)])
    mem.columns.current()
    return mem


def test_a_reinforce_reaches_the_cache_without_being_read_back(two: Membrane, monkeypatch):
    before = _row(two.columns.current(), "a")
    reads = _spy_reads(two, monkeypatch)
    two.reinforce("a", "op", "used it", gain=0.3)
    snap = two.columns.current()
    # On PostgreSQL the store's probe answers the check (nothing newer than the snapshot) and the
    # change log is not read at all; on SQLite the check reads it and finds nothing.
    assert reads == ([] if two.store.probe else [[]]), "the check should find nothing this process has not already taken"
    assert _row(snap, "a") != before and _row(snap, "a")[0] == pytest.approx(0.7)
    assert _all_rows(snap) == _all_rows(ColumnCache(two.store).current())


def test_a_change_by_someone_else_in_between_is_read_back_with_ours(two: Membrane, store_url, monkeypatch):
    other = Membrane.open(store_url, load_sample=False, clock=lambda: T0)
    try:
        other.reinforce("b", "someone", "in between", gain=0.2)
        reads = _spy_reads(two, monkeypatch)
        two.reinforce("a", "op", "used it", gain=0.3)
        snap = two.columns.current()
        assert [len(r) for r in reads] == [2], "both changes, the other's first, should be read back"
        assert _row(snap, "b")[0] == pytest.approx(0.7) and _row(snap, "a")[0] == pytest.approx(0.7)
        assert _all_rows(snap) == _all_rows(ColumnCache(two.store).current())
    finally:
        other.close()


def test_a_write_that_does_not_commit_leaves_the_cache_alone(two: Membrane, monkeypatch):
    before = _all_rows(two.columns.current())
    original = two.store.write_updates

    def fail_after_writing(conn, audit_rows, updates, last=False):
        original(conn, audit_rows, updates)  # not the last: the transaction goes on, and fails
        raise RuntimeError("injected after the rows were written")

    monkeypatch.setattr(two.store, "write_updates", fail_after_writing)
    with pytest.raises(RuntimeError, match="injected"):
        two.reinforce("a", "op", "used it", gain=0.3)
    assert _all_rows(two.columns.current()) == before
    assert _all_rows(ColumnCache(two.store).current()) == before
    assert [e.action.value for e in two.audit_log("a")] == ["create"]


def test_a_statement_that_fails_beside_the_commit_writes_nothing(two: Membrane, monkeypatch):
    """A rewrite's statements go out with its COMMIT on PostgreSQL (``write_updates(last=True)``):
    when one of them fails, the server skips the COMMIT and the whole write is rolled back."""
    from membrane_engine.errors import ValidationError

    before = _all_rows(two.columns.current())
    original = two.store.write_updates
    sent: list[bool] = []

    def with_a_bad_value(conn, audit_rows, updates, last=False):
        sent.append(last)
        return original(conn, audit_rows, [*updates, ("b", {"doc": None})], last=last)  # NOT NULL

    monkeypatch.setattr(two.store, "write_updates", with_a_bad_value)
    with pytest.raises(ValidationError):
        two.reinforce("a", "op", "used it", gain=0.3)
    assert sent == [True]
    assert _all_rows(two.columns.current()) == before
    assert _all_rows(ColumnCache(two.store).current()) == before
    assert [e.action.value for e in two.audit_log("a")] == ["create"]
    monkeypatch.undo()
    two.reinforce("a", "op", "used it", gain=0.3)  # the store and its pool are fine after it
    assert [e.action.value for e in two.audit_log("a")] == ["create", "reinforce"]


@pytest.mark.postgres
def test_write_connections_go_back_to_the_pool_in_their_own_transaction_mode(postgres_url: str):
    """A PostgreSQL write runs its connection in autocommit mode (its BEGIN goes out with the
    writers' lock); after success, a failure in the body, and a failure taking the lock, every
    pooled connection runs reads in a transaction again."""
    url = postgres_url + "%20-clock_timeout%3D300"
    m = Membrane.open(url, load_sample=False, clock=lambda: T0)
    try:
        m.import_records([rec("a", "semantic", salience=0.4)])
        m.reinforce("a", "op", "ok")
        with pytest.raises(RuntimeError):
            with m.store.write() as conn:
                conn.exec_driver_sql("UPDATE records SET confidence = 0.1 WHERE id = 'a'")
                raise RuntimeError("body fails")
        assert m.get("a").confidence != 0.1, "the failed write must have rolled back"
        holder = create_engine(postgres_url)
        with holder.connect() as other, other.begin():
            other.execute(text("SELECT pg_advisory_xact_lock(7264321, hashtext(current_schema()))"))
            with pytest.raises(StoreUnavailableError):
                m.reinforce("a", "op", "the writers' lock is held elsewhere")
        holder.dispose()
        m.reinforce("a", "op", "after the lock was released")
        for _ in range(3):  # several pooled connections, if the pool holds several
            with m.store.read() as conn:
                raw = conn.connection.driver_connection
                assert raw.autocommit is False
                conn.exec_driver_sql("SELECT 1")
                assert raw.info.transaction_status.name == "INTRANS"
        assert [e.action.value for e in m.audit_log("a")] == ["create", "reinforce", "reinforce"]
    finally:
        m.close()


def test_a_rewrite_reads_its_record_once_with_the_first_round_trip(two: Membrane, monkeypatch):
    """The record a rewrite names is read and locked once; on PostgreSQL inside the pipeline
    that begins the transaction and takes the writers' lock. A name that is no record still
    gives NotFoundError with nothing written, and a bad one the planner's own message."""
    from membrane_engine.errors import NotFoundError, ValidationError
    from membrane_engine.storage.store import Store

    reads: list[tuple[list[str], bool]] = []
    original = Store._send_rows_for_update

    def spy(self, conn, ids):
        raw = conn.connection.driver_connection
        pipelined = not self.is_sqlite and raw.pgconn.pipeline_status != 0  # psycopg.pq.PipelineStatus.OFF
        reads.append((sorted(ids), pipelined))
        return original(self, conn, ids)

    monkeypatch.setattr(Store, "_send_rows_for_update", spy)
    two.penalize("a", 0.1, "op", "wrong")
    assert reads == [(["a"], not two.store.is_sqlite)]
    assert [e.action.value for e in two.audit_log("a")] == ["create", "decay"]  # a penalty is audited as decay
    with pytest.raises(NotFoundError):
        two.reinforce("nobody", "op", "used")
    with pytest.raises(ValidationError, match="id"):
        two.reinforce("bad\x00id", "op", "used")
    assert sorted(two.ids()) == ["a", "b"] and len(two.audit_log("b")) == 1
