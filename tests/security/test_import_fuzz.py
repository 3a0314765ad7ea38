"""Fuzzing the import path (hypothesis): random JSON values, random bytes as files, and random
mutations of valid records (fields dropped or replaced, wrong types, huge numbers, NaN and
infinities, long and odd strings) raise nothing but MembraneError subclasses. A mutated
record that is accepted must then read back, retrieve and export without error.

Examples per test are modest for CI; MEMBRANE_SECURITY_FULL=1 runs ten times as many."""

from __future__ import annotations

import copy
import itertools
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from membrane_engine import Membrane, RetrieveRequest, TrustContext
from membrane_engine.errors import MembraneError
from membrane_engine.transfer.imports import parse_text

from tests.support.security import FULL, iso, T0, open_loaded, simple

SCALE = 10 if FULL else 1
TYPES = ("episodic", "working", "semantic", "competence", "plan_graph", "entity")
EVERYTHING = TrustContext(max_sensitivity="hyper")
_ids = itertools.count()


def base_records() -> list[dict[str, Any]]:
    """One rich valid record per type (every optional part filled, so mutations reach it)."""
    out = []
    for type_ in TYPES:
        r = simple(f"base-{type_}", type_)
        r["lifecycle"]["last_reinforced_at"] = iso(T0)
        r["lifecycle"]["anchor_salience"] = 0.5
        r["lifecycle"]["anchor_at"] = iso(T0)
        r["provenance"]["sources"][0].update(hash="h", created_by="c", timestamp=iso(T0))
        r["relations"] = [{"predicate": "about", "target_id": "anchor", "weight": 0.5, "created_at": iso(T0)}]
        r["audit_log"] = [{"action": "create", "actor": "a", "timestamp": iso(T0), "rationale": "r"}]
        r["tags"] = ["t1", "t2"]
        out.append(r)
    out[2]["payload"].update(validity={"mode": "timeboxed", "start": iso(T0), "end": iso(T0)},
                             revision={"supersedes": "x", "status": "active"})
    out[3]["payload"]["recipe"] = [{"step": "s", "tool": "t", "args_schema": {"a": 1}}]
    out[4]["payload"]["metrics"] = {"avg_latency_ms": 1.0, "failure_rate": 0.5, "execution_count": 3}
    custom = simple("base-custom", "semantic")
    custom["lifecycle"]["decay"] = {"curve": "custom", "half_life_seconds": 60, "points": [[0, 1], [60, 0.5], [120, 0.1]]}
    out.append(custom)
    return out


BASES = base_records()


def paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (tuple of keys and indices) inside a JSON value, the root excluded."""
    out: list[tuple] = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.append(prefix + (k,))
            out.extend(paths(v, prefix + (k,)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.append(prefix + (i,))
            out.extend(paths(v, prefix + (i,)))
    return out


def _parent(doc: Any, path: tuple) -> Any:
    node = doc
    for p in path[:-1]:
        node = node[p]
    return node


ODD_FLOATS = st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324, -0.0, 1.5, -1.0, 2.0])
HUGE_INTS = st.sampled_from([10 ** 400, -10 ** 400, 2 ** 63, 2 ** 63 - 1, -2 ** 63, 2 ** 64, 10 ** 19])
ODD_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " ", "\x00", "a\x00b", "\ud800", "x" * 129, "s" * 257, "x" * 5000, "nan", "NaN",
                     "2026-13-45T99:99:99Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "10000-01-01T00:00:00Z",
                     "semantic", "hyper", "custom", "never", "retracted", "<script>", "\u202e", "1e999"]),
)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), HUGE_INTS, st.floats(allow_nan=True), ODD_FLOATS, ODD_TEXT)
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(ODD_TEXT, inner, max_size=4)), max_leaves=12)


@st.composite
def mutated(draw) -> dict[str, Any]:
    doc = copy.deepcopy(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(1, 3))):
        all_paths = paths(doc)
        if not all_paths:
            break
        path = draw(st.sampled_from(all_paths))
        parent = _parent(doc, path)
        try:
            action = draw(st.sampled_from(["drop", "replace", "scalar", "wrap", "duplicate-key-type"]))
            if action == "drop":
                del parent[path[-1]]
            elif action == "replace":
                parent[path[-1]] = draw(JSON_VALUES)
            elif action == "scalar":
                parent[path[-1]] = draw(SCALARS)
            elif action == "wrap":
                parent[path[-1]] = [parent[path[-1]]] if draw(st.booleans()) else {"v": parent[path[-1]]}
            else:
                parent[path[-1]] = str(parent[path[-1]])
        except (KeyError, IndexError, TypeError):
            continue
    if isinstance(doc, dict) and isinstance(doc.get("id"), str):
        doc["id"] = f"{doc['id'][:100]}-{next(_ids)}"  # fresh ids: acceptance is not refused as a duplicate
    return doc


@pytest.fixture(scope="module")
def fuzz_sqlite(tmp_path_factory) -> Iterator[Membrane]:
    yield from open_loaded("sqlite", tmp_path_factory, [simple("anchor"), simple("x")])


@pytest.fixture(scope="module")
def fuzz_postgres(tmp_path_factory) -> Iterator[Membrane]:
    yield from open_loaded("postgres", tmp_path_factory, [simple("anchor"), simple("x")])


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fuzz(request) -> tuple[Membrane, int]:
    m = request.getfixturevalue(f"fuzz_{request.param}")
    return m, (1 if request.param == "sqlite" else 3)  # PostgreSQL: a third of the examples


def _examples(n: int, divisor: int) -> int:
    return max(10, n * SCALE // divisor)


def _accepted_reads_back(m: Membrane, rid: str) -> None:
    """A record the engine took must be as usable as any other."""
    record = m.get(rid)
    assert record.id == rid
    assert math.isfinite(m.salience_at(rid, T0))
    m.explain(rid, EVERYTHING, as_of=T0)
    m.retrieve_by_id(rid, EVERYTHING)
    docs = list(m.iter_export(ids=[rid]))
    assert len(docs) == 1
    json.dumps(docs[0], allow_nan=False)  # exports are strict JSON
    m.retrieve(RetrieveRequest(trust=EVERYTHING, memory_types=[record.type], limit=5))


def _import(m: Membrane, items: Any) -> int | None:
    try:
        return m.import_records(items)
    except MembraneError as exc:
        message = str(exc)
        assert message and "Traceback" not in message
        return None


FUZZ = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
            derandomize=not FULL)


def test_mutated_records_only_raise_membrane_errors(fuzz):
    m, divisor = fuzz

    @settings(max_examples=_examples(300, divisor), **FUZZ)
    @given(mutated())
    def run(doc):
        if _import(m, [doc]) == 1:
            _accepted_reads_back(m, doc["id"])

    run()


def test_random_json_values_only_raise_membrane_errors(fuzz):
    m, divisor = fuzz

    @settings(max_examples=_examples(200, divisor), **FUZZ)
    @given(JSON_VALUES)
    def run(value):
        assert _import(m, [value]) is None  # a random value is never a valid record
        if isinstance(value, list):
            assume(len(value) > 0)
            assert _import(m, value) is None

    run()


@settings(max_examples=_examples(300, 1), **FUZZ)
@given(st.one_of(st.binary(max_size=300).map(lambda b: b.decode("utf-8", "replace")),
                 JSON_VALUES.map(lambda v: json.dumps(v, ensure_ascii=False) if _jsonable(v) else "[]"),
                 st.builds(lambda d, cut: json.dumps([d])[:cut], mutated(), st.integers(0, 2000))),
       st.booleans())
def test_parse_text_only_raises_validation_errors(text, jsonl):
    try:
        items = parse_text(text, jsonl=jsonl, name="fuzz.json")
    except MembraneError:
        return
    assert isinstance(items, list)


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
        return True
    except (ValueError, UnicodeEncodeError):
        return False


def test_import_file_with_random_bytes(fuzz_sqlite: Membrane, tmp_path: Path):
    @settings(max_examples=_examples(100, 1), **FUZZ)
    @given(st.binary(max_size=500), st.sampled_from([".json", ".jsonl"]))
    def run(data, suffix):
        path = tmp_path / f"fuzz{suffix}"
        path.write_bytes(data)
        try:
            fuzz_sqlite.import_file(path)
        except MembraneError:
            pass

    run()


def test_fuzzed_store_is_still_consistent(fuzz):
    """After all that: the audit chains verify and every record reads back."""
    m, _ = fuzz
    assert m.verify_audit() == []
    for rid in m.ids():
        m.get(rid)
    assert len(list(m.iter_export())) == m.count()
