"""The record search (explorer and picker) finding the label the pages show, "subject predicate
object" and the others (membrane_engine.rules.labels), on both databases."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from membrane_engine import Membrane, TrustContext
from membrane_engine.oversight.record_query import Filters, search
from membrane_engine.rules.labels import label
from membrane_engine.oversight.finders import search_records

from tests.support.records import T0, revised_store

EVERYTHING = TrustContext(max_sensitivity="hyper", authenticated=True, actor_id="agent", scopes=[])
LOW = TrustContext(max_sensitivity="low", authenticated=True, actor_id="agent", scopes=[])


@pytest.fixture
def mem(store_url: str) -> Iterator[Membrane]:
    yield from revised_store(store_url)


@pytest.mark.parametrize("text", ["python version 3.12", "PYTHON VERSION 3.1", "on version 3.1", "thon  version"])
def test_explorer_search_finds_the_displayed_label(mem: Membrane, text: str) -> None:
    total, page = search(mem, Filters(text=text), as_of=T0)
    assert "keep" in {r.id for r in page}
    assert all(text.lower().split()[0] in label(r).lower() or text.lower() in label(r).lower() for r in page)


def test_label_search_matches_only_labels_and_respects_the_clearance(mem: Membrane) -> None:
    shown = label(mem.get("secret"))
    assert shown == "Vault Root rotates_every days: 30; owner: ops"
    assert {r.id for r in search(mem, Filters(text="root rotates_every days: 30"))[1]} == {"secret"}
    # Words that all occur in the document but not in this order are no match.
    assert search(mem, Filters(text="version python"))[0] == 0
    # A clearance that sees the record redacted does not find it by what it says.
    assert search(mem, Filters(text="root rotates_every"), clearance=LOW)[0] == 0
    assert [f.id for f in search_records(mem, "root rotates_every", clearance=LOW)] == []


def test_picker_search_finds_the_displayed_label(mem: Membrane) -> None:
    assert [f.id for f in search_records(mem, "postgres version 1", clearance=EVERYTHING)] == ["new", "old"]
    assert [f.id for f in search_records(mem, "Vault Root rotates", clearance=EVERYTHING)] == ["secret"]
    assert [f.id for f in search_records(mem, "version", limit=2)] == ["gone", "keep"]
    assert [f.id for f in search_records(mem, "skill")] == ["skill", "skill-2"]  # ids still match
