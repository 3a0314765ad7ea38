"""Ranking vectors made when records are imported or created (SPEC 9), kept with the store:
the small import path and the bulk one (worker processes), a provider that fails, records
created by curation, and a cold load of the stored vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest
from sqlalchemy import text

from membrane_engine import Membrane, RetrieveRequest
from membrane_engine.retrieval.graph import EntityTerms
from membrane_engine.rules.ranking import default_embedder, embed_records
from membrane_engine.storage.vectors import VECTOR_DTYPE, from_blob
from membrane_engine.model.records import MemoryRecord
from membrane_engine.transfer import jsonl_import
from membrane_engine.storage.store import BULK_ROWS

from tests.support.records import T0, default_payload, rec, trust

EVERYTHING = trust("hyper")


def stored_vectors(m: Membrane) -> dict[str, tuple[str, np.ndarray]]:
    with m.store.read() as conn:
        rows = conn.execute(text("SELECT id, model, vector FROM record_vectors")).all()
    return {rid: (model, from_blob(bytes(blob))) for rid, model, blob in rows}


def expected(m: Membrane, docs: list[dict]) -> np.ndarray:
    """What the store's provider makes of ``docs``, stored at half precision."""
    vectors = embed_records(m.embedder, [MemoryRecord.model_validate(d) for d in docs])
    return vectors.astype(VECTOR_DTYPE).astype(np.float32)


def mixed(n: int, prefix: str = "r") -> list[dict]:
    """``n`` records of every type, each saying something of its own."""
    types = ["semantic", "competence", "plan_graph", "episodic", "working", "entity"]
    docs = []
    for i in range(n):
        t = types[i % len(types)]
        payload = default_payload(t)
        if t == "semantic":
            payload["subject"] = f"service {i}"
        elif t == "competence":
            payload["skill_name"] = f"rotate key {i}"
        elif t == "plan_graph":
            payload["intent"] = f"ship release {i}"
        elif t == "entity":
            payload["canonical_name"] = f"Cluster{i}"
            payload["aliases"] = [f"c{i}", {"value": f"k8s-{i}", "kind": "short"}]
        docs.append(rec(f"{prefix}{i}", t, payload=payload))
    return docs


def check_all_stored(m: Membrane, docs: list[dict]) -> None:
    stored = stored_vectors(m)
    assert sorted(stored) == sorted(d["id"] for d in docs)
    want = expected(m, docs)
    for d, v in zip(docs, want):
        model, got = stored[d["id"]]
        assert model == m.embedder.name
        np.testing.assert_array_equal(got, v)
        assert np.any(got)  # each of these records has text to rank by


def test_a_small_import_writes_vectors_in_its_transaction(mem: Membrane) -> None:
    docs = mixed(30)
    assert mem.import_records(docs) == 30
    check_all_stored(mem, docs)


def test_a_refused_import_writes_no_vector(mem: Membrane) -> None:
    docs = mixed(10) + [rec("bad", "semantic", confidence=7.0)]
    with pytest.raises(Exception):
        mem.import_records(docs)
    assert stored_vectors(mem) == {}


class Flaky:
    """A picklable provider that fails while ``failing`` (workers get a copy of it)."""

    name = "flaky-v1"

    def __init__(self, failing: bool = True):
        self.failing = failing
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        if self.failing:
            raise RuntimeError("embedding service unavailable")
        return default_embedder().embed(texts)


def test_a_failing_provider_stores_the_records_without_vectors_and_fills_them_later(store_url: str) -> None:
    provider = Flaky()
    m = Membrane.open(store_url, load_sample=False, clock=lambda: T0, embedder=provider)
    try:
        docs = mixed(24)
        assert m.import_records(docs) == 24  # the import does not fail for its provider
        assert provider.calls >= 1
        assert stored_vectors(m) == {}
        with m.store.read() as conn:
            assert conn.execute(text("SELECT count(*) FROM records")).scalar() == 24
        provider.failing = False  # the service is back: the first ranked request fills them
        m.retrieve(RetrieveRequest(trust=EVERYTHING, task_descriptor="rotate key 3", limit=50))
        stored = stored_vectors(m)
        assert sorted(stored) == sorted(d["id"] for d in docs)
        assert {model for model, _ in stored.values()} == {"flaky-v1"}
    finally:
        m.close()


def write_jsonl(path: Path, docs: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(d) + b"\n" for d in docs))
    return path


def test_a_bulk_import_on_workers_writes_vectors_in_its_transaction(store_url: str, tmp_path: Path) -> None:
    from bench.generate import records

    docs = list(records(BULK_ROWS))
    path = write_jsonl(tmp_path / "bulk.jsonl", docs)
    m = Membrane.open(store_url, load_sample=False, clock=lambda: T0)
    try:
        assert m.import_file(path, workers=2) == BULK_ROWS
        stored = stored_vectors(m)
        assert len(stored) == BULK_ROWS
        sample = docs[:: BULK_ROWS // 50]
        want = expected(m, sample)
        for d, v in zip(sample, want):
            model, got = stored[d["id"]]
            assert model == m.embedder.name
            np.testing.assert_array_equal(got, v)
    finally:
        m.close()


def test_a_failing_provider_on_workers_leaves_the_import_whole(sqlite_url: str, tmp_path: Path) -> None:
    docs = mixed(40)
    path = write_jsonl(tmp_path / "small.jsonl", docs)
    assert jsonl_import.for_workers(Flaky()) is not None  # it travels to the workers, and fails there
    m = Membrane.open(sqlite_url, load_sample=False, clock=lambda: T0, embedder=Flaky())
    try:
        assert m.import_file(path, workers=2) == 40
        assert stored_vectors(m) == {}
    finally:
        m.close()


def test_a_failed_bulk_import_leaves_no_vector(store_url: str, tmp_path: Path) -> None:
    docs = mixed(30)
    path = tmp_path / "broken.jsonl"
    path.write_bytes(b"".join(orjson.dumps(d) + b"\n" for d in docs) + b"{not json\n")
    m = Membrane.open(store_url, load_sample=False, clock=lambda: T0)
    try:
        with pytest.raises(Exception):
            m.import_file(path, workers=2)
        assert stored_vectors(m) == {}
    finally:
        m.close()


class Counting:
    name = "counting-v1"

    def __init__(self):
        self.texts = 0

    def embed(self, texts):
        self.texts += len(texts)
        return default_embedder().embed(texts)


def test_records_created_by_curation_have_vectors(store_url: str) -> None:
    provider = Counting()
    m = Membrane.open(store_url, load_sample=False, clock=lambda: T0, embedder=provider)
    try:
        docs = mixed(12)
        m.import_records(docs)
        before = provider.texts
        m.reinforce("r0", "op", "used it")
        m.penalize("r0", 0.1, "op", "wrong once")
        m.pin("r1", "op", "keep")
        assert provider.texts == before  # operations that keep the text embed nothing
        assert len(stored_vectors(m)) == 12

        evidence = [{"source_type": "doc", "source_id": "doc-1"}]
        new = rec("r0b", "semantic", payload={**default_payload("semantic"), "subject": "gateway signing key",
                                              "evidence": evidence})
        m.supersede("r0", new, "op", "newer")
        fork = rec("r1f", "competence", payload={**default_payload("competence"), "skill_name": "rotate certs"})
        m.fork("r1", fork, "op", "variant")
        merged = rec("m1", "semantic", payload={**default_payload("semantic"), "subject": "merged facts",
                                                "evidence": evidence})
        m.merge(["r0b", "r6"], merged, "op", "together")
        stored = stored_vectors(m)
        for created in (new, fork, merged):
            model, got = stored[created["id"]]
            assert model == "counting-v1"
            np.testing.assert_array_equal(got, expected(m, [created])[0])

        # a deleted record keeps its vector in the archive's shadow; restore brings it back
        m.delete("r2", "op", "gone")
        m.restore("r2", "op", "back")
        assert "r2" in stored_vectors(m)
        # a record archived with no vector (say, imported before vectors existed) gets one on restore
        with m.store.write() as conn:
            conn.execute(text("DELETE FROM record_vectors WHERE id = 'r3'"))
        m.delete("r3", "op", "gone")
        m.restore("r3", "op", "back")
        model, got = stored_vectors(m)["r3"]
        np.testing.assert_array_equal(got, expected(m, [docs[3]])[0])
    finally:
        m.close()


def test_a_cold_load_reads_the_stored_vectors(store_url: str) -> None:
    m = Membrane.open(store_url, load_sample=False, clock=lambda: T0)
    docs = mixed(60)
    m.import_records(docs)
    m.close()
    cold = Membrane.open(store_url, load_sample=False, clock=lambda: T0)
    try:
        cold.vectors.BULK_LOAD = 0  # the one-scan path, as a million-record store takes it
        calls = []
        cold.vectors._compute = lambda ids: calls.append(ids) or {}  # nothing is recomputed
        cold.warm()
        snap = cold.columns.current()
        stored = stored_vectors(cold)
        rows = np.array([snap.row_of[d["id"]] for d in docs])
        query = np.zeros(next(iter(stored.values()))[1].shape, dtype=np.float32)
        query[:] = 1.0 / np.sqrt(len(query))
        cos, has = cold.vectors.cosines(snap, rows, query)
        assert has.all() and not calls
        for d, c, row in zip(docs, cos, rows):
            np.testing.assert_array_equal(cold.vectors._matrix[row], stored[d["id"]][1])
            assert c == pytest.approx(float(stored[d["id"]][1] @ query), abs=1e-5)
    finally:
        cold.close()


def test_entity_terms_read_in_one_scan_match_those_read_by_id(mem: Membrane) -> None:
    mem.import_records(mixed(60))
    snap = mem.columns.current()
    by_scan, by_id = EntityTerms(mem.store), EntityTerms(mem.store)
    by_scan.BULK, by_id.BULK = 0, 10**9
    by_scan.load(snap)
    by_id.load(snap)
    assert by_scan._terms == by_id._terms
    assert by_scan._terms["cluster5"] and by_scan._terms["k8s 5"] and by_scan._terms["c5"]
    rows = by_scan.matching(snap, "restart cluster5 today")
    assert [str(snap.ids[r]) for r in rows] == ["r5"]
    # a term of several words is found as a run of the task's words, and only as one
    assert sorted(str(snap.ids[r]) for r in by_scan.matching(snap, "Scale K8s-11, then c5")) == ["r11", "r5"]
    assert by_scan.matching(snap, "k8s then 11") == []


def test_cosines_of_rows_in_runs_and_scattered_equal_a_plain_product() -> None:
    from membrane_engine.storage.vectors import _dot_at

    rng = np.random.default_rng(5)
    matrix = rng.standard_normal((6000, 9)).astype(np.float32)
    query = rng.standard_normal(9).astype(np.float32)
    runs = np.concatenate([np.arange(100, 900), np.arange(2000, 2003), np.arange(4000, 5999, 3)])
    for at in (runs, rng.permutation(runs), rng.integers(0, 6000, 50), rng.integers(0, 6000, 4000), runs[:0]):
        np.testing.assert_allclose(_dot_at(matrix, at, query), matrix[at] @ query, rtol=1e-5, atol=1e-5)


def test_the_hybrid_order_of_the_head_equals_the_full_sort() -> None:
    from membrane_engine.retrieval.layered import _hybrid, _hybrid_scores

    rng = np.random.default_rng(9)
    for trial in range(60):
        n = int(rng.integers(1, 50_000))
        cos = rng.choice(rng.standard_normal(max(2, n // int(rng.integers(1, 40)))), n).astype(np.float32)  # ties
        sal = np.ones(n) if trial % 4 == 0 else rng.random(n)
        room = int(rng.integers(1, 30))
        at, scores = _hybrid_scores(cos, sal, room)
        full = _hybrid(cos, sal, np.arange(n), n)
        head = np.lexsort((at, -scores))[:room]
        want = np.lexsort((np.arange(n), -full))[:room]
        assert at[head].tolist() == want.tolist()
        np.testing.assert_array_equal(scores[head], full[want])
