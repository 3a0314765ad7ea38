"""Membrane's pkg/retrieval tests (trust_test.go, filter_test.go, selector_test.go,
helpers_test.go, vector_test.go at 8408c8c) that are observable through our API, on both
databases: the trust gate, the redacted view, salience filtering and sorting, the selector's
scores, retrieve_by_id and retrieve_by_type.

Left to the ranking work (SPEC 4 step 5 and SPEC 9), not here: the order with a task
descriptor or a vector ranker (TestRankRecordsWithSelectionPromotesSelectedThenSalienceSorts-
Remainder, TestRetrieveUsesVectorRankerForAllRecordTypes, TestRetrieveUsesPrecomputedQuery-
Embedding, TestRetrieveVectorRankerErrorFallsBackToSalience, TestRetrieveAppliesMinSalience-
SelectionRankingAndLimit, TestRankByVector*), graph_test.go, TestRelationBoostAndLexicalMatch
(graph helpers), TestSelectorSelectScoresAndRanksCandidates' similarity provider and
TestRetrieveByIDAndEmbeddingServicePath's embedding calls (the embedder). Not ported:
TestRetrievePropagatesStoreErrors (failing Go store doubles; ours: tests/security/test_faults.py),
Allows(nil) / allowsScope(nil) / Redact(nil) (no nil record reaches the gate in Python)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from membrane_engine import Membrane, RetrieveRequest, TrustContext
from membrane_engine.errors import AccessDeniedError, NilTrustError, ValidationError

from membrane_kit import T0, go_record, iso, semantic_payload, trust

CREATED = datetime(2026, 5, 1, 10, 0, tzinfo=timezone.utc)


def semantic(rid: str, salience: float, sensitivity: str = "low", scope: str = "", **fields) -> dict:
    """vector_test.go newSemanticRetrievalRecord (anchored at T0, so S(T0) = salience)."""
    doc = go_record(rid, payload=semantic_payload(rid, "retrievable"), sensitivity=sensitivity, salience=salience,
                    created_at=iso(CREATED), updated_at=iso(T0), **fields)
    if scope:
        doc["scope"] = scope
    return doc


def ids(records) -> list[str]:
    return [r.id for r in records]


def verdict(m: Membrane, rid: str, ctx: TrustContext) -> str:
    return m.explain(rid, ctx, as_of=T0).verdict.value


# --------------------------------------------------------------------------- trust_test.go


def test_trust_allows_rejects_invalid_max_sensitivity():
    """trust_test.go TestTrustAllowsRejectsInvalidMaxSensitivity: Go denies everything to a
    context with an unknown maximum; here the context itself is refused (pydantic boundary)."""
    with pytest.raises(Exception) as err:
        TrustContext(max_sensitivity="invalid", authenticated=True, actor_id="actor", scopes=[])
    assert "max_sensitivity" in str(err.value)


def test_trust_allows_redacted_honors_scope(mem: Membrane):
    """trust_test.go TestTrustAllowsRedactedHonorsScope"""
    mem.import_records([semantic("in-scope", 0.5, "medium", "project:a"),
                        semantic("out-of-scope", 0.5, "medium", "project:b")])
    ctx = trust("low", ["project:a"])
    assert verdict(mem, "in-scope", ctx) == "redacted"
    assert verdict(mem, "out-of-scope", ctx) == "hidden"


def test_trust_allows_scope_and_sensitivity_branches(mem: Membrane):
    """trust_test.go TestTrustAllowsScopeAndSensitivityBranches"""
    mem.import_records([semantic("unscoped-low", 0.5), semantic("other-low", 0.5, scope="project:b"),
                        semantic("medium-a", 0.5, "medium", "project:a"), semantic("low-a", 0.5, scope="project:a")])
    ctx = trust("low", ["project:a"])
    assert verdict(mem, "unscoped-low", ctx) == "full"
    assert verdict(mem, "other-low", ctx) == "hidden"
    assert verdict(mem, "medium-a", ctx) != "full"
    assert verdict(mem, "low-a", ctx) == "full"  # fully allowed: not the redacted view


def test_filter_by_sensitivity_skips_invalid_values(mem: Membrane):
    """trust_test.go TestFilterBySensitivitySkipsInvalidValues and TrustAllowsRejectsInvalid-
    RecordSensitivity: an unknown sensitivity never passes. SPEC 1 refuses such a record at
    import, so it cannot be in the store at all; the gate's own rule is tested in
    tests/rules/test_trust.py."""
    with pytest.raises(ValidationError) as err:
        mem.import_records([semantic("bad", 0.5, "invalid")])
    assert "sensitivity" in str(err.value)
    mem.import_records([semantic("ok-low", 0.6), semantic("ok-high", 0.5, "high")])
    got = mem.retrieve(RetrieveRequest(trust=trust("medium"), as_of=T0)).records
    assert [(r.id, r.redacted) for r in got] == [("ok-low", False), ("ok-high", True)]  # high: one above medium


# --------------------------------------------------------------------------- filter_test.go


def test_filter_by_salience_sensitivity_trust_and_sort(mem: Membrane):
    """filter_test.go TestFilterBySalienceSensitivityTrustAndSort"""
    mem.import_records([semantic("low", 0.2, "low", "project:a"), semantic("medium", 0.8, "medium", "project:a"),
                        semantic("high", 0.5, "high", "project:a"), semantic("out-of-scope", 1.0, "low", "project:b")])
    everything = trust("hyper")
    by_salience = mem.retrieve(RetrieveRequest(trust=everything, min_salience=0.5, as_of=T0)).records
    assert sorted(ids(by_salience)) == ["high", "medium", "out-of-scope"]  # inclusive threshold
    got = mem.retrieve(RetrieveRequest(trust=trust("low", ["project:a"]), as_of=T0)).records
    assert ids(got) == ["medium", "low"]  # low in full, medium redacted; sorted by salience
    assert got[0].redacted and got[0].payload is None and not got[1].redacted


def test_redact_copies_metadata_without_sharing_slices(mem: Membrane):
    """filter_test.go TestRedactCopiesMetadataWithoutSharingSlices"""
    rec = semantic("rec-1", 0.7, "medium", "project", tags=["tag-a", "tag-b"],
                   relations=[{"predicate": "related_to", "target_id": "other", "created_at": iso(T0)}],
                   interpretation={"summary": "private"}, confidence=0.8)
    rec["provenance"] = {"sources": [{"kind": "observation", "ref": "obs-1", "timestamp": iso(T0)}]}
    mem.import_records([semantic("other", 0.5), rec])
    (view,) = [r for r in mem.retrieve(RetrieveRequest(trust=trust("low"), as_of=T0)).records if r.id == "rec-1"]
    assert (view.id, view.type.value, view.scope, view.confidence) == ("rec-1", "semantic", "project", 0.8)
    assert view.payload is None and view.interpretation is None
    assert view.provenance.sources == [] and view.relations == [] and view.audit_log == []
    assert view.tags == ["tag-a", "tag-b"]
    view.tags[0] = "changed"
    assert mem.get("rec-1").tags[0] == "tag-a"
    decay = view.lifecycle.decay
    assert (decay.curve.value, decay.half_life_seconds, view.lifecycle.deletion_policy.value) == (
        "exponential", 0, "auto_prune")
    assert "private" not in view.model_dump_json()


# --------------------------------------------------------------------------- selector_test.go, helpers_test.go


def competence(rid: str, confidence: float, success: int, failure: int, reinforced: datetime) -> dict:
    """selector_test.go competenceCandidate"""
    payload = {"kind": "competence", "skill_name": rid, "triggers": None, "recipe": None,
               "performance": {"success_count": success, "failure_count": failure}}
    doc = go_record(rid, "competence", payload=payload, confidence=confidence, updated_at=iso(T0))
    doc["lifecycle"] = doc["lifecycle"] | {"last_reinforced_at": iso(reinforced)}
    return doc


def plan(rid: str, confidence: float, failure_rate: float, reinforced: datetime) -> dict:
    """selector_test.go planCandidate"""
    payload = {"kind": "plan_graph", "plan_id": rid, "version": "", "nodes": None, "edges": None,
               "metrics": {"execution_count": 4, "failure_rate": failure_rate}}
    doc = go_record(rid, "plan_graph", payload=payload, confidence=confidence, updated_at=iso(T0))
    doc["lifecycle"] = doc["lifecycle"] | {"last_reinforced_at": iso(reinforced)}
    return doc


def selection(m: Membrane, ctx: TrustContext | None = None):
    return m.retrieve(RetrieveRequest(trust=ctx or trust("hyper"), as_of=T0)).selection


def test_selector_select_scores_and_ranks_candidates(mem: Membrane):
    """selector_test.go TestSelectorSelectScoresAndRanksCandidates, without the similarity
    provider (applicability is the confidence, SPEC 5); the record without a payload is a
    redacted candidate here, scored 0.5 flat as Go scores a nil payload."""
    mem.import_records([plan("weak", 0.8, 0.6, T0 - timedelta(days=90)),
                        competence("strong", 0.1, 9, 1, T0 + timedelta(minutes=1)),
                        plan("no-payload", 1.0, 0.0, T0) | {"sensitivity": "medium"}])
    result = selection(mem, trust("low"))
    assert ids(result.selected) == ["strong", "no-payload", "weak"]
    assert result.scores["strong"] == pytest.approx((0.1 + 0.9 + 1.0) / 3)
    assert result.scores["no-payload"] == 0.5
    assert result.scores["weak"] == pytest.approx((0.8 + 0.4 + 0.5 ** 3) / 3)
    best, second = result.scores["strong"], 0.5
    assert result.confidence == pytest.approx((best - second) / best) and result.confidence > 0


def test_selector_empty_single_and_success_rate_defaults(mem: Membrane, store_url):
    """selector_test.go TestSelectorEmptySingleAndSuccessRateDefaults (threshold 0.75)"""
    m = Membrane.open(store_url, load_sample=False, clock=lambda: T0, selector_threshold=0.75)
    try:
        assert selection(m) is None  # no candidate evaluated: SPEC 4 step 6 (Go: empty, needs_more)
        m.import_records([competence("single", 0.9, 1, 0, T0 - timedelta(minutes=1))])
        result = selection(m)
        assert ids(result.selected) == ["single"] and result.confidence > 0 and not result.needs_more
    finally:
        m.close()
    mem.import_records([plan("plan", 1.0, 0.25, T0)])
    # a plan with executions: success signal 1 - failure_rate (0.75); the defaults without
    # counts are in test_success_rate_defaults_without_counts
    result = selection(mem)
    assert result.scores["plan"] == pytest.approx((1.0 + 0.75 + 1.0) / 3)


def test_single_candidate_confidence_is_clamped_to_one(mem: Membrane):
    """selector_test.go TestSelectorEmptySingleAndSuccessRateDefaults "overconfident": Go feeds
    a confidence of 3 to show the clamp; SPEC 1 refuses a confidence above 1, so the clamp is
    reached with the highest valid score instead and the result never exceeds 1."""
    with pytest.raises(ValidationError):
        mem.import_records([competence("overconfident", 3, 1, 0, T0 + timedelta(minutes=1))])
    mem.import_records([competence("top", 1.0, 1, 0, T0 + timedelta(minutes=1))])
    result = selection(mem)
    assert result.scores["top"] == 1.0 and result.confidence == 1.0


def test_success_rate_defaults_without_counts(mem: Membrane):
    """selector_test.go extractSuccessRate: 0.5 for a competence or plan without counts."""
    bare_c = go_record("c", "competence", payload={"kind": "competence", "triggers": None, "recipe": None},
                       confidence=0.0, updated_at=iso(T0))
    bare_p = go_record("p", "plan_graph", payload={"kind": "plan_graph", "plan_id": "p", "version": "",
                                                   "nodes": None, "edges": None}, confidence=0.0, updated_at=iso(T0))
    for doc in (bare_c, bare_p):
        doc["lifecycle"] = doc["lifecycle"] | {"last_reinforced_at": "0001-01-01T00:00:00Z"}
    mem.import_records([bare_c, bare_p])
    result = selection(mem)
    assert result.scores == {"c": pytest.approx((0 + 0.5 + 0.5) / 3), "p": pytest.approx((0 + 0.5 + 0.5) / 3)}


@pytest.mark.parametrize("reinforced, low, high", [
    (None, 0.5, 0.5),                                  # zero time: neutral
    (T0 + timedelta(hours=1), 1.0, 1.0),               # future
    (T0 - timedelta(hours=1), 0.99, 1.0),              # recent
    (T0 - timedelta(days=60), 0.24, 0.26),             # two 30-day half-lives
])
def test_selector_recency_scores(mem: Membrane, reinforced, low, high):
    """helpers_test.go TestSelectorRecencyScores, through the score (applicability 0,
    success 0.5 without counts: score = (0.5 + recency) / 3)."""
    doc = go_record("r", "competence", payload={"kind": "competence", "triggers": None, "recipe": None},
                    confidence=0.0, updated_at=iso(T0))
    doc["lifecycle"] = doc["lifecycle"] | {"last_reinforced_at": iso(reinforced) if reinforced else
                                           "0001-01-01T00:00:00Z"}
    mem.import_records([doc])
    recency = selection(mem).scores["r"] * 3 - 0.5
    assert low - 1e-9 <= recency <= high + 1e-9


# --------------------------------------------------------------------------- retrieve_by_id, retrieve_by_type


def test_retrieve_by_id(mem: Membrane):
    """selector_test.go TestRetrieveByIDAndEmbeddingServicePath (the by-id half)"""
    mem.import_records([semantic("retrievable", 0.8), semantic("denied", 0.9, "hyper")])
    low = trust("low")
    assert mem.retrieve_by_id("retrievable", low).id == "retrievable"
    with pytest.raises(NilTrustError):
        mem.retrieve_by_id("retrievable", None)
    with pytest.raises(AccessDeniedError):
        mem.retrieve_by_id("denied", low)
    got = mem.retrieve(RetrieveRequest(trust=low, memory_types=["semantic"], limit=1, as_of=T0)).records
    assert ids(got) == ["retrievable"]


def test_retrieve_rejects_nil_request(mem: Membrane):
    """vector_test.go TestRetrieveRejectsNilRequest: a request without trust."""
    with pytest.raises(NilTrustError):
        mem.retrieve(RetrieveRequest(trust=None))


def test_retrieve_by_type_filters_trust_and_sorts(mem: Membrane):
    """vector_test.go TestRetrieveByTypeFiltersTrustAndSorts"""
    mem.import_records([semantic("low", 0.9), semantic("redacted", 0.8, "medium"), semantic("denied", 1.0, "hyper")])
    got = mem.retrieve_by_type("semantic", trust("low"), as_of=T0)
    assert ids(got) == ["low", "redacted"]
    assert got[1].payload is None
    with pytest.raises(NilTrustError):
        mem.retrieve_by_type("semantic", None)
