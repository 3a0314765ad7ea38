"""The access log ("who looked", SPEC 10): many entries in one transaction with the page or
command that read them (``via``); older stores migrate. On SQLite and PostgreSQL alike."""

from __future__ import annotations

import pytest
from sqlalchemy import select, text

from membrane_engine import Membrane
from membrane_engine import clearance as gate
from membrane_engine.errors import ValidationError
from membrane_engine.storage.store import access_log


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
