"""The public calls that came after the bad-argument sweep (retrieve_graph, verify_audit's
checkpoint, a record's history): each bad argument is a MembraneError naming it, and the store
is unchanged."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from membrane_engine import Membrane, RetrieveGraphRequest, TrustContext
from membrane_engine.errors import NilTrustError, ValidationError

LOW = TrustContext(max_sensitivity="low")

CASES = [
    ("verify_audit", lambda m: m.verify_audit(checkpoint="x"), ValidationError, "checkpoint"),
    ("verify_audit", lambda m: m.verify_audit(checkpoint={"a": 1}), ValidationError, "checkpoint"),
    ("verify_audit", lambda m: m.verify_audit(checkpoint=5), ValidationError, "checkpoint"),
    ("retrieve_graph", lambda m: m.retrieve_graph("x"), ValidationError, "request"),
    ("retrieve_graph", lambda m: m.retrieve_graph({"trust": None}), NilTrustError, "trust"),
    ("retrieve_graph", lambda m: m.retrieve_graph(RetrieveGraphRequest(trust=LOW, root_limit=-1)), ValidationError, "root_limit"),
    ("retrieve_graph", lambda m: m.retrieve_graph(RetrieveGraphRequest(trust=LOW, max_hops=-2)), ValidationError, "max_hops"),
    ("history", lambda m: m.history(" "), ValidationError, "record_id"),
    ("record_at", lambda m: m.record_at("a", "yesterday"), ValidationError, "when"),
    ("salience_history", lambda m: m.salience_history("a", [1]), ValidationError, "times"),
]


@pytest.fixture
def mem(store_url: str) -> Iterator[Membrane]:
    m = Membrane.open(store_url, load_sample=False, embedder=None)
    m.import_records([{"id": "a", "type": "semantic", "sensitivity": "low", "payload": {
        "kind": "semantic", "subject": "s", "predicate": "p", "object": "o"}}], actor="test")
    yield m
    m.close()


def _state(m: Membrane) -> tuple:
    checkpoint = m.audit_checkpoint()
    return m.count(), checkpoint["entries"], checkpoint["head"], m.store.peeking(m.store.change_counter)


@pytest.mark.parametrize("name, call, error, argument", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_bad_argument_is_refused_naming_it(mem: Membrane, name, call, error, argument) -> None:
    before = _state(mem)
    with pytest.raises(error, match=argument):
        call(mem)
    assert _state(mem) == before
