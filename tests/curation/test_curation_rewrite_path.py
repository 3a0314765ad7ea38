"""Operations that only rewrite existing records (reinforce, penalize, retract, contest, pin, unpin,
reclassify) are written by a shorter path (curation._execute_rewrites: the chain end read with the
row, audit entries, changed columns and change log in one batch). It must write exactly what the
general path (audit.append_batch, Store.update_row) writes."""

from __future__ import annotations

import pytest
from tests.support.curation import DAY, semantic

from membrane_engine.storage import audit_log as audit
from membrane_engine.rules.chain import GENESIS
from membrane_engine.curation import operations as curation
from membrane_engine.storage.store import Store

OPS = [
    ("reinforce", ("a", "op", "useful"), {"gain": 0.2}),
    ("reinforce", ("a", "op", "useful"), {}),
    ("penalize", ("a", 0.05, "op", "misleading"), {}),
    ("retract", ("a", "op", "false"), {}),
    ("contest", ("a", "b", "op", "disputed"), {}),
    ("pin", ("a", "op", "keep"), {}),
    ("reclassify", ("a", "op", "moved"), {"sensitivity": "high", "scope": "beta", "tags": ["x", "ünï"]}),
]


class _Rollback(Exception):
    pass


def _written(conn, record_id: str) -> tuple[list[tuple], list[tuple], int]:
    audit_rows = [tuple(r) for r in conn.exec_driver_sql(
        "SELECT record_id, position, action, actor, timestamp, ts, rationale, details, extra, prev_hash, hash "
        f"FROM audit_entries WHERE record_id = '{record_id}' ORDER BY position")]
    record = [tuple(r) for r in conn.exec_driver_sql(f"SELECT * FROM records WHERE id = '{record_id}'")]
    changes = conn.exec_driver_sql(f"SELECT count(*) FROM changes WHERE record_id = '{record_id}'").scalar()
    return audit_rows, record, int(changes)


def _by_general_path(m, op: str, args: tuple, kwargs: dict) -> tuple:
    """What the general path writes for the operation (in a transaction that is rolled back)."""
    out = None
    try:
        with m.store.write() as conn:
            plan = curation.PLANNERS[op](curation.PlanView(m.store, conn, True), m.now(), *args, **kwargs)
            curation.execute(m.store, conn, plan)  # no view: the general path
            out = _written(conn, args[0])
            raise _Rollback
    except _Rollback:
        pass
    return out


@pytest.mark.parametrize("keyed", [False, True], ids=["sha256", "hmac"])
@pytest.mark.parametrize("op,args,kwargs", OPS, ids=[f"{op}{k}" for k, (op, _, _) in enumerate(OPS)])
def test_rewrite_path_writes_what_the_general_path_writes(m, clock, monkeypatch, op, args, kwargs, keyed):
    if keyed:
        monkeypatch.setenv("MEMBRANE_AUDIT_KEY", "a key")
    m.import_records([semantic("a"), semantic("b")])
    m.reinforce("a", "op", "earlier entry")
    clock.advance(DAY)
    general = _by_general_path(m, op, args, kwargs)
    getattr(m, op)(*args, **kwargs)
    with m.store.read() as conn:
        fast = _written(conn, args[0])
    assert fast == general
    assert m.verify_audit() == []


def test_rewrite_path_starts_a_chain_like_the_general_path(m, clock, raw):
    """A record whose audit rows are gone (verify reports it) gets a chain from the start, as
    audit.append_batch would give it."""
    m.import_records([semantic("a")])
    raw.execute("DELETE FROM audit_entries WHERE record_id = 'a'")
    clock.advance(DAY)
    general = _by_general_path(m, "reinforce", ("a", "op", "r"), {})
    m.reinforce("a", "op", "r")
    with m.store.read() as conn:
        assert _written(conn, "a") == general
    assert general[0][0][1] == 0 and general[0][0][9] == GENESIS


def test_rewrites_take_the_short_path_and_others_the_general_one(m, clock, monkeypatch):
    m.import_records([semantic("a"), semantic("b")])
    calls: list[str] = []
    for owner, name in ((Store, "write_updates"), (audit, "append_batch")):
        original = getattr(owner, name)

        def spy(*a, _original=original, _name=name, **k):
            calls.append(_name)
            return _original(*a, **k)

        monkeypatch.setattr(owner, name, spy)
    m.reinforce("a", "op", "r")
    m.penalize("a", 0.1, "op", "r")
    m.pin("b", "op", "r")
    assert calls == ["write_updates"] * 3
    calls.clear()
    m.fork("b", semantic("c"), "op", "variant")  # creates a record: the general path
    assert calls == ["append_batch"]
    assert m.verify_audit() == []


def test_a_failure_in_the_rewrite_batch_changes_nothing(m, clock, monkeypatch):
    """A database error inside the batch (here: an audit position already taken, as if the chain
    end had been read wrong) rolls the whole operation back, and the store works afterwards."""
    from tests.support.curation import dump

    from membrane_engine.errors import ValidationError

    m.import_records([semantic("a"), semantic("b")])
    m.reinforce("a", "op", "earlier")
    m.columns.current()
    before = dump(m)
    original = Store.rows_for_update

    def stale_chain_end(self, conn, ids):
        return {rid: (cols, (end[0] - 1, end[1]) if end else None)
                for rid, (cols, end) in original(self, conn, ids).items()}

    monkeypatch.setattr(Store, "rows_for_update", stale_chain_end)
    clock.advance(DAY)
    with pytest.raises(ValidationError):
        m.reinforce("a", "op", "conflicting")
    monkeypatch.undo()
    assert dump(m) == before
    m.reinforce("a", "op", "after the failure")
    m.penalize("b", 0.1, "op", "after the failure")
    assert m.verify_audit() == []
    assert [e.rationale for e in m.audit_log("a")][-2:] == ["earlier", "after the failure"]
