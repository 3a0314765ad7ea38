"""Restore a version (a curation operation) and a record's past through an operator's clearance,
on both databases: reconstruction after a sequence of operations, preview equals apply, the
audit entry and its chain, refusals that leave the store unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from membrane_engine import Membrane
from membrane_engine.oversight import clearance as gate
from membrane_engine.oversight.clearance import WITHHELD
from membrane_engine.model.records import format_time
from membrane_engine.errors import EpisodicImmutableError, NotFoundError, ValidationError
from membrane_engine.rules.trust import TrustContext

from tests.support.records import DAY, T0, rec


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def at(self, days: float) -> None:
        self.now = T0 + timedelta(days=days)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def mem(store_url: str, clock: Clock) -> Iterator[Membrane]:
    m = Membrane.open(store_url, load_sample=False, clock=clock)
    yield m
    m.close()


def day(v: float) -> datetime:
    return T0 + timedelta(days=v)


def stored(m: Membrane, rid: str) -> dict:
    """Everything a read returns about the record, and its trail's length."""
    return {"doc": m.get(rid).to_json_dict(), "trail": len(m.audit_rows(rid))}


def curated(m: Membrane, clock: Clock) -> None:
    """r: low, tags [a], half-life a day. Day 1 reclassify (medium, scope team, tags [a, b]);
    day 2 reinforce +0.1; day 3 pin; day 4 unpin; day 5 retract."""
    m.import_records([rec("r", tags=["a"], half_life=DAY)])
    clock.at(1)
    m.reclassify("r", "ops:ann", "tighten", sensitivity="medium", scope="team", tags=["a", "b"])
    clock.at(2)
    m.reinforce("r", "ops:bob", "useful", gain=0.1)   # 0.25 -> 0.35
    clock.at(3)
    m.pin("r", "ops:ann", "hold")                      # 0.175, held
    clock.at(4)
    m.unpin("r", "ops:ann", "release")                 # decays from 0.175
    clock.at(5)
    m.retract("r", "ops:bob", "wrong")                 # 0.0875 -> 0


def test_history_reconstructs_each_version_after_a_sequence_of_operations(mem: Membrane, clock: Clock) -> None:
    curated(mem, clock)
    kinds = [v.kind for v in mem.history("r")]
    assert kinds[-5:] == ["revise", "reinforce", "pin", "unpin", "retract"]
    assert mem.history("r")[-1].is_retract
    at = {d: mem.record_at("r", day(d)) for d in (0.5, 1.5, 2.5, 3.5, 4.5, 5.5)}
    assert [(r.sensitivity.value, r.scope, r.tags) for r in (at[0.5], at[1.5])] == \
        [("low", "", ["a"]), ("medium", "team", ["a", "b"])]
    assert [at[d].lifecycle.pinned for d in (2.5, 3.5, 4.5)] == [False, True, False]
    assert [at[d].revision_status for d in (4.5, 5.5)] == ["active", "retracted"]
    assert [at[d].salience for d in (0.5, 2.5, 3.5, 4.5, 5.5)] == pytest.approx(
        [2 ** -0.5, 0.35 * 2 ** -0.5, 0.175, 0.175 * 2 ** -0.5, 0.0], abs=1e-9)


def test_restore_a_version_brings_back_its_labels_status_and_salience(mem: Membrane, clock: Clock) -> None:
    curated(mem, clock)
    clock.at(6)
    before_trail = len(mem.audit_rows("r"))
    preview = mem.preview("restore_version", "r", day(0.5), "ops:cat", "undo it all")
    assert stored(mem, "r")["trail"] == before_trail  # a preview writes nothing
    plan = mem.restore_version("r", day(0.5), "ops:cat", "undo it all")
    # Preview equals apply: the same record after, the same entry.
    assert preview.changes[0].after.to_json_dict() == plan.changes[0].after.to_json_dict()
    assert [(e.action, e.rationale, e.details) for e in preview.audit] == [(e.action, e.rationale, e.details) for e in plan.audit]
    now = mem.get("r")
    assert (now.sensitivity.value, now.scope, now.tags, now.lifecycle.pinned, now.revision_status) == \
        ("low", "", ["a"], False, "active")
    assert now.salience == pytest.approx(2 ** -0.5)  # the version's S(day 0.5), anchored now (day 6)
    assert now.lifecycle.anchor_at == day(6)
    clock.at(7)
    assert mem.get("r").salience == pytest.approx(2 ** -0.5 / 2)  # decays from the restored value
    rows = mem.audit_rows("r")
    assert len(rows) == before_trail + 1
    last = rows[-1]
    assert last.entry.actor == "ops:cat"
    assert last.entry.rationale == f"restored the version of {format_time(day(0.5))}: undo it all"
    assert last.details["version"] == format_time(day(0.5))
    assert last.details["version_position"] == 0  # the create entry was the last one then
    assert last.details["sensitivity"] == {"before": "medium", "after": "low"}
    assert last.details["scope"] == {"before": "team", "after": ""}
    assert last.details["tags"] == {"before": ["a", "b"], "after": ["a"]}
    assert last.details["status"] == {"before": "retracted", "after": "active"}
    assert last.details["salience"]["before"] == 0.0
    assert last.details["salience"]["after"] == pytest.approx(2 ** -0.5)
    assert mem.history("r")[-1].kind == "restore version"
    assert mem.verify_audit() == []
    # The history knows the restore too: the record just before it was the retracted one.
    assert mem.record_at("r", day(5.5)).revision_status == "retracted"
    assert mem.salience_history("r", [day(5.5), day(6.5)]) == pytest.approx([0.0, 2 ** -0.5 * 2 ** -0.5])


def test_restore_version_entry_names_the_version_time(mem: Membrane, clock: Clock) -> None:
    curated(mem, clock)
    clock.at(6)
    mem.restore_version("r", day(3.5), "ops:cat", "back to pinned")
    last = mem.audit_rows("r")[-1]
    assert last.details["version"] == format_time(day(3.5))
    assert last.details["version_position"] == [v.kind for v in mem.history("r")].index("pin")
    assert "pinned" in last.details and last.details["pinned"] == {"before": False, "after": True}
    assert mem.get("r").lifecycle.pinned is True
    assert mem.get("r").salience == pytest.approx(0.175)
    assert mem.verify_audit() == []


@pytest.mark.parametrize("case", ["episodic", "future", "before_creation", "unknown", "bad_when", "empty_actor"])
def test_refused_restores_leave_the_store_unchanged(mem: Membrane, clock: Clock, case: str) -> None:
    curated(mem, clock)
    mem.import_records([rec("e", "episodic", created_at=day(5))])
    clock.at(6)
    before = {rid: stored(mem, rid) for rid in ("r", "e")}
    calls = {
        "episodic": (("e", day(5.5), "ops:cat", "x"), EpisodicImmutableError),
        "future": (("r", day(7), "ops:cat", "x"), ValidationError),
        "before_creation": (("r", day(-1), "ops:cat", "x"), ValidationError),
        "unknown": (("nope", day(1), "ops:cat", "x"), NotFoundError),
        "bad_when": (("r", "yesterday", "ops:cat", "x"), ValidationError),
        "empty_actor": (("r", day(1), "", "x"), ValidationError),
    }
    args, error = calls[case]
    with pytest.raises(error):
        mem.preview("restore_version", *args)
    with pytest.raises(error):
        mem.restore_version(*args)
    assert {rid: stored(mem, rid) for rid in ("r", "e")} == before
    assert mem.verify_audit() == []


def test_restore_version_undoes_a_contest_relation(mem: Membrane, clock: Clock) -> None:
    mem.import_records([rec("x"), rec("y")])
    clock.at(1)
    mem.contest("x", "y", "ops:ann", "disputed")
    assert [r.target_id for r in mem.get("x").relations] == ["y"]
    clock.at(2)
    mem.restore_version("x", day(0.5), "ops:ann", "not disputed after all")
    assert mem.get("x").relations == [] and mem.get("x").revision_status == "active"
    assert [r.target_id for r in mem.record_at("x", day(1.5)).relations] == ["y"]  # the undo of the undo
    assert mem.verify_audit() == []


# --------------------------------------------------------------------------- through a clearance

LOW = TrustContext(max_sensitivity="low")
MEDIUM = TrustContext(max_sensitivity="medium", scopes=["team"])


def test_a_version_beyond_the_clearance_shows_no_content(mem: Membrane, clock: Clock) -> None:
    # r was low (day 0-1), medium in scope team from day 1: a low clearance sees it redacted now.
    curated(mem, clock)
    clock.at(6)
    with pytest.raises(NotFoundError):
        gate.history(mem, "r", TrustContext(max_sensitivity="public"))  # not seen at all: absent
    assert gate.history(mem, "r", LOW) == []  # redacted now: no history content
    assert gate.salience_history(mem, "r", [day(0.5)], LOW) == [None]
    assert gate.record_at(mem, "r", day(0.5), LOW) is None
    # Medium (scope team) sees it in full now and every version: nothing withheld.
    full = gate.history(mem, "r", MEDIUM)
    assert [v.withheld for v in full] == [False] * len(full)
    assert full[-5].changes["sensitivity"] == ("low", "medium")


def test_each_version_is_decided_on_its_own_labels(mem: Membrane, clock: Clock) -> None:
    # s: medium at first, raised to high on day 1, lowered back to medium on day 2. A medium
    # clearance sees it in full now but not the high version (day 1-2) nor the changes into
    # and out of it.
    mem.import_records([rec("s", sensitivity="medium", half_life=DAY)])
    clock.at(1)
    mem.reclassify("s", "ops:ann", "secret now", sensitivity="high")
    clock.at(2)
    mem.reclassify("s", "ops:ann", "not so secret", sensitivity="medium")
    clock.at(3)
    seen = TrustContext(max_sensitivity="medium")
    versions = gate.history(mem, "s", seen)
    assert [v.withheld for v in versions[-2:]] == [True, True]
    assert all(v.actor == WITHHELD and v.changes == {} and "secret" not in v.rationale for v in versions[-2:])
    assert not versions[0].withheld
    assert gate.record_at(mem, "s", day(0.5), seen).redacted is False
    at_high = gate.record_at(mem, "s", day(1.5), seen)
    assert at_high is not None and at_high.redacted and at_high.payload is None
    got = gate.salience_history(mem, "s", [day(0.5), day(1.5), day(2.5)], seen)
    assert got[0] == pytest.approx(2 ** -0.5) and got[1] is None and got[2] == pytest.approx(2 ** -2.5)
    # The whole clearance sees every version.
    everything = TrustContext(max_sensitivity="hyper")
    assert not any(v.withheld for v in gate.history(mem, "s", everything))
    assert gate.salience_history(mem, "s", [day(1.5)], everything) == pytest.approx([2 ** -1.5])


def test_time_below_follows_the_true_past(mem: Membrane, clock: Clock) -> None:
    curated(mem, clock)
    clock.at(6)
    seen = TrustContext(max_sensitivity="hyper")
    # After the unpin (day 4, 0.175) it decays below 0.1 at day 4 + log2(1.75); the retract
    # (day 5) drops it below 0.05 at once. Today's anchor (0 since day 5) says "below from the start".
    got = gate.time_below(mem, "r", 0.1, day(0.5), day(6), seen)
    assert abs((got - day(4 + 0.8073549220576041)).total_seconds()) < 1
    got = gate.time_below(mem, "r", 0.05, day(0.5), day(6), seen)
    assert abs((got - day(5)).total_seconds()) < 1
    assert gate.time_below(mem, "r", 0.01, day(0.5), day(4.9), seen) is None
    assert gate.time_below(mem, "r", 0.1, day(0.5), day(6), LOW) is None  # redacted now: nothing
