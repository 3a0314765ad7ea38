"""Reading Membrane JSON as Membrane writes it (SPEC 1), against records that Membrane's own
pkg/schema marshalled (fixtures/membrane_records.go at commit 8408c8c).

Go's encoding/json leaves out fields tagged ``omitempty`` when they hold their zero value and
writes an unset (nil) list as ``null``; an absent field reads as its zero value. So a record
read here and written back must be the bytes Membrane wrote, plus the anchor extension of
SPEC 2 (and, in its audit log, the importer's own entry of SPEC 6)."""

from __future__ import annotations

import json

import pytest

from membrane_engine import Membrane
from membrane_engine.errors import ValidationError
from membrane_engine.model.records import validate_record

from membrane_kit import MEMBRANE_LINES, T0, go_json, go_record, iso, semantic_payload


def exported_as_membrane(m: Membrane, original: dict) -> dict:
    """The record's export at T0, without what SPEC adds on purpose: the anchor extension
    fields and the audit entries written after the ones the file brought."""
    (doc,) = m.iter_export(ids=[original["id"]], as_of=T0)
    life = doc["lifecycle"]
    assert (life.pop("anchor_salience"), life.pop("anchor_at")) == (original["salience"], original["updated_at"])
    brought = original["audit_log"] or []
    assert doc["audit_log"][:len(brought)] == brought
    assert all(e["action"] == "create" for e in doc["audit_log"][len(brought):])
    doc["audit_log"] = original["audit_log"]
    return doc


def test_membrane_written_records_round_trip_byte_for_byte(mem: Membrane, tmp_path):
    path = tmp_path / "membrane.jsonl"
    path.write_text("\n".join(MEMBRANE_LINES) + "\n", encoding="utf-8")
    assert mem.import_file(path) == len(MEMBRANE_LINES)
    for line in MEMBRANE_LINES:
        original = json.loads(line)
        assert go_json(exported_as_membrane(mem, original)) == line


def test_round_trip_through_a_second_store_is_stable(mem: Membrane, tmp_path):
    """Export, import elsewhere, export again: the same documents (anchor included)."""
    mem.import_records([json.loads(line) for line in MEMBRANE_LINES])
    first = tmp_path / "first.jsonl"
    mem.export_file(first, as_of=T0)
    other = Membrane.open(f"sqlite:///{tmp_path / 'other.db'}", load_sample=False, clock=lambda: T0)
    try:
        other.import_file(first)
        again = {d["id"]: d for d in other.iter_export(as_of=T0)}
    finally:
        other.close()
    for doc in (json.loads(line) for line in first.read_text().splitlines()):
        copy = again[doc["id"]]
        assert copy["audit_log"][:len(doc["audit_log"])] == doc["audit_log"]
        copy["audit_log"] = doc["audit_log"]
        assert go_json(copy) == go_json(doc)


def test_absent_reinforcement_gain_is_zero_so_reinforce_adds_nothing(mem: Membrane):
    mem.import_records([go_record("g", salience=0.5)])
    assert mem.get("g").lifecycle.decay.reinforcement_gain == 0.0
    mem.reinforce("g", "op", "useful")
    assert mem.get("g").salience == pytest.approx(0.5)  # Go: Salience + ReinforcementGain (0)
    (doc,) = mem.iter_export(ids=["g"])
    assert "reinforcement_gain" not in doc["lifecycle"]["decay"]  # still Membrane's zero value


@pytest.mark.parametrize("field", ["min_salience", "max_age_seconds", "reinforcement_gain"])
def test_absent_decay_numbers_are_zero(field):
    decay = validate_record(go_record("d")).lifecycle.decay
    assert getattr(decay, field) == 0


def test_absent_scope_tags_relations_pinned_take_go_zero_values():
    record = validate_record(go_record("z"))
    assert (record.scope, record.tags, record.relations, record.lifecycle.pinned) == ("", [], [], False)


def test_absent_relation_weight_is_zero():
    rel = {"predicate": "mentions", "target_id": "x", "created_at": iso(T0)}
    assert validate_record(go_record("r", relations=[rel])).relations[0].weight == 0.0


def test_absent_deletion_policy_is_not_auto_prune(mem: Membrane):
    """Membrane's Prune skips a record whose policy is not auto_prune, the empty one included."""
    life = {"decay": {"curve": "exponential", "half_life_seconds": 1}, "last_reinforced_at": iso(T0)}
    mem.import_records([go_record("no-policy", salience=0, lifecycle=life),
                        go_record("auto", salience=0)])
    assert mem.get("no-policy").lifecycle.deletion_policy is None
    assert mem.prune("op", "sweep", dry_run=True) == ["auto"]
    (doc,) = mem.iter_export(ids=["no-policy"], as_of=T0)
    assert "deletion_policy" not in doc["lifecycle"]


def test_absent_revision_status_stays_absent():
    payload = semantic_payload(revision={"supersedes": "old"})
    record = validate_record(go_record("s", payload=payload))
    assert record.payload.revision.status is None
    assert record.revision_status == "active"  # no status: neither contested nor retracted
    assert record.to_json_dict()["payload"]["revision"] == {"supersedes": "old"}


NULL_LISTS = {
    "episodic": {"kind": "episodic", "timeline": None, "tool_graph": None, "artifacts": None},
    "working": {"kind": "working", "thread_id": "t", "state": "planning", "active_constraints": None,
                "next_actions": None, "open_questions": None},
    "semantic": semantic_payload(evidence=None),
    "competence": {"kind": "competence", "skill_name": "s", "triggers": None, "recipe": None,
                   "required_tools": None, "failure_modes": None, "fallbacks": None},
    "plan_graph": {"kind": "plan_graph", "plan_id": "p", "version": "1", "nodes": None, "edges": None},
    "entity": {"kind": "entity", "canonical_name": "e", "types": None, "aliases": None, "identifiers": None},
}


@pytest.mark.parametrize("type_", sorted(NULL_LISTS))
def test_null_lists_read_as_empty_lists(type_):
    doc = go_record("n", type_, payload=dict(NULL_LISTS[type_]), tags=None, relations=None,
                    provenance={"sources": None}, audit_log=None)
    record = validate_record(doc)
    assert (record.tags, record.relations, record.provenance.sources, record.audit_log) == ([], [], [], [])
    for key, value in NULL_LISTS[type_].items():
        if value is None:
            assert getattr(record.payload, key) == [], key
    # Written back as Membrane writes nil lists: null where the field is always written, left
    # out where it is omitempty.
    out = record.to_json_dict()
    assert "tags" not in out and "relations" not in out
    assert out["provenance"]["sources"] is None and out["audit_log"] is None
    always = {"timeline", "triggers", "recipe", "nodes", "edges"}
    for key, value in NULL_LISTS[type_].items():
        if value is None:
            assert (out["payload"][key] is None) if key in always else (key not in out["payload"]), key


def test_empty_lists_that_membrane_always_writes_stay_empty_lists():
    record = validate_record(go_record("e", payload={"kind": "plan_graph", "plan_id": "p", "version": "1",
                                                     "nodes": [], "edges": []}, type="plan_graph"))
    out = record.to_json_dict()
    assert (out["payload"]["nodes"], out["payload"]["edges"], out["provenance"]["sources"]) == ([], [], [])


def entity(*aliases) -> dict:
    return go_record("ent", "entity", payload={"kind": "entity", "canonical_name": "PostgreSQL", "aliases": list(aliases)})


def test_entity_aliases_are_strings_or_value_objects():
    record = validate_record(entity("pg", {"value": "postgres", "kind": "abbreviation"}, {"value": "Postgres"},
                                    {"value": "Postgres", "locale": "en"}))
    assert [a.value for a in record.payload.aliases] == ["pg", "postgres", "Postgres", "Postgres"]
    assert record.payload.aliases[1].kind == "abbreviation"
    # Membrane's EntityAlias.MarshalJSON: a plain alias (no kind, no locale) is written as a string.
    assert record.to_json_dict()["payload"]["aliases"] == [
        "pg", {"value": "postgres", "kind": "abbreviation"}, "Postgres", {"value": "Postgres", "locale": "en"}]


@pytest.mark.parametrize("bad", [5, None, True, ["pg"], {"kind": "abbreviation"}, {"value": 5},
                                 {"value": "pg", "kind": 3}])
def test_other_entity_alias_items_are_refused_naming_the_field(bad):
    with pytest.raises(ValidationError) as err:
        validate_record(entity("ok", bad))
    assert "payload.aliases.1" in str(err.value)
