"""Shared by the gate tests (SPEC 4, "the gate decides on what it returns"): a small store
whose records carry, in their payload, a canary naming the labels they were written under,
and a judge that says whether a record handed to a trust context went beyond it.

Every record starts at sensitivity ``low`` in scope ``alpha``, and the context under test is
``max_sensitivity=low, scopes=[alpha]``. A relabel moves a record to ``hyper`` (hidden), to
``medium`` (redacted: one level above) or to scope ``beta`` (hidden), and writes nothing else,
so the labels a returned record carries are its labels when it was read.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from membrane_engine import TrustContext

UTC = timezone.utc
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
CONTEXT = TrustContext(max_sensitivity="low", authenticated=True, actor_id="agent-gate", scopes=["alpha"])
FOREIGN = "beta"
# relabel name -> (reclassify arguments, what CONTEXT must get afterwards)
RELABELS: dict[str, tuple[dict[str, str], str]] = {
    "hyper": ({"sensitivity": "hyper"}, "hidden"),
    "medium": ({"sensitivity": "medium"}, "redacted"),
    "foreign-scope": ({"scope": FOREIGN}, "hidden"),
}
TYPES = ("semantic", "competence", "plan_graph", "working", "episodic", "entity")
LEVEL = {"public": 0, "low": 1, "medium": 2, "high": 3, "hyper": 4}


def canary(record_id: str) -> str:
    """The marker in a record's payload: only a full view may carry it."""
    return f"CANARY-{record_id}"


def payload(type_: str, record_id: str) -> dict[str, Any]:
    mark = canary(record_id)
    if type_ == "semantic":
        return {"kind": "semantic", "subject": mark, "predicate": "is", "object": "x", "validity": {"mode": "global"}}
    if type_ == "competence":
        return {"kind": "competence", "skill_name": mark, "triggers": [{"signal": "deploy " + mark}],
                "performance": {"success_count": 9, "failure_count": 1, "success_rate": 0.9}}
    if type_ == "plan_graph":
        return {"kind": "plan_graph", "plan_id": mark, "version": "1", "intent": "deploy " + mark,
                "nodes": [{"id": "n1", "op": "build"}], "edges": [],
                "metrics": {"avg_latency_ms": 1.0, "failure_rate": 0.1, "execution_count": 3}}
    if type_ == "working":
        return {"kind": "working", "thread_id": "t", "state": "executing", "context_summary": mark}
    if type_ == "episodic":
        return {"kind": "episodic", "timeline": [{"t": "2026-06-01T11:00:00Z", "event_kind": "tool", "ref": "r",
                                                  "summary": mark}], "outcome": "success"}
    if type_ == "entity":
        return {"kind": "entity", "canonical_name": mark, "primary_type": "thing", "aliases": []}
    raise ValueError(type_)


def record(record_id: str, type_: str, salience: float = 0.9, confidence: float = 0.9) -> dict[str, Any]:
    return {
        "id": record_id, "type": type_, "sensitivity": "low", "confidence": confidence, "salience": salience,
        "scope": "alpha", "tags": ["gate"], "created_at": "2026-05-01T12:00:00Z",
        "updated_at": "2026-06-01T12:00:00Z",
        "lifecycle": {"decay": {"curve": "exponential", "half_life_seconds": 10 ** 8, "min_salience": 0,
                                "reinforcement_gain": 0.1},
                      "last_reinforced_at": "2026-06-01T00:00:00Z", "pinned": False,
                      "deletion_policy": "auto_prune"},
        "provenance": {"sources": [{"kind": "observation", "ref": "obs-" + record_id}]},
        "payload": payload(type_, record_id),
        "audit_log": [],
    }


def store_records(per_type: int = 2) -> list[dict[str, Any]]:
    """``per_type`` records of every type, ids ``<type>-<n>``; salience falls with n, so the
    order of a retrieve is fixed."""
    return [record(f"{t}-{n}", t, salience=0.9 - 0.01 * n) for t in TYPES for n in range(per_type)]


def full_allowed(sensitivity: Any, scope: Any, trust: TrustContext = CONTEXT) -> bool:
    """SPEC 3's "full", written here independently of the engine."""
    level = LEVEL.get(getattr(sensitivity, "value", sensitivity), 99)
    scope = scope or ""
    return level <= trust.max_sensitivity.level and (not trust.scopes or scope == "" or scope in trust.scopes)


def as_dict(item: Any) -> dict[str, Any]:
    return item if isinstance(item, dict) else item.to_json_dict()


def leaks(items: list[Any], trust: TrustContext = CONTEXT) -> list[str]:
    """Ids of records handed out in full (a payload present) although their own labels do not
    allow it, or carrying a canary although redacted."""
    out = []
    for item in items:
        doc = as_dict(item)
        text = str(doc.get("payload"))
        if doc.get("payload") is not None and not full_allowed(doc.get("sensitivity"), doc.get("scope"), trust):
            out.append(doc["id"])
        elif doc.get("payload") is None and "CANARY-" in str(doc):
            out.append(doc["id"])
        elif "CANARY-" in text and canary(doc["id"]) not in text:
            out.append(doc["id"])
    return out
