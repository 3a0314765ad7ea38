"""Property tests (hypothesis) on random stores and random trust contexts, on SQLite.

The reference implementation here is deliberately naive: it loads every record with
``Membrane.get``, gates it with ``trust.decide``, filters and sorts in Python. The engine's
fast path (column cache, numpy) must agree with it exactly, also after another Membrane
instance has written to the same file between queries.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from membrane_engine import Membrane, MemoryRecord, RetrieveRequest, TrustContext
from membrane_engine.errors import MembraneError
from membrane_engine.model.records import LAYER_RANK, SELECTOR_TYPES
from membrane_engine.rules.selector import select
from membrane_engine.rules.trust import Verdict, decide, redact

from tests.support.records import DAY, HOUR, T0, iso
from sqlalchemy import create_engine, text

POSTGRES_URL = os.environ.get("MEMBRANE_TEST_POSTGRES_URL", "")

TYPES = ["episodic", "working", "semantic", "competence", "plan_graph", "entity"]
LEVELS = ["public", "low", "medium", "high", "hyper"]
SCOPES = ["", "alpha", "beta", "gamma"]
LATER_SCOPES = SCOPES + ["delta", "epsilon"]
# Each example opens fresh SQLite files; on tmpfs that costs a fifth of what fsyncs on disk do.
FAST_TMP = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
PROPS = settings(max_examples=35, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def markers(rid: str) -> dict[str, str]:
    """Unique strings planted in the parts of a record a redacted view must never show."""
    return {part: f"zq{rid}{part}" for part in ("PAY", "PROV", "CREATOR", "REL", "AUDIT", "EXTRA", "LCX")}


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


# --------------------------------------------------------------------------- strategies


@st.composite
def decay_points(draw):
    k = draw(st.integers(1, 3))
    times = sorted(draw(st.lists(st.integers(60, 7 * DAY), min_size=k, max_size=k, unique=True)))
    factors = sorted(draw(st.lists(st.floats(0, 1), min_size=k, max_size=k)), reverse=True)
    return [[0, 1]] + [[t, f] for t, f in zip(times, factors)]


@st.composite
def record_doc(draw, rid: str, scopes: list[str], targets: list[str]):
    type_ = draw(st.sampled_from(TYPES))
    mk = markers(rid)
    created = at(-draw(st.one_of(st.sampled_from([0, HOUR, DAY, 3 * DAY]), st.integers(0, 20 * DAY))))
    updated = created + timedelta(seconds=draw(st.sampled_from([0, 0, 600, DAY])),
                                  microseconds=draw(st.sampled_from([0, 0, 1, 999_999, 123_457])))
    curve = draw(st.sampled_from(["exponential", "linear", "custom"]))
    decay = {
        "curve": curve,
        "half_life_seconds": draw(st.sampled_from([60, HOUR, DAY, 7 * DAY])),
        "min_salience": draw(st.sampled_from([0.0, 0.0, 0.1, 0.3])),
        "max_age_seconds": draw(st.sampled_from([0, 0, 0, DAY, 5 * DAY])),
        "reinforcement_gain": 0.1,
    }
    if curve == "custom" and draw(st.booleans()):
        decay["points"] = draw(decay_points())
    lifecycle = {"decay": decay, "pinned": draw(st.booleans()),
                 "deletion_policy": draw(st.sampled_from(["auto_prune", "manual_only"])),
                 "x_lifecycle": mk["LCX"]}
    if draw(st.booleans()):
        lifecycle["last_reinforced_at"] = iso(at(draw(st.integers(-60 * DAY, 2 * DAY))))
    if draw(st.booleans()):
        lifecycle["anchor_salience"] = draw(st.floats(0, 1.2))
        lifecycle["anchor_at"] = iso(at(draw(st.integers(-5 * DAY, DAY)))
                                     + timedelta(microseconds=draw(st.integers(0, 999_999))))
    payload: dict = {"kind": type_}
    if type_ == "semantic":
        payload |= {"subject": "s", "object": {"secret": mk["PAY"]}}
    elif type_ == "episodic":
        payload |= {"timeline": [{"t": iso(created), "event_kind": "k", "ref": "r", "summary": mk["PAY"]}]}
    elif type_ == "working":
        payload |= {"context_summary": mk["PAY"], "state": "blocked"}
    elif type_ == "competence":
        payload |= {"skill_name": mk["PAY"]}
        if draw(st.booleans()):
            payload["performance"] = {"success_count": draw(st.integers(0, 20)), "failure_count": draw(st.integers(0, 20)),
                                      "success_rate": draw(st.floats(0, 1))}
    elif type_ == "plan_graph":
        payload |= {"intent": mk["PAY"]}
        if draw(st.booleans()):
            payload["metrics"] = {"failure_rate": draw(st.floats(0, 1)), "execution_count": draw(st.integers(0, 9))}
    else:
        payload |= {"canonical_name": mk["PAY"]}
    doc = {
        "id": rid, "type": type_,
        "sensitivity": draw(st.sampled_from(LEVELS)),
        "confidence": draw(st.one_of(st.sampled_from([0.0, 0.5, 1.0]), st.floats(0, 1))),
        "salience": draw(st.one_of(st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0]), st.floats(0, 1.5))),
        "scope": draw(st.sampled_from(scopes)),
        "tags": draw(st.lists(st.sampled_from(["t1", "t2", "t3"]), max_size=2)),
        "created_at": iso(created), "updated_at": iso(updated),
        "lifecycle": lifecycle,
        "provenance": {"sources": [{"kind": "tool_call", "ref": mk["PROV"]}], "created_by": mk["CREATOR"]},
        "relations": [{"predicate": mk["REL"], "target_id": draw(st.sampled_from(targets + [rid])), "weight": 0.5}],
        "payload": payload,
        "x_extra": mk["EXTRA"],
    }
    if draw(st.booleans()):
        doc["audit_log"] = [{"action": "create", "actor": mk["AUDIT"], "timestamp": iso(created), "rationale": mk["AUDIT"]}]
    return doc


@st.composite
def store_docs(draw, prefix: str = "a", scopes: list[str] = SCOPES, existing: list[str] = (), min_size: int = 0,
               max_size: int = 14):
    n = draw(st.integers(min_size, max_size))
    docs: list[dict] = []
    for i in range(n):
        docs.append(draw(record_doc(f"{prefix}{i:02d}", scopes, list(existing) + [d["id"] for d in docs])))
    return docs


trust_contexts = st.builds(
    TrustContext,
    max_sensitivity=st.sampled_from(LEVELS),
    authenticated=st.booleans(),
    actor_id=st.sampled_from(["", "agent"]),
    scopes=st.lists(st.sampled_from(LATER_SCOPES + ["zeta"]), max_size=3),
)


@st.composite
def requests(draw):
    return RetrieveRequest(
        trust=draw(trust_contexts),
        memory_types=draw(st.lists(st.sampled_from(TYPES), max_size=4)),
        min_salience=draw(st.one_of(st.sampled_from([0.0, 0.0, 0.1, 0.25, 0.5]), st.floats(0, 1.2))),
        limit=draw(st.sampled_from([0, 0, 1, 2, 5, 10000])),
        as_of=at(draw(st.one_of(st.sampled_from([0, HOUR, DAY]), st.integers(-DAY, 12 * DAY)))),
    )


# --------------------------------------------------------------------------- the naive reference


def reference(m: Membrane, req: RetrieveRequest, threshold: float = 0.7):
    """(records, selection) computed the slow, obvious way."""
    types = set(req.memory_types) or set(TYPES)
    passing: list[tuple[MemoryRecord, bool]] = []
    for rid in m.ids():
        r = m.get(rid, as_of=req.as_of)
        if r.type.value not in types:
            continue
        verdict = decide(r.sensitivity, r.scope, req.trust).verdict
        if verdict is Verdict.HIDDEN:
            continue
        if req.min_salience > 0 and r.salience < req.min_salience:
            continue
        passing.append((r, verdict is Verdict.REDACTED))
    passing.sort(key=lambda p: (-p[0].salience, LAYER_RANK[p[0].type.value], -p[0].created_at.timestamp(), p[0].id))
    views = [redact(r) if red else r for r, red in passing]
    candidates = [v for v in views if v.type.value in SELECTOR_TYPES]
    selection = select(candidates, req.as_of, threshold) if candidates else None
    return (views[: req.limit] if req.limit else views), selection


def assert_matches_reference(m: Membrane, req: RetrieveRequest) -> None:
    got = m.retrieve(req)
    want, want_sel = reference(m, req)
    assert [r.id for r in got.records] == [r.id for r in want]
    for g, w in zip(got.records, want):
        assert g.model_dump(mode="json") == w.model_dump(mode="json")
    if want_sel is None:
        assert got.selection is None
    else:
        sel = got.selection
        assert [r.id for r in sel.selected] == [r.id for r in want_sel.selected]
        assert sel.scores.keys() == want_sel.scores.keys()
        for k, v in want_sel.scores.items():
            assert abs(sel.scores[k] - v) <= 1e-12
        assert abs(sel.confidence - want_sel.confidence) <= 1e-12
        assert sel.needs_more == want_sel.needs_more
        for g, w in zip(sel.selected, want_sel.selected):
            assert g.model_dump(mode="json") == w.model_dump(mode="json")


def sort_key(r: MemoryRecord):
    return (-r.salience, LAYER_RANK[r.type.value], -r.created_at.timestamp(), r.id)


def new_store(tmp: str) -> tuple[Membrane, str]:
    url = f"sqlite:///{Path(tmp) / 'p.db'}"
    return Membrane.open(url, load_sample=False, clock=lambda: T0), url


# --------------------------------------------------------------------------- properties


@PROPS
@given(docs=store_docs(), reqs=st.lists(requests(), min_size=1, max_size=4))
def test_no_hidden_record_is_returned_and_redaction_is_total(docs, reqs):
    originals = {d["id"]: d for d in docs}
    with tempfile.TemporaryDirectory(dir=FAST_TMP) as tmp:
        m, _ = new_store(tmp)
        try:
            m.import_records(docs)
            for req in reqs:
                resp = m.retrieve(req)
                shown = list(resp.records) + (list(resp.selection.selected) if resp.selection else [])
                for r in shown:
                    d = originals[r.id]
                    verdict = decide(d["sensitivity"], d["scope"], req.trust).verdict
                    assert verdict is not Verdict.HIDDEN
                    assert r.redacted == (verdict is Verdict.REDACTED)
                    blob = r.model_dump_json()
                    if r.redacted:
                        assert r.payload is None and r.audit_log == [] and r.relations == []
                        for marker in markers(r.id).values():
                            assert marker not in blob
                    else:
                        assert markers(r.id)["PAY"] in blob
                assert [sort_key(r) for r in resp.records] == sorted(sort_key(r) for r in resp.records)
                if req.min_salience > 0:
                    assert all(r.salience >= req.min_salience for r in resp.records)
                if req.memory_types:
                    assert all(r.type.value in req.memory_types for r in resp.records)
                if req.limit:
                    assert len(resp.records) <= req.limit
        finally:
            m.close()


@PROPS
@given(docs=store_docs(), reqs=st.lists(requests(), min_size=1, max_size=4))
def test_fast_path_equals_naive_reference(docs, reqs):
    with tempfile.TemporaryDirectory(dir=FAST_TMP) as tmp:
        m, _ = new_store(tmp)
        try:
            m.import_records(docs)
            everything = RetrieveRequest(trust=TrustContext(max_sensitivity="hyper"), as_of=reqs[0].as_of)
            for req in reqs + [everything]:
                assert_matches_reference(m, req)
                for r in m.retrieve_by_type("competence", req.trust, as_of=req.as_of):
                    assert decide(r.sensitivity, r.scope, req.trust).verdict is not Verdict.HIDDEN
        finally:
            m.close()


@st.composite
def write_rounds(draw):
    rounds = []
    for k in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["import", "import", "reclassify", "pin", "delete", "restore"]))
        rounds.append((op, draw(st.integers(0, 10_000)), draw(requests())))
    return rounds


@contextmanager
def fresh_store_url(kind: str):
    """A URL to an empty store: a SQLite file on tmpfs, or a PostgreSQL schema of its own."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(dir=FAST_TMP) as tmp:
            yield f"sqlite:///{Path(tmp) / 'p.db'}"
        return
    schema = "tp_" + uuid.uuid4().hex[:12]
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        sep = "&" if "?" in POSTGRES_URL else "?"
        yield f"{POSTGRES_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=store_docs(min_size=1), rounds=write_rounds(), data=st.data())
def test_cache_stays_current_across_instances(first, rounds, data):
    check_cache_across_instances("sqlite", first, rounds, data)


@pytest.mark.postgres
@pytest.mark.skipif(not POSTGRES_URL, reason="MEMBRANE_TEST_POSTGRES_URL is not set")
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=store_docs(min_size=1, max_size=8), rounds=write_rounds(), data=st.data())
def test_cache_stays_current_across_instances_on_postgres(first, rounds, data):
    check_cache_across_instances("postgres", first, rounds, data)


def check_cache_across_instances(kind, first, rounds, data):
    with fresh_store_url(kind) as url:
        a = Membrane.open(url, load_sample=False, clock=lambda: T0)
        try:
            a.import_records(first)
            assert_matches_reference(a, data.draw(requests()))
            for n, (op, pick, req) in enumerate(rounds):
                b = Membrane.open(url, clock=lambda: T0)  # another instance on the same file
                try:
                    ids = b.ids()
                    target = ids[pick % len(ids)] if ids else None
                    try:
                        if op == "import" or target is None:
                            b.import_records(data.draw(store_docs(prefix=f"n{n}-", scopes=LATER_SCOPES,
                                                                  existing=ids, min_size=1, max_size=6)))
                        elif op == "reclassify":
                            b.reclassify(target, "tester", "property test",
                                         sensitivity=data.draw(st.sampled_from(LEVELS)),
                                         scope=data.draw(st.sampled_from(LATER_SCOPES)))
                        elif op == "pin":
                            b.pin(target, "tester", "property test")
                        elif op == "delete":
                            b.delete(target, "tester", "property test")
                        elif op == "restore":
                            archived = b.archived_ids()
                            if archived:
                                b.restore(archived[pick % len(archived)], "tester", "property test")
                    except MembraneError:
                        pass  # e.g. a policy that forbids the operation: nothing was written
                finally:
                    b.close()
                assert_matches_reference(a, req)
                # and one request that sees every record, so each row of the cache is compared
                assert_matches_reference(a, RetrieveRequest(trust=TrustContext(max_sensitivity="hyper"),
                                                            as_of=req.as_of))
                assert a.ids() == sorted(a.ids())
                assert a.count() == len(a.ids())
        finally:
            a.close()


@PROPS
@given(docs=store_docs(min_size=1), export_at=st.integers(-DAY, 5 * DAY),
       probes=st.lists(st.integers(-2 * DAY, 15 * DAY), min_size=1, max_size=4), jsonl=st.booleans())
def test_export_then_import_reproduces_every_record_and_curve(docs, export_at, probes, jsonl):
    with tempfile.TemporaryDirectory(dir=FAST_TMP) as tmp:
        m, _ = new_store(tmp)
        fresh = Membrane.open(f"sqlite:///{Path(tmp) / 'fresh.db'}", load_sample=False, clock=lambda: T0)
        try:
            m.import_records(docs)
            path = Path(tmp) / ("out.jsonl" if jsonl else "out.json")
            assert m.export_file(path, as_of=at(export_at)) == len(docs)
            exported = ([json.loads(x) for x in path.read_text().splitlines() if x.strip()] if jsonl
                        else json.loads(path.read_text()))
            for d in exported:
                assert abs(d["salience"] - m.salience_at(d["id"], at(export_at))) <= 1e-12
            assert fresh.import_file(path) == len(docs)
            assert fresh.ids() == m.ids()
            fixed = at(probes[0])
            for d in docs:
                again, first = fresh.get(d["id"], as_of=fixed), m.get(d["id"], as_of=fixed)
                assert again.audit_log[:-1] == first.audit_log  # then the second importer's own entry
                assert again.model_dump(exclude={"audit_log"}) == first.model_dump(exclude={"audit_log"})
                for p in probes:
                    assert fresh.salience_at(d["id"], at(p)) == m.salience_at(d["id"], at(p))
            times = [at(p) for p in probes]
            assert fresh.salience_curves(m.ids(), times) == m.salience_curves(m.ids(), times)
        finally:
            m.close()
            fresh.close()
