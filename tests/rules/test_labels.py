"""Records named by what they say (membrane_engine.rules.labels), through the trust gate."""

from __future__ import annotations

from membrane_engine import Membrane, TrustContext
from membrane_engine.retrieval.labels import labels
from membrane_engine.rules.labels import label


def _record(rid: str, rtype: str, payload: dict, sensitivity: str = "low", scope: str = "") -> dict:
    return {"id": rid, "type": rtype, "sensitivity": sensitivity, "confidence": 1, "salience": 1, "scope": scope,
            "created_at": "2026-11-01T00:00:00Z", "updated_at": "2026-11-01T00:00:00Z",
            "lifecycle": {"decay": {"curve": "exponential", "half_life_seconds": 86400}},
            "payload": {"kind": rtype, **payload}}


RECORDS = [
    _record("sem", "semantic", {"subject": "maya", "predicate": "prefers", "object": "tabs"}),
    _record("sem-obj", "semantic", {"subject": "svc", "predicate": "limits", "object": {"rps": 5}}),
    _record("skill", "competence", {"skill_name": "rotate the JWT key"}),
    _record("plan", "plan_graph", {"plan_id": "p1", "intent": "cut a release"}),
    _record("plan-noint", "plan_graph", {"plan_id": "p2"}),
    _record("ent", "entity", {"canonical_name": "Project Alpha", "primary_type": "project"}),
    _record("epi", "episodic", {"timeline": [{"t": "2026-11-01T00:00:00Z", "event_kind": "x", "ref": "r", "summary": "CI run 8"},
                                             {"t": "2026-11-01T00:01:00Z", "event_kind": "x", "ref": "r", "summary": "later"}]}),
    _record("epi-empty", "episodic", {"timeline": None}),
    _record("work", "working", {"thread_id": "t1", "state": "blocked", "context_summary": "waiting   for\nreview"}),
    _record("secret", "semantic", {"subject": "api", "predicate": "key", "object": "SECRET-123"}, sensitivity="high"),
    _record("far", "semantic", {"subject": "x", "predicate": "y", "object": "HIDDEN-456"}, sensitivity="hyper"),
    _record("beta", "semantic", {"subject": "x", "predicate": "y", "object": "BETA-789"}, scope="beta"),
]

EXPECTED = {
    "sem": "maya prefers tabs", "sem-obj": "svc limits rps: 5", "skill": "rotate the JWT key",
    "plan": "cut a release", "plan-noint": "p2", "ent": "Project Alpha", "epi": "CI run 8", "epi-empty": "epi-empty",
    "work": "blocked: waiting for review",
}


def test_each_type_is_named_by_what_it_says(tmp_path) -> None:
    m = Membrane.open(f"sqlite:///{tmp_path / 's.db'}", load_sample=False, embedder=None)
    m.import_records(RECORDS, actor="test")
    for rid, want in EXPECTED.items():
        assert label(m.get(rid)) == want
    assert label(m.get("work"), limit=10) == "blocked: …"


def test_labels_through_a_clearance_never_name_what_it_may_not_see(tmp_path) -> None:
    m = Membrane.open(f"sqlite:///{tmp_path / 's.db'}", load_sample=False, embedder=None)
    m.import_records(RECORDS, actor="test")
    medium_alpha = TrustContext(max_sensitivity="medium", scopes=["alpha"])
    got = labels(m, [r["id"] for r in RECORDS] + ["missing"], medium_alpha)
    assert got["secret"] == "redacted semantic record"
    assert "far" not in got and "beta" not in got and "missing" not in got
    assert got["sem"] == "maya prefers tabs"
    text = " ".join(got.values())
    assert "SECRET" not in text and "HIDDEN" not in text and "BETA" not in text
