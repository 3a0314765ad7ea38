"""The review queue (membrane_engine/review.py): contested records beside what contests them and
records about to be pruned, through an operator's clearance, on each database."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest

from membrane_engine import Membrane, TrustContext
from membrane_engine.errors import ValidationError
from membrane_engine.rules.salience import PRUNE_THRESHOLD

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
ALL = TrustContext(max_sensitivity="hyper")
LOW_ALPHA = TrustContext(max_sensitivity="low", scopes=["alpha"])
ACTOR = "operator:ann"


@pytest.fixture
def m(store_url: str) -> Iterator[Membrane]:
    mem = Membrane.open(store_url, load_sample=False, clock=lambda: NOW)
    yield mem
    mem.close()


def fact(rid: str, subject: str, sensitivity: str = "low", scope: str = "alpha", salience: float = 0.8,
         half_life: int = 86400, **lifecycle) -> dict:
    return {"id": rid, "type": "semantic", "sensitivity": sensitivity, "confidence": 0.9, "salience": salience,
            "scope": scope, "created_at": "2026-02-01T00:00:00Z", "updated_at": "2026-03-01T12:00:00Z",
            "lifecycle": {"decay": {"curve": "exponential", "half_life_seconds": half_life},
                          "deletion_policy": "auto_prune", **lifecycle},
            "payload": {"kind": "semantic", "subject": subject, "predicate": "is", "object": "x",
                        "evidence": [{"source_type": "doc", "source_id": rid}]}}


def test_contested_records_come_with_what_contests_them(m: Membrane) -> None:
    m.import_records([fact("a", "alpha claim"), fact("b", "bravo rebuttal"), fact("c", "charlie claim")])
    m.contest("a", "b", ACTOR, "b disagrees")
    m.contest("c", "ticket-42", ACTOR, "an outside report")
    q = m.review_queue(ALL)
    assert q.contested_total == 2 and q.contested_withheld == 0
    by_id = {item.record.id: item for item in q.contested}
    assert by_id["a"].label == "alpha claim is x"
    [contester] = by_id["a"].contesters
    assert (contester.record_id, contester.label, contester.via) == ("b", "bravo rebuttal is x", ("audit", "relation"))
    [external] = by_id["c"].contesters
    assert (external.record_id, external.ref, external.via) == (None, "ticket-42", ("audit",))
    assert by_id["c"].rationale == "an outside report"  # the reason; the contester is named above
    m.reinstate("a", ACTOR, "a holds")
    assert [item.record.id for item in m.review_queue(ALL).contested] == ["c"]


def test_contested_beyond_the_clearance_is_counted_never_shown(m: Membrane) -> None:
    m.import_records([fact("seen", "visible claim"), fact("secret", "classified claim", sensitivity="hyper"),
                      fact("medium", "medium claim", sensitivity="medium"),
                      fact("other", "other scope claim", scope="beta"),
                      fact("spy", "hidden contester", sensitivity="high")])
    for rid in ("seen", "secret", "medium", "other"):
        m.contest(rid, "spy", ACTOR, "disputed")
    q = m.review_queue(LOW_ALPHA)
    assert q.contested_total == 2  # seen (full) and medium (redacted)
    assert q.contested_withheld == 2  # secret (hyper) and other (scope beta)
    by_id = {item.record.id: item for item in q.contested}
    assert set(by_id) == {"seen", "medium"}
    assert by_id["seen"].contesters == () and by_id["seen"].contesters_withheld == 1  # the spy is counted
    redacted = by_id["medium"]
    assert redacted.record.redacted and redacted.record.payload is None
    assert redacted.label == "redacted semantic record"
    assert redacted.contesters == () and redacted.rationale is None
    text = repr(q)
    for leak in ("classified", "other scope", "hidden contester", "medium claim"):
        assert leak not in text
    # (The record "seen" itself is seen in full, its own relations and rationale with it; what
    # contests it is only counted.)
    assert "spy" not in repr(by_id["seen"].contesters) + repr(redacted) + by_id["seen"].rationale
    assert by_id["seen"].rationale == "disputed"


def test_records_about_to_be_pruned_with_when(m: Membrane) -> None:
    day = 86400
    m.import_records([
        fact("gone", "already faded", salience=0.0005),
        fact("soon", "fades in days", salience=0.5, half_life=day),  # below 0.001 after log2(500) days
        fact("later", "fades slowly", salience=0.5, half_life=30 * day),
        fact("pinned", "kept", salience=0.0005, pinned=True),
        fact("manual", "manual only", salience=0.0005, deletion_policy="manual_only"),
        fact("hyper", "secret fading", salience=0.0005, sensitivity="hyper"),
    ])
    q = m.review_queue(LOW_ALPHA, horizon=timedelta(days=14))
    by_id = {p.record_id: p for p in q.pruning}
    assert set(by_id) == {"gone", "soon"} and q.pruning_withheld == 1
    assert by_id["gone"].eligible_now and by_id["gone"].prune_at == NOW
    expected = NOW + timedelta(seconds=day * math.log2(0.5 / PRUNE_THRESHOLD))
    assert abs((by_id["soon"].prune_at - expected).total_seconds()) < 1
    assert not by_id["soon"].eligible_now and by_id["soon"].label == "fades in days is x"
    assert m.salience_at("soon", by_id["soon"].prune_at + timedelta(seconds=1)) < PRUNE_THRESHOLD
    assert m.salience_at("soon", by_id["soon"].prune_at - timedelta(seconds=1)) >= PRUNE_THRESHOLD
    # Eligible now: exactly what prune would take (through an all-seeing clearance).
    everything = m.review_queue(ALL, horizon=timedelta(0))
    assert sorted(p.record_id for p in everything.pruning) == sorted(m.prune(ACTOR, "dry run")) == ["gone", "hyper"]
    # Within a week, "soon" is not yet (log2(500) days is about 9).
    week = m.review_queue(LOW_ALPHA)
    assert {p.record_id for p in week.pruning} == {"gone"}
    assert "secret fading" not in repr(q)


def test_review_queue_arguments_are_checked(m: Membrane) -> None:
    with pytest.raises(ValidationError, match="horizon"):
        m.review_queue(ALL, horizon=timedelta(days=-1))
    with pytest.raises(ValidationError, match="limit"):
        m.review_queue(ALL, limit=10_001)
    with pytest.raises(ValidationError, match="clearance"):
        m.review_queue("everyone")


def test_a_record_relabelled_while_the_queue_is_read_is_shown_as_read(store_url: str, monkeypatch) -> None:
    """SPEC 4, "the gate decides on what it returns": another process raises a contested
    record to hyper between the queue's index look-up (which saw it low) and the read of its
    content. It is listed, if at all, under the labels read with its content: never in full
    as hyper. (PostgreSQL reads each statement afresh, so there the record drops out; SQLite
    reads one snapshot, so there it is listed as it was, low.)"""
    from membrane_engine.curation import review

    reader = Membrane.open(store_url, load_sample=False, clock=lambda: NOW)
    writer = Membrane.open(store_url, load_sample=False, clock=lambda: NOW)
    try:
        writer.import_records([fact("a", "alpha claim"), fact("b", "bravo claim"), fact("ref", "a rebuttal")])
        writer.contest("a", "ref", ACTOR, "disputed")
        writer.contest("b", "ref", ACTOR, "disputed")
        looked_up = review._contest_refs

        def relabel_in_between(conn, ids):
            writer.reclassify("a", ACTOR, "raised", sensitivity="hyper")
            return looked_up(conn, ids)

        monkeypatch.setattr(review, "_contest_refs", relabel_in_between)
        q = reader.review_queue(LOW_ALPHA)
        listed = {item.record.id: item for item in q.contested}
        assert "b" in listed and listed["b"].record.payload is not None
        if "a" in listed:
            assert listed["a"].record.sensitivity.value == "low" and listed["a"].label == "alpha claim is x"
        monkeypatch.setattr(review, "_contest_refs", looked_up)
        after = reader.review_queue(LOW_ALPHA)  # read afresh: hyper is beyond a low clearance
        assert [item.record.id for item in after.contested] == ["b"] and after.contested_withheld == 1
    finally:
        reader.close()
        writer.close()


def test_the_newest_contest_comes_first(store_url: str) -> None:
    """Ordered by each record's newest contest entry; a record contested again moves up, and the
    limit lists the first ones of that order with their own contest entries."""
    when = [NOW]
    m = Membrane.open(store_url, load_sample=False, clock=lambda: when[0])
    try:
        m.import_records([fact(r, f"{r} claim") for r in ("a", "b", "c")])
        for hours, rid in ((1, "a"), (2, "b"), (3, "c")):
            when[0] = NOW + timedelta(hours=hours)
            m.contest(rid, f"ticket-{rid}", ACTOR, f"first doubt about {rid}")
        assert [i.record.id for i in m.review_queue(ALL, as_of=when[0]).contested] == ["c", "b", "a"]
        when[0] = NOW + timedelta(hours=4)
        m.contest("a", "ticket-a2", ACTOR, "a again")
        q = m.review_queue(ALL, as_of=when[0], limit=2)
        assert [i.record.id for i in q.contested] == ["a", "c"] and q.contested_total == 3
        first = q.contested[0]
        assert first.rationale == "a again" and first.contested_at == NOW + timedelta(hours=4)
        assert {c.ref for c in first.contesters} == {"ticket-a", "ticket-a2"}
        # Seen redacted, records are listed after the others by id: when each was contested is
        # in the audit a redacted view withholds.
        m.import_records([fact(r, f"{r} secret", sensitivity="high") for r in ("x", "y")])
        for hours, rid in ((5, "x"), (6, "y")):  # y contested last: newest first would put it first
            when[0] = NOW + timedelta(hours=hours)
            m.contest(rid, f"ticket-{rid}", ACTOR, "doubt")
        q = m.review_queue(TrustContext(max_sensitivity="medium"), as_of=when[0])
        assert [(i.record.id, i.record.redacted) for i in q.contested] == [
            ("a", False), ("c", False), ("b", False), ("x", True), ("y", True)]
    finally:
        m.close()


def test_contest_entries_known_by_their_rationale_alone(m: Membrane) -> None:
    """Records that came through Membrane's format carry their audit entries without details:
    a contest entry is then known by the rationale this engine words it with, so the queue still
    says when, why and by what each was contested, and orders them by it. A revise that is not a
    contest is not taken for one."""
    def contested(rid: str, entries: list[tuple[str, str]]) -> dict:
        doc = fact(rid, f"{rid} claim")
        doc["payload"]["revision"] = {"status": "contested"}
        doc["audit_log"] = [{"action": "create", "actor": "agent", "timestamp": "2026-02-01T00:00:00Z",
                             "rationale": "observed"}]
        doc["audit_log"] += [{"action": "revise", "actor": ACTOR, "timestamp": ts, "rationale": why}
                             for ts, why in entries]
        return doc

    m.import_records([
        contested("old", [("2026-02-10T09:00:00Z", "contested by ticket-1: first report")]),
        contested("new", [("2026-02-12T09:00:00Z", "contested: no source given"),
                          ("2026-02-20T09:00:00Z", "tightened the wording")]),  # a revise, not a contest
    ])
    q = m.review_queue(ALL)
    assert [i.record.id for i in q.contested] == ["new", "old"]
    new, old = q.contested
    assert (new.contested_at, new.rationale) == (datetime(2026, 2, 12, 9, tzinfo=timezone.utc), "no source given")
    assert (old.contested_at, old.rationale) == (datetime(2026, 2, 10, 9, tzinfo=timezone.utc), "first report")
    assert [(c.ref, c.via) for c in old.contesters] == [("ticket-1", ("audit",))]
    assert new.contesters == ()
