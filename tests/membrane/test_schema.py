"""Membrane's pkg/schema tests (memory_test.go, payloads_test.go at 8408c8c) ported to our
validation boundary (``validate_record``, what import and curation use) and JSON writer.
test_membrane_json.py adds records marshalled by Membrane itself.

Not ported: TestConcretePayloadMarkerMethods and TestValidationErrorError (Go interface
plumbing and Go's error text), TestMemoryRecordMarshalJSONReturnsPayloadError (a Go payload
whose MarshalJSON fails: no such payload exists in Python), Validate(nil) (no nil record),
and EntityTypes / NormalizeEntityTerm (graph helpers, not part of our API)."""

from __future__ import annotations

import json

import pytest

from membrane_engine.errors import ValidationError
from membrane_engine.model.records import EntityPayload, validate_record

from membrane_kit import go_json, go_record, semantic_payload

ENTITY = {"kind": "entity", "canonical_name": "Orchid", "primary_type": "Project", "types": ["Project"],
          "aliases": ["orchid", "staging target"], "summary": "Staging deploy target"}
PAYLOADS = {
    "episodic": {"kind": "episodic", "timeline": [{"t": "0001-01-01T00:00:00Z", "event_kind": "event",
                                                   "ref": "evt-1", "summary": "summary"}]},
    "working": {"kind": "working", "thread_id": "thread-1", "state": "planning"},
    "semantic": semantic_payload("Go", "typed"),
    "entity": {"kind": "entity", "canonical_name": "Orchid", "aliases": ["orchid"]},
    "competence": {"kind": "competence", "skill_name": "debug", "triggers": [{"signal": "panic"}],
                   "recipe": [{"step": "read logs"}]},
    "plan_graph": {"kind": "plan_graph", "plan_id": "plan-1", "version": "1", "nodes": [{"id": "n1", "op": "test"}],
                   "edges": [{"from": "n1", "to": "n2", "kind": "control"}]},
}


def refused(doc: dict) -> str:
    with pytest.raises(ValidationError) as err:
        validate_record(doc)
    return str(err.value)


@pytest.mark.parametrize("field, value", [("sensitivity", "invalid"), ("type", "unknown")])
def test_memory_record_validate_rejects_invalid_enums(field, value):
    """memory_test.go TestMemoryRecordValidateRejectsInvalidSensitivity and
    TestMemoryRecordValidateRejectsInvalidTypeAndPayloadMismatch (invalid type)"""
    assert field in refused(go_record("id-1", **{field: value}))


def test_payload_kind_must_match_the_type():
    """memory_test.go TestMemoryRecordValidateRejectsInvalidTypeAndPayloadMismatch"""
    assert "payload" in refused(go_record("id-2", payload=PAYLOADS["working"]))


@pytest.mark.parametrize("field, values", [
    ("sensitivity", ["public", "low", "medium", "high", "hyper"]),
    ("type", ["episodic", "working", "semantic", "competence", "plan_graph", "entity"]),
])
def test_is_valid_sensitivity_and_memory_type(field, values):
    """memory_test.go TestIsValidSensitivity, TestIsValidMemoryType"""
    for value in values:
        doc = go_record("r", value if field == "type" else "semantic",
                        payload=PAYLOADS[value] if field == "type" else None, **({field: value} if field == "sensitivity" else {}))
        assert getattr(validate_record(doc), field).value == value


@pytest.mark.parametrize("state", ["planning", "executing", "blocked", "waiting", "done", "invalid"])
def test_is_valid_task_state(state):
    """memory_test.go TestIsValidTaskState"""
    doc = go_record("w", "working", payload=PAYLOADS["working"] | {"state": state})
    if state == "invalid":
        assert "payload.state" in refused(doc)
    else:
        assert validate_record(doc).payload.state.value == state


@pytest.mark.parametrize("outcome", ["success", "failure", "partial", "invalid"])
def test_is_valid_outcome_status(outcome):
    """memory_test.go TestIsValidOutcomeStatus"""
    doc = go_record("e", "episodic", payload=PAYLOADS["episodic"] | {"outcome": outcome})
    if outcome == "invalid":
        assert "payload.outcome" in refused(doc)
    else:
        assert validate_record(doc).payload.outcome.value == outcome


def test_memory_record_json_round_trip_preserves_interpretation_and_entity_payload():
    """memory_test.go TestMemoryRecordJSONRoundTripPreservesInterpretationAndEntityPayload"""
    interpretation = {"status": "resolved", "summary": "Canonicalized Orchid entity", "proposed_type": "entity",
                      "topical_labels": ["deploy", "staging"],
                      "mentions": [{"surface": "Orchid", "entity_kind": "project", "canonical_entity_id": "entity-1",
                                    "confidence": 0.92, "aliases": ["orchid"]}],
                      "extraction_confidence": 0.92}
    doc = go_record("entity-1", "entity", payload=ENTITY)
    doc = {k: v for k, v in doc.items() if k != "audit_log"} | {"interpretation": interpretation,
                                                                  "audit_log": doc["audit_log"]}
    got = validate_record(json.loads(json.dumps(doc)))
    assert isinstance(got.payload, EntityPayload) and got.payload.canonical_name == "Orchid"
    assert got.interpretation["status"] == "resolved"
    assert got.interpretation["mentions"][0]["canonical_entity_id"] == "entity-1"
    # written back in Membrane's place (between payload and audit_log), byte for byte
    assert go_json(got.to_json_dict()) == go_json(doc)


def test_memory_record_unmarshal_and_validate_branches():
    """memory_test.go TestMemoryRecordUnmarshalAndValidateBranches"""
    assert "payload" in refused({"id": "rec-1", "type": "semantic", "sensitivity": "low"})
    assert validate_record(go_record("valid", payload=semantic_payload("Go", "typed"))).id == "valid"


@pytest.mark.parametrize("kind", sorted(PAYLOADS))
def test_payload_wrapper_marshal_and_unmarshal(kind):
    """payloads_test.go TestPayloadWrapperMarshalAndUnmarshal"""
    doc = go_record("p", kind, payload=PAYLOADS[kind])
    got = validate_record(json.loads(json.dumps(validate_record(doc).to_json_dict())))
    assert got.payload.kind == kind
    assert got.to_json_dict()["payload"] == PAYLOADS[kind]  # Membrane's shape, unchanged


def test_payload_wrapper_unknown_and_invalid_payloads():
    """payloads_test.go TestPayloadWrapperUnknownAndInvalidPayloads: an unknown kind leaves Go
    without a payload (refused by Validate); an alias that is not a string or a value object
    is refused."""
    assert "payload" in refused(go_record("u", payload={"kind": "unknown", "value": 1}))
    assert "payload.aliases.0" in refused(go_record("e", "entity", payload={"kind": "entity", "aliases": [{"value": 1}]}))


def test_entity_helpers_and_alias_json():
    """payloads_test.go TestEntityHelpersAndAliasJSON (EntityAliasValues and the alias JSON)"""
    aliases = [" Orchid ", {"value": "   "}, {"value": "Staging", "kind": "nickname", "locale": "en"}]
    payload = validate_record(go_record("e", "entity", payload={"kind": "entity", "canonical_name": "x",
                                                                 "aliases": aliases})).payload
    assert payload.alias_values == ["Orchid", "Staging"]
    written = validate_record(go_record("e", "entity", payload={"kind": "entity", "canonical_name": "x",
                                                                "aliases": [{"value": "Orchid"}, aliases[2]]}))
    assert written.to_json_dict()["payload"]["aliases"] == ["Orchid", aliases[2]]
    from_string, from_object = validate_record(go_record("e", "entity", payload={
        "kind": "entity", "canonical_name": "x", "aliases": ["Orchid", aliases[2]]})).payload.aliases
    assert (from_string.value, from_string.kind, from_string.locale) == ("Orchid", "", "")
    assert (from_object.value, from_object.kind, from_object.locale) == ("Staging", "nickname", "en")


@pytest.mark.parametrize("change, field", [
    ({"id": None}, "id"), ({"type": None}, "type"), ({"sensitivity": None}, "sensitivity"),
    ({"confidence": -0.1}, "confidence"), ({"confidence": 1.1}, "confidence"), ({"salience": -0.1}, "salience"),
    ({"payload": None}, "payload"),
])
def test_memory_record_validate_rejects_required_and_range_fields(change, field):
    """payloads_test.go TestMemoryRecordValidateRejectsRequiredAndRangeFields"""
    doc = {k: v for k, v in (go_record("id") | change).items() if v is not None}
    assert field in refused(doc)
