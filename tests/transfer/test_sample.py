"""The bundled sample store (sample_data/membrane_sample.json) against SPEC 1-4."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from membrane_engine import Membrane, RetrieveRequest
from membrane_engine.model.records import MemoryType, Sensitivity

from tests.support.records import trust

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "membrane_sample.json"
SAMPLE_NOW_ISO = "2026-11-20T12:00:00Z"

pytestmark = pytest.mark.skipif(not SAMPLE.exists(), reason="sample_data/membrane_sample.json not written yet")


def test_sample_imports_cleanly_and_covers_the_model(sample_membrane):
    docs = json.loads(SAMPLE.read_text())
    m = sample_membrane
    assert m.count() == len(docs) >= 150
    assert sorted(m.ids()) == sorted(d["id"] for d in docs)
    by_type = m.metrics()["records_by_type"]
    assert all(by_type[t.value] > 0 for t in MemoryType), by_type
    assert len(m.scopes()) >= 3
    assert any(d["scope"] == "" for d in docs)
    assert {d["sensitivity"] for d in docs} == {s.value for s in Sensitivity}
    assert m.verify_audit() == []


def test_sample_is_retrievable_under_a_narrow_context(sample_membrane):
    from datetime import datetime, timezone

    now = datetime(2026, 11, 20, 12, 0, tzinfo=timezone.utc)
    scope = sample_membrane.scopes()[0]
    resp = sample_membrane.retrieve(RetrieveRequest(trust=trust("medium", [scope]), as_of=now))
    assert resp.records
    assert all(r.scope in ("", scope) for r in resp.records)
    assert all(r.redacted == (r.sensitivity.value == "high") for r in resp.records)
    assert all(r.sensitivity.value != "hyper" for r in resp.records)


def test_default_open_loads_the_sample_under_membrane_home(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMBRANE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MEMBRANE_DB_URL", raising=False)
    m = Membrane.open()
    try:
        assert (tmp_path / "home" / "membrane.db").exists()
        assert m.count() == len(json.loads(SAMPLE.read_text()))
    finally:
        m.close()
    again = Membrane.open()  # reopening the default store does not import it twice
    try:
        assert again.count() == len(json.loads(SAMPLE.read_text()))
    finally:
        again.close()
