"""Membrane's pkg/ingestion tests (8408c8c: capture_test.go, capture_helpers_test.go,
capture_transaction_test.go, observation_test.go, tool_outcome_test.go, working_state_test.go,
classifier_test.go, policy_test.go, ingestion_error_test.go) ported to capture (SPEC 12), on
both databases; then the behaviour SPEC 12 adds: trust on write, scopes, one transaction, the
audit trail, ranking vectors, the preview and the operator's view.

Each test names the Go test it ports. Membrane's tests that reach into its Go service with
store doubles (a failing List, Create, Update or AddRelation) are ported as what they check:
that the failure refuses the capture, here by injecting a failure into the write and checking
that nothing is left. Tests that need an interpreter pass a stub, as Membrane's do. What is not
ported, and why, is listed in tests/membrane/README.md.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import text

from membrane_engine import CaptureMemoryRequest, Membrane, TrustContext
from membrane_engine.errors import AccessDeniedError, ValidationError
from membrane_engine.ingestion import capture as ingestion
from membrane_engine.ingestion import interpret as ip
from membrane_engine.ingestion.models import (
    Interpretation,
    Mention,
    ReferenceCandidate,
    RelationCandidate,
)
from membrane_engine.model.records import Relation
from membrane_engine.retrieval.graph import RetrieveGraphRequest, root_boost
from membrane_engine.storage import entity_index
from membrane_engine.storage.store import Store

from membrane_kit import T0, go_record

TS = datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc)


# ----------------------------------------------------------------------------- helpers


def entity(rid: str, name: str, scope: str = "", sensitivity: str = "low", aliases: list[Any] | None = None) -> dict:
    """observation_test.go newObservationEntity: a Project entity with its lower-case name as alias."""
    payload = {"kind": "entity", "canonical_name": name, "primary_type": "Project", "types": ["Project"],
               "aliases": [name.lower()] if aliases is None else aliases, "summary": f"{name} entity"}
    doc = go_record(rid, "entity", payload, sensitivity=sensitivity)
    if scope:
        doc["scope"] = scope
    return doc


def semantic(rid: str, subject: str, obj: Any = "tested", scope: str = "", sensitivity: str = "low") -> dict:
    """capture_helpers_test.go newHelperSemanticRecord."""
    doc = go_record(rid, "semantic", {"kind": "semantic", "subject": subject, "predicate": "is", "object": obj,
                                      "validity": {"mode": "global"}}, sensitivity=sensitivity)
    if scope:
        doc["scope"] = scope
    return doc


def episode(rid: str, ref: str, scope: str = "") -> dict:
    doc = go_record(rid, "episodic", {"kind": "episodic", "timeline": [
        {"t": "2026-05-01T10:00:00Z", "event_kind": "observation", "ref": ref, "summary": "Saw Orchid"}]})
    if scope:
        doc["scope"] = scope
    return doc


def capture(m: Membrane, **fields: Any):
    fields.setdefault("source", "tester")
    return m.capture_memory(fields)


class Stub:
    """capture_test.go stubInterpreter: a first pass and, optionally, a resolution pass."""

    def __init__(self, interpretation: Interpretation | None = None, resolved: Interpretation | None = None):
        self.interpretation, self.resolved = interpretation, resolved
        self.asked: list[str] = []

    def interpret(self, request, timestamp):
        self.asked.append("interpret")
        return self.interpretation

    def resolve(self, request, timestamp, interpretation, candidates):
        self.asked.append("resolve")
        self.candidates = candidates
        return self.resolved


def interpreted(m: Membrane, stub: Stub, **fields: Any):
    fields.setdefault("source", "tester")
    return ingestion.capture(m.context, fields, interpreter=stub)


def predicates(response) -> list[str]:
    return [e.predicate for e in response.edges]


def count_rows(m: Membrane, table: str) -> int:
    with m.store.read() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar())


# ----------------------------------------------------------------------------- capture_test.go


def test_captures_primary_record_entity_and_edges(mem: Membrane):
    """TestCaptureMemoryCreatesPrimaryRecordEntityAndEdges."""
    r = capture(mem, source_kind="event", content={"ref": "evt-1", "text": "Remember Orchid", "project": "Orchid"},
                context={"thread_id": "thread-1"}, reason_to_remember="Deploy vocabulary should be recoverable",
                summary="Remember Orchid", tags=["deploy"], scope="project:alpha", sensitivity="low", timestamp=TS)
    assert r.primary_record.type.value == "episodic"
    assert [c.type.value for c in r.created_records] == ["entity"]
    assert len(r.edges) == 2  # mentions_entity and mentioned_in
    got = mem.get(r.primary_record.id)
    assert got.interpretation["status"] == "resolved"
    mentions = got.interpretation["mentions"]
    assert len(mentions) == 1 and mentions[0]["canonical_entity_id"] == r.created_records[0].id
    assert got.payload.environment.context["reason_to_remember"] == "Deploy vocabulary should be recoverable"
    assert got.payload.environment.context["capture_content"]["project"] == "Orchid"
    assert got.payload.environment.context["capture_context"] == {"thread_id": "thread-1"}


def test_empty_sensitivity_means_low(mem: Membrane):
    """TestCaptureMemoryDefaultsSensitivityAndPropagatesPrepareErrors (the default; the failing
    candidate listing it also injects is a store double: see the rollback tests)."""
    r = capture(mem, source_kind="observation", content={"subject": "Orchid", "predicate": "is", "object": "ready"})
    assert {rec.sensitivity.value for rec in [r.primary_record, *r.created_records]} == {"low"}


def test_capture_without_interpreter_uses_the_fallback_interpretation(mem: Membrane):
    """TestCaptureMemoryDirectNilInterpretationAndErrorBranches: no interpreter, a fallback
    interpretation; a request without a source is refused."""
    r = capture(mem, source_kind="event", content={"ref": "nil-interpretation", "summary": "nil interpretation"})
    interpretation = mem.get(r.primary_record.id).interpretation
    assert interpretation["proposed_type"] == "episodic" and interpretation["extraction_confidence"] == 0.25
    with pytest.raises(ValidationError, match="source"):
        mem.capture_memory({"source_kind": "event"})
    assert mem.count() == 1


def test_reference_to_an_entity_and_to_the_capture_itself(mem: Membrane):
    """TestCaptureMemoryDirectReferenceBranchesAndFinalizeError: an interpreter's reference to an
    entity resolves with its entity target and confidence 1, and its new mention gets an
    entity; a reference to the capture's own event resolves to the capture, without an edge.
    (The failing final update is a store double: see the rollback tests.)"""
    mem.import_records([entity("entity-reference-target", "Orchid")])
    stub = Stub(Interpretation(mentions=[Mention(surface="New Entity", entity_kind="project")],
                               reference_candidates=[ReferenceCandidate(target_entity_id="entity-reference-target")]))
    r = interpreted(mem, stub, source_kind="event", content={"id": "evt-entity-ref", "text": "references entity"})
    ref = ReferenceCandidate.model_validate(r.primary_record.interpretation["reference_candidates"][0])
    assert ref.resolved and ref.target_entity_id == "entity-reference-target" and ref.target_record_id == ""
    assert ref.confidence == 1
    mention = r.primary_record.interpretation["mentions"][0]
    assert mention["canonical_entity_id"] and mention["confidence"] == 1
    assert mem.get("entity-reference-target").relations[-1].predicate == "referenced_by"

    r = interpreted(mem, Stub(Interpretation(reference_candidates=[ReferenceCandidate(ref="evt-self")])),
                    source_kind="event", content={"id": "evt-self", "text": "references itself"})
    ref = r.primary_record.interpretation["reference_candidates"][0]
    assert ref["resolved"] and ref["target_record_id"] == r.primary_record.id
    assert "references_record" not in predicates(r)


@pytest.mark.parametrize("kind,content,field", [
    ("working_state", {"state": "planning"}, "thread_id"),
    ("tool_output", {"result": "ok"}, "tool_name"),
])
def test_primary_record_validation(mem: Membrane, kind: str, content: dict, field: str):
    """TestCreatePrimaryRecordPropagatesBranchErrors (validation), TestIngestToolOutputValidation-
    Errors and TestIngestWorkingStateValidationErrors (a missing tool name or thread)."""
    with pytest.raises(ValidationError, match=field) as refused:
        capture(mem, source_kind=kind, content=content)
    assert refused.value.problems[0][0] == f"content.{field}"
    assert mem.count() == 0


@pytest.mark.parametrize("fields,named", [
    ({"source_kind": "event"}, "source"),  # missing source
    ({"source": "tester", "sensitivity": "secret"}, "sensitivity"),
    ({"source": "tester", "source_kind": "tool_output", "content": {"tool_name": "rg"}, "sensitivity": "private"},
     "sensitivity"),
])
def test_request_validation(mem: Membrane, fields: dict, named: str):
    """TestIngestToolOutputValidationErrors, TestIngestObservationValidationErrors,
    TestPolicyValidateRejectsInvalidCandidates: a missing source or an unknown sensitivity is
    refused, naming the field (and nothing is written)."""
    with pytest.raises(ValidationError) as refused:
        mem.capture_memory(fields)
    assert refused.value.problems[0][0] == named
    assert mem.count() == 0


def test_content_id_is_the_event_ref(mem: Membrane):
    """TestCreatePrimaryRecordUsesContentIDAsEventRef."""
    r = capture(mem, source_kind="event", content={"id": "evt-123", "text": "lowercase event"}, summary="event summary")
    assert [e.ref for e in r.primary_record.payload.timeline] == ["evt-123"]
    r = capture(mem, source_kind="event", content={"text": "lowercase event without id"}, summary="event summary")
    (event,) = r.primary_record.payload.timeline
    assert event.ref and event.ref != "id"
    assert r.primary_record.provenance.sources[0].ref == event.ref


def test_working_state_capture(mem: Membrane):
    """TestCreatePrimaryRecordCapturesWorkingState: an unknown state is executing; actions,
    questions and constraints kept; the reason is the context summary. And
    TestIngestWorkingStateCreatesProvenancedWorkingRecord: the source ref is the thread."""
    r = capture(mem, source="planner", source_kind="working_state",
                content={"thread_id": "thread-1", "state": "not-a-valid-state", "next_actions": ["run tests"],
                         "open_questions": ["which env?"],
                         "active_constraints": [{"type": "env", "key": "target", "value": "staging", "required": True}]},
                reason_to_remember="track current task", tags=["working"], scope="project:alpha", timestamp=TS)
    p = r.primary_record.payload
    assert r.primary_record.type.value == "working"
    assert p.thread_id == "thread-1" and p.state.value == "executing"
    assert p.context_summary == "track current task" and p.next_actions == ["run tests"]
    assert p.open_questions == ["which env?"] and p.active_constraints[0].key == "target"
    assert p.active_constraints[0].required is True
    (source,) = r.primary_record.provenance.sources
    assert source.ref == "thread-1" and source.created_by == "planner" and source.kind.value == "event"
    assert r.primary_record.payload.model_extra == {} and "environment" not in r.primary_record.payload.model_dump()
    assert mem.get(r.primary_record.id).payload.state.value == "executing"


def test_working_state_keeps_a_valid_state_and_creates_nothing_else(mem: Membrane):
    """TestCaptureMemoryWorkingStateCreatesWorkingPrimaryRecord."""
    r = capture(mem, source_kind="working_state", scope="project:alpha",
                content={"thread_id": "thread-1", "state": "planning", "context_summary": "Investigating Orchid",
                         "active_constraints": [{"type": "environment", "key": "region", "value": "us-east",
                                                 "required": True}]})
    assert r.primary_record.type.value == "working" and r.created_records == []
    assert r.primary_record.payload.state.value == "planning"
    assert [c.key for c in r.primary_record.payload.active_constraints] == ["region"]
    assert r.primary_record.payload.context_summary == "Investigating Orchid"


def test_tool_output_capture(mem: Membrane):
    """TestCreatePrimaryRecordCapturesToolOutputContext and
    TestIngestToolOutputCreatesEpisodicToolGraph."""
    args = {"pattern": "panic", "path": "pkg"}
    result = {"matches": ["pkg/a.go", "pkg/b.go"]}
    r = capture(mem, source_kind="tool_output", content={"tool_name": "rg", "args": args, "result": result,
                                                         "depends_on": ["tool-parent"]},
                context={"cwd": "/repo"}, reason_to_remember="search result explains the next edit",
                tags=["search"], scope="project:alpha", sensitivity="medium", timestamp=TS)
    rec = mem.get(r.primary_record.id)
    assert rec.type.value == "episodic" and rec.sensitivity.value == "medium"
    assert rec.scope == "project:alpha" and rec.tags == ["search"] and rec.confidence == 0.9
    (node,) = rec.payload.tool_graph
    (event,) = rec.payload.timeline
    assert node.id and event.event_kind == "tool_call" and event.ref == node.id and event.t == TS
    assert event.summary == "tool_call: rg"
    assert node.tool == "rg" and node.args == args and node.result == result
    assert node.depends_on == ["tool-parent"] and node.timestamp == TS
    (source,) = rec.provenance.sources
    assert source.kind.value == "tool_call" and source.ref == node.id and source.created_by == "tester"
    assert rec.payload.environment.context["reason_to_remember"] == "search result explains the next edit"
    # tool_name is a mention (a Tool entity)
    assert [(c.payload.canonical_name, c.payload.primary_type) for c in r.created_records] == [("rg", "Tool")]


def test_interpreter_resolves_an_existing_entity(mem: Membrane):
    """TestCaptureMemoryInterpreterResolvesExistingEntity."""
    mem.import_records([entity("entity-existing", "Orchid")])
    stub = Stub(Interpretation(status="tentative", summary="Resolved Orchid mention", proposed_type="semantic",
                               mentions=[Mention(surface="Orchid", entity_kind="project", aliases=["orchid"],
                                                 confidence=0.9)], extraction_confidence=0.9))
    r = interpreted(mem, stub, source_kind="event", content={"ref": "evt-2", "text": "Use Orchid for rollout"},
                    scope="project:alpha")
    assert r.created_records == []
    assert r.edges[0].target_id == "entity-existing"
    assert mem.get(r.primary_record.id).interpretation["mentions"][0]["canonical_entity_id"] == "entity-existing"
    assert stub.asked == ["interpret", "resolve"]


def test_explicit_fact_creates_a_semantic_record(mem: Membrane):
    """TestCaptureMemoryCreatesSecondarySemanticRecordForExplicitFact."""
    r = capture(mem, source_kind="observation", scope="project:alpha", tags=["deploy"],
                content={"subject": "Orchid", "predicate": "deploy_target_for", "object": "staging"})
    (ent,) = [c for c in r.created_records if c.type.value == "entity"]
    fact = r.derived_record
    assert fact is not None and fact.payload.predicate == "deploy_target_for" and fact.payload.object == "staging"
    assert fact.payload.subject == ent.id
    assert "derived_semantic" in predicates(r)
    assert any(e.predicate == "subject_entity" and e.source_id != r.primary_record.id and e.target_id == ent.id
               for e in r.edges)
    # Membrane's values for the derived record
    assert fact.confidence == 0.8 and fact.salience == 1.0 and fact.tags == ["deploy"]
    assert fact.payload.evidence[0].source_id == r.primary_record.id
    assert fact.payload.evidence[0].source_type == "episodic"
    assert fact.provenance.created_by == "tester"
    assert fact.interpretation["status"] == "resolved" and fact.interpretation["mentions"][0]["surface"] == ent.id
    assert [(rel.predicate, rel.target_id) for rel in mem.get(fact.id).relations] == [
        ("derived_from", r.primary_record.id), ("subject_entity", ent.id)]
    assert r.primary_record.payload.timeline[0].event_kind == "observation"


def test_interpreter_relation_candidates_are_materialized(mem: Membrane):
    """TestCaptureMemoryInterpreterMaterializesResolvedRelationCandidates."""
    mem.import_records([entity("entity-existing", "Orchid"), semantic("semantic-playbook", "rollout", "playbook")])
    stub = Stub(
        Interpretation(status="tentative", summary="Orchid depends on rollout playbook", proposed_type="semantic",
                       mentions=[Mention(surface="Orchid", entity_kind="project", confidence=0.9)],
                       relation_candidates=[RelationCandidate(predicate="depends_on", confidence=0.8)],
                       reference_candidates=[ReferenceCandidate(ref="playbook-ref", confidence=0.7)],
                       extraction_confidence=0.9),
        Interpretation(mentions=[Mention(surface="Orchid", entity_kind="project",
                                         canonical_entity_id="entity-existing", confidence=0.9)],
                       relation_candidates=[RelationCandidate(predicate="depends_on", target_record_id="semantic-playbook",
                                                              confidence=0.8, resolved=True)],
                       reference_candidates=[ReferenceCandidate(ref="playbook-ref", target_record_id="semantic-playbook",
                                                                confidence=0.7, resolved=True)],
                       extraction_confidence=0.9))
    r = interpreted(mem, stub, source_kind="event", content={"ref": "evt-3", "text": "Orchid uses the rollout playbook"},
                    scope="project:alpha")
    assert {"mentions_entity", "depends_on", "dependency_of", "references_record", "referenced_by"} <= set(predicates(r))
    got = mem.get(r.primary_record.id).interpretation
    assert got["status"] == "resolved"
    (rel,) = got["relation_candidates"]
    assert rel["resolved"] and rel["target_record_id"] == "semantic-playbook"
    (ref,) = got["reference_candidates"]
    assert ref["resolved"]
    depends = next(e for e in r.edges if e.predicate == "depends_on")
    assert depends.weight == 0.8


def test_unresolved_relation_keeps_the_interpretation_tentative(mem: Membrane):
    """TestCaptureMemoryKeepsInterpretationTentativeWhenRelationsRemainUnresolved."""
    stub = Stub(Interpretation(status="tentative", summary="Unresolved relation", proposed_type="semantic",
                               relation_candidates=[RelationCandidate(predicate="depends_on", confidence=0.4)]))
    r = interpreted(mem, stub, source_kind="event", content={"ref": "evt-4", "text": "depends on something"})
    assert mem.get(r.primary_record.id).interpretation["status"] == "tentative"


def test_resolver_targets_that_do_not_exist_are_cleared(mem: Membrane):
    """TestCaptureMemoryClearsResolverTargetsThatDoNotExist."""
    stub = Stub(Interpretation(status="tentative", summary="Invalid resolver target", proposed_type="semantic"),
                Interpretation(status="resolved",
                               relation_candidates=[RelationCandidate(predicate="depends_on",
                                                                      target_record_id="missing-record",
                                                                      confidence=0.9, resolved=True)],
                               reference_candidates=[ReferenceCandidate(ref="missing-ref", target_record_id="missing-record",
                                                                        confidence=0.9, resolved=True)],
                               extraction_confidence=0.9))
    r = interpreted(mem, stub, source_kind="event", content={"ref": "evt-invalid-resolver", "text": "missing"})
    assert all(e.target_id != "missing-record" for e in r.edges)
    got = mem.get(r.primary_record.id).interpretation
    assert "resolved" not in got["relation_candidates"][0] and "target_record_id" not in got["relation_candidates"][0]
    assert "resolved" not in got["reference_candidates"][0]
    assert "target_record_id" not in got["reference_candidates"][0]
    assert got["status"] == "tentative"


# ----------------------------------------------------------------------------- one transaction


def _failing(monkeypatch: pytest.MonkeyPatch, method: str) -> None:
    real = getattr(Store, method)

    def fail(self, *args, **kwargs):
        real(self, *args, **kwargs)  # the write happens, inside the transaction ...
        raise RuntimeError("forced relation write failure")  # ... which then fails

    monkeypatch.setattr(Store, method, fail)


@pytest.mark.parametrize("method", ["insert_rows", "write_updates", "insert_vectors"])
def test_a_failure_mid_capture_leaves_nothing(mem: Membrane, monkeypatch: pytest.MonkeyPatch, method: str):
    """TestCaptureMemoryRollsBackWhenRelationWriteFails, and the forced relation, create and
    update failures of TestCaptureMemoryReferenceAndSemanticErrorBranches,
    TestResolveMentionErrorsAndEntityDefaults, TestMaterializeRelationCandidatePropagates-
    RelationWriteError, TestMaybeCreateSemanticRecordGuardsAndRelationErrors and
    TestLinkRecordToCanonicalEntitiesPropagatesRelationErrors: a capture that fails while it is
    written (records, relations on an existing entity, the audit entries, the vectors) leaves
    the store as it was."""
    mem.import_records([entity("entity-orchid", "Orchid", "project:alpha"), episode("episode-ref", "evt-42")])
    before = {t: count_rows(mem, t) for t in ("records", "audit_entries", "record_vectors", "changes")}
    orchid = mem.get("entity-orchid").model_dump()
    _failing(monkeypatch, method)
    with pytest.raises(RuntimeError, match="forced"):
        capture(mem, source_kind="observation", scope="project:alpha",
                content={"ref": "evt-42", "project": "Orchid", "tool_name": "rg",
                         "subject": "Orchid", "predicate": "runs_on", "object": "staging"})
    monkeypatch.undo()
    assert {t: count_rows(mem, t) for t in before} == before
    assert mem.get("entity-orchid").model_dump() == orchid
    assert mem.verify_audit() == []
    # and the store still takes the same capture afterwards
    r = capture(mem, source_kind="observation", scope="project:alpha",
                content={"ref": "evt-42", "project": "Orchid", "subject": "Orchid", "predicate": "runs_on",
                         "object": "staging"})
    assert r.mentions[0].entity_id == "entity-orchid" and mem.verify_audit() == []


def test_a_batch_is_all_or_nothing(mem: Membrane):
    """Several captures in one transaction: a bad one (here the third, refused only when its
    primary record is built) leaves none of the others."""
    with pytest.raises(ValidationError, match="request 2") as refused:
        mem.capture_many([
            {"source": "a", "content": {"project": "Orchid"}},
            {"source": "a", "source_kind": "observation", "content": {"subject": "Orchid", "predicate": "is",
                                                                      "object": "ready"}},
            {"source": "a", "source_kind": "tool_output", "content": {"result": "no tool"}},
        ])
    assert refused.value.problems[0][0].startswith("2.")
    assert mem.count() == 0 and count_rows(mem, "audit_entries") == 0


def test_a_later_capture_of_a_batch_resolves_against_an_earlier_one(mem: Membrane):
    first, second = mem.capture_many([
        {"source": "a", "content": {"ref": "evt-1", "project": "Orchid"}},
        {"source": "a", "content": {"record_ref": "evt-1", "entity": "orchid"}},
    ])
    assert first.mentions[0].created and not second.mentions[0].created
    assert second.mentions[0].entity_id == first.mentions[0].entity_id
    ref = second.primary_record.interpretation["reference_candidates"][0]
    assert ref["resolved"] and ref["target_record_id"] == first.primary_record.id
    assert mem.verify_audit() == []


# ----------------------------------------------------------------------------- capture_helpers_test.go


def test_value_conversions():
    """TestCaptureHelperValueConversions (clamp01, summarizeContent, asObject)."""
    assert [ip.clamp01(v) for v in (-0.1, 0.4, 1.2)] == [0, 0.4, 1]
    assert ip.summarize_content("plain text") == "plain text"
    assert ip.summarize_content({"k": "v"}) == '{"k":"v"}'
    assert ip.summarize_content({"b": 1, "a": [2.0, "<&>"]}) == '{"a":[2,"\\u003c\\u0026\\u003e"],"b":1}'
    assert ip.summarize_content(object()) == ""
    assert ip.as_object({"a": 1}) == {"a": 1} and ip.as_object("not an object") == {}


@pytest.mark.parametrize("kind,want", [("person", "Person"), ("tool", "Tool"), ("project", "Project"), ("file", "File"),
                                       ("concept", "Concept"), ("other", "Other"), ("", "Other")])
def test_entity_type_from_mention_kind(kind: str, want: str):
    """TestEntityTypeFromMentionKind."""
    assert ip.entity_type(kind) == want


def test_fallback_helpers():
    """TestCaptureFallbackHelpers (firstNonEmpty, inferMentionsFromContent,
    inferReferenceCandidates)."""
    assert ip.first_non_empty(" ", "\t", "fallback") == "fallback" and ip.first_non_empty(" ", "\t") == ""
    mentions = ip.infer_mentions({"project": "", "tool_name": "rg"})
    assert [(m.surface, m.entity_kind, m.confidence) for m in mentions] == [("rg", "tool", 0.5)]
    refs = ip.infer_reference_candidates({"ref": ""}, {"record_id": "rec-1"})
    assert [(r.ref, r.confidence) for r in refs] == [("rec-1", 0.5)]
    # keys Membrane reads: any containing "entity" (not "entities"), subject, tool_name, project, file
    found = ip.infer_mentions({"entity_name": "A", "active_entities": "B", "file": "x.go", "subject": "C", "other": "D"})
    assert [m.surface for m in found] == ["A", "x.go", "C"]
    # values written as Go writes them; a JSON null is no value (deviation)
    assert [m.surface for m in ip.infer_mentions({"entity": 3.0, "project": None, "file": [1, "a"]})] == ["3", "[1 a]"]
    assert [r.ref for r in ip.infer_reference_candidates({"id": 12, "prefix": True}, None)] == ["12", "true"]


def test_working_state_has_no_capture_context(mem: Membrane):
    """TestCaptureFallbackHelpers (attachCaptureContext leaves a working payload alone)."""
    r = capture(mem, source_kind="working_state", content={"thread_id": "t", "state": "planning"})
    assert "environment" not in r.primary_record.payload.model_dump()


def test_merge_interpretations():
    """TestMergeInterpretationsNilAndOverrideFields."""
    override = Interpretation(status="resolved", summary="override", proposed_type="semantic", topical_labels=["override"],
                              mentions=[Mention(surface="Orchid")],
                              relation_candidates=[RelationCandidate(predicate="depends_on")],
                              reference_candidates=[ReferenceCandidate(ref="evt-1")], extraction_confidence=0.8)
    assert ip.merge_interpretations(None, override) is override
    base = Interpretation(status="tentative", summary="base", topical_labels=["base"])
    assert ip.merge_interpretations(base, None) is base
    got = ip.merge_interpretations(base, override)
    assert (got.status, got.summary, got.proposed_type) == ("resolved", "override", "semantic")
    assert got.topical_labels == ["base", "override"] and len(got.mentions) == 1
    assert len(got.relation_candidates) == 1 and len(got.reference_candidates) == 1 and got.extraction_confidence == 0.8
    assert base.summary == "base"  # the base is not changed


def test_entity_aliases_unique_mentions_and_status():
    """TestEntityAliasMentionAndInterpretationStatusHelpers."""
    rec = ingestion.build_entity(Mention(surface=" Orchid ", aliases=["", "\t", "Borealis", "orchid"]),
                                 CaptureMemoryRequest(source="t"), TS, T0)
    assert [a.value for a in rec.payload.aliases] == ["Orchid", "Borealis"]
    mentions = ip.unique_mentions([Mention(surface=" Orchid "), Mention(surface="orchid"), Mention(surface=" "),
                                   Mention(surface="Borealis")])
    assert [m.surface for m in mentions] == [" Orchid ", "Borealis"]
    resolved = Mention(surface="Orchid", canonical_entity_id="entity-orchid")
    assert ip.final_status(None) == "tentative"
    assert ip.final_status(Interpretation(mentions=[Mention(surface="Orchid")])) == "tentative"
    assert ip.final_status(Interpretation(mentions=[resolved], reference_candidates=[ReferenceCandidate(ref="obs-1")])) \
        == "tentative"
    assert ip.final_status(Interpretation(mentions=[resolved],
                                          reference_candidates=[ReferenceCandidate(ref="obs-1", resolved=True)],
                                          relation_candidates=[RelationCandidate(predicate="depends_on")],
                                          extraction_confidence=0.8)) == "tentative"
    assert ip.final_status(Interpretation(mentions=[resolved],
                                          reference_candidates=[ReferenceCandidate(ref="obs-1", resolved=True)],
                                          relation_candidates=[RelationCandidate(predicate="depends_on", resolved=True)])
                           ) == "resolved"


@pytest.mark.parametrize("kind,content,provenance,confidence,half_life,mtype", [
    ("event", {"ref": "e"}, "event", 0.8, 3600, "episodic"),
    ("", {"ref": "e"}, "event", 0.8, 3600, "episodic"),
    ("user_input", {"ref": "e"}, "event", 0.8, 3600, "episodic"),
    ("observation", {"ref": "e"}, "event", 0.8, 3600, "episodic"),
    ("tool_output", {"tool_name": "go test"}, "tool_call", 0.9, 3600, "episodic"),
    ("working_state", {"thread_id": "t", "state": "planning"}, "event", 1.0, 86400, "working"),
])
def test_classification_policy_and_provenance(mem: Membrane, kind: str, content: dict, provenance: str,
                                              confidence: float, half_life: int, mtype: str):
    """TestClassifierClassify, TestPolicyApplyAssignsExpectedDefaults and
    TestProvenanceKindForCandidateDefault as capture reaches them: the primary record's type,
    confidence, half-life, salience 1, auto_prune and provenance kind by source kind (an
    observation and any other kind are events, as CaptureMemory makes them)."""
    r = capture(mem, source_kind=kind, content=content, sensitivity="high")
    p = mem.get(r.primary_record.id)
    assert p.type.value == mtype and p.confidence == confidence and p.salience == 1.0
    assert p.lifecycle.decay.half_life_seconds == half_life and p.lifecycle.decay.curve.value == "exponential"
    assert p.lifecycle.deletion_policy.value == "auto_prune" and p.sensitivity.value == "high"
    assert p.provenance.sources[0].kind.value == provenance and p.provenance.created_by == "ingestion-service"
    if mtype == "episodic" and kind != "tool_output":
        assert p.payload.timeline[0].event_kind == (kind or "event")
    assert p.audit_log[0].actor == "ingestion-service"
    assert p.audit_log[0].rationale.startswith(f"Ingested {kind if kind in ('tool_output', 'working_state') else 'event'}")


def test_record_search_terms_cover_every_payload():
    """TestRecordSearchTermsCoversPayloadVariants."""
    ent = entity("entity", "Orchid", "project:alpha", aliases=["orchid alias"])
    ent["payload"]["summary"] = "deployment project"
    ent["tags"] = ["deploy"]
    ent["interpretation"] = {"summary": "interpreted entity", "topical_labels": ["infra"],
                             "mentions": [{"surface": "Orchid", "aliases": ["orchid project"]}]}
    joined = "\n".join(ip.record_search_terms(ent))
    for want in ("entity", "project:alpha", "deploy", "interpreted entity", "infra", "Orchid", "orchid project",
                 "orchid alias", "deployment project"):
        assert want in joined
    docs = {
        "depends_on": go_record("s", "semantic", {"kind": "semantic", "subject": "Orchid", "predicate": "depends_on",
                                                  "object": "Borealis"}),
        "evt-1": episode("e", "evt-1"),
        "which cluster?": go_record("w", "working", {"kind": "working", "thread_id": "thread-1", "state": "planning",
                                                     "context_summary": "planning deploy", "next_actions": ["run tests"],
                                                     "open_questions": ["which cluster?"]}),
        "debug deploy": go_record("c", "competence", {"kind": "competence", "skill_name": "debug deploy",
                                                      "required_tools": ["rg"]}),
        "deploy safely": go_record("p", "plan_graph", {"kind": "plan_graph", "plan_id": "plan-1",
                                                       "intent": "deploy safely"}),
    }
    for term, doc in docs.items():
        assert ip.record_matches_term(doc, term), term


def test_reference_matching_and_fact_extraction_edge_cases():
    """TestRecordMatchingReferenceAndSemanticExtractionEdgeCases."""
    assert not ip.record_matches_term(None, "orchid") and not ip.record_matches_term(semantic("s", "Orchid"), " ")
    ep = episode("episode", " EVT-1 ")
    assert ip.record_contains_reference(ep, "evt-1") and not ip.record_contains_reference(ep, "evt-2")
    assert not ip.record_contains_reference(None, "evt-1") and not ip.record_contains_reference(ep, " ")
    assert not ip.record_contains_reference(semantic("s", "Orchid", "project"), "evt-1")
    assert ip.extract_fact({"fact": {"subject": "Orchid", "predicate": "deploys_to", "object": "staging"}}) == \
        ("Orchid", "deploys_to", "staging")
    assert ip.extract_fact({"subject": "Orchid", "predicate": "is"}) is None
    assert ip.extract_fact({"subject": "Orchid", "predicate": "is", "object": None}) == ("Orchid", "is", None)


def _request(**fields: Any) -> CaptureMemoryRequest:
    return CaptureMemoryRequest(source="t", **fields)


def test_candidate_score_clamps_future_recency():
    """TestCaptureCandidateScoreClampsFutureRecency."""
    doc = semantic("future", "Orchid", "ready")
    now = T0.timestamp()
    doc["created_at"] = (T0 + timedelta(hours=24)).isoformat().replace("+00:00", "Z")
    assert ip.candidate_score(doc, _request(), None, now) == 1


def test_candidate_score_counts_scope_tags_type_and_terms():
    """TestCaptureCandidateScoreIncludesScopeTagsTypesAndTerms."""
    doc = entity("entity-scored", "Orchid", "project:alpha", aliases=["Project Orchid"])
    doc["tags"] = ["deploy"]
    score = ip.candidate_score(doc, _request(scope="project:alpha", tags=["DEPLOY"],
                                             context={"active_entities": ["Project Orchid"]},
                                             content={"subject": "Orchid"}),
                               Interpretation(proposed_type="entity", topical_labels=["rollout"],
                                              mentions=[Mention(surface="Orchid", aliases=["Project Orchid"])],
                                              reference_candidates=[ReferenceCandidate(ref="orchid-ref")]),
                               T0.timestamp())
    assert score >= 180


def test_candidates_are_ranked_unique_newest_first_and_limited():
    """TestFetchCaptureCandidatesDedupesOrdersAndAvoidsDuplicateGlobalList (the ranking; which
    records are read is in the next test)."""
    def at(doc: dict, hours: float) -> dict:
        doc["created_at"] = (T0 - timedelta(hours=hours)).isoformat().replace("+00:00", "Z")
        return doc

    matching = at(entity("matching", "Orchid", "project:alpha"), 2)
    matching["tags"] = ["deploy"]
    recent = at(entity("recent", "Unrelated"), 0)
    duplicate = at(semantic("duplicate", "Orchid", "staging"), 24)
    got = ip.rank_candidates([matching, duplicate, recent, duplicate], _request(scope="project:alpha", tags=["deploy"]),
                             Interpretation(proposed_type="entity", topical_labels=["orchid"]), T0.timestamp(), 20)
    assert [d["id"] for d in got] == ["matching", "recent", "duplicate"]
    many = [at(semantic(f"candidate-{i:02d}", "same"), -i / 60) for i in range(ingestion.CANDIDATE_LIMIT + 2)]
    got = ip.rank_candidates(many, _request(), None, T0.timestamp(), ingestion.CANDIDATE_LIMIT)
    assert len(got) == ingestion.CANDIDATE_LIMIT and got[0]["id"] == "candidate-21"


def test_candidates_come_from_the_scope_and_unscoped_records(mem: Membrane):
    """TestFetchCaptureCandidatesDedupesOrdersAndAvoidsDuplicateGlobalList (the scoped, then the
    unscoped listing). **(deviation)** An unscoped capture reads unscoped records only, and a
    scoped one never another scope's: Membrane's unscoped listing reaches every scope."""
    mem.import_records([episode("alpha-ep", "evt-a", "project:alpha"), episode("global-ep", "evt-g"),
                        episode("beta-ep", "evt-b", "project:beta")])
    r = capture(mem, scope="project:alpha", content={"text": "x", "ref_a": "evt-a", "ref_g": "evt-g", "ref_b": "evt-b"})
    refs = {c["ref"]: c for c in r.primary_record.interpretation["reference_candidates"]}
    assert refs["evt-a"]["target_record_id"] == "alpha-ep" and refs["evt-g"]["target_record_id"] == "global-ep"
    assert not refs["evt-b"].get("resolved")
    r = capture(mem, content={"text": "x", "ref_a": "evt-a", "ref_g": "evt-g"})
    refs = {c["ref"]: c for c in r.primary_record.interpretation["reference_candidates"]}
    assert not refs["evt-a"].get("resolved") and refs["evt-g"]["target_record_id"] == "global-ep"


def test_inverse_relation_predicates():
    """TestInverseRelationPredicatePairs."""
    pairs = [("mentions_entity", "mentioned_in"), ("references_record", "referenced_by"),
             ("derived_semantic", "derived_from"), ("subject_entity", "fact_subject_of"),
             ("object_entity", "fact_object_of"), ("depends_on", "dependency_of"), ("uses", "used_by"),
             ("caused_by", "causes"), ("supports", "supported_by"), ("contradicts", "contradicted_by")]
    for a, b in pairs:
        assert ip.inverse_predicate(a) == b and ip.inverse_predicate(b) == a
    assert ip.inverse_predicate("custom") == "inverse_of_custom"
    assert ip.inverse_predicate(" Depends_On ") == "dependency_of"


def test_mention_resolution_fallbacks(mem: Membrane):
    """TestResolveMentionEntityFallbacks: the entity an interpreter names by id, then the term
    index, then the candidates."""
    mem.import_records([entity("entity-stored", "Orchid", "project:alpha")])
    stub = Stub(Interpretation(mentions=[Mention(surface="Something else", canonical_entity_id="entity-stored")]))
    r = interpreted(mem, stub, scope="project:alpha", content={"text": "x"})
    assert r.mentions[0].entity_id == "entity-stored" and not r.mentions[0].created
    r = capture(mem, scope="project:alpha", content={"project": "Orchid"})
    assert r.mentions[0].entity_id == "entity-stored"
    # an entity this capture created is found among its candidates by a later mention's alias
    stub = Stub(Interpretation(mentions=[Mention(surface="Borealis"), Mention(surface="North", aliases=["borealis"])]))
    r = interpreted(mem, stub, scope="project:alpha", content={"text": "x"})
    assert r.mentions[0].created and r.mentions[1].entity_id == r.mentions[0].entity_id
    assert len(r.created_records) == 1


def test_new_entity_defaults():
    """TestResolveMentionErrorsAndEntityDefaults (buildEntityRecord; its create and relation
    failures are the rollback tests)."""
    rec = ingestion.build_entity(Mention(), CaptureMemoryRequest(source="t", scope="project:alpha"), TS, T0)
    assert rec.sensitivity.value == "low" and rec.scope == "project:alpha"
    assert rec.payload.canonical_name == "entity" and rec.payload.summary == "entity"
    assert rec.payload.primary_type == "Other" and rec.payload.types == ["Other"]
    assert rec.payload.identifiers[0].namespace == "membrane" and rec.payload.identifiers[0].value
    assert rec.created_at == TS and rec.provenance.created_by == "t" and rec.provenance.sources == []


def test_find_matching_entity_by_alias_skipping_blank_terms():
    """TestFindMatchingEntityMatchesAliasesAndSkipsBlankTerms."""
    rec = entity("entity-orchid", "Orchid Canonical", "project:alpha", aliases=["Project Orchid"])
    got = ip.find_matching_entity(Mention(surface=" ", aliases=["", "project orchid"]),
                                  [semantic("semantic", "Project Orchid"), rec])
    assert got is rec
    assert ip.find_matching_entity(Mention(surface="missing"), [rec]) is None
    # (deviation) runs of spaces are one
    assert ip.find_matching_entity(Mention(surface="project  ORCHID"), [rec]) is rec


def test_relation_candidate_targets(mem: Membrane):
    """TestResolveRelationCandidateTarget and TestMaterializeRelationCandidateEdgeCases: a
    record or an entity named by id, a missing one cleared, a blank predicate writes nothing,
    an entity target uses/used_by with the confidence clamped to 1."""
    mem.import_records([semantic("stored-target", "SQLite"), entity("entity-target", "Orchid")])
    stub = Stub(Interpretation(relation_candidates=[
        RelationCandidate(predicate="depends_on", target_record_id="stored-target"),
        RelationCandidate(predicate="uses", target_entity_id="entity-target", confidence=2),
        RelationCandidate(predicate="depends_on", target_record_id="missing", resolved=True),
        RelationCandidate(predicate="   ", target_record_id="stored-target"),
    ]))
    r = interpreted(mem, stub, content={"text": "x"})
    got = r.primary_record.interpretation["relation_candidates"]
    assert got[0]["resolved"] and got[0]["target_record_id"] == "stored-target" and got[0]["confidence"] == 1
    assert got[1] == {"predicate": "uses", "target_entity_id": "entity-target", "confidence": 1, "resolved": True}
    assert "resolved" not in got[2] and "target_record_id" not in got[2]
    assert "resolved" not in got[3]
    assert [(e.source_id == r.primary_record.id, e.predicate, e.target_id) for e in r.edges] == [
        (True, "depends_on", "stored-target"), (False, "dependency_of", r.primary_record.id),
        (True, "uses", "entity-target"), (False, "used_by", r.primary_record.id)]
    assert r.primary_record.interpretation["status"] == "tentative"  # the blank predicate stays unresolved


def test_low_confidence_facts_outside_observations_are_not_derived(mem: Membrane):
    """TestMaybeCreateSemanticRecordGuardsAndRelationErrors (the guard): a fact in an event with
    the fallback's confidence is no semantic record; proposed as semantic, or with an
    interpreter's confidence of 0.5 or more, it is."""
    fact = {"subject": "Orchid", "predicate": "runs_on", "object": "staging"}
    assert capture(mem, source_kind="event", content=fact).derived_record is None
    assert capture(mem, source_kind="event", content=fact, proposed_type="semantic").derived_record is not None
    r = interpreted(mem, Stub(Interpretation(extraction_confidence=0.5)), source_kind="event", content=fact)
    assert r.derived_record is not None and r.derived_record.confidence == 0.8
    assert capture(mem, source_kind="working_state", content={"thread_id": "t", **fact}).derived_record is None


def test_reference_candidates(mem: Membrane):
    """TestResolveReferenceCandidate: a record or an entity named by id (in the store), a
    timeline ref of a candidate episode, a missing one unresolved."""
    mem.import_records([semantic("stored-ref", "SQLite"), entity("entity-ref", "Orchid"), episode("episode-ref", "evt-42")])
    stub = Stub(Interpretation(reference_candidates=[
        ReferenceCandidate(target_record_id="stored-ref"), ReferenceCandidate(target_entity_id="entity-ref"),
        ReferenceCandidate(ref="evt-42"), ReferenceCandidate(ref="missing")]))
    r = interpreted(mem, stub, content={"text": "x"})
    got = r.primary_record.interpretation["reference_candidates"]
    assert got[0]["target_record_id"] == "stored-ref" and got[0]["resolved"]
    assert got[1]["target_entity_id"] == "entity-ref" and got[1]["resolved"]
    assert got[2]["target_record_id"] == "episode-ref" and got[2]["resolved"]
    assert not got[3].get("resolved")
    assert [rel.predicate for rel in mem.get("episode-ref").relations] == ["referenced_by"]


def test_fact_subject_and_object_link_to_their_entities(mem: Membrane):
    """TestLinkRecordToCanonicalEntitiesDirectly: a fact whose subject and object are entity ids
    is linked both ways to each; a missing id or a record that is no entity is not."""
    mem.import_records([entity("entity-subject", "Subject"), entity("entity-object", "Object"),
                        semantic("entity-wrong-type", "wrong")])
    # under "fact", so the subject is no mention of its own (a top-level "subject" would be)
    r = capture(mem, source_kind="observation",
                content={"fact": {"subject": "entity-subject", "predicate": "depends_on", "object": "entity-object"}})
    fact = r.derived_record
    assert r.mentions == []
    links = [(e.source_id, e.predicate, e.target_id) for e in r.edges if e.predicate.endswith(("_entity", "_of"))]
    assert links == [(fact.id, "subject_entity", "entity-subject"), ("entity-subject", "fact_subject_of", fact.id),
                     (fact.id, "object_entity", "entity-object"), ("entity-object", "fact_object_of", fact.id)]
    assert [rel.predicate for rel in mem.get(fact.id).relations] == ["derived_from", "subject_entity", "object_entity"]
    assert fact.updated_at == fact.created_at
    r = capture(mem, source_kind="observation",
                content={"fact": {"subject": "entity-missing", "predicate": "mentions", "object": "entity-wrong-type"}})
    assert [rel.predicate for rel in r.derived_record.relations] == ["derived_from"]
    assert mem.get("entity-wrong-type").relations == []


def test_semantic_interpretation_helpers():
    """TestSemanticInterpretationHelpers."""
    interp = Interpretation(summary="linked semantic", topical_labels=["deploy", "orchid"], extraction_confidence=0.82,
                            mentions=[Mention(surface="Orchid", aliases=["orchid project"],
                                              canonical_entity_id="entity-orchid")])
    assert ip.canonical_side("Orchid", interp) == "entity-orchid"
    assert ip.canonical_side("orchid project", interp) == "entity-orchid"
    assert ip.canonical_side("Borealis", interp) == "Borealis" and ip.canonical_side("Orchid", None) == "Orchid"
    assert ip.canonical_object("orchid project", interp) == "entity-orchid"
    assert ip.canonical_object({"name": "Orchid"}, interp) == {"name": "Orchid"}
    assert ip.interpretation_confidence(interp, 0.7) == 0.82
    assert ip.interpretation_confidence(Interpretation(), 0.7) == 0.7


def test_semantic_entity_links_and_derived_interpretation():
    """TestSemanticEntityLinksAndDerivedInterpretation."""
    payload = {"kind": "semantic", "subject": "entity-subject", "predicate": "depends_on",
               "object": "550e8400-e29b-41d4-a716-446655440000"}
    assert len(ip.semantic_entity_links(payload)) == 2
    assert ip.semantic_entity_ids(payload) == ["entity-subject", "550e8400-e29b-41d4-a716-446655440000"]
    source = Interpretation(summary="source summary", topical_labels=["label"], extraction_confidence=0.9)
    derived = ip.derive_semantic_interpretation(source, payload)
    assert derived.extraction_confidence == 0.9 and derived.summary == "source summary" and len(derived.mentions) == 2
    source.topical_labels[0] = "changed"
    assert derived.topical_labels[0] == "label"
    plain = {"kind": "semantic", "subject": "subject", "predicate": "is", "object": "object"}
    assert ip.semantic_entity_links(plain) == [] and ip.semantic_entity_links(None) == []
    assert ip.semantic_entity_links({"kind": "working", "thread_id": "thread"}) == []
    assert ip.derive_semantic_interpretation(None, plain) is None
    assert ip.derive_semantic_interpretation(None, None) is None


def test_entity_kind_and_proposed_type():
    """TestInferEntityKindAndProposedType."""
    for key, kind in [("tool_name", "tool"), ("project", "project"), ("file_path", "file"), ("user", "person"),
                      ("subject", "person"), ("topic", "concept")]:
        assert ip.infer_entity_kind(key) == kind
    for source_kind, mtype in [("working_state", "working"), ("observation", "semantic"), ("event", "episodic")]:
        assert ip.infer_proposed_type(source_kind) == mtype


# ----------------------------------------------------------------------------- tool_outcome_test.go, ingestion_error_test.go


def test_value_helpers_normalize_lists_and_booleans():
    """TestCaptureValueHelpersNormalizeListsAndBooleans."""
    assert ip.string_list([" Alpha ", "alpha", "Beta", ""]) == ["Alpha", "Beta"]
    assert ip.string_list(["one", 2, " ", "ONE"]) == ["one", "2"]
    assert ip.string_list("one") == []
    (c,) = ip.constraint_list([{"type": "scope", "key": "project", "value": "alpha", "required": True}, "ignored"])
    assert (c.type, c.key, c.value, c.required) == ("scope", "project", "alpha", True)
    (c,) = ip.constraint_list([{"type": "env", "required": "true"}])
    assert c.required is False  # only a JSON true is required


def test_a_capture_without_timestamp_happens_now(mem: Membrane):
    """TestIngestEventDirectTimestampAndErrors (a zero timestamp is the write time)."""
    r = capture(mem, content={"ref": "evt-zero-time"}, timestamp="0001-01-01T00:00:00Z")
    assert r.primary_record.created_at == T0 and r.primary_record.payload.timeline[0].t == T0


def test_a_timestamp_in_the_future_is_refused(mem: Membrane):
    """**(deviation)** Membrane takes any timestamp; one ahead of the engine's clock by more than
    a few minutes would create records in the future."""
    capture(mem, content={"ref": "skew"}, timestamp=T0 + timedelta(seconds=60))
    with pytest.raises(ValidationError, match="timestamp"):
        capture(mem, content={"ref": "late"}, timestamp=T0 + timedelta(days=1))
    assert mem.count() == 1


# ----------------------------------------------------------------------------- entity resolution (SPEC 12)


def test_names_resolve_normalised_and_by_alias(mem: Membrane):
    mem.import_records([entity("maya", "Maya Chen", aliases=["mchen", {"value": "The Reviewer", "kind": "role"}])])
    for surface in ("maya chen", "  MAYA   Chen ", "MChen", "the  reviewer"):
        r = capture(mem, content={"entity": surface})
        assert r.mentions[0].entity_id == "maya" and not r.mentions[0].created, surface
    assert [rel.predicate for rel in mem.get("maya").relations] == ["mentioned_in"] * 4


def test_an_entity_created_by_one_capture_is_matched_by_the_next(mem: Membrane):
    first = capture(mem, scope="p", content={"project": "Orchid"})
    second = capture(mem, scope="p", content={"entity": "ORCHID"})
    assert first.mentions[0].created and second.mentions[0].entity_id == first.mentions[0].entity_id
    assert second.created_records == []


def test_two_scopes_are_never_merged(mem: Membrane):
    """SPEC 12: entity matches come from the capture's scope and unscoped records only."""
    a = capture(mem, scope="project:alpha", content={"project": "Orchid"})
    b = capture(mem, scope="project:beta", content={"project": "Orchid"})
    assert a.mentions[0].created and b.mentions[0].created
    assert a.mentions[0].entity_id != b.mentions[0].entity_id
    assert mem.get(b.mentions[0].entity_id).scope == "project:beta"
    unscoped = capture(mem, content={"project": "Orchid"})
    assert unscoped.mentions[0].created and mem.get(unscoped.mentions[0].entity_id).scope == ""
    # a scoped capture matches an unscoped entity; its own scope's first
    mem.import_records([entity("global-borealis", "Borealis")])
    assert capture(mem, scope="project:gamma", content={"project": "Borealis"}).mentions[0].entity_id == "global-borealis"
    assert capture(mem, scope="project:alpha", content={"project": "Orchid"}).mentions[0].entity_id == a.mentions[0].entity_id
    # references never reach another scope either
    r = capture(mem, scope="project:beta", content={"record_id": a.primary_record.id})
    assert not r.primary_record.interpretation["reference_candidates"][0].get("resolved")


def test_a_hyper_capture_never_yields_a_less_sensitive_entity_or_fact(mem: Membrane):
    """SPEC 12, trust on write: a low entity is not linked from a hyper capture (a new hyper one
    is made) and is left as it was; everything the capture creates is hyper."""
    mem.import_records([entity("orchid-low", "Orchid")])
    before = mem.get("orchid-low").model_dump()
    log = len(mem.audit_log("orchid-low"))
    r = capture(mem, source_kind="observation", sensitivity="hyper", content={
        "subject": "Orchid", "predicate": "owned_by", "object": "orchid-low-owner", "record_id": "orchid-low"})
    assert {rec.sensitivity.value for rec in [r.primary_record, *r.created_records]} == {"hyper"}
    (new,) = [c for c in r.created_records if c.type.value == "entity"]
    assert r.mentions[0].entity_id == new.id and r.mentions[0].created
    assert r.derived_record.payload.subject == new.id
    assert mem.get("orchid-low").model_dump() == before and len(mem.audit_log("orchid-low")) == log
    assert all(e.source_id != "orchid-low" for e in r.edges)
    # the reference to the low entity is one way: from the hyper capture only
    ref = r.primary_record.interpretation["reference_candidates"][0]
    assert ref["resolved"] and ref["target_entity_id"] == "orchid-low"
    assert r.updated_records == []
    # a later hyper capture matches the hyper entity, a low one the low entity
    assert capture(mem, sensitivity="hyper", content={"project": "orchid"}).mentions[0].entity_id == new.id
    assert capture(mem, content={"project": "orchid"}).mentions[0].entity_id == "orchid-low"
    # a medium capture links to the hyper entity rather than making another (it is at least as sensitive)
    mem.import_records([entity("borealis-high", "Borealis", sensitivity="high")])
    assert capture(mem, sensitivity="medium", content={"project": "Borealis"}).mentions[0].entity_id == "borealis-high"
    assert mem.verify_audit() == []


def test_least_sensitive_sufficient_entity_is_preferred(mem: Membrane):
    """**(deviation)** Membrane takes the first match by id at any sensitivity; here, among the
    matches at least as sensitive as the capture, the least sensitive (same scope first)."""
    mem.import_records([entity("a-hyper", "Orchid", sensitivity="hyper"), entity("b-medium", "Orchid", sensitivity="medium"),
                        entity("c-high", "Orchid", sensitivity="high"), entity("d-scoped", "Orchid", "p", "hyper")])
    assert capture(mem, sensitivity="medium", content={"project": "Orchid"}).mentions[0].entity_id == "b-medium"
    assert capture(mem, sensitivity="high", content={"project": "Orchid"}).mentions[0].entity_id == "c-high"
    assert capture(mem, sensitivity="low", scope="p", content={"project": "Orchid"}).mentions[0].entity_id == "d-scoped"


def test_the_index_follows_relabels_and_deletes(mem: Membrane):
    mem.import_records([entity("orchid", "Orchid")])
    mem.reclassify("orchid", "op", "moved", scope="p")
    assert capture(mem, content={"project": "Orchid"}).mentions[0].created  # no longer unscoped
    assert capture(mem, scope="p", content={"project": "Orchid"}).mentions[0].entity_id == "orchid"
    mem.delete("orchid", "op", "gone")
    again = capture(mem, scope="p", content={"project": "Orchid"}).mentions[0]
    assert again.entity_id != "orchid" and mem.get(again.entity_id).scope == ""  # the unscoped one made above


def test_a_store_made_before_the_index_gets_it_on_open_and_filled_at_first_use(store_url: str):
    m = Membrane.open(store_url, load_sample=False, clock=lambda: T0)
    m.import_records([entity("orchid", "Orchid", aliases=["Project  Orchid"])])
    with m.store.write() as conn:  # as a store from before the index: no tables
        conn.execute(text("DROP TABLE entity_terms"))
        conn.execute(text("DROP TABLE entity_terms_mark"))
    m.close()
    m = Membrane.open(store_url, load_sample=False, clock=lambda: T0)
    try:
        assert count_rows(m, "entity_terms") == 0 and count_rows(m, "entity_terms_mark") == 0  # opening writes no row
        with m.store.read() as conn:  # a reader sees the records' terms all the same
            rows = entity_index.find(conn, ["project orchid", "orchid"], [""], current=False)
        assert sorted(r[1] for r in rows) == ["orchid", "project orchid"]
        assert m.preview_capture({"source": "t", "content": {"entity": "project orchid"}}).mentions[0].entity_id \
            == "orchid"
        assert capture(m, content={"entity": "project orchid"}).mentions[0].entity_id == "orchid"
        assert count_rows(m, "entity_terms") == 2 and count_rows(m, "entity_terms_mark") == 1  # built by the capture
    finally:
        m.close()


def test_the_index_after_many_changes_is_rebuilt(mem: Membrane, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(entity_index, "REBUILD_ABOVE", 2)
    mem.import_records([entity(f"e{i}", f"Name {i}") for i in range(5)])
    assert capture(mem, content={"entity": "name 3"}).mentions[0].entity_id == "e3"
    assert mem.preview_capture({"source": "t", "content": {"entity": "name 4"}}).mentions[0].entity_id == "e4"


# ----------------------------------------------------------------------------- what a capture writes beside


def test_storage_rules_for_relations():
    """Membrane's storage: a relation of weight 0 is stored with weight 1, a zero created_at as
    the write time."""
    rels = [Relation(predicate="p", target_id="t", weight=0.0),
            Relation(predicate="q", target_id="t", weight=0.5, created_at="0001-01-01T00:00:00Z")]
    ingestion.stored_relations(rels, T0)
    assert [(r.weight, r.created_at) for r in rels] == [(1.0, T0), (0.5, T0)]


def test_a_relation_of_confidence_zero_is_stored_with_weight_one(mem: Membrane):
    mem.import_records([semantic("target", "x")])
    r = interpreted(mem, Stub(Interpretation(relation_candidates=[
        RelationCandidate(predicate="supports", target_record_id="target", confidence=-1)])), content={"text": "x"})
    assert [(rel.predicate, rel.weight) for rel in mem.get(r.primary_record.id).relations] == [("supports", 1.0)]


def test_audit_entries_name_actors_and_sources(mem: Membrane):
    mem.import_records([entity("entity-orchid", "Orchid")])
    r = capture(mem, source="agent-7", source_kind="observation",
                content={"subject": "Orchid", "predicate": "is", "object": "ready", "tool_name": "rg"})
    primary, fact = r.primary_record, r.derived_record
    (tool,) = [c for c in r.created_records if c.type.value == "entity"]
    assert [(e.action.value, e.actor) for e in mem.audit_log(primary.id)] == [("create", "ingestion-service")]
    assert [(e.action.value, e.actor) for e in mem.audit_log(tool.id)] == [("create", "agent-7")]
    assert primary.id in mem.audit_log(tool.id)[0].rationale and primary.id in mem.audit_log(fact.id)[0].rationale
    entries = mem.audit_log("entity-orchid")[-2:]  # mentioned_in, and the fact's fact_subject_of
    assert [(e.action.value, e.actor) for e in entries] == [("revise", "agent-7"), ("revise", "agent-7")]
    assert all(primary.id in e.rationale for e in entries)
    r = mem.capture_memory({"source": "agent-7", "content": {"project": "Orchid"}}, actor="operator:ana")
    assert {e.actor for e in mem.audit_log(r.primary_record.id)} == {"operator:ana"}
    assert mem.audit_log("entity-orchid")[-1].actor == "operator:ana"
    assert r.primary_record.audit_log[0].actor == "operator:ana"
    assert mem.verify_audit() == []


def test_history_undoes_a_link(mem: Membrane):
    mem.import_records([entity("orchid", "Orchid")])
    mem.context.clock = lambda: T0 + timedelta(hours=1)
    r = capture(mem, content={"project": "Orchid"})
    assert [rel.target_id for rel in mem.get("orchid").relations] == [r.primary_record.id]
    assert mem.record_at("orchid", T0 + timedelta(minutes=1)).relations == []
    assert [v.kind for v in mem.history("orchid")][-1] == "revise"


def test_created_records_get_ranking_vectors_in_the_transaction(mem: Membrane):
    if mem.embedder is None:
        pytest.skip("no ranking provider")
    r = capture(mem, source_kind="observation", content={"subject": "Orchid", "predicate": "is", "object": "ready"})
    ids = [r.primary_record.id, *[c.id for c in r.created_records]]
    with mem.store.read() as conn:
        kept = mem.store.vectors_of(conn, ids, mem.embedder.name)
    assert sorted(kept) == sorted(ids)


def test_without_a_ranking_provider_nothing_is_embedded(store_url: str):
    m = Membrane.open(store_url, load_sample=False, clock=lambda: T0, embedder=None)
    try:
        capture(m, content={"project": "Orchid"})
        assert count_rows(m, "record_vectors") == 0 and m.count() == 2
    finally:
        m.close()


def test_captured_records_are_gated_like_any(mem: Membrane):
    r = capture(mem, sensitivity="high", scope="p", content={"project": "Orchid"})
    low = TrustContext(max_sensitivity="medium", scopes=["p"])
    assert mem.retrieve_by_id(r.primary_record.id, TrustContext(max_sensitivity="high", scopes=["p"])).payload
    assert mem.explain(r.primary_record.id, low).verdict.value == "redacted"
    assert mem.explain(r.created_records[0].id, TrustContext(max_sensitivity="hyper", scopes=["q"])).verdict.value \
        == "hidden"


def test_graph_roots_are_boosted_by_aliases_and_mentions(mem: Membrane):
    """Membrane's rootBoost: an entity named by an alias, and a record whose interpretation
    mentions the term, rank as roots."""
    mem.import_records([entity("orchid", "Orchid", aliases=["Hothouse"])])
    r = capture(mem, content={"project": "Orchid", "text": "deploy"})
    g = mem.retrieve_graph(RetrieveGraphRequest(trust=TrustContext(max_sensitivity="hyper"), task_descriptor="hothouse",
                                                root_limit=2))
    assert "orchid" in g.root_ids
    assert any(e.source_id == "orchid" and e.predicate == "mentioned_in" and e.target_id == r.primary_record.id
               for e in g.edges)
    rec = mem.get(r.primary_record.id)
    assert root_boost(rec, "orchid", {}) == 30  # its mention's surface
    aliased = rec.model_copy(update={"interpretation": {"mentions": [{"surface": "x", "aliases": ["orchid"]},
                                                                     {"surface": "y", "aliases": ["orchid"]}]}})
    assert root_boost(aliased, "orchid", {}) == 40
    assert root_boost(rec, "nothing", {}) == 0


# ----------------------------------------------------------------------------- the preview


def test_preview_writes_nothing_and_shows_what_capture_writes(mem: Membrane):
    mem.import_records([entity("orchid", "Orchid")])
    request = {"source": "t", "source_kind": "observation",
               "content": {"subject": "Orchid", "predicate": "is", "object": "ready", "tool_name": "rg"}}
    before = {t: count_rows(mem, t) for t in ("records", "audit_entries", "changes", "record_vectors", "entity_terms")}
    preview = mem.preview_capture(request)
    assert {t: count_rows(mem, t) for t in before} == before
    assert preview.dry_run
    assert [(m.surface, m.entity_id if not m.created else "new", m.created) for m in preview.mentions] == [
        ("Orchid", "orchid", False), ("rg", "new", True)]
    assert [u.id for u in preview.updated_records] == ["orchid"]
    assert preview.derived_record is not None
    applied = mem.capture_memory(request)
    assert [(m.surface, m.created) for m in applied.mentions] == [(m.surface, m.created) for m in preview.mentions]
    assert predicates(applied) == predicates(preview)
    assert [c.type for c in applied.created_records] == [c.type for c in preview.created_records]
    assert not applied.dry_run


def test_preview_sees_entities_not_yet_indexed(mem: Membrane):
    """The preview reads the index in a read transaction: records changed since it was last
    brought up to date are read from the records themselves."""
    capture(mem, content={"text": "first"})  # the index is current now
    mem.import_records([entity("fresh", "Fresh Name")])
    assert mem.preview_capture({"source": "t", "content": {"entity": "fresh name"}}).mentions[0].entity_id == "fresh"
    mem.delete("fresh", "op", "gone")
    assert mem.preview_capture({"source": "t", "content": {"entity": "fresh name"}}).mentions[0].created


# ----------------------------------------------------------------------------- the operator's view


def test_operators_capture_within_their_clearance(mem: Membrane):
    ops = mem.operators
    ops.add("viewer", "viewer", "hyper", actor="test")
    ops.add("cur", "curator", "medium", scopes=["p"], actor="test")
    mem.import_records([entity("secret-orchid", "Orchid", "p", "high"), entity("orchid", "Orchid", "p", "medium")])
    request = {"source": "t", "scope": "p", "sensitivity": "medium", "content": {"project": "Orchid"}}
    with pytest.raises(AccessDeniedError):
        mem.as_operator("viewer").capture_memory(request)
    view = mem.as_operator("cur")
    for beyond in ({**request, "sensitivity": "high"}, {**request, "scope": "q"}):
        with pytest.raises(AccessDeniedError, match="beyond your clearance"):
            view.capture_memory(beyond)
        with pytest.raises(AccessDeniedError):
            view.preview_capture(beyond)
    count = mem.count()
    preview = view.preview_capture(request)
    assert preview.mentions[0].entity_id == "orchid" and mem.count() == count
    r = view.capture_memory(request)
    assert r.mentions[0].entity_id == "orchid"
    assert {e.actor for e in mem.audit_log(r.primary_record.id)} == {"operator:cur"}
    assert mem.audit_log("orchid")[-1].actor == "operator:cur"
    # a record beyond the clearance is never matched nor linked: a new entity instead
    mem.delete("orchid", "op", "gone")
    r = view.capture_memory(request)
    assert r.mentions[0].created and mem.get("secret-orchid").relations == []
    assert mem.verify_audit() == []


def test_a_capture_refused_for_the_clearance_writes_nothing(mem: Membrane):
    mem.operators.add("cur", "curator", "low", actor="test")
    with pytest.raises(AccessDeniedError):
        mem.as_operator("cur").capture_many([{"source": "t", "content": {"project": "A"}},
                                              {"source": "t", "sensitivity": "hyper", "content": {"project": "B"}}])
    assert mem.count() == 0


def test_response_json_round_trips(mem: Membrane):
    r = capture(mem, source_kind="observation", content={"subject": "Orchid", "predicate": "is", "object": "ready"})
    dumped = json.loads(r.model_dump_json())
    assert dumped["primary_record"]["id"] == r.primary_record.id and len(dumped["edges"]) == len(r.edges)
