"""A small store for the page tests of decay, selector, audit, curate and import/export, used
until (and alongside) the bundled sample store: a few records of every selector-relevant type
with known numbers. Named uniquely so it never collides with other test folders' helpers."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

UTC = timezone.utc
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
DAY = 86400


def iso(when: datetime) -> str:
    return when.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z"


def record(rid: str, type_: str, payload: dict[str, Any], *, sensitivity: str = "low", scope: str = "",
           salience: float = 0.8, confidence: float = 0.9, age_days: float = 2, half_life_days: float = 3,
           min_salience: float = 0.0, reinforced_days_ago: float | None = None, tags: list[str] | None = None,
           pinned: bool = False, policy: str = "auto_prune", audit: list[dict] | None = None) -> dict[str, Any]:
    created = NOW - timedelta(days=age_days)
    lifecycle: dict[str, Any] = {
        "decay": {"curve": "exponential", "half_life_seconds": int(half_life_days * DAY),
                  "min_salience": min_salience, "max_age_seconds": 0, "reinforcement_gain": 0.2},
        "pinned": pinned, "deletion_policy": policy,
    }
    if reinforced_days_ago is not None:
        lifecycle["last_reinforced_at"] = iso(NOW - timedelta(days=reinforced_days_ago))
    return {
        "id": rid, "type": type_, "sensitivity": sensitivity, "confidence": confidence, "salience": salience,
        "scope": scope, "tags": tags or [], "created_at": iso(created), "updated_at": iso(created),
        "lifecycle": lifecycle, "provenance": {"sources": [{"kind": "observation", "ref": f"obs-{rid}"}]},
        "relations": [], "payload": payload,
        "audit_log": audit if audit is not None else [
            {"action": "create", "actor": "agent-7", "timestamp": iso(created), "rationale": f"learned {rid}"}],
    }


def competence(rid: str, skill: str, ok: int, bad: int, **kw: Any) -> dict[str, Any]:
    return record(rid, "competence", {
        "kind": "competence", "skill_name": skill, "triggers": [{"signal": "deploy failed"}],
        "recipe": [{"step": "check logs", "tool": "bash"}], "required_tools": ["bash"],
        "performance": {"success_count": ok, "failure_count": bad, "success_rate": 0.0}, "version": "1"}, **kw)


def plan(rid: str, intent: str, failure_rate: float, runs: int, **kw: Any) -> dict[str, Any]:
    return record(rid, "plan_graph", {
        "kind": "plan_graph", "plan_id": f"plan-{rid}", "version": "1", "intent": intent,
        "nodes": [{"id": "a", "op": "build"}, {"id": "b", "op": "test"}],
        "edges": [{"from": "a", "to": "b", "kind": "control"}],
        "metrics": {"avg_latency_ms": 12.0, "failure_rate": failure_rate, "execution_count": runs}}, **kw)


def semantic(rid: str, subject: str, obj: Any, **kw: Any) -> dict[str, Any]:
    return record(rid, "semantic", {
        "kind": "semantic", "subject": subject, "predicate": "is", "object": obj,
        "validity": {"mode": "global"}, "evidence": [{"source_type": "doc", "source_id": "d1"}],
        "revision": {"status": "active"}}, **kw)


def episodic(rid: str, **kw: Any) -> dict[str, Any]:
    return record(rid, "episodic", {
        "kind": "episodic", "timeline": [{"t": iso(NOW - timedelta(days=3)), "event_kind": "tool", "ref": "r1",
                                          "summary": "ran the deploy"}], "outcome": "success"}, **kw)


def small_store() -> list[dict[str, Any]]:
    """Ten records: three competences and two plans (selector candidates), semantic facts
    (one with a markup-laden tag), an episode, a pinned and a never-delete record, and one
    fading record that a prune 30 days on would take."""
    reinforce = [
        {"action": "create", "actor": "agent-7", "timestamp": iso(NOW - timedelta(days=5)), "rationale": "learned"},
        {"action": "reinforce", "actor": "operator-ann", "timestamp": iso(NOW - timedelta(days=1)),
         "rationale": "used successfully"},
    ]
    return [
        competence("comp-deploy-a", "deploy via blue/green", 90, 10, confidence=0.95, reinforced_days_ago=0.05,
                   tags=["deploy", "ops"], scope="project-alpha", audit=reinforce),
        competence("comp-deploy-b", "deploy via rolling restart", 50, 50, confidence=0.70, reinforced_days_ago=15,
                   tags=["deploy"], scope="project-alpha"),
        competence("comp-deploy-c", "deploy by hand", 20, 80, confidence=0.40, reinforced_days_ago=60,
                   tags=["deploy", "legacy"], scope="project-alpha", sensitivity="medium"),
        plan("plan-release", "cut a release", 0.1, 40, confidence=0.8, reinforced_days_ago=3, tags=["release"],
             scope="project-alpha"),
        plan("plan-rollback", "roll back a release", 0.3, 10, confidence=0.6, tags=["release"],
             scope="infra-ops", sensitivity="high"),
        semantic("fact-python", "python", "3.11", tags=["toolchain"], salience=0.9, half_life_days=10,
                 min_salience=0.05),
        semantic("fact-markup", "**bold** <script>alert(1)</script>", "[link](http://x)", tags=["<b>x</b>", "odd"],
                 salience=0.5),
        episodic("ep-deploy-1", tags=["deploy", "incident"], salience=0.6, half_life_days=1),
        semantic("fact-pinned", "pinned", True, pinned=True, salience=0.7, policy="never", tags=["keep"]),
        semantic("fact-fading", "fading", "soon gone", salience=0.05, half_life_days=0.5, tags=["fading"]),
    ]
