"""A new default store holds the sample with its "now" moved to the moment it was first opened."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from membrane_engine import Membrane
from membrane_engine.transfer.sample import SAMPLE_NOW, sample_records, sample_store_path, shift_times

OPENED = datetime(2027, 3, 14, 9, 30, 15, tzinfo=timezone.utc)
# The instants of Membrane's JSON (SPEC 1) that the sample uses.
INSTANTS = {"created_at", "updated_at", "last_reinforced_at", "timestamp", "t", "last_used_at",
            "last_executed_at", "start", "end"}


def test_every_instant_moves_by_the_same_amount_and_nothing_else_changes() -> None:
    original = json.loads(sample_store_path().read_text(encoding="utf-8"))
    shifted = sample_records(OPENED)
    by = OPENED - SAMPLE_NOW
    moved = 0

    def compare(a, b, key=None):
        nonlocal moved
        if isinstance(a, dict):
            assert a.keys() == b.keys()
            for k in a:
                compare(a[k], b[k], k)
        elif isinstance(a, list):
            assert len(a) == len(b)
            for x, y in zip(a, b):
                compare(x, y, key)
        elif isinstance(a, str) and a[:4].isdigit() and "T" in a and key in INSTANTS:
            assert datetime.fromisoformat(b.replace("Z", "+00:00")) - datetime.fromisoformat(a.replace("Z", "+00:00")) == by
            moved += 1
        else:
            assert a == b

    compare(original, shifted)
    assert moved > 500
    assert sample_records(OPENED) == shifted  # deterministic given the instant


def test_a_free_form_field_that_is_not_an_instant_is_kept() -> None:
    assert shift_times({"start": "after lunch", "t": 3, "x": "2026-01-01T00:00:00Z"}, timedelta(days=1)) == \
        {"start": "after lunch", "t": 3, "x": "2026-01-01T00:00:00Z"}


def test_the_default_store_opens_on_the_sample_as_of_its_first_opening(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMBRANE_HOME", str(tmp_path))
    monkeypatch.delenv("MEMBRANE_DB_URL", raising=False)
    m = Membrane.open(clock=lambda: OPENED)
    try:
        reference = Membrane.open(f"sqlite:///{tmp_path / 'reference.db'}", load_sample=False)
        reference.import_file(sample_store_path())
        ids = m.ids()
        assert ids == reference.ids() and len(ids) > 100
        newest = max(e.timestamp for rid in ids[:40] for e in m.audit_log(rid) if e.actor != "membrane-console:sample")
        assert SAMPLE_NOW - timedelta(days=30) < newest - (OPENED - SAMPLE_NOW) <= SAMPLE_NOW
        for rid in ids[:25]:  # the same salience now as the original had at its own "now"
            assert m.salience_at(rid, OPENED) == pytest.approx(reference.salience_at(rid, SAMPLE_NOW), abs=1e-9)
        reference.close()
    finally:
        m.close()
