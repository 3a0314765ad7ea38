"""SPEC 1: records, enums, validation at the boundary, extra fields, times."""

from __future__ import annotations

import math
from datetime import datetime, timezone

import pytest

from membrane_engine import MemoryRecord, MemoryType, Sensitivity
from membrane_engine.errors import AlreadyExistsError, ValidationError
from membrane_engine.model.records import (
    AuditAction,
    DecayCurve,
    DeletionPolicy,
    EdgeKind,
    OutcomeStatus,
    ProvenanceKind,
    RevisionStatus,
    TaskState,
    ValidityMode,
    sensitivity_level,
    validate_record,
)

from tests.support.records import T0, iso, rec

# --------------------------------------------------------------------------- enums


@pytest.mark.parametrize("enum, values", [
    (MemoryType, ["episodic", "working", "semantic", "competence", "plan_graph", "entity"]),
    (Sensitivity, ["public", "low", "medium", "high", "hyper"]),
    (DecayCurve, ["exponential", "linear", "custom"]),
    (DeletionPolicy, ["auto_prune", "manual_only", "never"]),
    (RevisionStatus, ["active", "contested", "retracted"]),
    (ValidityMode, ["global", "conditional", "timeboxed"]),
    (TaskState, ["planning", "executing", "blocked", "waiting", "done"]),
    (OutcomeStatus, ["success", "failure", "partial"]),
    (AuditAction, ["create", "revise", "fork", "merge", "delete", "reinforce", "decay"]),
    (ProvenanceKind, ["event", "artifact", "tool_call", "observation", "outcome"]),
    (EdgeKind, ["data", "control"]),
])
def test_enum_exact_strings(enum, values):
    assert sorted(m.value for m in enum) == sorted(values)
    for v in values:
        assert enum(v).value == v


def test_sensitivity_order_and_levels():
    assert [s.value for s in sorted(Sensitivity, key=lambda s: s.level)] == ["public", "low", "medium", "high", "hyper"]
    assert [Sensitivity(v).level for v in ["public", "low", "medium", "high", "hyper"]] == [0, 1, 2, 3, 4]
    assert sensitivity_level("secret") == -1
    assert sensitivity_level(None) == -1


def test_every_enum_value_is_accepted_inside_a_record():
    for curve in ["exponential", "linear", "custom"]:
        for policy in ["auto_prune", "manual_only", "never"]:
            r = validate_record(rec("x", curve=curve, deletion_policy=policy))
            assert r.lifecycle.decay.curve.value == curve
            assert r.lifecycle.deletion_policy.value == policy
    for state in ["planning", "executing", "blocked", "waiting", "done"]:
        r = validate_record(rec("w", "working", payload={"kind": "working", "state": state}))
        assert r.payload.state.value == state
    for status in ["active", "contested", "retracted"]:
        for mode in ["global", "conditional", "timeboxed"]:
            r = validate_record(rec("s", payload={"kind": "semantic", "validity": {"mode": mode},
                                                  "revision": {"status": status}}))
            assert (r.payload.revision.status.value, r.payload.validity.mode.value) == (status, mode)
    for outcome in ["success", "failure", "partial"]:
        assert validate_record(rec("e", "episodic", payload={"kind": "episodic", "outcome": outcome})).payload.outcome.value == outcome
    for action in ["create", "revise", "fork", "merge", "delete", "reinforce", "decay"]:
        r = validate_record(rec("a", audit_log=[{"action": action, "actor": "x", "timestamp": iso(T0), "rationale": "r"}]))
        assert r.audit_log[0].action.value == action
    for kind in ["event", "artifact", "tool_call", "observation", "outcome"]:
        r = validate_record(rec("p", provenance={"sources": [{"kind": kind, "ref": "r"}]}))
        assert r.provenance.sources[0].kind.value == kind
    for kind in ["data", "control"]:
        r = validate_record(rec("g", "plan_graph", payload={"kind": "plan_graph", "edges": [{"from": "a", "to": "b", "kind": kind}]}))
        assert r.payload.edges[0].kind.value == kind
        assert r.to_json_dict()["payload"]["edges"][0] == {"from": "a", "to": "b", "kind": kind}


def test_enums_accept_strings_and_members():
    a = MemoryRecord(id="x", type="semantic", sensitivity="medium", payload={"kind": "semantic"})
    b = MemoryRecord(id="x", type=MemoryType.SEMANTIC, sensitivity=Sensitivity.MEDIUM, payload={"kind": "semantic"})
    assert a.type is MemoryType.SEMANTIC and a.sensitivity is Sensitivity.MEDIUM
    assert a.model_dump(exclude={"created_at", "updated_at"}) == b.model_dump(exclude={"created_at", "updated_at"})


# --------------------------------------------------------------------------- refusals naming the field


def _without(key: str) -> dict:
    d = rec("x")
    del d[key]
    return d


REFUSALS = [
    ("missing id", _without("id"), "id"),
    ("missing type", _without("type"), "type"),
    ("missing sensitivity", _without("sensitivity"), "sensitivity"),
    ("unknown sensitivity", rec("x", sensitivity="secret"), "sensitivity"),
    ("unknown type", rec("x", type="dream"), "type"),
    ("unknown curve", rec("x", curve="cubic"), "lifecycle.decay.curve"),
    ("unknown policy", rec("x", deletion_policy="whenever"), "lifecycle.deletion_policy"),
    ("unknown task state", rec("x", "working", payload={"kind": "working", "state": "asleep"}), "payload.state"),
    ("unknown audit action", rec("x", audit_log=[{"action": "smash", "actor": "a", "timestamp": iso(T0), "rationale": ""}]),
     "audit_log.0.action"),
    ("unknown provenance kind", rec("x", provenance={"sources": [{"kind": "rumor", "ref": "r"}]}), "provenance.sources.0.kind"),
    ("unknown edge kind", rec("x", "plan_graph", payload={"kind": "plan_graph", "edges": [{"from": "a", "to": "b", "kind": "magic"}]}),
     "payload.edges.0.kind"),
    ("confidence 1.5", rec("x", confidence=1.5), "confidence"),
    ("confidence -0.1", rec("x", confidence=-0.1), "confidence"),
    ("confidence NaN", rec("x", confidence=math.nan), "confidence"),
    ("negative salience", rec("x", salience=-0.01), "salience"),
    ("infinite salience", rec("x", salience=math.inf), "salience"),
    ("NaN salience", rec("x", salience=math.nan), "salience"),
    ("missing payload", _without("payload"), "payload"),
    ("null payload", rec("x") | {"payload": None}, "payload"),
    ("payload kind differs from type", rec("x", "semantic", payload={"kind": "working"}), "payload.kind"),
    ("unknown payload kind", rec("x", payload={"kind": "dream"}), "payload"),
    ("half_life_seconds 0", rec("x", half_life=0), "lifecycle.decay.half_life_seconds"),
    ("relation weight 1.5", rec("x", relations=[{"predicate": "p", "target_id": "y", "weight": 1.5}]), "relations.0.weight"),
    ("relation weight -0.5", rec("x", relations=[{"predicate": "p", "target_id": "y", "weight": -0.5}]), "relations.0.weight"),
]


@pytest.mark.parametrize("label, doc, field", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_validation_names_the_field(label, doc, field):
    with pytest.raises(ValidationError) as info:
        validate_record(doc)
    locations = [loc for loc, _ in info.value.problems]
    assert field in locations, (label, info.value.problems)
    assert field in str(info.value)


def test_model_level_refusals_do_not_echo_the_whole_record():
    doc = rec("x", half_life=0, payload={"kind": "semantic", "object": "SECRET-PAYLOAD-TEXT"})
    with pytest.raises(ValidationError) as info:
        validate_record(doc)
    assert "SECRET-PAYLOAD-TEXT" not in str(info.value)


def test_redacted_view_skips_payload_and_half_life_rules_but_is_not_importable(lite):
    view = rec("x", half_life=0) | {"payload": None, "redacted": True}
    assert validate_record(view).redacted is True
    with pytest.raises(ValidationError) as info:
        lite.import_records([view])
    assert "record 0" in str(info.value)
    assert lite.count() == 0


# --------------------------------------------------------------------------- import-level refusals


def test_dangling_relation_target_is_refused(mem):
    with pytest.raises(ValidationError) as info:
        mem.import_records([rec("a", relations=[{"predicate": "about", "target_id": "nowhere", "weight": 0.5}])])
    assert ("record 0: relations.0.target_id") in [loc for loc, _ in info.value.problems]
    assert "nowhere" in str(info.value)
    assert mem.count() == 0


def test_relation_target_in_same_import_or_store_is_accepted(mem):
    mem.import_records([rec("a", relations=[{"predicate": "about", "target_id": "b", "weight": 1.0}]), rec("b")])
    mem.import_records([rec("c", relations=[{"predicate": "about", "target_id": "a", "weight": 0.0}])])
    assert mem.count() == 3
    assert mem.get("c").relations[0].target_id == "a"


def test_duplicate_id_in_one_import_is_a_validation_error(mem):
    with pytest.raises(ValidationError) as info:
        mem.import_records([rec("a"), rec("b"), rec("a")])
    assert "record 2: id" in [loc for loc, _ in info.value.problems]
    assert "duplicate" in str(info.value)
    assert mem.count() == 0


def test_id_already_in_store_is_already_exists(mem):
    mem.import_records([rec("a", salience=0.4)])
    with pytest.raises(AlreadyExistsError) as info:
        mem.import_records([rec("b"), rec("a", salience=0.9)])
    assert info.value.record_id == "a"
    assert mem.ids() == ["a"]  # nothing replaced, nothing added
    assert mem.get("a", as_of=T0).salience == pytest.approx(0.4)


def test_several_bad_records_are_all_reported_and_nothing_written(mem):
    items = [
        rec("ok-1"),
        rec("bad-conf", confidence=1.5),
        rec("ok-2"),
        _without("sensitivity") | {"id": "bad-sens"},
        rec("bad-kind", "competence", payload={"kind": "semantic"}),
        rec("bad-hl", half_life=0),
        rec("bad-rel", relations=[{"predicate": "p", "target_id": "ghost", "weight": 0.5}]),
        rec("ok-1"),
    ]
    with pytest.raises(ValidationError) as info:
        mem.import_records(items)
    locations = [loc for loc, _ in info.value.problems]
    for expected in ["record 1: confidence", "record 3: sensitivity", "record 4: payload.kind",
                     "record 5: lifecycle.decay.half_life_seconds", "record 6: relations.0.target_id",
                     "record 7: id"]:
        assert expected in locations, (expected, locations)
    assert not any(loc.startswith(("record 0", "record 2")) for loc in locations)
    assert mem.count() == 0
    assert mem.metrics(as_of=T0)["total_audit_entries"] == 0


# --------------------------------------------------------------------------- extra fields, times


def test_unknown_fields_survive_import_then_export(mem, tmp_path):
    doc = rec("x", "plan_graph", x_top={"k": [1, 2, {"deep": True}]}, vendor_note="keep me")
    doc["lifecycle"]["x_lifecycle"] = "lc"
    doc["lifecycle"]["decay"]["x_decay"] = 7
    doc["payload"]["x_payload"] = {"nested": "yes"}
    doc["payload"]["nodes"][0]["x_node"] = [1]
    doc["payload"]["edges"][0]["x_edge"] = "e"
    doc["provenance"] = {"sources": [{"kind": "event", "ref": "r", "x_src": 1}], "x_prov": "p"}
    doc["relations"] = [{"predicate": "self", "target_id": "x", "weight": 0.5, "x_rel": "r"}]
    mem.import_records([doc])
    out = tmp_path / "out.json"
    assert mem.export_file(out) == 1
    import json

    back = json.loads(out.read_text())[0]
    assert back["x_top"] == {"k": [1, 2, {"deep": True}]}
    assert back["vendor_note"] == "keep me"
    assert back["lifecycle"]["x_lifecycle"] == "lc"
    assert back["lifecycle"]["decay"]["x_decay"] == 7
    assert back["payload"]["x_payload"] == {"nested": "yes"}
    assert back["payload"]["nodes"][0]["x_node"] == [1]
    assert back["payload"]["edges"][0] == {"from": "n1", "to": "n2", "kind": "control", "x_edge": "e"}
    assert back["provenance"]["sources"][0]["x_src"] == 1
    assert back["provenance"]["x_prov"] == "p"
    assert back["relations"][0]["x_rel"] == "r"
    # and they come back through get() as well
    assert mem.get("x").model_dump(mode="json")["x_top"] == {"k": [1, 2, {"deep": True}]}


def test_naive_datetimes_are_utc():
    doc = rec("x")
    doc["created_at"] = "2026-06-01T12:00:00"
    doc["updated_at"] = "2026-06-01T14:00:00+02:00"
    r = validate_record(doc)
    assert r.created_at == datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
    assert r.created_at.utcoffset().total_seconds() == 0
    assert r.updated_at == datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
    assert r.to_json_dict()["created_at"] == "2026-06-01T12:00:00Z"
    assert r.to_json_dict()["updated_at"] == "2026-06-01T12:00:00Z"
    direct = MemoryRecord(id="y", type="semantic", sensitivity="low", payload={"kind": "semantic"},
                          created_at=datetime(2026, 6, 1, 12, 0))
    assert direct.created_at.tzinfo is not None and direct.created_at == T0


def test_naive_as_of_is_utc(lite):
    lite.import_records([rec("x", salience=1.0, created_at=T0)])
    naive = datetime(2026, 6, 2, 12, 0)  # one day (one half-life) after T0, read as UTC
    assert lite.salience_at("x", naive) == pytest.approx(0.5)
    assert lite.get("x", as_of=naive).salience == pytest.approx(0.5)
