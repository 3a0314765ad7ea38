"""The bulk paths write exactly what the general ones would: the import's fast document dump,
the driver-level inserts (audit chain intact), and the column cache's incremental refresh
(equal to a full reload, and never changing a snapshot already handed out)."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.generate import NOW, records
from membrane_engine import Membrane
from membrane_engine.storage.columns import ColumnCache
from membrane_engine.rules.salience import anchor_of
from membrane_engine.model.records import validate_record
from membrane_engine.storage.store import record_row


def _both_ways(doc: dict) -> tuple[dict, dict]:
    record = validate_record(doc)
    s_a, a = anchor_of(record)
    fast = record_row(record, s_a, a, None, validated=True)
    slow = record_row(validate_record(doc), s_a, a, None)
    return fast, slow


def test_fast_document_dump_equals_the_general_one_on_generated_records():
    for doc in records(400, seed=3):
        fast, slow = _both_ways(doc)
        assert fast == slow or json.loads(fast["doc"]) == json.loads(slow["doc"])
        assert {k: v for k, v in fast.items() if k != "doc"} == {k: v for k, v in slow.items() if k != "doc"}


odd_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
stamps = st.sampled_from(["2026-03-01T15:07:58Z", "2026-03-01T15:07:58.123456Z", "2026-03-01T17:07:58+02:00",
                          "2026-03-01T15:07:58", "2026-03-01T10:07:58.5-05:00"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=odd_values, extra=odd_values, created=stamps, tags=st.lists(st.text(max_size=5), max_size=3))
def test_fast_document_dump_equals_the_general_one_on_odd_values(obj, extra, created, tags):
    doc = next(iter(records(1, seed=5)))
    doc["payload"] = {"kind": doc["type"]} if doc["type"] != "semantic" else {"kind": "semantic", "object": obj}
    doc["created_at"] = doc["updated_at"] = created
    doc["tags"] = tags
    doc["x_extra"] = extra
    fast, slow = _both_ways(doc)
    assert json.loads(fast["doc"]) == json.loads(slow["doc"])
    assert fast["tags"] == slow["tags"]


def test_bulk_import_keeps_the_audit_chain_and_every_field(store_url):
    m = Membrane.open(store_url, load_sample=False, clock=lambda: NOW)
    try:
        docs = list(records(1200, seed=9))
        assert m.import_records(docs) == len(docs)
        assert m.verify_audit() == []
        for doc in docs[::97]:
            got = m.get(doc["id"])
            assert [e.action.value for e in got.audit_log] == [e["action"] for e in doc["audit_log"]] + ["create"]
            assert got.scope == doc["scope"] and got.sensitivity.value == doc["sensitivity"]
            assert sorted(got.tags) == sorted(doc["tags"])
            if "x_origin" in doc:
                assert got.model_dump(mode="json")["x_origin"] == doc["x_origin"]
        exported = {d["id"]: d for d in m.iter_export(as_of=NOW)}
        assert set(exported) == {d["id"] for d in docs}
    finally:
        m.close()


def _columns_by_id(snap) -> dict[str, tuple]:
    out = {}
    for i in np.flatnonzero(snap.alive):
        rid = str(snap.ids[i])
        d = snap.decay
        out[rid] = (int(snap.type_code[i]), int(snap.sens_level[i]), snap.scope_names[snap.scope_code[i]],
                    float(snap.confidence[i]), float(snap.created_at[i]), float(d.anchor_salience[i]),
                    float(d.anchor_at[i]), int(d.curve[i]), float(d.half_life[i]), float(d.min_salience[i]),
                    float(d.max_age[i]), bool(d.pinned[i]), d.custom_points.get(int(i)), int(snap.policy[i]),
                    repr(float(snap.last_reinforced_at[i])), float(snap.success_signal[i]))
    return out


def _frozen(snap) -> dict[str, np.ndarray]:
    arrays = {k: getattr(snap, k).copy() for k in ("ids", "alive", "type_code", "sens_level", "scope_code",
                                                    "confidence", "created_at", "policy", "last_reinforced_at")}
    arrays.update({f"decay.{k}": getattr(snap.decay, k).copy() for k in ("anchor_salience", "anchor_at", "pinned")})
    return arrays


def test_incremental_refresh_equals_a_full_reload_and_leaves_old_snapshots_alone(store_url):
    reader = Membrane.open(store_url, load_sample=False, clock=lambda: NOW)
    writer = Membrane.open(store_url, load_sample=False, clock=lambda: NOW)
    try:
        reader.import_records(list(records(500, seed=21)))
        kept = []  # (snapshot, its arrays as they were when handed out)
        rng = np.random.default_rng(0)
        for step in range(12):
            snap = reader.columns.current()
            kept.append((snap, _frozen(snap), _columns_by_id(snap)))
            ids = writer.ids()
            target = ids[int(rng.integers(len(ids)))]
            op = step % 6
            if op == 0:
                writer.import_records(list(records(30, seed=500 + step)))
            elif op == 1:
                writer.reinforce(target, "t", "reinforce")
            elif op == 2:
                writer.reclassify(target, "t", "reclassify", scope=f"new-scope-{step}", sensitivity="hyper")
            elif op == 3:
                try:
                    writer.delete(target, "t", "delete")
                except Exception:
                    writer.pin(target, "t", "pin")
            elif op == 4:
                archived = writer.archived_ids()
                if archived:
                    writer.restore(archived[0], "t", "restore")
            else:
                writer.penalize(target, 0.2, "t", "penalize")
            fresh = ColumnCache(reader.store).current()
            assert _columns_by_id(reader.columns.current()) == _columns_by_id(fresh)
        for snap, arrays, by_id in kept:
            now = _frozen(snap)
            for name, before in arrays.items():
                assert np.array_equal(before, now[name], equal_nan=True) if before.dtype.kind == "f" else \
                    np.array_equal(before, now[name]), name
            assert _columns_by_id(snap) == by_id
    finally:
        writer.close()
        reader.close()
