"""SPEC 7: store metrics on a small hand-built store with known answers."""

from __future__ import annotations

import pytest

from tests.support.records import DAY, HOUR, T0, ago, iso, rec


def audit(*actions: str) -> list[dict]:
    return [{"action": a, "actor": "someone", "timestamp": iso(ago(HOUR * (len(actions) - i))), "rationale": a}
            for i, a in enumerate(actions)]


STORE = [
    rec("a", "semantic", salience=0.2, pinned=True, confidence=0.5, created_at=ago(2 * HOUR),
        audit_log=audit("create", "reinforce", "reinforce", "revise")),
    rec("b", "working", salience=1.3, pinned=True, confidence=1.0, created_at=ago(3 * DAY),
        audit_log=audit("create", "fork", "merge", "decay")),
    rec("c", "episodic", salience=0.0, confidence=0.0, created_at=ago(10 * DAY)),
    rec("d", "competence", salience=0.5, half_life=DAY, confidence=0.8, created_at=ago(2 * DAY), updated_at=ago(DAY),
        payload={"kind": "competence", "performance": {"success_count": 3, "failure_count": 1, "success_rate": 0.1}}),
    rec("e", "competence", salience=0.6, pinned=True, confidence=0.6, created_at=ago(HOUR),
        payload={"kind": "competence", "performance": {"success_count": 1, "failure_count": 1, "success_rate": 0.9}}),
    rec("f", "competence", salience=0.4, pinned=True, confidence=0.7, created_at=ago(5 * DAY),
        payload={"kind": "competence"}),
    rec("g", "plan_graph", salience=0.8, pinned=True, confidence=0.9, created_at=T0,
        payload={"kind": "plan_graph", "metrics": {"failure_rate": 0.1, "execution_count": 5}}),
    rec("h", "plan_graph", salience=0.79999, pinned=True, confidence=0.1, created_at=ago(30 * DAY),
        payload={"kind": "plan_graph", "metrics": {"failure_rate": 0.0, "execution_count": 0}}),
    rec("i", "plan_graph", salience=0.4, pinned=True, confidence=0.3, created_at=ago(100 * DAY),
        payload={"kind": "plan_graph"}),
    rec("j", "entity", salience=1.0, max_age=DAY, confidence=0.2, created_at=ago(10 * DAY)),
]


def test_metrics_known_answers(mem):
    mem.import_records(STORE)
    got = mem.metrics(as_of=T0)
    assert got == {
        "total_records": 10,
        "records_by_type": {"working": 1, "entity": 1, "semantic": 1, "competence": 3, "plan_graph": 3, "episodic": 1},
        "avg_salience": pytest.approx((0.2 + 1.3 + 0 + 0.25 + 0.6 + 0.4 + 0.8 + 0.79999 + 0.4 + 0) / 10),
        "avg_confidence": pytest.approx(0.51),
        "salience_distribution": {"0.0-0.2": 2, "0.2-0.4": 2, "0.4-0.6": 2, "0.6-0.8": 2, "0.8-1.0": 2},
        "active_records": 8,
        "pinned_records": 7,
        "total_audit_entries": 18,  # the two records that brought a history also get the importer's entry
        "memory_growth_rate": pytest.approx(0.3),
        "retrieval_usefulness": pytest.approx(2 / 18),
        # The stored success_rate of d and e (f has no performance block), as Membrane's
        # GetMetrics averages it; the counts (3/4 and 1/2) are the selector's signal only.
        "competence_success_rate": pytest.approx((0.1 + 0.9) / 2),
        "plan_reuse_frequency": pytest.approx(2.5),
        "revision_rate": pytest.approx(3 / 18),
    }


def test_metrics_move_with_as_of(mem):
    mem.import_records(STORE)
    got = mem.metrics(as_of=T0 + (T0 - ago(2 * DAY)))  # two days later
    # d has decayed from 0.5 (anchored a day before T0) over three half-lives; nothing new was created
    assert got["avg_salience"] == pytest.approx((0.2 + 1.3 + 0.5 / 8 + 0.6 + 0.4 + 0.8 + 0.79999 + 0.4) / 10)
    assert got["salience_distribution"] == {"0.0-0.2": 3, "0.2-0.4": 1, "0.4-0.6": 2, "0.6-0.8": 2, "0.8-1.0": 2}
    assert got["memory_growth_rate"] == 0.0
    assert got["active_records"] == 8


@pytest.mark.parametrize("value, bucket", [
    (0.0, "0.0-0.2"), (0.1999999, "0.0-0.2"), (0.2, "0.2-0.4"), (0.4, "0.4-0.6"), (0.6, "0.6-0.8"),
    (0.7999999, "0.6-0.8"), (0.8, "0.8-1.0"), (1.0, "0.8-1.0"), (1.3, "0.8-1.0"), (57.0, "0.8-1.0"),
])
def test_bucket_bounds(lite, value, bucket):
    lite.import_records([rec("x", salience=value, pinned=True)])
    dist = lite.metrics(as_of=T0)["salience_distribution"]
    assert dist[bucket] == 1 and sum(dist.values()) == 1


def test_metrics_of_an_empty_store(mem):
    got = mem.metrics(as_of=T0)
    assert got["total_records"] == 0 and got["total_audit_entries"] == 0
    assert got["avg_salience"] == got["avg_confidence"] == got["memory_growth_rate"] == 0.0
    assert got["retrieval_usefulness"] == got["revision_rate"] == 0.0
    assert got["competence_success_rate"] == got["plan_reuse_frequency"] == 0.0
    assert set(got["salience_distribution"].values()) == {0}
    assert got["records_by_type"] == {t: 0 for t in ["working", "entity", "semantic", "competence", "plan_graph", "episodic"]}


def test_audit_counts_follow_writes_by_this_and_other_processes(mem, store_url):
    """Metrics count audit entries incrementally (only those after the last counted): after
    writes by this Membrane and another one (reinforce, import, delete, a merge) they equal a
    count of the whole table."""
    from membrane_engine import Membrane
    from membrane_engine.oversight.metrics import compute_metrics

    def counted_in_full() -> dict[str, int]:
        with mem.store.read() as conn:
            return dict(conn.exec_driver_sql("SELECT action, count(*) FROM audit_entries GROUP BY action").all())

    mem.import_records(STORE)
    first = mem.metrics()
    assert first["total_audit_entries"] == sum(counted_in_full().values())
    other = Membrane.open(store_url, load_sample=False, clock=lambda: T0)
    try:
        other.reinforce("d", "op", "used")
        mem.reinforce("e", "op", "used")
        other.import_records([rec("z", "semantic", audit_log=audit("create", "reinforce", "revise"))])
        mem.delete("c", "op", "gone")
        other.penalize("z", 0.1, "op", "wrong")
        assert mem.action_counts.current() == counted_in_full()
        later = mem.metrics()
        assert later["total_audit_entries"] == first["total_audit_entries"] + 8  # z: 3 brought + the importer's
        assert later == compute_metrics(mem.store, mem.columns.current(), T0)  # counted in full
    finally:
        other.close()


def test_metrics_at_a_past_instant_count_only_what_existed_then(mem):
    """An instant in the past counts the records created by then and the audit entries written by
    then, not the ones that came later (issue 22: "as of" counted everything)."""
    mem.import_records(STORE)
    mem.reinforce("d", "op", "used")  # written at T0, after the instant below
    past = ago(4 * DAY)
    got = mem.metrics(as_of=past)
    existed = [r for r in STORE if r["created_at"] <= iso(past)]
    assert {r["id"] for r in existed} == {"c", "f", "h", "i", "j"}
    assert got["total_records"] == len(existed) == 5
    assert got["records_by_type"]["plan_graph"] == 2 and got["records_by_type"]["semantic"] == 0
    assert got["pinned_records"] == 3  # f, h, i (g, a, b, e came later)
    assert got["avg_confidence"] == pytest.approx((0.0 + 0.7 + 0.1 + 0.3 + 0.2) / 5)
    assert got["competence_success_rate"] == 0.0  # d and e, the competences with performance, came later
    assert got["total_audit_entries"] == 0  # every entry of this store is from the last hours
    # Ninety minutes back: a and b's first three entries each, not the importer's (at T0).
    mid = ago(90 * 60)
    got = mem.metrics(as_of=mid)
    assert got["total_records"] == 8  # all but e (an hour ago) and g (T0)
    total, _ = mem.audit_query(until=mid, limit=1)
    reinforces, _ = mem.audit_query(until=mid, action="reinforce", limit=1)
    revisions = sum(mem.audit_query(until=mid, action=a, limit=1)[0] for a in ("revise", "fork", "merge"))
    now = mem.metrics()
    assert total == 6 < now["total_audit_entries"]
    assert got["total_audit_entries"] == total
    assert got["retrieval_usefulness"] == pytest.approx(reinforces / total) == pytest.approx(2 / 6)
    assert got["revision_rate"] == pytest.approx(revisions / total) == pytest.approx(2 / 6)
    assert now["retrieval_usefulness"] != got["retrieval_usefulness"]
    # Before anything existed: nothing at all.
    empty = mem.metrics(as_of=ago(1000 * DAY))
    assert empty["total_records"] == 0 and empty["total_audit_entries"] == 0
    # The overview's breakdown agrees with the metrics at that instant.
    from membrane_engine.oversight.metrics import store_breakdown

    breakdown = store_breakdown(mem.columns.current(), past)
    assert breakdown["total"] == 5 and sum(breakdown["by_scope"].values()) == 5


def test_a_past_instant_asked_again_counts_only_the_new_entries_and_stays_exact(store_url):
    """The entries after a past instant are kept counted per instant and brought up to date by
    the entries written since (by this process or another): after writes dated after the
    instant, and one dated before it (a clock set back), the answer equals a fresh count."""
    from membrane_engine import Membrane
    from membrane_engine.oversight.metrics import compute_metrics

    clock = {"now": T0}
    mem = Membrane.open(store_url, load_sample=False, clock=lambda: clock["now"])
    other = Membrane.open(store_url, load_sample=False, clock=lambda: T0)
    try:
        mem.import_records(STORE)
        past = ago(90 * 60)
        first = mem.metrics(as_of=past)
        assert len(mem.action_counts._after) == 1  # the instant is kept counted
        mem.reinforce("d", "op", "used")  # at T0: after the instant
        other.penalize("e", 0.1, "op", "wrong")  # another process, also after it
        again = mem.metrics(as_of=past)
        audit_fields = ("total_audit_entries", "retrieval_usefulness", "revision_rate")
        # Entries written after the instant change none of its audit counts (salience is another
        # matter: S(past) is computed from a record's current anchor).
        assert [again[k] for k in audit_fields] == [first[k] for k in audit_fields]
        assert again == compute_metrics(mem.store, mem.columns.current(), past)  # counted in full
        clock["now"] = ago(2 * 60 * 60)  # a clock set back: this entry is dated before the instant
        mem.reinforce("a", "op", "used earlier")
        moved = mem.metrics(as_of=past)
        assert moved["total_audit_entries"] == first["total_audit_entries"] + 1
        assert moved == compute_metrics(mem.store, mem.columns.current(), past)
    finally:
        other.close()
        mem.close()


def test_store_breakdown_known_answers(mem):
    """The overview's counts by type x sensitivity and by scope, at now and at a past instant."""
    from membrane_engine.oversight.metrics import store_breakdown

    mem.import_records([
        rec("s1", "semantic", sensitivity="low", scope="alpha", created_at=ago(3 * DAY)),
        rec("s2", "semantic", sensitivity="low", scope="alpha", created_at=ago(HOUR)),
        rec("s3", "semantic", sensitivity="hyper", scope="beta", created_at=ago(3 * DAY)),
        rec("e1", "episodic", sensitivity="public", created_at=ago(3 * DAY)),
        rec("w1", "working", sensitivity="medium", scope="beta", created_at=ago(3 * DAY)),
    ])
    got = store_breakdown(mem.columns.current(), T0)
    grid = got["by_type_sensitivity"]
    assert grid["semantic"] == {"public": 0, "low": 2, "medium": 0, "high": 0, "hyper": 1}
    assert grid["episodic"] == {"public": 1, "low": 0, "medium": 0, "high": 0, "hyper": 0}
    assert grid["working"] == {"public": 0, "low": 0, "medium": 1, "high": 0, "hyper": 0}
    assert grid["competence"] == {"public": 0, "low": 0, "medium": 0, "high": 0, "hyper": 0}
    assert got["unknown_sensitivity"] == 0
    assert got["total"] == 5 and got["by_scope"] == {"alpha": 2, "beta": 2, "": 1}
    assert list(got["by_scope"]) == ["alpha", "beta", ""]  # largest first, then by name
    earlier = store_breakdown(mem.columns.current(), ago(DAY))
    assert earlier["total"] == 4 and earlier["by_type_sensitivity"]["semantic"]["low"] == 1
    assert earlier["by_scope"] == {"alpha": 1, "beta": 2, "": 1}
