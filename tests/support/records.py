"""Helpers shared by the engine tests: a record factory in Membrane's JSON shape, trust
contexts, and a fixed clock. (Named uniquely so it never collides with other test folders.)"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone
from typing import Any

from membrane_engine import TrustContext

UTC = timezone.utc
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)  # a fixed "now" for every engine test
HOUR = 3600
DAY = 86400


class Clock:
    """A clock an engine test moves: ``Membrane.open(..., clock=clock)``, then ``clock.at(days)``
    (days after T0); it stands at T0 until moved."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def at(self, days: float) -> None:
        self.now = T0 + timedelta(days=days)


def iso(when: datetime) -> str:
    return when.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z"


def default_payload(type_: str) -> dict[str, Any]:
    if type_ == "episodic":
        return {"kind": "episodic", "timeline": [{"t": iso(T0), "event_kind": "tool", "ref": "r1",
                                                  "summary": "ran a tool"}], "outcome": "success"}
    if type_ == "working":
        return {"kind": "working", "thread_id": "th-1", "state": "executing",
                "next_actions": ["write the test"]}
    if type_ == "semantic":
        return {"kind": "semantic", "subject": "python", "predicate": "version", "object": "3.11",
                "validity": {"mode": "global"}}
    if type_ == "competence":
        return {"kind": "competence", "skill_name": "deploy",
                "performance": {"success_count": 1, "failure_count": 1, "success_rate": 0.5}}
    if type_ == "plan_graph":
        return {"kind": "plan_graph", "plan_id": "p1", "version": "1", "intent": "ship",
                "nodes": [{"id": "n1", "op": "build"}, {"id": "n2", "op": "test"}],
                "edges": [{"from": "n1", "to": "n2", "kind": "control"}],
                "metrics": {"avg_latency_ms": 10.0, "failure_rate": 0.2, "execution_count": 5}}
    if type_ == "entity":
        return {"kind": "entity", "canonical_name": "Postgres", "primary_type": "database",
                "aliases": ["pg"]}
    raise ValueError(type_)


def rec(record_id: str, type_: str = "semantic", *, sensitivity: str = "low", scope: str = "",
        salience: float = 1.0, confidence: float = 0.9, created_at: datetime = T0,
        updated_at: datetime | None = None, curve: str = "exponential", half_life: int = DAY,
        min_salience: float = 0.0, max_age: int = 0, points: list | None = None,
        pinned: bool = False, anchor: tuple[float, datetime] | None = None,
        last_reinforced_at: datetime | None = None, payload: dict | None = None,
        deletion_policy: str = "auto_prune", tags: list[str] | None = None,
        relations: list[dict] | None = None, provenance: dict | None = None,
        audit_log: list[dict] | None = None, **extra: Any) -> dict[str, Any]:
    """One record as Membrane JSON. ``anchor=(S_a, a)`` writes the extension fields."""
    decay: dict[str, Any] = {"curve": curve, "half_life_seconds": half_life, "min_salience": min_salience,
                             "max_age_seconds": max_age, "reinforcement_gain": 0.1}
    if points is not None:
        decay["points"] = points
    lifecycle: dict[str, Any] = {"decay": decay, "pinned": pinned, "deletion_policy": deletion_policy}
    if last_reinforced_at is not None:
        lifecycle["last_reinforced_at"] = iso(last_reinforced_at)
    if anchor is not None:
        lifecycle["anchor_salience"] = anchor[0]
        lifecycle["anchor_at"] = iso(anchor[1])
    doc: dict[str, Any] = {
        "id": record_id, "type": type_, "sensitivity": sensitivity, "confidence": confidence,
        "salience": salience, "scope": scope, "tags": list(tags or []),
        "created_at": iso(created_at), "updated_at": iso(updated_at or created_at),
        "lifecycle": lifecycle,
        "provenance": copy.deepcopy(provenance) if provenance is not None else {"sources": []},
        "relations": copy.deepcopy(relations or []),
        "payload": copy.deepcopy(payload) if payload is not None else default_payload(type_),
    }
    if audit_log is not None:
        doc["audit_log"] = copy.deepcopy(audit_log)
    doc.update(extra)
    return doc


def competence(record_id: str, *, confidence: float, successes: int, failures: int,
               reinforced: datetime | None, success_rate: float = 0.0, **kw: Any) -> dict[str, Any]:
    payload = {"kind": "competence", "skill_name": record_id,
               "performance": {"success_count": successes, "failure_count": failures,
                               "success_rate": success_rate}}
    return rec(record_id, "competence", confidence=confidence, payload=payload,
               last_reinforced_at=reinforced, **kw)


def trust(max_sensitivity: str = "medium", scopes: list[str] | None = None, **kw: Any) -> TrustContext:
    return TrustContext(max_sensitivity=max_sensitivity, authenticated=True, actor_id="tester",
                        scopes=list(scopes or []), **kw)


def ago(seconds: float, base: datetime = T0) -> datetime:
    return base - timedelta(seconds=seconds)


def later(seconds: float, base: datetime = T0) -> datetime:
    return base + timedelta(seconds=seconds)


def fact(rid: str, subject: str, predicate: str, obj: Any, sensitivity: str = "low") -> dict[str, Any]:
    """A semantic record with evidence (so it may be superseded)."""
    return rec(rid, "semantic", sensitivity=sensitivity,
               payload={"kind": "semantic", "subject": subject, "predicate": predicate, "object": obj,
                        "validity": {"mode": "global"}, "evidence": [{"source_type": "doc", "source_id": "d1"}]})


def revised_store(store_url: str):
    """A store at T0 with live, retracted and superseded facts and skills (the label search and
    revision-flag tests): for a fixture to ``yield from``."""
    from membrane_engine import Membrane

    m = Membrane.open(store_url, load_sample=False, clock=lambda: T0)
    m.import_records([
        fact("keep", "python", "version", "3.12"),
        fact("gone", "python", "version", "3.10"),
        fact("old", "postgres", "version", "15"),
        fact("secret", "Vault Root", "rotates_every", {"days": 30, "owner": "ops"}, sensitivity="medium"),
        rec("skill", "competence"),
        rec("skill-2", "competence", payload={"kind": "competence", "skill_name": "rollback"}),
    ])
    m.retract("gone", "ops:ann", "wrong version")
    m.supersede("old", fact("new", "postgres", "version", "16"), "ops:ann", "upgraded")
    m.retract("skill", "ops:ann", "broken recipe")
    try:
        yield m
    finally:
        m.close()
