"""SPEC 4, "the gate decides on what it returns": a relabel committed by another Membrane
exactly between a read path's fast index decision (the column cache) and its read of the
records' content must not hand the record out under the labels it no longer has.

The seam is forced, not raced: the reader's store is wrapped so that the writer's
``reclassify`` commits just before the reader's first (or, for an export, a later) read of
record content. Every read path that returns or writes content under a trust context has a
test, for each relabel (to hyper: hidden; to medium: redacted; to a foreign scope: hidden), on
SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import gates as kit
from tests.support.gates import CONTEXT, RELABELS, T0
from membrane_engine import Membrane, RetrieveRequest, TrustContext
from membrane_engine.errors import AccessDeniedError
from membrane_engine.oversight import trust_diff as whatif

NARROW = TrustContext(max_sensitivity="public", actor_id="agent-narrow", scopes=["alpha"])  # low is redacted to it


@pytest.fixture
def pair(store_url: str) -> Iterator[tuple[Membrane, Membrane]]:
    """A reader and a writer: two Membranes (two engines, two connection pools) on one store."""
    reader = Membrane.open(store_url, load_sample=False, clock=lambda: T0)
    reader.import_records(kit.store_records(), actor="test:gate")
    writer = Membrane.open(store_url, load_sample=False, clock=lambda: T0)
    reader.columns.current()  # the reader's index is up to date before the request starts
    yield reader, writer
    writer.close()
    reader.close()


def relabel_at_content_read(monkeypatch, reader: Membrane, writer: Membrane, record_id: str, relabel: str,
                            at_read: int = 1) -> list[int]:
    """Commit ``relabel`` of ``record_id`` through ``writer`` just before the reader's
    ``at_read``-th read of record content (either of the store's two content reads), after
    every index decision the reader made before it. Returns a one-item list counting reads."""
    args, _ = RELABELS[relabel]
    seen = [0]
    store = reader.store

    def hooked(original):
        def read(*a, **k):
            seen[0] += 1
            if seen[0] == at_read:
                writer.reclassify(record_id, "test:writer", "relabel between decision and read", **args)
            return original(*a, **k)
        return read

    monkeypatch.setattr(store, "records_with_logs", hooked(store.records_with_logs))
    monkeypatch.setattr(store, "fetch", hooked(store.fetch))
    return seen


def assert_gated(items: list, record_id: str, relabel: str) -> None:
    """The relabelled record is absent (hidden) or redacted, and nothing went beyond CONTEXT."""
    assert kit.leaks(items) == []
    got = [kit.as_dict(i) for i in items if kit.as_dict(i)["id"] == record_id]
    if RELABELS[relabel][1] == "hidden":
        assert got == [], f"{record_id} relabelled {relabel} was returned"
    else:
        assert len(got) == 1 and got[0].get("redacted") is True and got[0]["payload"] is None
        assert got[0]["sensitivity"] == "medium"


RELABEL_NAMES = list(RELABELS)


@pytest.mark.parametrize("relabel", RELABEL_NAMES)
def test_retrieve(pair, monkeypatch, relabel):
    reader, writer = pair
    before = reader.retrieve(RetrieveRequest(trust=CONTEXT, limit=3))
    target = before.records[1].id  # on the page, in full, before the relabel
    assert not before.records[1].redacted
    seen = relabel_at_content_read(monkeypatch, reader, writer, target, relabel)
    resp = reader.retrieve(RetrieveRequest(trust=CONTEXT, limit=3))
    assert seen[0] >= 1
    assert_gated(resp.records, target, relabel)
    # A record the read hides leaves the page and is not replaced (SPEC 4 via retrieval.run).
    expected = [r.id for r in before.records if not (r.id == target and RELABELS[relabel][1] == "hidden")]
    assert [r.id for r in resp.records] == expected


@pytest.mark.parametrize("relabel", RELABEL_NAMES)
def test_retrieve_by_type(pair, monkeypatch, relabel):
    reader, writer = pair
    relabel_at_content_read(monkeypatch, reader, writer, "semantic-0", relabel)
    assert_gated(reader.retrieve_by_type("semantic", CONTEXT), "semantic-0", relabel)


@pytest.mark.parametrize("relabel", RELABEL_NAMES)
def test_retrieve_by_id(pair, monkeypatch, relabel):
    reader, writer = pair
    assert reader.retrieve_by_id("semantic-0", CONTEXT).payload is not None
    relabel_at_content_read(monkeypatch, reader, writer, "semantic-0", relabel)
    with pytest.raises(AccessDeniedError, match="semantic-0"):
        reader.retrieve_by_id("semantic-0", CONTEXT)


@pytest.mark.parametrize("relabel", RELABEL_NAMES)
def test_simulate(pair, monkeypatch, relabel):
    reader, writer = pair
    relabel_at_content_read(monkeypatch, reader, writer, "working-0", relabel)
    sim = reader.simulate(RetrieveRequest(trust=CONTEXT, memory_types=["working", "semantic"]))
    assert_gated(sim.response.records, "working-0", relabel)


@pytest.mark.parametrize("relabel", RELABEL_NAMES)
def test_selector_selected(pair, monkeypatch, relabel):
    """Without an embedder the selector ranks on the columns; its chosen records are read with
    the page and must be gated as read."""
    reader, writer = pair
    before = reader.retrieve(RetrieveRequest(trust=CONTEXT, task_descriptor="deploy", limit=1))
    assert "competence-0" in [r.id for r in before.selection.selected]
    relabel_at_content_read(monkeypatch, reader, writer, "competence-0", relabel)
    resp = reader.retrieve(RetrieveRequest(trust=CONTEXT, task_descriptor="deploy", limit=1))
    assert_gated(resp.selection.selected, "competence-0", relabel)
    assert kit.leaks(resp.records) == []


class RecordingEmbedder:
    """A ranking provider (SPEC 9) that remembers every text it was shown."""

    name = "recording"

    def __init__(self) -> None:
        self.shown: list[str] = []

    def embed(self, texts):
        import numpy as np

        self.shown.extend(texts)
        return np.array([[1.0, float(len(t) % 3)] for t in texts])


@pytest.mark.parametrize("relabel", RELABEL_NAMES)
def test_selector_candidates_with_embedder(pair, monkeypatch, relabel):
    """With a ranking provider the candidates are scored on vectors computed from their text
    when they were stored (or first asked for), never on content read for the request: the
    provider sees only the task descriptor during it, and a candidate relabelled before the
    content read comes back as its new labels allow (redacted: no payload) or not at all."""
    from membrane_engine.storage.vectors import VectorIndex

    reader, writer = pair
    embedder = RecordingEmbedder()
    reader.embedder, reader.vectors = embedder, VectorIndex(reader.store, embedder)
    reader.retrieve(RetrieveRequest(trust=CONTEXT, task_descriptor="deploy", limit=1))  # vectors made
    assert any(kit.canary("competence-1") in shown for shown in embedder.shown)  # records were embedded
    embedder.shown.clear()
    relabel_at_content_read(monkeypatch, reader, writer, "competence-0", relabel)
    resp = reader.retrieve(RetrieveRequest(trust=CONTEXT, task_descriptor="deploy", limit=1))
    assert embedder.shown == ["deploy"]
    assert_gated(resp.selection.selected, "competence-0", relabel)
    assert kit.leaks(resp.records) == []


@pytest.mark.parametrize("relabel", RELABEL_NAMES)
def test_what_if_record(pair, monkeypatch, relabel):
    """What-if decides on the columns; the record it then shows is gated as read."""
    reader, writer = pair
    diff = whatif.compare(reader, NARROW, CONTEXT, limit=100)
    assert "semantic-0" in [c.id for c in diff.rows]  # redacted under NARROW, full under CONTEXT
    relabel_at_content_read(monkeypatch, reader, writer, "semantic-0", relabel)
    shown = whatif.record_view(reader, "semantic-0", NARROW, CONTEXT)
    if RELABELS[relabel][1] == "hidden":
        # hyper is hidden under both; foreign scope is hidden under both (both name alpha only)
        assert shown is None
    else:
        view, verdict = shown
        assert verdict.value == "redacted" and view.payload is None and kit.leaks([view]) == []


@pytest.mark.parametrize("relabel", RELABEL_NAMES)
def test_export_under_trust(pair, monkeypatch, relabel):
    """An export decides once and reads in batches: a record relabelled after the first batch
    was read is written as its new labels allow."""
    reader, writer = pair
    relabel_at_content_read(monkeypatch, reader, writer, "working-1", relabel, at_read=2)
    docs = list(reader.iter_export(trust=CONTEXT, batch=1))
    assert len(docs) >= 2
    assert_gated(docs, "working-1", relabel)


@pytest.mark.parametrize("relabel", RELABEL_NAMES)
def test_export_file_under_trust(pair, monkeypatch, tmp_path, relabel):
    reader, writer = pair
    relabel_at_content_read(monkeypatch, reader, writer, "entity-0", relabel)
    path = tmp_path / "out.jsonl"
    reader.export_file(path, trust=CONTEXT)
    text = path.read_text()
    assert kit.canary("entity-0") not in text
    assert kit.canary("entity-1") in text


def test_the_rule_as_read_is_the_rule_explained():
    """``verdict_as_read`` (what every gated read applies to the labels it read) gives exactly
    ``decide``'s verdict (what ``explain`` says), unknown sensitivities and absent scopes
    included; ``gate_as_read`` returns the record, its redacted view, or nothing accordingly."""
    from membrane_engine import MemoryRecord
    from membrane_engine.rules.trust import decide, gate_as_read, verdict_as_read

    levels = ["public", "low", "medium", "high", "hyper", "secret", "", None]
    scopes = ["", None, "alpha", "beta"]
    for max_sensitivity in ["public", "low", "medium", "high", "hyper"]:
        for allowed in [[], ["alpha"], ["alpha", "gamma"]]:
            trust = TrustContext(max_sensitivity=max_sensitivity, scopes=allowed)
            for sensitivity in levels:
                for scope in scopes:
                    assert verdict_as_read(sensitivity, scope, trust) is decide(sensitivity, scope or "", trust).verdict
    base = MemoryRecord.model_validate(kit.record("semantic-9", "semantic"))
    for sensitivity, scope, expected in [("low", "alpha", "full"), ("medium", "alpha", "redacted"),
                                         ("hyper", "alpha", "hidden"), ("low", "beta", "hidden"), ("low", "", "full")]:
        view = gate_as_read(base.model_copy(update={"sensitivity": sensitivity, "scope": scope}), CONTEXT)
        got = "hidden" if view is None else "redacted" if view.redacted else "full"
        assert got == expected, (sensitivity, scope)
        assert view is None or view.redacted or view.payload is not None
