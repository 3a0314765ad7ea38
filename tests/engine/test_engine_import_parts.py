"""An import in parts (imports.prepare per part, possibly in other processes, then one
Membrane.import_prepared): the same store as import_records, all or nothing across parts."""

from __future__ import annotations

import json
import pickle

import pytest

from membrane_engine import Membrane
from membrane_engine.errors import AlreadyExistsError, ValidationError
from membrane_engine import jsonl_import
from membrane_engine import store as store_module
from membrane_engine.imports import prepare

from engine_kit import T0, rec


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
    docs = _docs()
    m = _open(tmp_path, "m.db")
    with pytest.raises(AlreadyExistsError):
        m.import_prepared([prepare(docs[:10], T0, "op"), prepare(docs[5:15], T0, "op", first_index=10)])
    assert m.count() == 0
    m.import_records(docs[:10], actor="op")
    with pytest.raises(AlreadyExistsError):
        m.import_prepared(prepare(docs[9:12], T0, "op"))
    assert m.count() == 10


def test_relation_to_a_later_part_is_refused(tmp_path):
    docs = _docs()
    docs[2]["relations"] = [{"predicate": "about", "target_id": "r20"}]
    m = _open(tmp_path, "m.db")
    with pytest.raises(ValidationError) as caught:
        m.import_prepared([prepare(docs[:10], T0, "op"), prepare(docs[10:], T0, "op", first_index=10)])
    assert caught.value.problems[0][0] == "record 2: relations.0.target_id"
    assert m.count() == 0


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
    monkeypatch.setattr(jsonl_import, "CHUNK_LINES", 8)  # chunking happens in this process


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


def test_the_collector_is_paused_only_while_importing(tmp_path):
    import gc

    from membrane_engine.imports import gc_paused

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
