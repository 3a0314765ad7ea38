"""The access log ("who looked", SPEC 10): many entries in one transaction with the page or
command that read them (``via``); older stores migrate. The log is a hash chain under the audit
key (row_seal.py): an entry deleted or edited with raw SQL, or forged with a plain hash in a keyed
store, is reported by verify_audit, naming the entry. On SQLite and PostgreSQL alike."""

from __future__ import annotations

import pytest
from sqlalchemy import delete, insert, select, text, update

from membrane_engine import Membrane
from membrane_engine.oversight import clearance as gate
from membrane_engine.errors import ValidationError
from membrane_engine.audit.row_seal import Seal, access_fields
from membrane_engine.storage.store import access_log

KEY = "correct horse battery staple"
NO_KEY = Seal(None, False)  # what a writer without the key can compute


def _seqs(m: Membrane) -> list[int]:
    with m.store.read() as conn:
        return list(conn.execute(select(access_log.c.seq).order_by(access_log.c.seq)).scalars())


def test_log_accesses_appends_all_entries_with_their_via(membrane):
    gate.log_accesses(membrane, "operator:ann", [("r1", "high", "alpha"), ("r2", "hyper", "")], via="page:records")
    gate.log_access(membrane, "r3", "operator:bob", "high")
    total, rows = membrane.access_log()
    assert total == 3
    assert sorted((a.record_id, a.actor, a.sensitivity, a.scope, a.via) for a in rows) == [
        ("r1", "operator:ann", "high", "alpha", "page:records"),
        ("r2", "operator:ann", "hyper", "", "page:records"),
        ("r3", "operator:bob", "high", "", ""),
    ]
    gate.log_access(membrane, "r4", "operator:bob", "high", via="command:export")
    assert membrane.access_log(record_id="r4")[1][0].via == "command:export"


@pytest.mark.parametrize("actor, entries, via, field", [
    ("operator:ann", [("r1", "high", "")], "x" * 65, "via"),
    ("operator:ann", [("r1", "high", "")], "page:records\nforged", "via"),
    ("operator:ann", [("r1", "high", "")], None, "via"),
    ("", [("r1", "high", "")], "page:records", "actor"),
    ("operator:ann", [("r1", "high", ""), ("", "high", "")], "page:records", "entries[1].record_id"),
    ("operator:ann", [("r1", "high", ""), ("r2", "high")], "page:records", "entries[1]"),
    ("operator:ann", "r1", "page:records", "entries"),
])
def test_a_bad_entry_refuses_the_whole_batch_naming_the_field(membrane, actor, entries, via, field):
    with pytest.raises(ValidationError) as err:
        gate.log_accesses(membrane, actor, entries, via)
    assert err.value.problems[0][0] == field
    assert _seqs(membrane) == []  # nothing half-written


def test_a_store_made_before_via_gets_the_column(sqlite_url):
    m = Membrane.open(sqlite_url, load_sample=False)
    gate.log_access(m, "r1", "operator:ann", "high")
    with m.store.write() as conn:
        conn.execute(text("ALTER TABLE access_log DROP COLUMN via"))
    m.close()
    m = Membrane.open(sqlite_url, load_sample=False)
    try:
        assert [a.via for a in m.access_log()[1]] == [""]
        gate.log_accesses(m, "operator:ann", [("r2", "high", "")], "page:records")
        assert m.access_log(record_id="r2")[1][0].via == "page:records"
    finally:
        m.close()


@pytest.fixture(params=["keyed", "unkeyed"])
def keyed(request, monkeypatch) -> bool:
    if request.param == "keyed":
        monkeypatch.setenv("MEMBRANE_AUDIT_KEY", KEY)
    else:
        monkeypatch.delenv("MEMBRANE_AUDIT_KEY", raising=False)
    return request.param == "keyed"


def problems_of(m: Membrane, kind: str) -> list[str]:
    return [str(p) for p in m.verify_audit() if p.kind == kind]


def test_access_log_rows_deleted_or_edited_with_raw_sql_are_reported(store_url, keyed):
    m = Membrane.open(store_url, load_sample=False)
    try:
        for k in range(5):
            gate.log_access(m, f"r{k}", "operator:ann", "high", via="page:records")
        assert problems_of(m, "access") == []
        with m.store.write() as conn:
            conn.execute(delete(access_log).where(access_log.c.seq == 2))
        assert any("access_log entry 2" in p and "deleted" in p for p in problems_of(m, "access"))
        with m.store.write() as conn:
            conn.execute(update(access_log).where(access_log.c.seq == 4).values(actor="operator:someone-else"))
        found = problems_of(m, "access")
        assert any("access_log entry 4" in p and "changed outside the engine" in p for p in found), found
        with m.store.write() as conn:  # the newest entry: the chain's head still names it
            conn.execute(delete(access_log).where(access_log.c.seq == 5))
        found = problems_of(m, "access")
        assert any("access_log entry 5" in p and "deleted" in p for p in found), found
        # An engine write after the deletion does not paper over it.
        gate.log_access(m, "r9", "operator:ann", "high")
        assert any("access_log entry 5" in p and "deleted" in p for p in problems_of(m, "access"))
    finally:
        m.close()


def test_a_row_forged_with_a_plain_hash_is_caught_in_a_keyed_access_log(store_url, monkeypatch):
    monkeypatch.setenv("MEMBRANE_AUDIT_KEY", KEY)
    m = Membrane.open(store_url, load_sample=False)
    try:
        gate.log_access(m, "r1", "operator:ann", "high")
        with m.store.read() as conn:
            last = conn.execute(select(access_log)).one()
        row = {"seq": 2, "record_id": "r2", "actor": "operator:ann", "sensitivity": "high", "scope": "", "ts": 1.0,
               "via": ""}
        with m.store.write() as conn:
            conn.execute(insert(access_log).values(**row, prev_hash=last.hash,
                                                   hash=NO_KEY.make(access_fields(last.hash, row))))
        found = problems_of(m, "access")
        assert any("access_log entry 2" in p for p in found), found
    finally:
        m.close()


