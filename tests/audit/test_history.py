"""A record's past from its audit trail: versions, the record at an instant, and the true
salience curve (each reinforce, penalize, retract, pin re-anchors), on both databases."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from membrane_engine import Membrane
from membrane_engine.errors import NotFoundError, ValidationError

from tests.support.records import DAY, T0, Clock, rec


def days(*values: float) -> list[datetime]:
    return [T0 + timedelta(days=v) for v in values]


def test_reinforced_then_retracted_inside_the_window(mem: Membrane, clock: Clock) -> None:
    # Half-life one day, anchored at 1.0 at T0. Day 2: S = 0.25, reinforce +0.1 -> 0.35.
    # Day 3: S = 0.35 / 2 = 0.175, retract -> 0.
    mem.import_records([rec("r", half_life=DAY)])
    clock.at(2)
    mem.reinforce("r", "ops:ann", "useful", gain=0.1)
    clock.at(3)
    mem.retract("r", "ops:ann", "wrong")
    clock.at(4)
    got = mem.salience_history("r", days(-1, 0, 1, 1.999999, 2, 2.5, 2.999999, 3, 3.5))
    expected = [None, 1.0, 0.5, 0.25, 0.35, 0.35 * 2 ** -0.5, 0.175, 0.0, 0.0]
    assert got[0] is None  # before it existed
    assert got[1:] == pytest.approx(expected[1:], abs=1e-5)
    # Today's anchor alone (0 since day 3) would have drawn it at zero all along.
    assert mem.salience_at("r", T0 + timedelta(days=1)) == 0.0


def test_pinned_then_unpinned_holds_then_decays(mem: Membrane, clock: Clock) -> None:
    mem.import_records([rec("p", half_life=DAY)])
    clock.at(1)
    mem.pin("p", "ops:ann", "hold it")
    clock.at(3)
    mem.unpin("p", "ops:ann", "let it go")
    clock.at(5)
    got = mem.salience_history("p", days(0.5, 1, 2, 2.9, 3, 4))
    assert got == pytest.approx([2 ** -0.5, 0.5, 0.5, 0.5, 0.5, 0.25], abs=1e-9)


def test_penalize_reanchors_and_the_first_segment_is_solved_from_its_before_value(mem: Membrane, clock: Clock) -> None:
    # Imported with an anchor a day after its creation: the trail does not hold it, the first
    # entry's "before" value does, and exponential decay gives the same curve from either.
    mem.import_records([rec("q", half_life=DAY, created_at=T0, anchor=(0.8, T0 + timedelta(days=1)))])
    clock.at(3)
    mem.penalize("q", 0.1, "ops:ann", "noisy")  # before 0.2, after 0.1
    got = mem.salience_history("q", days(1.5, 2, 3, 4))
    assert got == pytest.approx([0.8 * 2 ** -0.5, 0.4, 0.1, 0.05], abs=1e-9)


def test_archived_while_deleted_and_back_after_restore(mem: Membrane, clock: Clock) -> None:
    mem.import_records([rec("d", half_life=DAY)])
    clock.at(1)
    mem.delete("d", "ops:ann", "not needed")
    clock.at(2)
    mem.restore("d", "ops:ann", "needed after all")
    got = mem.salience_history("d", days(0.5, 1.5, 2, 3))
    assert got[1] is None
    assert [got[0], got[2], got[3]] == pytest.approx([2 ** -0.5, 0.25, 0.125], abs=1e-9)


def test_versions_and_the_record_as_it_was(mem: Membrane, clock: Clock) -> None:
    mem.import_records([rec("s", sensitivity="low", scope="alpha", tags=["a"]), rec("x")])
    clock.at(1)
    mem.reclassify("s", "ops:ann", "leaked a key", sensitivity="hyper", scope="beta", tags=["b"])
    clock.at(2)
    mem.contest("s", "x", "ops:bob", "x disagrees")
    clock.at(3)
    history = mem.history("s")
    changed = [v for v in history if v.changes]
    assert [(v.actor, v.changes.get("sensitivity")) for v in changed[:1]] == [("ops:ann", ("low", "hyper"))]
    assert changed[1].changes["status"] == ("active", "contested")
    before = mem.record_at("s", T0 + timedelta(hours=12))
    assert (before.sensitivity.value, before.scope, before.tags) == ("low", "alpha", ["a"])
    assert before.payload.revision is None or before.payload.revision.status.value == "active"
    assert not any(r.predicate == "contested_by" for r in before.relations)
    assert before.salience == pytest.approx(2 ** -0.5)
    middle = mem.record_at("s", T0 + timedelta(days=1.5))
    assert (middle.sensitivity.value, middle.scope) == ("hyper", "beta")
    assert middle.payload.revision is None or middle.payload.revision.status.value == "active"
    now = mem.record_at("s", T0 + timedelta(days=3))
    assert now.payload.revision.status.value == "contested"
    assert any(r.predicate == "contested_by" and r.target_id == "x" for r in now.relations)
    assert mem.record_at("s", T0 - timedelta(days=1)) is None


def test_bad_arguments_are_refused(mem: Membrane) -> None:
    mem.import_records([rec("r")])
    with pytest.raises(NotFoundError):
        mem.history("nope")
    with pytest.raises(ValidationError, match="times"):
        mem.salience_history("r", "yesterday")
    with pytest.raises(ValidationError, match="when"):
        mem.record_at("r", "yesterday")
