"""The archive (SPEC 6 deviation): prune and delete move records there with their full JSON and
audit log; restore brings one back exactly as it was. `never` records survive every prune and
delete. Prune finds its candidates over the column cache, not by loading every record."""

from __future__ import annotations

import json

import pytest
from tests.support.curation import DAY, T0, dump, lifecycle, semantic, working

from membrane_engine import Membrane
from membrane_engine.errors import ValidationError
from membrane_engine.storage.store import Store

OLD = {"updated_at": "2026-01-01T12:00:00Z"}  # ~59 half-lives before T0


def dump_row(m: Membrane, rid: str) -> dict:
    from sqlalchemy import select

    from membrane_engine.storage.store import records

    with m.store.engine.connect() as conn:
        return dict(conn.execute(select(records).where(records.c.id == rid)).mappings().one())


def test_prune_then_restore_gives_back_the_identical_record_and_log(m, clock):
    m.import_records([semantic("s", **OLD),
                      working("w", custom_field={"kept": [1, 2], "tiny": 1e-5, "text": "naïve ✓"}, **OLD)])
    m.reinforce("w", "op", "earlier history")  # S back up, then let it decay again
    clock.advance(DAY * 30)
    rows_before = {rid: dump_row(m, rid) for rid in ("s", "w")}
    recs_before = {rid: m.get(rid) for rid in ("s", "w")}
    assert m.prune("op", "monthly sweep", dry_run=False) == ["s", "w"]
    assert m.ids() == [] and sorted(m.archived_ids()) == ["s", "w"]
    for rid in ("s", "w"):
        log = m.audit_log(rid)
        assert log[:-1] == recs_before[rid].audit_log and log[-1].action.value == "delete"
    with m.store.engine.connect() as conn:
        archived = json.loads(conn.exec_driver_sql("SELECT doc FROM archive WHERE id = 'w'").scalar())
    assert archived["custom_field"] == {"kept": [1, 2], "tiny": 1e-5, "text": "naïve ✓"}  # the full JSON, unknown fields included
    assert [e["action"] for e in archived["audit_log"]] == ["create", "reinforce", "delete"]
    clock.advance(DAY)
    for rid in ("s", "w"):
        m.restore(rid, "op", "audit needs it")
        after = dump_row(m, rid)
        assert after.pop("audit_head") != rows_before[rid].pop("audit_head")
        assert after == rows_before[rid]  # byte-for-byte: doc, anchor, every column
        got = m.get(rid, as_of=T0 + DAY * 30)
        assert got.model_dump(exclude={"audit_log"}) == recs_before[rid].model_dump(exclude={"audit_log"})
        log = m.audit_log(rid)
        assert log[:-2] == recs_before[rid].audit_log
        assert [e.action.value for e in log[-2:]] == ["delete", "revise"]
        assert log[-1].rationale == "restored from archive: audit needs it"
    assert m.archived_ids() == []
    assert m.verify_audit() == []
    # a second cycle keeps the chain whole
    assert m.prune("op", "again", dry_run=False) == ["s", "w"]
    m.restore("s", "op", "again")
    assert [e.action.value for e in m.audit_log("s")][-4:] == ["delete", "revise", "delete", "revise"]
    assert m.verify_audit() == []


def test_delete_then_restore_gives_back_the_identical_record(m, clock):
    m.import_records([semantic("s", lifecycle=lifecycle(pinned=True, deletion_policy="manual_only"))])
    m.contest("s", "ticket-1", "op", "history")
    before = dump_row(m, "s")
    clock.advance(DAY)
    m.delete("s", "op", "gone")
    m.restore("s", "op", "back")
    after = dump_row(m, "s")
    after.pop("audit_head"), before.pop("audit_head")
    assert after == before


def test_never_records_survive_every_prune_and_delete(m, clock):
    never = lifecycle(deletion_policy="never")
    m.import_records([semantic("n1", lifecycle=never, **OLD), semantic("n2", lifecycle=never),
                      working("n3", lifecycle=lifecycle(deletion_policy="never", decay={"max_age_seconds": 60}))])
    m.retract("n2", "op", "zero salience")
    m.penalize("n1", 5, "op", "zero")
    before = dump(m)
    for as_of in (None, T0 + DAY, T0 + DAY * 3650):
        assert m.prune("op", "sweep", as_of=as_of) == []
        assert m.prune("op", "sweep", as_of=as_of, dry_run=False) == []
    assert dump(m) == before
    for rid in ("n1", "n2", "n3"):
        with pytest.raises(ValidationError):
            m.delete(rid, "op", "please")
    assert dump(m) == before
    assert sorted(m.ids()) == ["n1", "n2", "n3"]


def test_prune_loads_only_candidates(m, clock, monkeypatch):
    m.import_records([semantic(f"live{k:03d}") for k in range(300)] +
                     [semantic(f"stale{k}", **OLD) for k in range(4)] +
                     [semantic("stale_pinned", lifecycle=lifecycle(pinned=True), **OLD)])
    m.columns.current()
    loaded: list[str] = []
    for name in ("fetch", "lock", "rows_for_update"):
        original = getattr(Store, name)

        def spy(self, conn, ids, _original=original):
            ids = list(ids)
            loaded.extend(ids)
            return _original(self, conn, ids)

        monkeypatch.setattr(Store, name, spy)
    assert m.prune("op", "sweep", dry_run=False) == [f"stale{k}" for k in range(4)]
    assert sorted(loaded) == [f"stale{k}" for k in range(4)]


def test_prune_sees_changes_made_after_the_column_snapshot(store_url, clock):
    m1 = Membrane.open(store_url, load_sample=False, clock=clock)
    m2 = Membrane.open(store_url, load_sample=False, clock=clock)
    m1.import_records([semantic("a"), semantic("b", **OLD), semantic("c", **OLD)])
    stale = m1.columns.current()
    m2.retract("a", "other operator", "now eligible")
    m2.reinforce("b", "other operator", "no longer eligible")
    m2.pin("c", "other operator", "no longer eligible")
    m1.columns.current = lambda: stale  # as if the snapshot was taken just before m2 committed
    assert m1.prune("op", "sweep") == ["a"]
    assert m1.prune("op", "sweep", dry_run=False) == ["a"]
    assert sorted(m2.ids()) == ["b", "c"]
    m1.close()
    m2.close()
