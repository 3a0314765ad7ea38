"""The store on both databases: schema and version row, reopening, files in and out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import event, inspect, text

from membrane_engine import Membrane, RetrieveRequest
from membrane_engine.errors import StoreUnavailableError, ValidationError
from membrane_engine.storage.store import SCHEMA_VERSION

from tests.support.records import DAY, HOUR, T0, later, rec, trust

DOCS = [
    rec("e1", "episodic", salience=0.9, half_life=DAY, scope="alpha"),
    rec("w1", "working", salience=0.7, curve="linear", half_life=HOUR, sensitivity="medium"),
    rec("s1", "semantic", salience=0.5, curve="custom", points=[[0, 1], [HOUR, 0.5], [DAY, 0.1]],
        relations=[{"predicate": "about", "target_id": "e1", "weight": 0.3}]),
    rec("c1", "competence", salience=0.4, pinned=True, sensitivity="high", scope="beta"),
    rec("p1", "plan_graph", salience=0.3, min_salience=0.2),
    rec("n1", "entity", salience=0.2, max_age=DAY),
]


def _open(url: str) -> Membrane:
    return Membrane.open(url, load_sample=False, clock=lambda: T0)


def test_schema_created_on_first_open_with_a_version_row(store_url):
    m = _open(store_url)
    try:
        tables = set(inspect(m.store.engine).get_table_names())
        assert {"records", "audit_entries", "archive", "changes", "meta"} <= tables
        with m.store.engine.connect() as conn:
            rows = conn.execute(text("SELECT key, value FROM meta")).all()
        assert sorted(r[0] for r in rows) == ["column_snapshot_key", "schema_version", "store_id"]
        assert dict(rows)["schema_version"] == str(SCHEMA_VERSION)
        assert m.count() == 0
    finally:
        m.close()


def test_reopening_an_existing_store(store_url):
    m = _open(store_url)
    m.import_records(DOCS)
    m.close()
    again = _open(store_url)
    try:
        assert again.ids() == sorted(d["id"] for d in DOCS)
        assert again.salience_at("e1", later(DAY)) == pytest.approx(0.45)
        with again.store.engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM meta")).scalar() == 3  # version, store id, snapshot key
        again.import_records([rec("late")])
        assert again.count() == len(DOCS) + 1
    finally:
        again.close()


def sent_by(m: Membrane, markers: tuple[str, ...], call) -> list[tuple[str, object]]:
    """The statements (with their parameters) containing every one of ``markers`` that ``call`` sends."""
    sent: list[tuple[str, object]] = []

    def keep(conn, cursor, statement, parameters, context, executemany):
        if all(marker in statement for marker in markers):
            sent.append((statement, parameters))

    event.listen(m.store.engine, "before_cursor_execute", keep)
    try:
        call()
    finally:
        event.remove(m.store.engine, "before_cursor_execute", keep)
    return sent


def plan_of(m: Membrane, statement: str, parameters: object = ()) -> str:
    """SQLite's query plan of ``statement``, as one line of text."""
    with m.store.engine.connect() as conn:
        return " ".join(str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters))


def test_an_older_store_gets_this_engines_indexes_on_open(store_url):
    """The review queue finds contested records and their newest contests through partial
    indexes, metrics count the entries after an instant by action from the (ts, action) index,
    and the audit page reads the newest entries from the (ts, seq) index: a store opened by
    this engine has them all (a new one from the start, an older one built on open, its ts-only
    index dropped), and the queries are planned on them rather than on scans and sorts."""
    m = _open(store_url)
    m.import_records(DOCS)
    m.contest("s1", "ticket-7", "operator:ann", "disputed")
    with m.store.engine.begin() as conn:
        conn.execute(text("DROP INDEX ix_records_contested"))
        conn.execute(text("DROP INDEX ix_audit_contest_entries"))
        # as stores had it before contest entries were also known by their rationale
        conn.execute(text("CREATE INDEX ix_audit_contests ON audit_entries (record_id, ts) "
                          "WHERE details LIKE '%\"contesting_ref\"%'"))
        conn.execute(text("DROP INDEX ix_audit_ts_seq"))
        conn.execute(text("DROP INDEX ix_audit_ts_action"))
        conn.execute(text("CREATE INDEX ix_audit_ts ON audit_entries (ts)"))  # as older stores have it
    m.close()
    again = _open(store_url)
    try:
        names = {ix["name"] for ix in inspect(again.store.engine).get_indexes("records")}
        assert "ix_records_contested" in names
        audit_names = {ix["name"] for ix in inspect(again.store.engine).get_indexes("audit_entries")}
        assert "ix_audit_ts_action" in audit_names and "ix_audit_ts" not in audit_names
        assert "ix_audit_contest_entries" in audit_names and "ix_audit_ts_seq" in audit_names
        assert "ix_audit_contests" not in audit_names
        from membrane_engine import TrustContext

        # The statements as the engine sends them: the review queue's newest contest per record,
        # and the metrics' count of the entries after an instant.
        [contests] = sent_by(again, ("contesting_ref",), lambda: again.review_queue(TrustContext(max_sensitivity="hyper")))
        [after] = sent_by(again, ("GROUP BY", "ts >"), lambda: again.metrics(as_of=later(-DAY)))
        # Each planned on its index (PostgreSQL's planner scans tables this small whatever the
        # indexes, so the plans are SQLite's).
        if again.store.engine.dialect.name == "sqlite":
            newest_first = plan_of(again, "SELECT seq FROM audit_entries ORDER BY ts DESC, seq DESC LIMIT 50")
            assert "ix_audit_ts_seq" in newest_first and "TEMP B-TREE" not in newest_first, newest_first
            contested = "SELECT id, sensitivity, scope FROM records WHERE status = 'contested'"
            assert "ix_records_contested" in plan_of(again, contested)
            assert "ix_audit_contest_entries" in plan_of(again, *contests)
            assert "COVERING INDEX ix_audit_ts_action" in plan_of(again, *after)
        assert again.metrics(as_of=later(-DAY))["total_audit_entries"] == 0  # every entry came later
    finally:
        again.close()


def test_a_newer_schema_version_is_refused(store_url):
    m = _open(store_url)
    with m.store.engine.begin() as conn:
        conn.execute(text("UPDATE meta SET value = :v WHERE key = 'schema_version'"), {"v": str(SCHEMA_VERSION + 1)})
    m.close()
    with pytest.raises(StoreUnavailableError):
        _open(store_url)


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_export_file_then_import_file(mem, tmp_path, suffix):
    mem.import_records(DOCS)
    path = tmp_path / f"out{suffix}"
    assert mem.export_file(path, as_of=later(HOUR)) == len(DOCS)
    assert not list(tmp_path.glob("*.partial"))
    text_ = path.read_text()
    if suffix == ".jsonl":
        lines = [json.loads(line) for line in text_.splitlines() if line.strip()]
        assert len(lines) == len(DOCS)
    else:
        assert isinstance(json.loads(text_), list)
    fresh = _open(f"sqlite:///{tmp_path / 'fresh.db'}")
    try:
        assert fresh.import_file(path) == len(DOCS)
        for d in DOCS:
            for t in (T0, later(HOUR), later(5 * HOUR), later(2 * DAY)):
                assert fresh.salience_at(d["id"], t) == pytest.approx(mem.salience_at(d["id"], t), abs=1e-12)
            a, b = mem.get(d["id"], as_of=later(3 * HOUR)), fresh.get(d["id"], as_of=later(3 * HOUR))
            # the same record and history, and the second import's own entry after it (SPEC 6)
            assert b.audit_log[:-1] == a.audit_log and b.audit_log[-1].rationale.startswith("imported")
            assert a.model_dump(exclude={"audit_log"}) == b.model_dump(exclude={"audit_log"})
    finally:
        fresh.close()


def test_import_file_json_array_object_and_jsonl(mem, tmp_path):
    arr = tmp_path / "a.json"
    arr.write_text(json.dumps(DOCS[:2]))
    one = tmp_path / "one.json"
    one.write_text(json.dumps(DOCS[2]))
    lines = tmp_path / "rest.jsonl"
    lines.write_text("\n".join(json.dumps(d) for d in DOCS[3:]) + "\n\n")
    assert mem.import_file(arr) == 2
    assert mem.import_file(one) == 1
    assert mem.import_file(str(lines)) == 3
    assert mem.ids() == sorted(d["id"] for d in DOCS)


def test_truncated_json_file_names_line_and_column(mem, tmp_path):
    full = json.dumps(DOCS, indent=2)
    bad = tmp_path / "cut.json"
    bad.write_text(full[: len(full) // 2])
    with pytest.raises(ValidationError) as info:
        mem.import_file(bad)
    message = str(info.value)
    assert "line" in message and "column" in message
    lineno = full[: len(full) // 2].count("\n") + 1
    assert f"line {lineno}" in message
    assert mem.count() == 0
    assert mem.metrics(as_of=T0)["total_audit_entries"] == 0


def test_truncated_jsonl_file_names_the_line(mem, tmp_path):
    lines = [json.dumps(d) for d in DOCS]
    lines[3] = lines[3][:40]
    bad = tmp_path / "cut.jsonl"
    bad.write_text("\n".join(lines))
    with pytest.raises(ValidationError) as info:
        mem.import_file(bad)
    assert "line 4" in str(info.value) and "column" in str(info.value)
    assert mem.count() == 0


def test_import_file_refuses_a_missing_file_and_a_non_array(mem, tmp_path):
    with pytest.raises(ValidationError):
        mem.import_file(tmp_path / "nope.json")
    scalar = tmp_path / "n.json"
    scalar.write_text("42")
    with pytest.raises(ValidationError):
        mem.import_file(scalar)
    assert mem.count() == 0


def test_a_second_instance_sees_writes(store_url):
    a, b = _open(store_url), _open(store_url)
    try:
        assert a.count() == 0
        b.import_records(DOCS[:3])
        assert a.ids() == ["e1", "s1", "w1"]
        got = a.retrieve(RetrieveRequest(trust=trust("hyper"), as_of=T0))
        assert {r.id for r in got.records} == {"e1", "s1", "w1"}
    finally:
        a.close()
        b.close()


def test_export_with_trust_leaves_hidden_out(mem, tmp_path):
    mem.import_records(DOCS)
    out = tmp_path / "gated.json"
    n = mem.export_file(out, trust=trust("low", ["alpha"]), as_of=T0)
    docs = {d["id"]: d for d in json.loads(out.read_text())}
    # w1 (medium) redacted; c1 hidden (scope beta); everything low and unscoped/alpha in full
    assert n == len(docs) == 5
    assert "c1" not in docs
    assert docs["w1"]["redacted"] is True and docs["w1"]["payload"] is None
    assert docs["e1"]["payload"]["kind"] == "episodic"
    assert isinstance(Path(out), Path)


def _commit_setting(m: Membrane) -> str:
    with m.store.write() as conn:  # a pooled connection, as every write gets
        if m.store.is_sqlite:
            return {1: "normal", 2: "full"}[conn.exec_driver_sql("PRAGMA synchronous").scalar()]
        return conn.exec_driver_sql("SHOW synchronous_commit").scalar()


@pytest.mark.parametrize("durable", ["", "1"])
def test_one_durability_policy_on_both_databases(store_url, monkeypatch, durable):
    """Same guarantee on both: by default a commit does not wait for the disk (SQLite WAL with
    synchronous=NORMAL, PostgreSQL synchronous_commit=off); MEMBRANE_DURABLE_COMMITS=1 waits."""
    monkeypatch.setenv("MEMBRANE_DURABLE_COMMITS", durable)
    m = _open(store_url)
    try:
        m.import_records([rec("d1")])
        expected = ("full" if durable else "normal") if m.store.is_sqlite else ("on" if durable else "off")
        assert _commit_setting(m) == expected
        assert m.count() == 1
    finally:
        m.close()


def test_id_checks_are_never_prepared_statements_on_postgresql(store_url):
    """A bulk import checks ids part after part while its table grows from empty: a prepared
    statement's generic plan, made while the table was empty, would stay a sequential scan."""
    m = _open(store_url)
    try:
        if m.store.is_sqlite:
            pytest.skip("PostgreSQL's prepared statements")
        m.import_records([rec(f"p{i}") for i in range(3)])
        with m.store.write() as conn:
            for _ in range(8):  # psycopg prepares what runs 5 times on a connection
                assert m.store.existing_ids(conn, ["p1", "nope"]) == {"p1"}
            prepared = conn.exec_driver_sql("SELECT statement FROM pg_prepared_statements").scalars().all()
        assert not [s for s in prepared if "FROM records WHERE id IN" in s]
    finally:
        m.close()


def test_records_with_logs_is_the_transactional_read_in_one_statement(mem):
    """A page of records and their audit logs, read outside a transaction in one statement (per
    450 ids on SQLite), equals reading them in a read transaction (records and logs_of); ids of missing and
    archived records get nothing, not even the archived one's kept entries."""
    from membrane_engine.storage import audit_log as audit
    from membrane_engine.rules.chain import entries_by_record

    mem.import_records([rec(f"r{i:04d}", salience=0.5, audit_log=[
        {"action": "create", "actor": "a", "timestamp": "2026-01-01T00:00:00Z", "rationale": f"made {i}"},
        {"action": "reinforce", "actor": "b", "timestamp": "2026-01-02T00:00:00Z", "rationale": "used"}]
        [: 1 + i % 2]) for i in range(1000)])
    mem.reinforce("r0007", "op", "again")
    mem.delete("r0003", "op", "gone")
    ids = [f"r{i:04d}" for i in range(1000)] + ["missing"]
    texts, entries = mem.store.peeking(lambda conn: mem.store.records_with_logs(conn, ids))
    with mem.store.read() as conn:
        expected_texts = {rid: row[1] for rid, row in
                          ((r[0], r) for r in conn.exec_driver_sql("SELECT id, doc FROM records"))}
        expected_logs = audit.logs_of(conn, sorted(expected_texts))
    assert texts == expected_texts and len(texts) == 999 and "r0003" not in texts and "missing" not in texts
    assert entries_by_record(sorted(texts), entries) == expected_logs
    assert [e.action.value for e in expected_logs["r0007"]][-1] == "reinforce"


@pytest.mark.parametrize("odd", ['q"uote', "back\\slash", "com,ma", "{braces}", "sp ace", "NULL", "ü-ß", "x" * 128])
def test_records_with_logs_reads_any_id_as_written(mem, odd):
    """Ids go to PostgreSQL as one text[] literal: quotes, backslashes, commas, braces, blanks,
    and the word NULL come back as the record they name, with its log."""
    mem.import_records([rec(odd, audit_log=[{"action": "create", "actor": "a\"b", "timestamp": "2026-01-01T00:00:00Z",
                                             "rationale": "r,{x}"}]), rec("plain")])
    texts, entries = mem.store.peeking(lambda conn: mem.store.records_with_logs(conn, [odd, "plain", odd + "-missing"]))
    assert sorted(texts) == sorted([odd, "plain"]) and json.loads(texts[odd])["id"] == odd
    assert [(e[0], e[1], e[2], e[3], e[5]) for e in entries if e[0] == odd][0] == (odd, 0, "create", 'a"b', "r,{x}")
    assert mem.retrieve_by_id(odd, trust("hyper")).audit_log[0].actor == 'a"b'


def test_records_with_logs_prepares_its_statement_once_per_connection(postgres_url):
    mem = _open(postgres_url)
    try:
        _prepared_once_per_connection(mem)
    finally:
        mem.close()


def _prepared_once_per_connection(mem):
    mem.import_records([rec("a"), rec("b")])
    with mem.store.peek() as conn:
        raw = conn.connection.driver_connection
        for ids in (["a"], ["a", "b"], ["b", "nope"]):
            assert sorted(mem.store.records_with_logs(conn, ids)[0]) == sorted(set(ids) - {"nope"})
        names = [r[0] for r in raw.execute("SELECT name FROM pg_prepared_statements").fetchall()]
        assert names.count("membrane_records_with_logs") == 1
        conn.connection.info["membrane_prepared"].clear()  # forgotten, still on the server
        assert list(mem.store.records_with_logs(conn, ["a"])[0]) == ["a"]
        raw.execute("DEALLOCATE ALL")  # as psycopg does after a ROLLBACK it sees
        assert list(mem.store.records_with_logs(conn, ["b"])[0]) == ["b"]


def test_a_new_sqlite_store_has_16_kib_pages_and_an_old_one_keeps_its_own(tmp_path):
    import sqlite3

    from membrane_engine.storage.store import SQLITE_PAGE_SIZE

    new = _open(f"sqlite:///{tmp_path / 'new.db'}")
    new.import_records(DOCS, actor="op")
    old_path = tmp_path / "old.db"
    with sqlite3.connect(old_path) as made_before:  # a store file made with SQLite's default pages
        made_before.execute("PRAGMA page_size = 4096")
        made_before.execute("PRAGMA journal_mode = WAL")
        made_before.execute("CREATE TABLE placeholder (x)")
    made_before.close()
    old = _open(f"sqlite:///{old_path}")
    old.import_records(DOCS, actor="op")
    sizes = [sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0] for path in (tmp_path / "new.db", old_path)]
    assert sizes == [SQLITE_PAGE_SIZE, 4096] and SQLITE_PAGE_SIZE == 16384
    assert [r.id for r in old.retrieve(RetrieveRequest(trust=trust("hyper"), limit=0)).records] == \
        [r.id for r in new.retrieve(RetrieveRequest(trust=trust("hyper"), limit=0)).records]


def test_extra_payload_fields_named_like_another_layers_are_kept_not_read(tmp_path):
    """An episode may carry unknown payload fields called revision, performance or metrics
    (kept, as any extra field): they are not the semantic revision, competence performance or
    plan metrics the columns are made from (this once failed the import)."""
    doc = rec("e9", "episodic")
    doc["payload"].update({"revision": {"status": "retracted"}, "performance": {"success_count": 3, "failure_count": 1},
                           "metrics": {"execution_count": 4}})
    m = _open(f"sqlite:///{tmp_path / 'm.db'}")
    assert m.import_records([doc], actor="op") == 1
    with m.store.read() as conn:
        row = conn.execute(text("SELECT status, runs, success_signal FROM records WHERE id = 'e9'")).one()
    assert tuple(row) == (None, None, 0.5)
    payload = m.get("e9").to_json_dict()["payload"]
    assert payload["revision"] == {"status": "retracted"} and payload["metrics"] == {"execution_count": 4}


def test_a_store_named_in_a_missing_directory_is_refused_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such"
    with pytest.raises(StoreUnavailableError, match="does not exist"):
        Membrane.open(f"sqlite:///{missing / 'x.db'}")
    assert not missing.exists()


def test_the_default_store_gets_its_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMBRANE_HOME", str(tmp_path / "home" / "membrane"))
    monkeypatch.delenv("MEMBRANE_DB_URL", raising=False)
    Membrane.open(load_sample=False).close()
    assert (tmp_path / "home" / "membrane" / "membrane.db").exists()


def test_a_missing_driver_names_the_extra_that_brings_it() -> None:
    with pytest.raises(StoreUnavailableError, match=r"'pg8000' is not installed \(install the postgres extra"):
        Membrane.open("postgresql+pg8000://nobody@127.0.0.1/none")
