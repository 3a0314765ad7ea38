"""SPEC 6, one operation at a time: record changes, relations, provenance, revision status and
the audit entries each operation writes, on SQLite and PostgreSQL."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest
from tests.support.curation import DAY, T0, dump, episodic, lifecycle, semantic, working

from membrane_engine import MemoryRecord
from membrane_engine.errors import (
    AlreadyExistsError,
    EpisodicImmutableError,
    NotFoundError,
    ValidationError,
)


def last_rows(m, rid, n=1):
    return m.audit_rows(rid)[-n:]


def only_new_entry(m, rid, before_count):
    rows = m.audit_rows(rid)
    assert len(rows) == before_count + 1
    return rows[-1]


def assert_intact(m):
    assert m.verify_audit() == []


# --------------------------------------------------------------------------- common rules

OPS = {
    "reinforce": lambda m, a, r: m.reinforce("s1", a, r),
    "penalize": lambda m, a, r: m.penalize("s1", 0.1, a, r),
    "retract": lambda m, a, r: m.retract("s1", a, r),
    "contest": lambda m, a, r: m.contest("s1", "s2", a, r),
    "supersede": lambda m, a, r: m.supersede("s1", semantic("n1"), a, r),
    "fork": lambda m, a, r: m.fork("s1", semantic("n1"), a, r),
    "merge": lambda m, a, r: m.merge(["s1", "s2"], semantic("n1"), a, r),
    "pin": lambda m, a, r: m.pin("s1", a, r),
    "unpin": lambda m, a, r: m.unpin("s1", a, r),
    "reclassify": lambda m, a, r: m.reclassify("s1", a, r, sensitivity="high"),
    "delete": lambda m, a, r: m.delete("s1", a, r),
    "restore": lambda m, a, r: m.restore("s1", a, r),
    "prune": lambda m, a, r: m.prune(a, r, dry_run=False),
}


def test_actor_and_rationale_are_required(m):
    m.import_records([semantic("s1"), semantic("s2")])
    m.delete("s2", "setup", "so restore has a candidate")
    m.import_records([semantic("s3")])
    ops = dict(OPS, restore=lambda m, a, r: m.restore("s2", a, r), contest=lambda m, a, r: m.contest("s1", "s3", a, r),
               merge=lambda m, a, r: m.merge(["s1", "s3"], semantic("n1"), a, r))
    dumped = dump(m)
    for op, call in sorted(ops.items()):
        for actor, rationale, field in [("", "why", "actor"), ("  \t", "why", "actor"), (None, "why", "actor"),
                                        ("op", "", "rationale"), ("op", " \n ", "rationale"), ("op", 7, "rationale")]:
            with pytest.raises(ValidationError) as err:
                call(m, actor, rationale)
            assert err.value.problems[0][0] == field, op
            assert field in str(err.value)
    assert dump(m) == dumped


def test_check_order_arguments_then_existence_then_episodic_then_own_rules(m):
    m.import_records([episodic("e1"), semantic("s1")])
    # arguments come before existence
    with pytest.raises(ValidationError):
        m.reinforce("missing", "op", "")
    with pytest.raises(ValidationError):
        m.penalize("missing", -1, "op", "why")
    # existence before episodic immutability
    with pytest.raises(NotFoundError):
        m.merge(["e1", "missing"], semantic("n1"), "op", "why")
    # episodic immutability before the operation's own rules (the new id already exists)
    with pytest.raises(EpisodicImmutableError):
        m.supersede("e1", semantic("s1"), "op", "why")
    with pytest.raises(EpisodicImmutableError):
        m.supersede("e1", semantic("n1", evidence=False), "op", "why")
    # own rule once the rest passes
    with pytest.raises(AlreadyExistsError):
        m.supersede("s1", semantic("s1"), "op", "why")


def test_episodic_records_cannot_be_revised_but_take_other_operations(m):
    m.import_records([episodic("s1"), semantic("s2")])
    dumped = dump(m)
    for op in ["retract", "contest", "supersede", "fork", "merge"]:
        with pytest.raises(EpisodicImmutableError):
            OPS[op](m, "op", "why")
    assert dump(m) == dumped
    for op in ["reinforce", "penalize", "pin", "unpin", "reclassify", "delete"]:
        OPS[op](m, "op", "why")
    assert [e.action.value for e in m.audit_log("s1")] == ["create", "reinforce", "decay", "revise", "revise",
                                                            "revise", "delete"]
    assert_intact(m)


def test_missing_record_is_not_found(m):
    m.import_records([semantic("s2")])
    dumped = dump(m)
    for op in ["reinforce", "penalize", "retract", "contest", "supersede", "fork", "merge", "pin", "unpin",
               "reclassify", "delete", "restore"]:
        with pytest.raises(NotFoundError):
            OPS[op](m, "op", "why")
    assert dump(m) == dumped


# --------------------------------------------------------------------------- reinforce, penalize


def test_reinforce(m, clock):
    m.import_records([semantic("s1", salience=0.5)])
    clock.advance(DAY)  # S(now) = 0.25
    m.reinforce("s1", "alice", "it helped")
    r = m.get("s1")
    assert r.salience == pytest.approx(0.35)
    assert r.lifecycle.anchor_salience == pytest.approx(0.35)
    assert r.lifecycle.anchor_at == clock.t
    assert r.lifecycle.last_reinforced_at == clock.t
    assert r.updated_at == clock.t
    e = last_rows(m, "s1")[0]
    assert (e.entry.action.value, e.entry.actor, e.entry.rationale, e.entry.timestamp) == \
        ("reinforce", "alice", "it helped", clock.t)
    assert e.details["salience"] == {"before": pytest.approx(0.25), "after": pytest.approx(0.35)}
    assert e.details["gain"] == 0.1
    # decay restarts from the new anchor
    clock.advance(DAY)
    assert m.get("s1").salience == pytest.approx(0.175)
    assert_intact(m)


def test_reinforce_gain_and_cap(m):
    m.import_records([semantic("s1", salience=0.9), semantic("s2", salience=1.5),
                      semantic("s3", salience=0.2, lifecycle=lifecycle(decay={"reinforcement_gain": 0.3}))])
    m.reinforce("s1", "a", "r", gain=0.5)
    assert m.get("s1").salience == 1.0  # min(S + gain, 1)
    m.reinforce("s2", "a", "r")
    assert m.get("s2").salience == 1.5  # never lowered: max(S, ...)
    m.reinforce("s3", "a", "r")  # profile gain
    assert m.get("s3").salience == pytest.approx(0.5)
    for bad in (float("nan"), float("inf"), -0.1, "x", True):
        with pytest.raises(ValidationError) as err:
            m.reinforce("s1", "a", "r", gain=bad)
        assert err.value.problems[0][0] == "gain"


def test_penalize(m, clock):
    lri = "2026-02-20T00:00:00Z"
    m.import_records([semantic("s1", salience=0.8, lifecycle=lifecycle(last_reinforced_at=lri)),
                      semantic("s2", salience=0.5, lifecycle=lifecycle(decay={"min_salience": 0.3})),
                      semantic("s3", salience=0.2, lifecycle=lifecycle(decay={"min_salience": 0.3}))])
    clock.advance(DAY)  # s1: 0.4
    m.penalize("s1", 0.15, "bob", "wrong answer")
    r = m.get("s1")
    assert r.salience == pytest.approx(0.25)
    assert r.lifecycle.anchor_at == clock.t
    assert r.lifecycle.last_reinforced_at == datetime(2026, 2, 20, tzinfo=timezone.utc)  # unchanged
    assert r.updated_at == clock.t
    e = last_rows(m, "s1")[0]
    assert (e.entry.action.value, e.entry.actor, e.entry.rationale) == ("decay", "bob", "penalty: wrong answer")
    assert e.details["salience"] == {"before": pytest.approx(0.4), "after": pytest.approx(0.25)}
    assert e.details["amount"] == 0.15
    # floors at min_salience, never raises a value already below it
    m.penalize("s2", 10, "bob", "x")  # S(now) = max(0.25, 0.3) = 0.3
    assert m.get("s2").salience == pytest.approx(0.3)
    m.penalize("s3", 10, "bob", "x")  # S = 0.2 <= min: stays 0.2
    assert m.get("s3").salience == pytest.approx(0.2)
    m.penalize("s1", 0, "bob", "zero is allowed")
    assert m.get("s1").salience == pytest.approx(0.25)
    for bad in (-0.01, float("nan"), float("inf"), float("-inf"), None, "0.1"):
        with pytest.raises(ValidationError) as err:
            m.penalize("s1", bad, "bob", "x")
        assert err.value.problems[0][0] == "amount"
    assert_intact(m)


# --------------------------------------------------------------------------- retract, contest


def test_retract_semantic(m, clock):
    m.import_records([semantic("s1", salience=0.6)])
    clock.advance(timedelta(hours=1))
    m.retract("s1", "carol", "turned out false")
    r = m.get("s1")
    assert r.salience == 0.0 and r.lifecycle.anchor_salience == 0.0 and r.lifecycle.anchor_at == clock.t
    assert r.revision_status == "retracted"
    assert r.updated_at == clock.t
    assert "s1" in m.ids()  # the record stays
    e = last_rows(m, "s1")[0]
    assert (e.entry.action.value, e.entry.actor) == ("delete", "carol")
    assert "turned out false" in e.entry.rationale
    assert e.details["status"] == {"before": "active", "after": "retracted"}
    assert e.details["salience"]["after"] == 0.0
    clock.advance(DAY * 30)
    assert m.get("s1").salience == 0.0
    assert_intact(m)


def test_retract_non_semantic_zeroes_salience(m):
    m.import_records([working("w1")])
    m.retract("w1", "carol", "stale")
    r = m.get("w1")
    assert r.salience == 0.0 and r.revision_status is None
    assert m.audit_log("w1")[-1].action.value == "delete"


def test_contest_with_record_ref(m, clock):
    m.import_records([semantic("s1", salience=0.6), semantic("s2")])
    before = m.get("s1")
    clock.advance(timedelta(hours=2))
    s_now = m.get("s1").salience
    m.contest("s1", "s2", "dave", "s2 says otherwise")
    r = m.get("s1")
    assert r.revision_status == "contested"
    assert r.salience == pytest.approx(s_now)
    assert r.lifecycle.anchor_salience == before.lifecycle.anchor_salience  # salience unchanged: same anchor
    assert r.lifecycle.anchor_at == before.lifecycle.anchor_at
    assert [(x.predicate, x.target_id, x.weight) for x in r.relations] == [("contested_by", "s2", 1.0)]
    assert r.updated_at == clock.t
    e = last_rows(m, "s1")[0]
    assert (e.entry.action.value, e.entry.actor) == ("revise", "dave")
    assert "s2" in e.entry.rationale and "s2 says otherwise" in e.entry.rationale
    assert e.details["status"] == {"before": "active", "after": "contested"}
    # contesting again does not duplicate the relation
    m.contest("s1", "s2", "dave", "still")
    assert len(m.get("s1").relations) == 1
    assert_intact(m)


def test_contest_with_external_ref_adds_no_relation(m):
    m.import_records([semantic("s1")])
    m.contest("s1", "https://example.com/ticket/9", "dave", "ticket disputes it")
    r = m.get("s1")
    assert r.revision_status == "contested" and r.relations == []
    assert "https://example.com/ticket/9" in m.audit_log("s1")[-1].rationale
    # An empty ref contests without naming a contender (Membrane allows it): no relation.
    m.contest("s1", "", "dave", "x")
    assert m.get("s1").relations == [] and m.audit_log("s1")[-1].rationale == "contested: x"
    with pytest.raises(ValidationError) as err:
        m.contest("s1", "  ", "dave", "x")
    assert err.value.problems[0][0] == "contesting_ref"


# --------------------------------------------------------------------------- supersede, fork, merge


def test_supersede(m, clock):
    m.import_records([semantic("old", salience=0.7)])
    clock.advance(timedelta(hours=3))
    new = semantic("new", salience=0.9, provenance={"sources": [{"kind": "artifact", "ref": "doc://v2"}]})
    m.supersede("old", new, "erin", "v2 of the fact")
    old = m.get("old")
    assert old.salience == 0.0 and old.lifecycle.anchor_at == clock.t and old.updated_at == clock.t
    assert old.payload.revision.status.value == "retracted"
    assert old.payload.revision.superseded_by == "new"
    n = m.get("new")
    assert n.salience == pytest.approx(0.9)  # its given salience, anchored at the operation time
    assert n.lifecycle.anchor_salience == 0.9 and n.lifecycle.anchor_at == clock.t
    assert n.updated_at == clock.t
    assert n.created_at == datetime(2026, 2, 1, tzinfo=timezone.utc)  # as given
    assert [(s.kind.value, s.ref) for s in n.provenance.sources] == [("artifact", "doc://v2"), ("event", "old")]
    assert [(x.predicate, x.target_id, x.weight) for x in n.relations] == [("supersedes", "old", 1.0)]
    assert n.payload.revision.supersedes == "old"
    assert n.payload.revision.status.value == "active"
    oe, ne = m.audit_log("old")[-1], m.audit_log("new")
    assert oe.action.value == "revise" and oe.rationale == "superseded by new: v2 of the fact"
    assert [(x.action.value, x.rationale, x.actor) for x in ne] == [("create", "supersedes old: v2 of the fact", "erin")]
    assert m.audit_rows("old")[-1].details["status"] == {"before": "active", "after": "retracted"}
    clock.advance(DAY)
    assert m.get("new").salience == pytest.approx(0.45)
    assert_intact(m)


def test_supersede_evidence_rule_is_checked_on_the_record_as_given(m):
    m.import_records([semantic("old")])
    with pytest.raises(ValidationError) as err:
        m.supersede("old", semantic("new", evidence=False), "erin", "no evidence")
    assert "evidence" in err.value.problems[0][0]
    assert "new" not in m.ids()
    m.supersede("old", semantic("new", evidence=False, provenance={"sources": [{"kind": "observation", "ref": "o"}]}),
                "erin", "a provenance source is enough")
    m.supersede("new", semantic("newer"), "erin", "evidence is enough")
    # non-semantic new records need neither
    m.import_records([working("w1")])
    m.supersede("w1", working("w2"), "erin", "fresh thread")
    assert m.get("w2").relations[0].target_id == "w1"


def test_supersede_refuses_existing_ids_in_store_and_archive(m):
    m.import_records([semantic("old"), semantic("taken"), semantic("gone")])
    m.delete("gone", "op", "archive it")
    for rid in ("taken", "gone", "old"):
        with pytest.raises(AlreadyExistsError):
            m.supersede("old", semantic(rid), "erin", "x")
    assert m.get("old").revision_status is None and m.get("old").salience == 0.5  # untouched
    with pytest.raises(ValidationError):
        m.supersede("old", {"id": "bad", "type": "semantic"}, "erin", "no payload")
    with pytest.raises(ValidationError) as err:
        m.supersede("old", semantic("n", relations=[{"predicate": "about", "target_id": "nowhere", "weight": 1}]),
                    "erin", "unknown relation target")
    assert err.value.problems[0][0] == "new_record.relations.0.target_id"


def test_supersede_accepts_a_memory_record_and_defaults_created_at_to_now(m, clock):
    m.import_records([semantic("old")])
    rec = MemoryRecord.model_validate({k: v for k, v in semantic("new").items() if k not in ("created_at", "updated_at")})
    clock.advance(DAY)
    m.supersede("old", rec, "erin", "typed input")
    assert m.get("new").created_at == clock.t
    assert rec.relations == []  # the caller's object is not modified


def test_fork(m, clock):
    m.import_records([semantic("src", salience=0.6)])
    src_before = m.get("src")
    clock.advance(timedelta(hours=5))
    m.fork("src", semantic("forked", salience=0.4), "fay", "variant for beta")
    src = m.get("src", as_of=src_before.updated_at)
    assert src.model_dump(exclude={"audit_log"}) == src_before.model_dump(exclude={"audit_log"})  # unchanged
    f = m.get("forked")
    assert [(x.predicate, x.target_id, x.weight) for x in f.relations] == [("derived_from", "src", 1.0)]
    assert f.salience == pytest.approx(0.4) and f.lifecycle.anchor_at == clock.t
    se, fe = m.audit_log("src")[-1], m.audit_log("forked")
    assert se.action.value == "fork" and "forked" in se.rationale and "variant for beta" in se.rationale
    assert [x.action.value for x in fe] == ["create"] and "src" in fe[0].rationale
    assert_intact(m)


def test_merge(m, clock):
    m.import_records([semantic("a", salience=0.6), semantic("b", salience=0.3), working("w")])
    clock.advance(timedelta(hours=1))
    m.merge(["a", "b", "w"], semantic("ab", salience=0.8), "gus", "duplicates")
    for rid in ("a", "b", "w"):
        r = m.get(rid)
        assert r.salience == 0.0 and r.updated_at == clock.t
        e = m.audit_log(rid)[-1]
        assert e.action.value == "merge" and "ab" in e.rationale and "duplicates" in e.rationale
    assert m.get("a").revision_status == "retracted" and m.get("b").revision_status == "retracted"
    ab = m.get("ab")
    assert [(x.predicate, x.target_id) for x in ab.relations] == [("derived_from", "a"), ("derived_from", "b"),
                                                                  ("derived_from", "w")]
    assert ab.salience == pytest.approx(0.8) and ab.lifecycle.anchor_at == clock.t
    assert [x.action.value for x in m.audit_log("ab")] == ["create"]
    assert m.audit_rows("a")[-1].details["status"] == {"before": "active", "after": "retracted"}
    for bad in ([], "a", None):
        with pytest.raises(ValidationError) as err:
            m.merge(bad, semantic("x"), "gus", "r")
        assert err.value.problems[0][0] == "ids"
    with pytest.raises(AlreadyExistsError):
        m.merge(["ab"], semantic("ab"), "gus", "merging into itself")
    assert_intact(m)


# --------------------------------------------------------------------------- pin, unpin, reclassify


def test_pin_and_unpin(m, clock):
    m.import_records([semantic("s1", salience=0.8)])
    clock.advance(DAY)  # 0.4
    m.pin("s1", "hal", "keep")
    r = m.get("s1")
    assert r.lifecycle.pinned and r.salience == pytest.approx(0.4) and r.lifecycle.anchor_at == clock.t
    assert m.audit_log("s1")[-1].action.value == "revise" and "keep" in m.audit_log("s1")[-1].rationale
    clock.advance(DAY * 100)
    assert m.get("s1").salience == pytest.approx(0.4)  # frozen
    m.unpin("s1", "hal", "let it go")
    r = m.get("s1")
    assert not r.lifecycle.pinned and r.lifecycle.anchor_at == clock.t and r.salience == pytest.approx(0.4)
    clock.advance(DAY)
    assert m.get("s1").salience == pytest.approx(0.2)  # decay restarts from the unpin
    rows = m.audit_rows("s1")
    assert rows[-2].details["pinned"] == {"before": False, "after": True}
    assert rows[-1].details["pinned"] == {"before": True, "after": False}
    assert_intact(m)


def test_reclassify(m, clock):
    m.import_records([semantic("s1")])
    clock.advance(timedelta(minutes=5))
    m.reclassify("s1", "ivy", "contains a customer name", sensitivity="high", scope="beta", tags=["pii", "x"])
    r = m.get("s1")
    assert (r.sensitivity.value, r.scope, r.tags, r.updated_at) == ("high", "beta", ["pii", "x"], clock.t)
    e = m.audit_rows("s1")[-1]
    assert e.entry.action.value == "revise"
    for text_ in ("low", "high", "alpha", "beta", "pii", "contains a customer name"):
        assert text_ in e.entry.rationale
    assert e.details == {"sensitivity": {"before": "low", "after": "high"},
                         "scope": {"before": "alpha", "after": "beta"},
                         "tags": {"before": ["t1"], "after": ["pii", "x"]}}
    m.reclassify("s1", "ivy", "only the scope", scope="")
    assert m.get("s1").scope == "" and m.get("s1").sensitivity.value == "high"
    with pytest.raises(ValidationError) as err:
        m.reclassify("s1", "ivy", "r", sensitivity="secret")
    assert err.value.problems[0][0] == "sensitivity"
    with pytest.raises(ValidationError):
        m.reclassify("s1", "ivy", "nothing to change")
    with pytest.raises(ValidationError) as err:
        m.reclassify("s1", "ivy", "r", tags="pii")
    assert err.value.problems[0][0] == "tags"
    assert_intact(m)


# --------------------------------------------------------------------------- delete, restore, prune


def test_delete_and_restore(m, clock):
    m.import_records([semantic("s1"), semantic("keep", lifecycle=lifecycle(deletion_policy="never")),
                      semantic("man", lifecycle=lifecycle(deletion_policy="manual_only"))])
    log_before = m.audit_log("s1")
    clock.advance(DAY)
    m.delete("s1", "jo", "obsolete")
    assert "s1" not in m.ids() and m.archived_ids() == ["s1"]
    with pytest.raises(NotFoundError):
        m.get("s1")
    log = m.audit_log("s1")  # the history stays readable
    assert log[:-1] == log_before and log[-1].action.value == "delete" and "obsolete" in log[-1].rationale
    with pytest.raises(ValidationError) as err:
        m.delete("keep", "jo", "try")
    assert err.value.problems[0][0] == "lifecycle.deletion_policy"
    m.delete("man", "jo", "manual_only leaves this way")
    m.restore("s1", "jo", "needed after all")
    assert "s1" in m.ids() and m.archived_ids() == ["man"]
    e = m.audit_log("s1")[-1]
    assert e.action.value == "revise" and e.rationale == "restored from archive: needed after all"
    with pytest.raises(AlreadyExistsError):
        m.restore("s1", "jo", "already live")
    with pytest.raises(NotFoundError):
        m.restore("never-existed", "jo", "x")
    assert_intact(m)


def test_prune_eligibility_and_dry_run(m, clock):
    old = {"updated_at": "2026-01-01T12:00:00Z"}  # 59 days of decay at T0: S ~ 1e-18
    m.import_records([
        semantic("stale", **old),
        semantic("stale_pinned", lifecycle=lifecycle(pinned=True), **old),
        semantic("stale_manual", lifecycle=lifecycle(deletion_policy="manual_only"), **old),
        semantic("stale_never", lifecycle=lifecycle(deletion_policy="never"), **old),
        semantic("fresh"),
        semantic("floored", lifecycle=lifecycle(decay={"min_salience": 0.01}), **old),
        working("expired", created_at="2026-02-01T00:00:00Z",
                lifecycle=lifecycle(decay={"max_age_seconds": 3600, "half_life_seconds": 10 ** 9})),
    ])
    assert m.prune("kim", "sweep") == ["expired", "stale"]  # dry run by default
    assert m.archived_ids() == [] and len(m.ids()) == 7
    # as_of moves the evaluation instant: in 20 days "fresh" is below 0.001 too
    assert m.prune("kim", "sweep", as_of=T0 + 20 * DAY) == ["expired", "fresh", "stale"]
    assert m.prune("kim", "sweep", as_of=(T0 + 20 * DAY).replace(tzinfo=None)) == ["expired", "fresh", "stale"]
    assert m.prune("kim", "nightly sweep", dry_run=False) == ["expired", "stale"]
    assert sorted(m.archived_ids()) == ["expired", "stale"]
    assert sorted(m.ids()) == ["floored", "fresh", "stale_manual", "stale_never", "stale_pinned"]
    e = m.audit_rows("stale")[-1]
    assert e.entry.action.value == "delete" and "nightly sweep" in e.entry.rationale
    assert e.details["salience"] < 0.001 and e.details["archived"] is True
    assert m.prune("kim", "again", dry_run=False) == []
    with pytest.raises(ValidationError):
        m.prune("kim", "r", as_of="yesterday")
    assert_intact(m)


def test_new_records_created_by_operations_verify_and_read_back(m):
    m.import_records([semantic("a"), semantic("b")])
    m.supersede("a", semantic("a2"), "op", "r")
    m.fork("a2", semantic("a3"), "op", "r")
    m.merge(["a3", "b"], semantic("m"), "op", "r")
    for rid in ("a2", "a3", "m"):
        r = m.get(rid)
        assert r.audit_log[0].action.value == "create"
        assert not math.isnan(r.salience)
    assert_intact(m)
