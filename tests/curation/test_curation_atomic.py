"""Every operation is one transaction: a failure in the middle leaves the store byte-for-byte as
it was; previews write nothing and equal what the operation then does."""

from __future__ import annotations

import pytest
from tests.support.curation import DAY, dump, episodic, lifecycle, semantic, working

from membrane_engine.storage import audit_log as audit
from membrane_engine.curation.operations import CurationPlan
from membrane_engine.errors import NotFoundError, ValidationError
from membrane_engine.storage.store import Store


class Boom(RuntimeError):
    pass


def fail_after(monkeypatch, owner, name, calls_before_failure=0):
    """Make ``owner.name`` run normally ``calls_before_failure`` times, then run once more and raise
    (so the failure comes after that call has written its part of the transaction)."""
    original = getattr(owner, name)
    count = {"n": 0}

    def wrapper(*args, **kwargs):
        result = original(*args, **kwargs)
        count["n"] += 1
        if count["n"] > calls_before_failure:
            raise Boom(f"injected failure in {name}")
        return result

    monkeypatch.setattr(owner, name, wrapper)
    return count


def stale_store(m, clock):
    old = {"updated_at": "2026-01-01T12:00:00Z"}
    m.import_records([semantic("a"), semantic("b", salience=0.3), working("w"), episodic("e"),
                      semantic("stale1", **old), semantic("stale2", **old), working("stale3", **old),
                      semantic("keep", lifecycle=lifecycle(deletion_policy="never"), **old)])
    m.reinforce("a", "setup", "history")
    clock.advance(DAY)


# --------------------------------------------------------------------------- failures mid-transaction


def test_failure_in_the_middle_of_supersede_changes_nothing(m, clock, monkeypatch):
    stale_store(m, clock)
    before = dump(m)
    ids_before = m.ids()
    calls = fail_after(monkeypatch, Store, "insert_rows")  # after the old record and both audit entries
    with pytest.raises(Boom):
        m.supersede("a", semantic("a2"), "op", "v2")
    assert calls["n"] == 1
    monkeypatch.undo()
    assert dump(m) == before
    assert m.ids() == ids_before and m.get("a").salience > 0
    assert m.verify_audit() == []
    m.supersede("a", semantic("a2"), "op", "v2")  # and it works once the fault is gone
    assert m.get("a").salience == 0.0


def test_failure_in_the_middle_of_merge_changes_nothing(m, clock, monkeypatch):
    stale_store(m, clock)
    before = dump(m)
    calls = fail_after(monkeypatch, Store, "update_row", calls_before_failure=1)  # second source
    with pytest.raises(Boom):
        m.merge(["a", "b", "w"], semantic("ab"), "op", "dups")
    assert calls["n"] == 2
    monkeypatch.undo()
    assert dump(m) == before
    assert m.verify_audit() == []


def test_failure_in_the_audit_append_of_merge_changes_nothing(m, clock, monkeypatch):
    stale_store(m, clock)
    before = dump(m)
    fail_after(monkeypatch, audit, "append_batch")
    with pytest.raises(Boom):
        m.merge(["a", "b"], semantic("ab"), "op", "dups")
    monkeypatch.undo()
    assert dump(m) == before


def test_failure_in_the_middle_of_prune_changes_nothing(m, clock, monkeypatch):
    stale_store(m, clock)
    assert m.prune("op", "sweep") == ["stale1", "stale2", "stale3"]
    before = dump(m)
    calls = fail_after(monkeypatch, Store, "archive_rows")  # rows removed and archived, then the fault
    with pytest.raises(Boom):
        m.prune("op", "sweep", dry_run=False)
    assert calls["n"] == 1
    monkeypatch.undo()
    assert dump(m) == before
    assert m.archived_ids() == [] and "stale1" in m.ids()
    assert m.prune("op", "sweep", dry_run=False) == ["stale1", "stale2", "stale3"]
    assert m.verify_audit() == []


def test_failure_in_the_middle_of_restore_changes_nothing(m, clock, monkeypatch):
    stale_store(m, clock)
    m.delete("b", "op", "gone")
    before = dump(m)
    fail_after(monkeypatch, Store, "insert_rows")
    with pytest.raises(Boom):
        m.restore("b", "op", "back")
    monkeypatch.undo()
    assert dump(m) == before
    with pytest.raises(NotFoundError):
        m.get("b")


# --------------------------------------------------------------------------- previews


def check_preview_then_apply(m, op, *args, **kwargs):
    """Preview writes nothing; applying returns the same plan; the store then holds exactly the
    previewed records and audit entries."""
    before = dump(m)
    plan = m.preview(op, *args, **kwargs)
    assert isinstance(plan, CurationPlan) and plan.op == op
    assert dump(m) == before, f"preview of {op} wrote something"
    assert plan.audit and plan.changes
    logs_before = {c.record_id: (m.audit_log(c.record_id) if c.kind != "create" else []) for c in plan.changes}
    if op == "prune":
        applied_ids = m.prune(*args, **dict(kwargs, dry_run=False))
        assert applied_ids == plan.result
    else:
        applied = getattr(m, op)(*args, **kwargs)
        assert applied == plan
    for change in plan.changes:
        rid = change.record_id
        entries = plan.entries_for(rid)
        stored = m.audit_rows(rid)
        assert len(stored) == len(logs_before[rid]) + len(entries)
        for row, e in zip(stored[-len(entries):], entries):
            assert row.entry == e.entry
            assert row.details == e.details
        if change.kind == "archive":
            assert rid in m.archived_ids() and rid not in m.ids()
            assert m.audit_log(rid) == change.after.audit_log
        else:
            got = m.get(rid)
            assert got.model_dump(exclude={"audit_log"}) == change.after.model_dump(exclude={"audit_log"}), op
        if change.before is not None and change.kind != "archive":
            assert change.before.id == rid
    assert m.verify_audit() == []
    return plan


def test_previews_write_nothing_and_equal_what_apply_does(m, clock):
    stale_store(m, clock)
    m.import_records([semantic("c"), semantic("d"), semantic("f"), semantic("g")])
    p = check_preview_then_apply(m, "reinforce", "a", "op", "useful", gain=0.2)
    ch = p.change("a")
    assert ch.kind == "update" and ch.after.salience == pytest.approx(ch.before.salience + 0.2)
    check_preview_then_apply(m, "penalize", "b", 0.05, "op", "misleading")
    p = check_preview_then_apply(m, "retract", "c", "op", "false")
    assert p.record("c").revision_status == "retracted" and p.change("c").before.revision_status is None
    check_preview_then_apply(m, "contest", "d", "b", "op", "disputed")
    p = check_preview_then_apply(m, "supersede", "d", semantic("d2"), "op", "newer")
    assert [c.kind for c in p.changes] == ["update", "create"]
    assert [e.action.value for e in p.audit] == ["revise", "create"]
    p = check_preview_then_apply(m, "fork", "d2", semantic("d3"), "op", "variant")
    assert [c.kind for c in p.changes] == ["audit", "create"]
    check_preview_then_apply(m, "merge", ["f", "g"], semantic("fg"), "op", "dups")
    check_preview_then_apply(m, "pin", "fg", "op", "keep")
    check_preview_then_apply(m, "unpin", "fg", "op", "release")
    p = check_preview_then_apply(m, "reclassify", "fg", "op", "pii", sensitivity="hyper", scope="s", tags=["x"])
    assert p.change("fg").before.sensitivity.value == "low" and p.record("fg").sensitivity.value == "hyper"
    p = check_preview_then_apply(m, "delete", "e", "op", "gone")
    assert p.change("e").kind == "archive" and p.record("e").audit_log[-1].action.value == "delete"
    check_preview_then_apply(m, "restore", "e", "op", "back")
    p = check_preview_then_apply(m, "prune", "op", "sweep")
    # the stale ones and every record retracted above (salience 0); never the `never` one
    assert p.result == ["c", "d", "f", "g", "stale1", "stale2", "stale3"]
    assert all(c.kind == "archive" for c in p.changes)


def test_preview_raises_what_the_operation_raises_and_refuses_unknown_names(m):
    m.import_records([semantic("a"), episodic("e")])
    before = dump(m)
    with pytest.raises(ValidationError):
        m.preview("reinforce", "a", "", "r")
    with pytest.raises(ValidationError):
        m.preview("delete_everything", "op", "r")
    with pytest.raises(NotFoundError):
        m.preview("pin", "nope", "op", "r")
    assert dump(m) == before
