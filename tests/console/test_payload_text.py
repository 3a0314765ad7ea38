"""Payloads read as text (issue 22): objects as "key: value", lists as items, never JSON or a
Python dict's text; in the record explorer's tables and in a label."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from console.components.payload import as_lines, as_text, readable
from membrane_engine import Membrane

PAGE = Path(__file__).resolve().parents[2] / "console" / "app_pages" / "records.py"
WHEN = "2026-11-19T12:00:00Z"


def test_objects_and_lists_read_as_words():
    value = {"batch_rows": 10000, "pause": "2s", "hosts": ["a", "b"], "limits": {"rps": 5, "burst": 9},
             "on": True}
    assert readable(value) == "batch_rows: 10000; pause: 2s; hosts: a, b; limits: (rps: 5; burst: 9); on: true"
    assert as_lines(value) == ["batch_rows: 10000", "pause: 2s", "hosts:", "  - a", "  - b", "limits:",
                               "  rps: 5", "  burst: 9", "on: true"]
    assert as_lines([{"x": 1, "y": 2}, "z"]) == ["- x: 1", "  y: 2", "- z"]
    assert readable([[0, 1], [3600, 0.5]]) == "(0, 1), (3600, 0.5)"  # a custom decay curve's points
    assert readable([{"x": 1, "y": 2}, {"x": 3}]) == "(x: 1; y: 2), x: 3"
    assert as_text({"a": "x" * 500}, limit=20).startswith("a: " + "x" * 17)
    for text in (readable(value), "\n".join(as_lines(value))):
        assert "{" not in text and "'" not in text and '"' not in text


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'payload.db'}"
    m = Membrane.open(url, load_sample=False)
    base = {"sensitivity": "low", "confidence": 0.9, "salience": 0.9, "scope": "", "created_at": WHEN,
            "updated_at": WHEN, "lifecycle": {"decay": {"curve": "exponential", "half_life_seconds": 86400}}}
    m.import_records([
        {**base, "id": "fact", "type": "semantic",
         "payload": {"kind": "semantic", "subject": "maya", "predicate": "uses_editor",
                     "object": {"editor": "Neovim", "distribution": "LazyVim"}, "x_note": {"why": "speed"}}},
        {**base, "id": "ent", "type": "entity",
         "payload": {"kind": "entity", "canonical_name": "Maya Chen", "primary_type": "person",
                     "aliases": ["maya", {"value": "mchen", "kind": "handle"}],
                     "identifiers": [{"namespace": "github", "value": "mchen"}]}},
    ])
    m.close()
    monkeypatch.setenv("MEMBRANE_DB_URL", url)
    st.cache_resource.clear()
    st.cache_data.clear()
    yield url
    st.cache_resource.clear()
    st.cache_data.clear()


def _all_text(at: AppTest) -> list[str]:
    out = [e.value for e in at.markdown] + [e.value for e in at.text] + [e.value for e in at.caption]
    for frame in at.dataframe:
        out.extend(str(v) for v in frame.value.to_numpy().ravel())
    return out


def test_the_explorer_shows_payload_objects_and_aliases_as_text(store):
    at = AppTest.from_file(str(PAGE), default_timeout=60).run()
    assert not at.exception
    table = at.dataframe[0].value
    assert list(table.columns[:2]) == ["summary", "type"]  # the label first
    assert set(table["summary"]) == {"maya uses_editor editor: Neovim; distribution: LazyVim", "Maya Chen"}
    assert set(table["scope"]) == {"(unscoped)"}
    for rid, expected in (("fact", ["editor: Neovim; distribution: LazyVim", "why: speed"]),
                          ("ent", ["maya", "mchen (handle)", "github"])):
        at.query_params["id"] = rid
        at.run()
        assert not at.exception
        shown = _all_text(at)
        for text in expected:
            assert any(text in s for s in shown), (rid, text)
        assert any("**Scope:** (unscoped)" in s for s in shown)  # an unscoped record says so
        payload = [s for s in shown if "Neovim" in s or "mchen" in s]
        assert payload and not any("{" in s or "'value'" in s for s in payload), payload
