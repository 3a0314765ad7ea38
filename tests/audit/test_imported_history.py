"""Imported history told truthfully: a past salience the trail cannot tell is unknown (None), not
flat; entries that came with an import are marked as claimed; an imported entry dated after its
import is refused; an import preview names the ids already in the store. On both databases."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from membrane_engine import Membrane
from membrane_engine.errors import ValidationError
from membrane_engine.rules.history import claimed_by
from membrane_engine.storage.audit_log import last_creates
from membrane_engine.transfer.imports import preview_file

from tests.support.records import DAY, T0, Clock, iso, rec


def days(*values: float) -> list[datetime]:
    return [T0 + timedelta(days=v) for v in values]


def membrane_style(rid: str, **extra) -> dict:
    """As Membrane exports it: created at T0, reinforced at T0 + 1 d and penalized at T0 + 2 d with
    no before/after values, updated (so anchored, SPEC 2) at T0 + 2 d at salience 0.4."""
    return rec(rid, salience=0.4, half_life=DAY, updated_at=T0 + timedelta(days=2), audit_log=[
        {"action": "create", "actor": "agent:kestrel", "timestamp": iso(T0), "rationale": "captured"},
        {"action": "reinforce", "actor": "agent:kestrel", "timestamp": iso(T0 + timedelta(days=1)), "rationale": "used"},
        {"action": "decay", "actor": "agent:kestrel", "timestamp": iso(T0 + timedelta(days=2)), "rationale": "penalty: x"},
    ], **extra)


def test_past_salience_without_values_is_unknown_not_flat(mem: Membrane, clock: Clock) -> None:
    clock.at(3)
    mem.import_records([membrane_style("m"), rec("native", half_life=DAY)], actor="operator:ann")
    clock.at(4)
    got = mem.salience_history("m", days(0.25, 1.5, 1.999, 2, 2.5, 3.5))
    # Before the stored anchor (T0 + 2 d) the file said a reinforce and a penalty happened, not
    # from what to what: unknown. Drawn from today's anchor it was a flat 0.4 there.
    assert got[:3] == [None, None, None]
    assert got[3:] == pytest.approx([0.4, 0.4 * 2 ** -0.5, 0.4 * 2 ** -1.5], abs=1e-6)
    from membrane_engine.audit.reads import with_trail
    from membrane_engine.rules import history

    record, anchor, rows = with_trail(mem.context, "m")

    assert history.unknown_at(record, anchor, rows, days(0.25, 2.5)) == [True, False]
    # A record this engine knows from its creation on has no unknown past.
    assert None not in mem.salience_history("native", days(0, 1, 3.5))


def test_an_anchor_after_the_creation_leaves_the_time_before_it_unknown(mem: Membrane, clock: Clock) -> None:
    clock.at(5)
    mem.import_records([rec("a", salience=0.7, anchor=(0.7, T0 + timedelta(days=2)))])
    got = mem.salience_history("a", days(-1, 1, 2, 3))
    assert got[0] is None and got[1] is None  # before it existed / before its first known anchor
    assert got[2:] == pytest.approx([0.7, 0.35], abs=1e-6)


def test_a_native_change_after_the_import_is_known_and_the_import_ends_the_unknown(mem: Membrane, clock: Clock) -> None:
    # A reinforce without values first: unknown from the creation (the anchor it came with is
    # the file's, stale by that reinforce) until the import took it in.
    doc = rec("b", salience=0.5, half_life=DAY, updated_at=T0, audit_log=[
        {"action": "reinforce", "actor": "agent:x", "timestamp": iso(T0 + timedelta(days=1)), "rationale": "used"}])
    clock.at(2)
    mem.import_records([doc], actor="operator:ann")
    clock.at(3)
    mem.reinforce("b", "operator:ann", "useful", gain=0.1)
    clock.at(4)
    got = mem.salience_history("b", days(0.5, 1.5, 2.5, 3.5))
    assert got[0] is None and got[1] is None
    assert got[2] is not None and got[3] is not None  # the engine's own from the import on
    before = mem.history("b")[-1].changes["salience"][0]
    assert got[2] == pytest.approx(before * 2 ** 0.5, rel=1e-6)  # consistent with the engine's reinforce


def test_entries_that_came_with_the_import_are_claimed(mem: Membrane, clock: Clock) -> None:
    clock.at(3)
    mem.import_records([membrane_style("m"), rec("native")], actor="operator:ann")
    mem.reinforce("m", "operator:ann", "useful")
    versions = mem.history("m")
    assert [(v.kind, v.claimed) for v in versions] == [
        ("create", True), ("reinforce", True), ("penalize", True), ("create", False), ("reinforce", False)]
    assert versions[3].actor == "operator:ann" and versions[3].rationale.startswith("imported")
    total, rows = mem.audit_query(limit=100)
    claimed = claimed_by(rows, last_creates(mem.store, (r.record_id for r in rows)))
    by_seq = {r.seq: r for r in rows}
    assert sorted((by_seq[s].record_id, by_seq[s].position) for s in claimed) == [("m", 0), ("m", 1), ("m", 2)]
    assert set(claimed.values()) == {"the import"}
    assert total == len(rows) == 6  # m: 3 claimed, the import's, a reinforce; native: the import's


def test_an_imported_entry_dated_after_the_import_is_refused(mem: Membrane, clock: Clock) -> None:
    clock.at(3)
    late = rec("late", audit_log=[
        {"action": "create", "actor": "agent:x", "timestamp": iso(T0), "rationale": "captured"},
        {"action": "revise", "actor": "operator:admin", "timestamp": "2099-01-01T00:00:00Z", "rationale": "forged"}])
    with pytest.raises(ValidationError) as info:
        mem.import_records([rec("fine"), late], actor="operator:ann")
    message = str(info.value)
    assert "record 1: audit_log.1.timestamp" in message  # the entry
    assert "'late'" in message and "2099-01-01T00:00:00" in message  # the record and the timestamp
    assert ("record 1: audit_log.1.timestamp", info.value.problems[0][1]) == info.value.problems[0]
    assert mem.ids() == [] and mem.audit_query(limit=0)[0] == 0  # all or nothing
    # Up to the import's instant is fine.
    mem.import_records([rec("now", audit_log=[{"action": "create", "actor": "agent:x", "timestamp": iso(T0 + timedelta(days=3)),
                                               "rationale": "captured"}])])
    assert mem.ids() == ["now"]


def test_an_import_file_with_a_future_entry_is_refused(mem: Membrane, clock: Clock, tmp_path: Path) -> None:
    path = tmp_path / "late.jsonl"
    path.write_text(json.dumps(rec("late", audit_log=[
        {"action": "create", "actor": "operator:admin", "timestamp": "2099-06-01T00:00:00Z", "rationale": "x"}])) + "\n")
    with pytest.raises(ValidationError, match=r"record 0: audit_log\.0\.timestamp.*'late'.*2099-06-01"):
        mem.import_file(path)
    assert mem.ids() == []


def test_a_preview_names_the_ids_already_in_the_store(mem: Membrane, tmp_path: Path) -> None:
    mem.import_records([rec("x"), rec("y")])
    path = tmp_path / "again.json"
    path.write_text(json.dumps([rec("x"), rec("new", sensitivity="high", scope="team"), rec("y"), 7]))
    got = preview_file(mem.store, path)
    assert got.count == 4 and got.existing == ["x", "y"] and got.existing_count == 2
    assert got.briefs[1] == {"id": "new", "type": "semantic", "sensitivity": "high", "scope": "team"}
    assert got.briefs[3] == {}  # not a record object: the import names it
    fresh = tmp_path / "fresh.json"
    fresh.write_text(json.dumps([rec("z")]))
    assert preview_file(mem.store, fresh).existing_count == 0
