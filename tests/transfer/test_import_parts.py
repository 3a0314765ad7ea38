"""An import in parts (imports.prepare per part, possibly in other processes, then one
Membrane.import_prepared): the same store as import_records, all or nothing across parts."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time

import pytest

from membrane_engine import Membrane, TrustContext
from membrane_engine.errors import AlreadyExistsError, ValidationError
from membrane_engine.transfer import jsonl_import, strict_json
from membrane_engine.storage import store as store_module
from membrane_engine.transfer.imports import prepare

from tests.support.records import T0, rec


def _open(tmp_path, name: str) -> Membrane:
    return Membrane.open(f"sqlite:///{tmp_path / name}", load_sample=False, clock=lambda: T0)


def _docs() -> list[dict]:
    docs = [rec(f"r{i}", ("episodic", "semantic", "entity")[i % 3], scope=f"s{i % 4}") for i in range(30)]
    docs[12]["relations"] = [{"predicate": "about", "target_id": "r3", "weight": 0.5}]  # an earlier part
    docs[25]["audit_log"] = [{"action": "create", "actor": "alice", "timestamp": "2026-01-01T00:00:00Z",
                              "rationale": "seen", "x_note": {"k": 1}}]
    return docs


def _dump(m: Membrane) -> tuple:
    with m.store.read() as conn:
        rows = conn.exec_driver_sql("SELECT * FROM records ORDER BY id").fetchall()
        entries = conn.exec_driver_sql("SELECT record_id, position, action, actor, timestamp, rationale, extra, "
                                       "prev_hash, hash FROM audit_entries ORDER BY record_id, position").fetchall()
    return rows, entries


def test_parts_make_the_store_import_records_makes(tmp_path):
    docs = _docs()
    whole = _open(tmp_path, "whole.db")
    assert whole.import_records(docs, actor="op") == 30
    parted = _open(tmp_path, "parts.db")
    # parts go through pickle, as they do between processes
    parts = [pickle.loads(pickle.dumps(prepare(docs[lo:lo + 10], T0, "op", first_index=lo))) for lo in (0, 10, 20)]
    seen = []
    assert parted.import_prepared(iter(parts), expected=30, progress=seen.append) == 30
    assert seen == [10, 20, 30]
    assert _dump(parted) == _dump(whole)
    assert parted.verify_audit() == []


def test_a_bad_later_part_writes_nothing(tmp_path):
    docs = _docs()
    docs[27]["confidence"] = 7
    m = _open(tmp_path, "m.db")
    parts = [prepare(docs[lo:lo + 10], T0, "op", first_index=lo) for lo in (0, 10, 20)]
    with pytest.raises(ValidationError) as caught:
        m.import_prepared(parts, expected=30)
    assert [loc for loc, _ in caught.value.problems] == ["record 27: confidence"]  # numbered in the whole import
    assert m.count() == 0


def test_parts_refuse_ids_of_earlier_parts_and_of_the_store(tmp_path):
    """An id twice in one import is a duplicate, whichever parts it is in (as in one part);
    an id already in the store is AlreadyExistsError."""
    docs = _docs()
    m = _open(tmp_path, "m.db")
    with pytest.raises(ValidationError) as caught:
        m.import_prepared([prepare(docs[:10], T0, "op"), prepare(docs[5:15], T0, "op", first_index=10)])
    assert caught.value.problems[0] == ("record 10: id", "duplicate id 'r5' (also record 5)")
    assert caught.value.total == 5
    assert m.count() == 0
    m.import_records(docs[:10], actor="op")
    with pytest.raises(AlreadyExistsError):
        m.import_prepared(prepare(docs[9:12], T0, "op"))
    assert m.count() == 10


def test_an_archived_id_counts_as_taken_in_a_store_with_no_live_record(tmp_path):
    """An import into a store with no record at all keeps the ids of earlier parts itself
    (import_writer.ImportWriter); a store whose only record is archived is not such a store."""
    docs = _docs()
    m = _open(tmp_path, "m.db")
    with m.store.write() as conn:
        m.store.archive_doc(conn, "r15", {"id": "r15"}, None, 0.0)
        assert not m.store.is_empty(conn)
    with pytest.raises(AlreadyExistsError, match="r15"):
        m.import_prepared([prepare(docs[:10], T0, "op"), prepare(docs[10:20], T0, "op", first_index=10)])
    docs[2]["relations"] = [{"predicate": "about", "target_id": "r15"}]  # archived: not a target
    with pytest.raises(ValidationError) as caught:
        m.import_prepared([prepare(docs[:10], T0, "op")])
    assert caught.value.problems[0][0] == "record 2: relations.0.target_id"
    assert m.count() == 0


def test_an_empty_store_takes_parts_whose_relations_point_back(tmp_path):
    docs = _docs()
    docs[22]["relations"] = [{"predicate": "about", "target_id": "r0"}, {"predicate": "about", "target_id": "r19"}]
    m = _open(tmp_path, "m.db")
    with m.store.read() as conn:
        assert m.store.is_empty(conn)
    parts = [prepare(docs[lo:lo + 10], T0, "op", first_index=lo) for lo in (0, 10, 20)]
    assert m.import_prepared(parts, expected=30) == 30
    assert [r.target_id for r in m.get("r22").relations] == ["r0", "r19"]


def test_relation_to_a_later_part_is_taken_and_a_dangling_one_refused(tmp_path):
    """SPEC 1: a target in the same import is fine wherever it comes in the import; one that
    is in neither the import nor the store is refused naming the record."""
    docs = _docs()
    docs[2]["relations"] = [{"predicate": "about", "target_id": "r20"}]
    m = _open(tmp_path, "m.db")
    assert m.import_prepared([prepare(docs[:10], T0, "op"), prepare(docs[10:], T0, "op", first_index=10)]) == 30
    assert [r.target_id for r in m.get("r2").relations] == ["r20"]
    docs = [dict(d, id=f"n{i}") for i, d in enumerate(_docs())]
    docs[2]["relations"] = [{"predicate": "about", "target_id": "ghost"}]
    with pytest.raises(ValidationError) as caught:
        m.import_prepared([prepare(docs[:10], T0, "op"), prepare(docs[10:], T0, "op", first_index=10)])
    assert caught.value.problems == [("record 2: relations.0.target_id",
                                      "target 'ghost' is neither in the store nor in this import")]
    assert m.count() == 30


# --------------------------------------------------------------------------- JSON Lines on worker processes


def _write_jsonl(path, docs, blank_every: int = 7) -> None:
    lines = []
    for i, doc in enumerate(docs):
        lines.append(json.dumps(doc))
        if i % blank_every == 0:
            lines.append("   ")  # blank lines are skipped but still counted as lines
    path.write_text("\r\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(jsonl_import, "CHUNK_BYTES", 700)  # a few records a chunk; chunking happens in this process


def test_jsonl_on_workers_makes_the_same_store(tmp_path, small_chunks):
    docs = _docs()
    _write_jsonl(tmp_path / "in.jsonl", docs)
    one = _open(tmp_path, "one.db")
    assert one.import_file(tmp_path / "in.jsonl", actor="op") == 30
    many = _open(tmp_path, "many.db")
    seen = []
    assert many.import_file(tmp_path / "in.jsonl", actor="op", workers=2, progress=lambda d, t: seen.append((d, t))) == 30
    assert _dump(many) == _dump(one)
    assert seen[-1] == (30, 30) and len(seen) > 1


def test_jsonl_on_workers_refuses_as_one_process_does(tmp_path, small_chunks):
    docs = _docs()
    docs[26]["sensitivity"] = "secret-ish"
    _write_jsonl(tmp_path / "bad.jsonl", docs)
    m = _open(tmp_path, "m.db")
    with pytest.raises(ValidationError) as one:
        m.import_file(tmp_path / "bad.jsonl", actor="op")
    with pytest.raises(ValidationError) as many:
        m.import_file(tmp_path / "bad.jsonl", actor="op", workers=2)
    assert many.value.problems == one.value.problems and one.value.problems[0][0] == "record 26: sensitivity"
    assert m.count() == 0


def test_jsonl_line_that_is_not_json_is_named_and_nothing_written(tmp_path, small_chunks):
    lines = [json.dumps(d) for d in _docs()]
    lines[20] = '{"id": "x", NaN}'
    lines[24] = '{"id": "y", "confidence": NaN}'
    (tmp_path / "broken.jsonl").write_text("\n".join(lines), encoding="utf-8")
    m = _open(tmp_path, "m.db")
    with pytest.raises(ValidationError) as one:
        m.import_file(tmp_path / "broken.jsonl", actor="op")
    with pytest.raises(ValidationError) as many:
        m.import_file(tmp_path / "broken.jsonl", actor="op", workers=2)
    assert "line 21" in str(many.value) and many.value.problems == one.value.problems
    assert m.count() == 0


@pytest.mark.parametrize("workers", [0, -1, True, 2.0, "2"])
def test_workers_must_be_a_whole_number(tmp_path, workers):
    _write_jsonl(tmp_path / "in.jsonl", _docs()[:2])
    m = _open(tmp_path, "m.db")
    with pytest.raises(ValidationError, match="workers"):
        m.import_file(tmp_path / "in.jsonl", workers=workers)


def test_a_large_import_leaves_no_write_ahead_log_behind(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "BULK_ROWS", 10)  # "large" for this test
    m = _open(tmp_path, "m.db")
    m.import_records(_docs(), actor="op")
    assert (tmp_path / "m.db-wal").stat().st_size == 0
    assert m.count() == 30


def _journal_of(path) -> str:
    """The journal a SQLite file is in, from its header (bytes 18-19: 1 rollback, 2 WAL), read
    without opening a connection (which would keep the file from leaving WAL mode)."""
    with open(path, "rb") as f:
        return {b"\x01\x01": "rollback", b"\x02\x02": "wal"}[f.read(20)[18:20]]


def _parts_watching_the_journal(docs, path, seen: list[str]):
    for lo in range(0, len(docs), 10):
        yield prepare(docs[lo:lo + 10], T0, "op", first_index=lo)
        seen.append(_journal_of(path))  # while the import writes, after this part


def test_a_bulk_import_into_an_empty_store_writes_the_file_itself(tmp_path, monkeypatch):
    """Store._direct_pages: a rollback journal while the import writes, the write-ahead log again
    once it has committed; the store is the one import_records makes."""
    monkeypatch.setattr(store_module, "BULK_ROWS", 10)
    m = _open(tmp_path, "m.db")
    assert _journal_of(tmp_path / "m.db") == "wal"
    seen: list[str] = []
    assert m.import_prepared(_parts_watching_the_journal(_docs(), tmp_path / "m.db", seen), expected=30) == 30
    assert seen == ["rollback"] * 3
    assert _journal_of(tmp_path / "m.db") == "wal"
    with m.store.read() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
    whole = _open(tmp_path, "whole.db")
    whole.import_records(_docs(), actor="op")
    assert _dump(m) == _dump(whole) and m.verify_audit() == []
    m.reinforce("r1", actor="op", rationale="still a working store")
    assert m.retrieve_by_id("r1", TrustContext(max_sensitivity="hyper")).audit_log[-1].action.value == "reinforce"


def test_a_failed_bulk_import_into_an_empty_store_leaves_it_empty_and_in_wal(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "BULK_ROWS", 10)
    m = _open(tmp_path, "m.db")
    docs = _docs()
    docs[25]["id"] = "r3"  # refused when the third part comes, after two parts went into the file
    seen: list[str] = []
    with pytest.raises(ValidationError, match="duplicate id 'r3'"):
        m.import_prepared(_parts_watching_the_journal(docs, tmp_path / "m.db", seen), expected=30)
    assert seen[:2] == ["rollback"] * 2
    assert _journal_of(tmp_path / "m.db") == "wal" and not (tmp_path / "m.db-journal").exists()
    assert m.count() == 0
    with m.store.read() as conn:
        assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
        assert conn.exec_driver_sql("SELECT count(*) FROM audit_entries").scalar() == 0
    assert m.import_records(_docs(), actor="op") == 30  # and it takes the import afterwards


def test_a_bulk_import_keeps_the_write_ahead_log_when_the_file_is_shared_or_not_empty(tmp_path, monkeypatch):
    """Another connection on the file (here: a reader in another 'process') or a record already
    in the store: the import runs in WAL mode, as any write does, and readers are never blocked."""
    import sqlite3

    monkeypatch.setattr(store_module, "BULK_ROWS", 10)
    m = _open(tmp_path, "m.db")
    other = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    try:
        assert other.execute("SELECT count(*) FROM records").fetchone() == (0,)
        seen: list[str] = []
        docs = _docs()
        assert m.import_prepared(_parts_watching_the_journal(docs[:20], tmp_path / "m.db", seen), expected=20) == 20
        assert seen == ["wal", "wal"]
        assert other.execute("SELECT count(*) FROM records").fetchone() == (20,)
    finally:
        other.close()
    seen = []
    assert m.import_prepared(_parts_watching_the_journal(docs[20:], tmp_path / "m.db", seen), expected=10) == 10
    assert seen == ["wal"] and m.count() == 30


def test_the_collector_is_paused_only_while_importing(tmp_path):
    import gc

    from membrane_engine.transfer.imports import gc_paused

    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():  # nested: the inner one leaves it to the outer
            pass
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # someone else's choice is kept
    finally:
        gc.enable()
    m = _open(tmp_path, "m.db")
    m.import_records(_docs(), actor="op")
    assert gc.isenabled() and m.count() == 30


# --------------------------------------------------------------------------- chunks of a JSON Lines file

from hypothesis import given, settings, strategies as st  # noqa: E402

_LINE = st.one_of(st.just(""), st.sampled_from([" ", "\r", "\t \x0b", "\x0c"]),
                  st.builds(lambda n: '{"id": "' + "x" * n + '"}', st.integers(0, 40)),
                  st.sampled_from(['[1, 2]', '  {"a": 1}', 'not json', '{"é": "\u2028"}\r']))


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(_LINE, max_size=30), newline_at_end=st.booleans(), chunk_bytes=st.integers(1, 64))
def test_chunks_cover_the_file_with_the_sequential_readers_numbering(tmp_path_factory, lines, newline_at_end,
                                                                     chunk_bytes):
    text = "\n".join(lines) + ("\n" if newline_at_end and lines else "")
    path = tmp_path_factory.mktemp("c") / "in.jsonl"
    data = text.encode("utf-8")
    path.write_bytes(data)
    expected = text.split("\n")  # what the sequential reader numbers: line k is expected[k - 1]
    if expected[-1] == "":
        expected = expected[:-1]  # nothing after the last line end (blank either way)
    old = jsonl_import.CHUNK_BYTES
    jsonl_import.CHUNK_BYTES = chunk_bytes
    try:
        chunks = jsonl_import.chunks(path)
    finally:
        jsonl_import.CHUNK_BYTES = old
    assert [c.start for c in chunks] == ([0] + [c.end for c in chunks[:-1]] if chunks else [])
    assert (chunks[-1].end if chunks else 0) == len(data)
    seen_lines, index = [], 0
    for c in chunks:
        piece_lines = [b.decode("utf-8") for b in jsonl_import._lines(data[c.start:c.end])]
        assert c.first_line == len(seen_lines) + 1 and c.first_index == index
        assert c.records == sum(1 for line in piece_lines if line.strip())
        seen_lines += piece_lines
        index += c.records
    assert seen_lines == expected
    assert jsonl_import.count_records(path) == sum(1 for line in expected if line.strip())


def test_a_line_longer_than_a_chunk_is_one_chunk(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonl_import, "CHUNK_BYTES", 16)
    long = '{"id": "' + "y" * 100 + '"}'
    (tmp_path / "in.jsonl").write_text(f'{{"id": "a"}}\n{long}\n{{"id": "b"}}', encoding="utf-8")
    chunks = jsonl_import.chunks(tmp_path / "in.jsonl")
    assert [(c.first_line, c.records) for c in chunks] == [(1, 1), (2, 1), (3, 1)]
    assert chunks[1].end - chunks[1].start == len(long) + 1


def test_what_the_parser_checked_is_what_check_json_would_pass():
    assert strict_json.parser_checked(json.dumps(rec("a")).encode())
    deep = ("[" * 150) + ("]" * 150)
    assert not strict_json.parser_checked(('{"a": ' + deep + ', "b": {' + '"c": {' * 60 + "}" * 61).encode())
    assert not strict_json.parser_checked(b'{"a": "' + b"x" * (strict_json.MAX_RECORD_BYTES // 5) + b'"}')


def test_a_line_whose_numbers_grow_past_the_limit_when_written_is_refused(tmp_path, small_chunks):
    """1e15 is written back as 1000000000000000.0: a 2 MB line makes a record over 8 MiB."""
    doc = rec("big")
    numbers = ",".join(["1e15"] * 500_000)
    line = json.dumps(doc)[:-1] + f', "x_numbers": [{numbers}]}}'
    (tmp_path / "big.jsonl").write_text(json.dumps(rec("small")) + "\n" + line + "\n", encoding="utf-8")
    m = _open(tmp_path, "m.db")
    with pytest.raises(ValidationError) as one:
        m.import_file(tmp_path / "big.jsonl", actor="op")
    with pytest.raises(ValidationError) as many:
        m.import_file(tmp_path / "big.jsonl", actor="op", workers=2)
    assert many.value.problems == one.value.problems
    assert "the limit is" in str(many.value) and "record 1" in str(many.value)
    assert m.count() == 0


# --------------------------------------------------------------------------- PostgreSQL: indexes built after

_SECONDARY = {"ix_records_gate", "ix_records_scope", "ix_records_created", "ix_records_contested",
              "ix_audit_ts_action", "ix_audit_actor", "ix_audit_action", "ix_audit_contest_entries",
              "ix_audit_ts_seq"}


def _index_query(conn) -> str:
    if conn.dialect.name == "sqlite":
        return "SELECT name FROM sqlite_master WHERE type = 'index'"
    return "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()"


def _indexes(m: Membrane) -> set[str]:
    with m.store.read() as conn:
        return set(conn.exec_driver_sql(_index_query(conn)).scalars())


def _watch_indexes(monkeypatch, seen: list[set[str]]) -> None:
    """Record the indexes the import's own transaction sees as each part is written."""
    original = store_module.Store.insert_values

    def insert_values(self, conn, rows):
        seen.append(set(conn.exec_driver_sql(_index_query(conn)).scalars()))
        return original(self, conn, rows)

    monkeypatch.setattr(store_module.Store, "insert_values", insert_values)


@pytest.mark.postgres
def test_a_bulk_import_into_an_empty_postgres_store_builds_its_indexes_after(postgres_url, monkeypatch):
    """Store._indexes_after: the secondary indexes are gone while the parts are written and all
    there again when the import commits; keys stay (they refuse duplicates). The store is the one
    import_records makes (its audit verifies, its reads find every record)."""
    monkeypatch.setattr(store_module, "BULK_ROWS", 10)
    m = Membrane.open(postgres_url, load_sample=False, clock=lambda: T0)
    before = _indexes(m)
    assert _SECONDARY | {"records_pkey", "uq_audit_record_position"} <= before
    seen: list[set[str]] = []
    _watch_indexes(monkeypatch, seen)
    parts = [prepare(_docs()[lo:lo + 10], T0, "op", first_index=lo) for lo in (0, 10, 20)]
    assert m.import_prepared(iter(parts), expected=30) == 30
    assert seen == [before - _SECONDARY] * 3
    assert _indexes(m) == before
    assert m.verify_audit() == [] and m.count() == 30
    everything = TrustContext(max_sensitivity="hyper")
    assert all(m.retrieve_by_id(f"r{i}", everything).id == f"r{i}" for i in range(30))
    seen.clear()
    m.import_records([rec(f"later{i}", "episodic") for i in range(12)], actor="op")  # bulk, not empty: they stay
    assert seen == [before]


@pytest.mark.postgres
def test_a_failed_bulk_import_into_an_empty_postgres_store_keeps_its_indexes(postgres_url, monkeypatch):
    monkeypatch.setattr(store_module, "BULK_ROWS", 10)
    m = Membrane.open(postgres_url, load_sample=False, clock=lambda: T0)
    before = _indexes(m)
    docs = _docs()
    docs[25]["id"] = "r3"  # refused at the third part, after two were written without the indexes
    seen: list[set[str]] = []
    _watch_indexes(monkeypatch, seen)
    with pytest.raises(ValidationError, match="duplicate id .r3."):
        m.import_prepared(iter([prepare(docs[lo:lo + 10], T0, "op", first_index=lo) for lo in (0, 10, 20)]),
                          expected=30)
    assert seen == [before - _SECONDARY] * 2
    assert _indexes(m) == before and m.count() == 0
    assert m.import_records(_docs(), actor="op") == 30


def test_a_bulk_import_into_an_empty_sqlite_store_builds_its_indexes_after(tmp_path, monkeypatch):
    """The same on SQLite (the covering index of the column cache's load included), in the
    import's transaction: a failed import keeps them, a store that held records keeps them."""
    monkeypatch.setattr(store_module, "BULK_ROWS", 10)
    m = _open(tmp_path, "m.db")
    before = _indexes(m)
    secondary = _SECONDARY | {store_module.SQLITE_SCALAR_INDEX_NAME}
    assert secondary <= before
    seen: list[set[str]] = []
    _watch_indexes(monkeypatch, seen)
    docs = _docs()
    docs[25]["id"] = "r3"
    with pytest.raises(ValidationError, match="duplicate id .r3."):
        m.import_prepared(iter([prepare(docs[lo:lo + 10], T0, "op", first_index=lo) for lo in (0, 10, 20)]),
                          expected=30)
    assert seen == [before - secondary] * 2 and _indexes(m) == before and m.count() == 0
    seen.clear()
    assert m.import_prepared(iter([prepare(_docs()[lo:lo + 10], T0, "op", first_index=lo) for lo in (0, 10, 20)]),
                             expected=30) == 30
    assert seen == [before - secondary] * 3 and _indexes(m) == before
    with m.store.read() as conn:
        assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
        plan = " ".join(str(r) for r in conn.exec_driver_sql(
            "EXPLAIN QUERY PLAN SELECT id FROM records WHERE scope = 's1'").fetchall())
    assert "ix_records_" in plan  # the rebuilt indexes are used
    seen.clear()
    m.import_records([rec(f"later{i}", "episodic") for i in range(12)], actor="op")
    assert seen == [before]


# --------------------------------------------------------------------------- workers of a killed import

_IMPORTER = """
import json, multiprocessing, sys, time
from datetime import datetime, timezone
from pathlib import Path
from membrane_engine.transfer import jsonl_import

if __name__ == "__main__":
    jsonl_import.CHUNK_BYTES = 700
    parts = jsonl_import.prepared_parts(Path(sys.argv[1]), datetime.now(timezone.utc), "op", workers=2)
    next(parts)  # the workers are up and working
    print(json.dumps([p.pid for p in multiprocessing.active_children()]), flush=True)
    time.sleep(600)  # killed here, mid-import
"""


def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie, dead but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not hasattr(os, "getppid") or not os.path.isdir("/proc"), reason="reads /proc (Linux)")
def test_workers_of_a_killed_import_exit(tmp_path):
    docs = [rec(f"r{i}", "semantic") for i in range(200)]
    _write_jsonl(tmp_path / "in.jsonl", docs)
    script = tmp_path / "importer.py"
    script.write_text(_IMPORTER)
    importer = subprocess.Popen([sys.executable, str(script), str(tmp_path / "in.jsonl")], stdout=subprocess.PIPE,
                                text=True, cwd=tmp_path)
    try:
        workers = json.loads(importer.stdout.readline())
        assert len(workers) == 2 and all(_alive(pid) for pid in workers)
    finally:
        importer.kill()
        importer.wait()
    deadline = time.monotonic() + 30 * jsonl_import.ORPHAN_CHECK_S
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in workers if _alive(pid)]
    for pid in left:  # leave nothing behind for the next test, even when this one fails
        os.kill(pid, signal.SIGKILL)
    assert left == []
