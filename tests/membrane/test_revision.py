"""Membrane's pkg/revision tests (revision_test.go, embedder_test.go at 8408c8c), ported to
our API: supersede, fork, merge, retract and contest, on both databases (SPEC 6).

Each test names the Go test it ports. Membrane's services return the created record; here the
operation returns its plan, whose ``created`` is the record it stored. Not ported:
TestRevisionMutationErrorBranches (it injects storage failures into a fake Go transaction; our
atomicity under failure is tested in tests/curation/test_curation_atomic.py),
TestRevisionValidationHelpers' nil-record and untyped-payload cases (a Python caller cannot
pass Go's nil pointer or an untyped payload: both are refused by validation, tested in
tests/model/test_schema.py), and TestServiceWithEmbedderEmbedsCreatedRevisionRecords
(the embedder belongs to the ranking provider, SPEC 9)."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

import pytest

from membrane_engine import Membrane
from membrane_engine.errors import EpisodicImmutableError, NotFoundError, ValidationError

from membrane_kit import T0, iso

CREATED = datetime(2026, 5, 1, 11, 0, tzinfo=timezone.utc)


def semantic_revision_record(rid: str, subject: str, obj: str) -> dict:
    """revision/embedder_test.go semanticRevisionRecord: NewMemoryRecord's shape (with its
    "Initial creation" audit entry) plus one observation provenance source."""
    return {
        "id": rid, "type": "semantic", "sensitivity": "low", "confidence": 1, "salience": 1,
        "created_at": iso(CREATED), "updated_at": iso(CREATED),
        "lifecycle": {"decay": {"curve": "exponential", "half_life_seconds": 86400},
                      "last_reinforced_at": iso(CREATED), "deletion_policy": "auto_prune"},
        "provenance": {"sources": [{"kind": "observation", "ref": f"evidence-{rid}", "timestamp": iso(CREATED)}]},
        "payload": {"kind": "semantic", "subject": subject, "predicate": "is", "object": obj,
                    "validity": {"mode": "global"}},
        "audit_log": [{"action": "create", "actor": "system", "timestamp": iso(CREATED), "rationale": "Initial creation"}],
    }


def without_evidence(rid: str) -> dict:
    doc = semantic_revision_record(rid, "runtime", "go1.25")
    doc["provenance"] = {"sources": []}
    return doc


def episodic(rid: str) -> dict:
    doc = semantic_revision_record(rid, "", "")
    doc.update(type="episodic", payload={"kind": "episodic", "timeline": [{"t": iso(CREATED), "event_kind": "event",
                                                                           "ref": "evt-1"}]})
    return doc


def actions(m: Membrane, rid: str) -> list[str]:
    return [e.action.value for e in m.audit_log(rid)]


def is_uuid4(text: str) -> bool:
    try:
        return uuid.UUID(text).version == 4 and str(uuid.UUID(text)) == text
    except ValueError:
        return False


def test_supersede_retracts_old_record_and_links_replacement(mem: Membrane):
    """revision_test.go TestSupersedeRetractsOldRecordAndLinksReplacement"""
    mem.import_records([semantic_revision_record("old-runtime", "runtime", "go1.24")])
    plan = mem.supersede("old-runtime", semantic_revision_record("", "runtime", "go1.25"), "tester", "runtime upgrade")
    got = mem.get(plan.created.id)
    assert is_uuid4(got.id)  # "want generated ID"
    assert [(r.predicate, r.target_id) for r in got.relations] == [("supersedes", "old-runtime")]
    assert got.payload.revision.supersedes == "old-runtime" and got.payload.revision.status.value == "active"
    old = mem.get("old-runtime")
    assert old.salience == 0 and old.payload.revision.status.value == "retracted"
    assert old.payload.revision.superseded_by == got.id
    assert "revise" in actions(mem, "old-runtime")
    # Supersede's provenance source names the old record, the actor and the time
    source = got.provenance.sources[-1]
    assert (source.kind.value, source.ref, source.created_by, source.timestamp) == ("event", "old-runtime", "tester", T0)


def test_fork_creates_derived_record_without_retracting_source(mem: Membrane):
    """revision_test.go TestForkCreatesDerivedRecordWithoutRetractingSource"""
    mem.import_records([semantic_revision_record("source-db", "database", "postgres")])
    plan = mem.fork("source-db", semantic_revision_record("", "database", "sqlite"), "tester", "local backend")
    got = mem.get(plan.created.id)
    assert is_uuid4(got.id)
    assert [(r.predicate, r.target_id) for r in got.relations] == [("derived_from", "source-db")]
    assert mem.get("source-db").salience != 0
    assert "fork" in actions(mem, "source-db")


def test_merge_retracts_sources_and_creates_merged_record(mem: Membrane):
    """revision_test.go TestMergeRetractsSourcesAndCreatesMergedRecord"""
    mem.import_records([semantic_revision_record("merge-first", "editor", "vim"),
                        semantic_revision_record("merge-second", "editor", "neovim")])
    plan = mem.merge(["merge-first", "merge-second"], semantic_revision_record("", "editor", "neovim"),
                     "tester", "combine editor facts")
    got = mem.get(plan.created.id)
    assert is_uuid4(got.id)
    assert len(got.relations) == 2
    for rid in ("merge-first", "merge-second"):
        rec = mem.get(rid)
        assert rec.salience == 0 and rec.payload.revision.status.value == "retracted"
        assert "merge" in actions(mem, rid)


def test_retract_and_contest_update_semantic_revision_state(mem: Membrane):
    """revision_test.go TestRetractAndContestUpdateSemanticRevisionState"""
    mem.import_records([semantic_revision_record("retract-me", "cache", "redis"),
                        semantic_revision_record("contest-me", "queue", "sqs"),
                        semantic_revision_record("contesting-ref", "queue", "kafka")])
    mem.retract("retract-me", "tester", "obsolete")
    retracted = mem.get("retract-me")
    assert retracted.salience == 0 and retracted.payload.revision.status.value == "retracted"
    assert "delete" in actions(mem, "retract-me")
    mem.contest("contest-me", "contesting-ref", "tester", "conflicting source")
    contested = mem.get("contest-me")
    assert contested.payload.revision.status.value == "contested"
    assert [(r.predicate, r.target_id) for r in contested.relations] == [("contested_by", "contesting-ref")]


def test_contest_without_contesting_reference_skips_relation(mem: Membrane):
    """revision_test.go TestContestWithoutContestingReferenceSkipsRelation"""
    mem.import_records([semantic_revision_record("contest-no-ref", "queue", "sqs")])
    mem.contest("contest-no-ref", "", "tester", "reviewed")
    rec = mem.get("contest-no-ref")
    assert rec.relations == [] and rec.revision_status == "contested"
    assert mem.audit_log("contest-no-ref")[-1].action.value == "revise"


@pytest.mark.parametrize("op", ["supersede", "fork", "merge"])
def test_revision_rejects_a_semantic_record_without_evidence(mem: Membrane, op: str):
    """revision_test.go TestRevisionRejectsInvalidInputs: "missing evidence" (Supersede and
    Fork in Go; Merge applies the same ensureEvidence)."""
    mem.import_records([semantic_revision_record("semantic", "runtime", "go1.24")])
    call = {"supersede": lambda: mem.supersede("semantic", without_evidence("r"), "tester", "missing evidence"),
            "fork": lambda: mem.fork("semantic", without_evidence("r"), "tester", "missing evidence"),
            "merge": lambda: mem.merge(["semantic"], without_evidence("r"), "tester", "missing evidence")}[op]
    with pytest.raises(ValidationError) as err:
        call()
    assert "evidence" in err.value.problems[0][0]
    assert "r" not in mem.ids() and mem.get("semantic").revision_status is None  # nothing written


def test_revision_rejects_invalid_inputs(mem: Membrane):
    """revision_test.go TestRevisionRejectsInvalidInputs: nil records, an empty merge, episodic
    records and a missing record."""
    mem.import_records([episodic("episode"), semantic_revision_record("semantic", "runtime", "go1.24")])
    for call in (lambda: mem.supersede("semantic", None, "tester", "nil replacement"),
                 lambda: mem.fork("semantic", None, "tester", "nil fork"),
                 lambda: mem.merge([], semantic_revision_record("unused", "runtime", "go1.26"), "tester", "empty"),
                 lambda: mem.merge(["semantic"], None, "tester", "nil merge")):
        with pytest.raises(ValidationError):
            call()
    for call in (lambda: mem.supersede("episode", semantic_revision_record("replacement", "runtime", "go1.25"),
                                       "tester", "immutable"),
                 lambda: mem.fork("episode", semantic_revision_record("fork", "runtime", "go1.25"), "tester", "immutable"),
                 lambda: mem.retract("episode", "tester", "immutable"),
                 lambda: mem.contest("episode", "", "tester", "immutable"),
                 lambda: mem.merge(["episode"], semantic_revision_record("m", "editor", "neovim"), "tester", "merge")):
        with pytest.raises(EpisodicImmutableError):
            call()
    with pytest.raises(NotFoundError):
        mem.supersede("missing", semantic_revision_record("replacement-2", "runtime", "go1.25"), "tester", "missing")


def test_ensure_evidence_applies_to_semantic_records_only(mem: Membrane):
    """revision_test.go TestRevisionValidationHelpers: ensureEvidence passes a non-semantic record."""
    working = {"kind": "working", "thread_id": "thread", "state": "planning"}
    mem.import_records([semantic_revision_record("s", "runtime", "go1.24") | {"type": "working", "payload": working}])
    mem.fork("s", without_evidence("w2") | {"type": "working", "payload": working}, "tester", "no evidence needed")
    assert mem.get("w2").relations[0].target_id == "s"


@pytest.mark.parametrize("op", ["supersede", "fork", "merge"])
def test_a_new_record_keeps_the_audit_entries_it_brings_before_the_create_entry(mem: Membrane, op: str):
    """Membrane appends its create entry to the new record's own AuditLog (NewMemoryRecord's
    "Initial creation" in every revision test above)."""
    mem.import_records([semantic_revision_record("a", "editor", "vim")])
    new = semantic_revision_record("n", "editor", "neovim")
    new["audit_log"].append({"action": "revise", "actor": "curator", "timestamp": iso(T0), "rationale": "typo"})
    {"supersede": lambda: mem.supersede("a", new, "tester", "why"),
     "fork": lambda: mem.fork("a", new, "tester", "why"),
     "merge": lambda: mem.merge(["a"], new, "tester", "why")}[op]()
    log = mem.audit_log("n")
    assert [(e.action.value, e.actor, e.rationale) for e in log] == [
        ("create", "system", "Initial creation"), ("revise", "curator", "typo"), ("create", "tester", log[2].rationale)]
    assert [e.timestamp for e in log[:2]] == [CREATED, T0]
    assert log[2].rationale.endswith(": why")
    assert mem.verify_audit() == []  # chained with the rest


def test_generated_ids_differ_and_the_plan_returns_the_stored_record(mem: Membrane):
    mem.import_records([semantic_revision_record("a", "editor", "vim")])
    first = mem.fork("a", semantic_revision_record("", "editor", "x"), "tester", "one").created
    second = mem.fork("a", semantic_revision_record("", "editor", "y"), "tester", "two").created
    assert first.id != second.id
    assert mem.get(first.id).payload.object == "x" and mem.get(second.id).payload.object == "y"
    assert first.model_dump(exclude={"audit_log"}) == mem.get(first.id).model_dump(exclude={"audit_log"})
