"""Membrane's pkg/metrics tests (metrics_test.go at 8408c8c) ported to ``Membrane.metrics``
(SPEC 7), on both databases.

Not ported: TestCollectPropagatesListError (a failing Go store double; our store errors are
tested in tests/security/test_faults.py). Deviations asserted as SPEC says: metrics are
computed at ``as_of`` with S(as_of) (SPEC 2), and import appends the importer's own audit
entries (SPEC 6), so the audit-based rates are checked against the store's audit logs."""

from __future__ import annotations

from datetime import timedelta

import pytest

from membrane_engine import Membrane
from membrane_engine.storage.store import SQLITE_SCALAR_INDEX_NAME

from membrane_kit import T0, iso


def record(rid: str, type_: str, confidence: float, salience: float, created_ago: timedelta, payload: dict,
           audit: list[str] = (), pinned: bool = False) -> dict:
    # updated_at = T0 anchors S at T0, so S(T0) is the stored salience as in Go's test.
    life = {"decay": {"curve": "exponential", "half_life_seconds": 86400}, "last_reinforced_at": iso(T0)}
    if pinned:
        life["pinned"] = True
    return {"id": rid, "type": type_, "sensitivity": "low", "confidence": confidence, "salience": salience,
            "created_at": iso(T0 - created_ago), "updated_at": iso(T0), "lifecycle": life,
            "provenance": {"sources": None}, "payload": payload,
            "audit_log": [{"action": a, "actor": "", "timestamp": iso(T0 - created_ago), "rationale": ""}
                          for a in audit] or None}


GO_RECORDS = [
    record("semantic-1", "semantic", 0.8, 0.1, timedelta(hours=2),
           {"kind": "semantic", "subject": "Go", "predicate": "is", "object": "typed", "validity": {"mode": "global"}},
           audit=["reinforce", "revise"], pinned=True),
    record("competence-1", "competence", 0.6, 0.3, timedelta(hours=48),
           {"kind": "competence", "skill_name": "debug", "triggers": [{"signal": "panic"}],
            "recipe": [{"step": "read logs"}], "performance": {"success_rate": 0.75}}, audit=["fork"]),
    record("plan-1", "plan_graph", 1.0, 0.5, timedelta(minutes=30),
           {"kind": "plan_graph", "plan_id": "plan-1", "version": "1", "nodes": [{"id": "n1", "op": "test"}],
            "edges": [], "metrics": {"execution_count": 4}}),
    record("working-1", "working", 0.4, 0.7, timedelta(hours=25),
           {"kind": "working", "thread_id": "thread", "state": "executing"}),
    record("episode-1", "episodic", 0.2, 0.9, timedelta(hours=72), {"kind": "episodic", "timeline": None}),
]


def test_collect_computes_snapshot(mem: Membrane):
    """metrics_test.go TestCollectComputesSnapshot"""
    mem.import_records(GO_RECORDS)
    got = mem.metrics(as_of=T0)
    assert got["total_records"] == 5
    assert got["records_by_type"]["semantic"] == 1 and got["records_by_type"]["competence"] == 1
    assert got["records_by_type"]["plan_graph"] == 1
    assert got["active_records"] == 5 and got["pinned_records"] == 1
    assert got["salience_distribution"] == {"0.0-0.2": 1, "0.2-0.4": 1, "0.4-0.6": 1, "0.6-0.8": 1, "0.8-1.0": 1}
    assert got["avg_salience"] == pytest.approx(0.5, abs=1e-4)
    assert got["avg_confidence"] == pytest.approx(0.6, abs=1e-4)
    assert got["memory_growth_rate"] == pytest.approx(0.4, abs=1e-4)
    assert got["competence_success_rate"] == 0.75  # the stored success_rate, as GetMetrics averages
    assert got["plan_reuse_frequency"] == 4
    # Go counts the 3 entries the records carry (reinforce 1/3, revise + fork 2/3); here import
    # also writes the importer's entries (SPEC 6), which the rates count like any other.
    logs = [e.action.value for r in GO_RECORDS for e in mem.audit_log(r["id"])]
    assert got["total_audit_entries"] == len(logs) >= 3
    assert got["retrieval_usefulness"] == pytest.approx(logs.count("reinforce") / len(logs))
    assert got["revision_rate"] == pytest.approx(sum(logs.count(a) for a in ("revise", "fork", "merge")) / len(logs))


def test_competence_success_rate_is_the_mean_of_stored_rates_of_records_with_performance(mem: Membrane):
    """SPEC 7: the counts do not enter it (Membrane's GetMetrics), and a competence record
    without a performance block is left out; one with a block but no rate counts as 0."""
    base = GO_RECORDS[1]

    def competence(rid: str, performance: dict | None) -> dict:
        payload = dict(base["payload"])
        if performance is None:
            payload.pop("performance")
        else:
            payload["performance"] = performance
        return base | {"id": rid, "payload": payload, "audit_log": None}

    mem.import_records([competence("a", {"success_count": 9, "failure_count": 1, "success_rate": 0.2}),
                        competence("b", {"success_rate": 0.6}), competence("c", {}), competence("d", None)])
    assert mem.metrics(as_of=T0)["competence_success_rate"] == pytest.approx((0.2 + 0.6 + 0.0) / 3)


def test_collect_empty_store(mem: Membrane):
    """metrics_test.go TestCollectEmptyStore"""
    got = mem.metrics(as_of=T0)
    assert (got["total_records"], got["avg_salience"], got["memory_growth_rate"]) == (0, 0, 0)
    assert len(got["salience_distribution"]) == 5


def test_a_store_made_before_the_success_rate_column_gets_it_on_open(tmp_path):
    """Stores of schema version 1 made before ``records.success_rate`` existed are given the
    column, filled from their competence records, when opened."""
    from sqlalchemy import create_engine

    url = f"sqlite:///{tmp_path / 'old.db'}"
    m = Membrane.open(url, load_sample=False, clock=lambda: T0)
    m.import_records(GO_RECORDS)
    m.close()
    engine = create_engine(url)
    with engine.begin() as conn:  # the store as an older engine left it
        conn.exec_driver_sql(f"DROP INDEX {SQLITE_SCALAR_INDEX_NAME}")
        conn.exec_driver_sql("ALTER TABLE records DROP COLUMN success_rate")
    engine.dispose()
    m = Membrane.open(url, load_sample=False, clock=lambda: T0)
    try:
        assert m.metrics(as_of=T0)["competence_success_rate"] == 0.75
    finally:
        m.close()
