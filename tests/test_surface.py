"""SPEC 8: the stable Python surface other tools call."""

from __future__ import annotations

import inspect

import pytest

from tests.support.records import T0, rec, trust


def test_names_import_from_the_documented_places():
    from membrane_engine import (Membrane, MemoryRecord, MemoryType, RetrieveRequest,  # noqa: F401
                                 RetrieveResponse, SelectionResult, Sensitivity, TrustContext)
    from membrane_engine.errors import (AccessDeniedError, AlreadyExistsError,  # noqa: F401
                                        EpisodicImmutableError, MembraneError, NilTrustError,
                                        NotFoundError, ValidationError)

    for err in (AccessDeniedError, AlreadyExistsError, EpisodicImmutableError, NilTrustError,
                NotFoundError, ValidationError):
        assert issubclass(err, MembraneError)


@pytest.mark.parametrize("name, params", [
    ("open", ["url"]), ("import_records", ["items"]), ("import_file", ["path"]), ("export_file", ["path"]),
    ("get", ["record_id"]), ("retrieve", ["request"]), ("retrieve_by_id", ["record_id", "trust"]),
    ("retrieve_by_type", ["memory_type", "trust", "as_of"]), ("explain", ["record_id", "trust", "as_of"]),
    ("salience_at", ["record_id", "when"]), ("metrics", ["as_of"]),
    ("reinforce", []), ("penalize", []), ("retract", []), ("contest", []), ("supersede", []), ("fork", []),
    ("merge", []), ("pin", []), ("unpin", []), ("reclassify", []), ("delete", []), ("restore", []),
    ("prune", []), ("audit_log", []), ("verify_audit", []),
])
def test_membrane_methods(name, params):
    from membrane_engine import Membrane

    method = getattr(Membrane, name)
    names = list(inspect.signature(method).parameters)
    for p in params:
        assert p in names, (name, names)


def test_request_defaults_and_models_round_trip(lite):
    from membrane_engine import MemoryRecord, RetrieveRequest, RetrieveResponse

    req = RetrieveRequest(trust=trust("medium", ["alpha"]))
    assert (req.task_descriptor, req.memory_types, req.min_salience, req.limit, req.as_of) == ("", [], 0.0, 0, None)
    lite.import_records([rec("c", "competence"), rec("h", "plan_graph", sensitivity="high")])
    resp = lite.retrieve(RetrieveRequest(trust=trust("medium"), as_of=T0))
    back = RetrieveResponse.model_validate_json(resp.model_dump_json())
    assert [r.id for r in back.records] == [r.id for r in resp.records]
    assert back.selection.scores == resp.selection.scores
    assert set(resp.selection.model_dump()) == {"selected", "confidence", "needs_more", "scores"}
    r = lite.get("c")
    assert MemoryRecord.model_validate(r.model_dump()) == r
    assert MemoryRecord.model_validate_json(r.model_dump_json()).model_dump() == r.model_dump()


def test_go_style_timestamps_are_read(lite):
    doc = rec("x", salience=0.5, pinned=True)
    doc["created_at"] = "2026-02-10T15:04:05.123456789Z"
    doc["updated_at"] = "2026-02-10T17:04:05.5+02:00"
    doc["lifecycle"]["last_reinforced_at"] = "0001-01-01T00:00:00Z"
    lite.import_records([doc])
    got = lite.get("x").to_json_dict()
    assert got["created_at"] == "2026-02-10T15:04:05.123456Z"
    assert got["updated_at"] == "2026-02-10T15:04:05.500000Z"
    assert got["lifecycle"]["last_reinforced_at"] == "0001-01-01T00:00:00Z"
