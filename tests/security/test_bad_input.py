"""Bad input: every public engine call (SPEC 8) refuses malformed or out-of-range input with a
MembraneError subclass whose message names the field and the value, and writes nothing (every
table is dumped before and after and compared)."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from membrane_engine import Membrane, RetrieveRequest, TrustContext
from membrane_engine.errors import (
    AccessDeniedError,
    AlreadyExistsError,
    EpisodicImmutableError,
    MembraneError,
    NilTrustError,
    NotFoundError,
    ValidationError,
)
from membrane_engine.transfer.imports import MAX_RECORD_BYTES

from tests.support.security import T0, dump, iso, open_loaded, simple

BASE = [
    simple("s1"), simple("s2"), simple("e1", "episodic"), simple("c1", "competence"),
    simple("p1", "plan_graph"), simple("w1", "working"), simple("n1", "entity"),
    simple("keep", deletion_policy="never", lifecycle={
        "decay": {"curve": "exponential", "half_life_seconds": 86400}, "deletion_policy": "never"}),
]
CTX = TrustContext(max_sensitivity="medium", scopes=[], authenticated=True, actor_id="t")
NAN, INF = float("nan"), float("inf")
BIG = "B" * (10 * 1024 * 1024)  # a 10 MiB string


@pytest.fixture(scope="module")
def bad_sqlite(tmp_path_factory) -> Iterator[Membrane]:
    yield from open_loaded("sqlite", tmp_path_factory, BASE)


@pytest.fixture(scope="module")
def bad_postgres(tmp_path_factory) -> Iterator[Membrane]:
    yield from open_loaded("postgres", tmp_path_factory, BASE)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def bad(request) -> Membrane:
    return request.getfixturevalue(f"bad_{request.param}")


def new(rid: str = "new-1", type_: str = "semantic", **over: Any) -> dict[str, Any]:
    return simple(rid, type_, **over)


def with_(path: str, value: Any, base: dict | None = None) -> dict[str, Any]:
    """``new()`` with the dotted ``path`` set to ``value`` (``-`` deletes the key)."""
    doc = copy.deepcopy(base or new())
    *parents, last = path.split(".")
    node: Any = doc
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})
    if value == "-":
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return doc


def _deep(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


class Case:
    def __init__(self, name: str, call: Callable[[Membrane, Path], Any], error: type[MembraneError],
                 *mentions: str):
        self.name, self.call, self.error, self.mentions = name, call, error, mentions


def imp(name: str, record: Any, error: type[MembraneError] = ValidationError, *mentions: str) -> Case:
    return Case(f"import-{name}", lambda m, _: m.import_records([record]), error, *mentions)


CASES: list[Case] = [
    # ---------------------------------------------------------------- retrieve
    Case("retrieve-no-request", lambda m, _: m.retrieve(None), NilTrustError, "trust"),
    Case("retrieve-no-trust", lambda m, _: m.retrieve(RetrieveRequest()), NilTrustError, "trust"),
    Case("retrieve-not-a-request", lambda m, _: m.retrieve("medium"), ValidationError, "request", "'medium'"),
    Case("retrieve-min-salience-negative", lambda m, _: m.retrieve(RetrieveRequest(trust=CTX, min_salience=-0.5)),
         ValidationError, "min_salience", "-0.5"),
    Case("retrieve-min-salience-nan", lambda m, _: m.retrieve(RetrieveRequest(trust=CTX, min_salience=NAN)),
         ValidationError, "min_salience", "nan"),
    Case("retrieve-min-salience-inf", lambda m, _: m.retrieve(RetrieveRequest(trust=CTX, min_salience=INF)),
         ValidationError, "min_salience", "inf"),
    Case("retrieve-min-salience-text", lambda m, _: m.retrieve(RetrieveRequest(trust=CTX, min_salience="high")),
         ValidationError, "min_salience", "'high'"),
    Case("retrieve-limit-negative", lambda m, _: m.retrieve(RetrieveRequest(trust=CTX, limit=-1)),
         ValidationError, "limit", "-1"),
    Case("retrieve-limit-huge", lambda m, _: m.retrieve(RetrieveRequest(trust=CTX, limit=10_001)),
         ValidationError, "limit", "10001"),
    Case("retrieve-limit-float", lambda m, _: m.retrieve(RetrieveRequest(trust=CTX, limit=2.5)),
         ValidationError, "limit", "2.5"),
    Case("retrieve-limit-bool", lambda m, _: m.retrieve(RetrieveRequest(trust=CTX, limit=True)),
         ValidationError, "limit", "True"),
    Case("retrieve-unknown-type", lambda m, _: m.retrieve(RetrieveRequest(trust=CTX, memory_types=["memo"])),
         ValidationError, "memory_type", "'memo'"),
    Case("retrieve-type-none", lambda m, _: m.retrieve(RetrieveRequest(trust=CTX, memory_types=[None])),
         ValidationError, "memory_type", "None"),
    Case("retrieve-types-not-a-list", lambda m, _: m.retrieve(RetrieveRequest(trust=CTX, memory_types=5)),
         ValidationError, "memory_types", "5"),
    Case("retrieve-request-bad-trust", lambda m, _: m.retrieve(RetrieveRequest(trust="hyper")),
         ValidationError, "trust", "'hyper'"),
    Case("retrieve-request-bad-as-of", lambda m, _: m.retrieve(RetrieveRequest(trust=CTX, as_of="yesterday")),
         ValidationError, "as_of", "'yesterday'"),
    Case("trust-unknown-sensitivity", lambda m, _: TrustContext(max_sensitivity="secret"),
         ValidationError, "max_sensitivity", "'secret'"),
    Case("trust-scopes-string", lambda m, _: TrustContext(max_sensitivity="low", scopes="alpha"),
         ValidationError, "scopes", "'alpha'"),
    # ---------------------------------------------------------------- retrieve_by_id / by_type / explain
    Case("by-id-no-trust", lambda m, _: m.retrieve_by_id("s1", None), NilTrustError, "trust"),
    Case("by-id-trust-string", lambda m, _: m.retrieve_by_id("s1", "hyper"), ValidationError, "trust", "'hyper'"),
    Case("by-id-missing", lambda m, _: m.retrieve_by_id("nope", CTX), NotFoundError, "'nope'"),
    Case("by-id-int", lambda m, _: m.retrieve_by_id(42, CTX), ValidationError, "record_id", "42"),
    Case("by-id-list", lambda m, _: m.retrieve_by_id(["s1"], CTX), ValidationError, "record_id", "['s1']"),
    Case("by-id-nul", lambda m, _: m.retrieve_by_id("s\x001", CTX), ValidationError, "record_id", "'s\\x001'"),
    Case("by-id-denied", lambda m, _: m.retrieve_by_id("s1", TrustContext(max_sensitivity="public", scopes=["x"])),
         AccessDeniedError, "'s1'"),
    Case("by-id-as-of-text", lambda m, _: m.retrieve_by_id("s1", CTX, as_of="now"), ValidationError, "as_of", "'now'"),
    Case("by-type-unknown", lambda m, _: m.retrieve_by_type("memo", CTX), ValidationError, "memory_type", "'memo'"),
    Case("by-type-no-trust", lambda m, _: m.retrieve_by_type("semantic", None), NilTrustError, "trust"),
    Case("by-type-trust-dict-bad", lambda m, _: m.retrieve_by_type("semantic", {"max_sensitivity": "top"}),
         ValidationError, "max_sensitivity", "'top'"),
    Case("by-type-as-of-int", lambda m, _: m.retrieve_by_type("semantic", CTX, as_of=12), ValidationError, "as_of", "12"),
    Case("explain-no-trust", lambda m, _: m.explain("s1", None), NilTrustError, "trust"),
    Case("explain-missing", lambda m, _: m.explain("nope", CTX), NotFoundError, "'nope'"),
    Case("explain-int", lambda m, _: m.explain(7, CTX), ValidationError, "record_id", "7"),
    Case("explain-as-of-text", lambda m, _: m.explain("s1", CTX, as_of="2026-01-01"), ValidationError,
         "as_of", "'2026-01-01'"),
    Case("explain-min-salience-nan", lambda m, _: m.explain("s1", CTX, as_of=T0, min_salience=NAN),
         ValidationError, "min_salience", "nan"),
    Case("explain-min-salience-negative", lambda m, _: m.explain("s1", CTX, as_of=T0, min_salience=-1),
         ValidationError, "min_salience", "-1"),
    # ---------------------------------------------------------------- salience_at, get, audit_log
    Case("salience-at-none", lambda m, _: m.salience_at("s1", None), ValidationError, "when", "None"),
    Case("salience-at-text", lambda m, _: m.salience_at("s1", "2026-01-01"), ValidationError, "when", "'2026-01-01'"),
    Case("salience-at-missing", lambda m, _: m.salience_at("nope", T0), NotFoundError, "'nope'"),
    Case("salience-at-int-id", lambda m, _: m.salience_at(5, T0), ValidationError, "record_id", "5"),
    Case("get-missing", lambda m, _: m.get("nope"), NotFoundError, "'nope'"),
    Case("get-int", lambda m, _: m.get(5), ValidationError, "record_id", "5"),
    Case("get-nul", lambda m, _: m.get("a\x00b"), ValidationError, "record_id", "'a\\x00b'"),
    Case("audit-log-missing", lambda m, _: m.audit_log("nope"), NotFoundError, "'nope'"),
    Case("audit-log-nul", lambda m, _: m.audit_log("a\x00b"), ValidationError, "record_id", "'a\\x00b'"),
    # ---------------------------------------------------------------- import_records: record shape
    Case("import-not-iterable", lambda m, _: m.import_records(5), ValidationError, "items", "int"),
    Case("import-single-dict", lambda m, _: m.import_records(new()), ValidationError, "items", "dict"),
    imp("not-an-object", 5, ValidationError, "record 0", "int"),
    imp("null", None, ValidationError, "record 0", "NoneType"),
    imp("missing-id", with_("id", "-"), ValidationError, "id", "required"),
    imp("empty-id", with_("id", ""), ValidationError, "id", "''"),
    imp("int-id", with_("id", 12), ValidationError, "id", "12"),
    imp("long-id", with_("id", "x" * 200), ValidationError, "id", "128", "'xxxxx"),
    imp("nul-id", with_("id", "a\x00b"), ValidationError, "id", "'a\\x00b'"),
    imp("missing-type", with_("type", "-"), ValidationError, "type", "required"),
    imp("unknown-type", with_("type", "memo"), ValidationError, "type", "'memo'"),
    imp("missing-sensitivity", with_("sensitivity", "-"), ValidationError, "sensitivity", "required"),
    imp("unknown-sensitivity", with_("sensitivity", "secret"), ValidationError, "sensitivity", "'secret'"),
    imp("confidence-1.5", with_("confidence", 1.5), ValidationError, "confidence", "1.5"),
    imp("confidence-negative", with_("confidence", -0.1), ValidationError, "confidence", "-0.1"),
    imp("confidence-nan", with_("confidence", NAN), ValidationError, "confidence", "NaN"),
    imp("confidence-inf", with_("confidence", INF), ValidationError, "confidence", "Infinity"),
    imp("confidence-text", with_("confidence", "high"), ValidationError, "confidence", "'high'"),
    imp("confidence-huge", with_("confidence", 10 ** 400), ValidationError, "confidence"),
    imp("salience-negative", with_("salience", -1), ValidationError, "salience", "-1"),
    imp("salience-nan", with_("salience", NAN), ValidationError, "salience", "NaN"),
    imp("salience-inf", with_("salience", INF), ValidationError, "salience", "Infinity"),
    imp("scope-int", with_("scope", 3), ValidationError, "scope", "3"),
    imp("scope-long", with_("scope", "s" * 300), ValidationError, "scope", "256", "'sssss"),
    imp("scope-nul", with_("scope", "a\x00"), ValidationError, "scope", "'a\\x00'"),
    imp("tags-string", with_("tags", "a,b"), ValidationError, "tags", "'a,b'"),
    imp("created-at-text", with_("created_at", "yesterday"), ValidationError, "created_at", "'yesterday'"),
    imp("created-at-year-10000", with_("created_at", "10000-01-01T00:00:00Z"), ValidationError, "created_at", "10000"),
    imp("unknown-curve", with_("lifecycle.decay.curve", "sigmoid"), ValidationError, "curve", "'sigmoid'"),
    imp("half-life-zero", with_("lifecycle.decay.half_life_seconds", 0), ValidationError, "half_life_seconds", "0"),
    imp("half-life-negative", with_("lifecycle.decay.half_life_seconds", -5), ValidationError, "half_life_seconds", "-5"),
    imp("half-life-huge", with_("lifecycle.decay.half_life_seconds", 10 ** 400), ValidationError, "half_life_seconds"),
    imp("max-age-huge", with_("lifecycle.decay.max_age_seconds", 10 ** 400), ValidationError, "max_age_seconds"),
    imp("min-salience-negative", with_("lifecycle.decay.min_salience", -0.1), ValidationError, "min_salience", "-0.1"),
    imp("gain-nan", with_("lifecycle.decay.reinforcement_gain", NAN), ValidationError, "reinforcement_gain", "NaN"),
    imp("unknown-policy", with_("lifecycle.deletion_policy", "keep"), ValidationError, "deletion_policy", "'keep'"),
    imp("pinned-text", with_("lifecycle.pinned", "maybe"), ValidationError, "pinned", "'maybe'"),
    imp("anchor-nan", with_("lifecycle.anchor_salience", NAN), ValidationError, "anchor_salience", "NaN"),
    imp("provenance-kind", with_("provenance.sources.0.kind", "rumour"), ValidationError, "kind", "'rumour'"),
    imp("relation-weight", with_("relations", [{"predicate": "p", "target_id": "s1", "weight": 2}]),
        ValidationError, "weight", "2"),
    imp("relation-dangling", with_("relations", [{"predicate": "p", "target_id": "ghost"}]),
        ValidationError, "target_id", "'ghost'"),
    imp("relation-no-target", with_("relations", [{"predicate": "p"}]), ValidationError, "target_id", "required"),
    imp("payload-missing", with_("payload", "-"), ValidationError, "payload"),
    imp("payload-null", with_("payload", None), ValidationError, "payload"),
    imp("payload-kind-differs", with_("payload", {"kind": "working", "thread_id": "t"}), ValidationError,
        "payload.kind", "'working'"),
    imp("payload-kind-unknown", with_("payload", {"kind": "memo"}), ValidationError, "payload", "'memo'"),
    imp("payload-not-object", with_("payload", [1, 2]), ValidationError, "payload", "[1, 2]"),
    imp("payload-status", with_("payload.revision", {"status": "zombie"}), ValidationError, "status", "'zombie'"),
    imp("payload-validity", with_("payload.validity", {"mode": "forever"}), ValidationError, "mode", "'forever'"),
    imp("payload-state", new("w-2", "working", payload={"kind": "working", "state": "sleeping"}), ValidationError,
        "state", "'sleeping'"),
    imp("payload-outcome", new("e-2", "episodic", payload={"kind": "episodic", "outcome": "meh"}), ValidationError,
        "outcome", "'meh'"),
    imp("payload-edge-kind", new("p-2", "plan_graph", payload={"kind": "plan_graph", "edges": [
        {"from": "a", "to": "b", "kind": "magic"}]}), ValidationError, "kind", "'magic'"),
    imp("payload-failure-rate", new("p-3", "plan_graph", payload={"kind": "plan_graph", "metrics": {
        "failure_rate": 1.5}}), ValidationError, "failure_rate", "1.5"),
    imp("payload-count-negative", new("c-2", "competence", payload={"kind": "competence", "performance": {
        "success_count": -3}}), ValidationError, "success_count", "-3"),
    imp("payload-object-nan", with_("payload.object", NAN), ValidationError, "payload.object", "NaN"),
    imp("payload-object-inf", with_("payload.object", {"x": [INF]}), ValidationError, "payload.object.x.0", "Infinity"),
    imp("audit-action", with_("audit_log", [{"action": "erase", "actor": "a", "timestamp": iso(T0), "rationale": "r"}]),
        ValidationError, "action", "'erase'"),
    imp("audit-actor-nul", with_("audit_log", [{"action": "create", "actor": "a\x00", "timestamp": iso(T0),
                                                "rationale": "r"}]), ValidationError, "actor", "'a\\x00'"),
    imp("audit-rationale-nul", with_("audit_log", [{"action": "create", "actor": "a", "timestamp": iso(T0),
                                                    "rationale": "r\x00"}]), ValidationError, "rationale", "'r\\x00'"),
    imp("audit-actor-long", with_("audit_log", [{"action": "create", "actor": "a" * 300, "timestamp": iso(T0),
                                                 "rationale": "r"}]), ValidationError, "actor", "300"),
    imp("lone-surrogate", with_("payload.subject", "x\ud800y"), ValidationError, "payload.subject", "\\ud800"),
    imp("lone-surrogate-key", with_("payload.object", {"\udfff": 1}), ValidationError, "payload.object", "\\udfff"),
    imp("redacted-view", with_("redacted", True), ValidationError, "redacted"),
    imp("existing-id", new("s1"), AlreadyExistsError, "'s1'"),
    imp("oversized-payload", with_("payload.object", BIG), ValidationError, "payload", str(MAX_RECORD_BYTES)),
    imp("deeply-nested", with_("payload.object", _deep(5000)), ValidationError, "record 0", "nested too deeply"),
    Case("import-duplicate-ids", lambda m, _: m.import_records([new("dup"), new("dup")]), ValidationError,
         "duplicate", "'dup'"),
    Case("import-one-bad-of-many", lambda m, _: m.import_records([new("ok-1"), with_("confidence", 1.5, new("bad-2")),
                                                                 new("ok-3")]), ValidationError, "record 1", "1.5"),
    # ---------------------------------------------------------------- import_file
    Case("import-file-missing", lambda m, d: m.import_file(d / "nope.json"), ValidationError, "nope.json"),
    Case("import-file-none", lambda m, d: m.import_file(None), ValidationError, "path", "None"),
    Case("import-file-directory", lambda m, d: m.import_file(d), ValidationError, "path", str(Path("x")).strip("x")),
    Case("import-file-truncated", lambda m, d: m.import_file(_write(d / "t.json", json.dumps([new()])[:-40])),
         ValidationError, "t.json", "line 1"),
    Case("import-file-truncated-jsonl", lambda m, d: m.import_file(_write(d / "t.jsonl", json.dumps(new())[:-9])),
         ValidationError, "t.jsonl", "line 1"),
    Case("import-file-empty", lambda m, d: m.import_file(_write(d / "e.json", "")), ValidationError, "e.json"),
    Case("import-file-number", lambda m, d: m.import_file(_write(d / "n.json", "42")), ValidationError, "n.json", "int"),
    Case("import-file-nan-literal", lambda m, d: m.import_file(_write(d / "nan.json", json.dumps([new()]).replace(
        '"confidence": 0.9', '"confidence": NaN'))), ValidationError, "nan.json", "NaN"),
    Case("import-file-nan-in-payload", lambda m, d: m.import_file(_write(d / "nan2.json", json.dumps([new()]).replace(
        '"object": "o"', '"object": Infinity'))), ValidationError, "nan2.json", "Infinity"),
    Case("import-file-not-utf8", lambda m, d: m.import_file(_write_bytes(d / "l.json", b'[{"id": "caf\xe9"}]')),
         ValidationError, "l.json", "UTF-8"),
    Case("import-file-deep", lambda m, d: m.import_file(_write(d / "deep.json", "[" * 100_000 + "]" * 100_000)),
         ValidationError, "deep.json", "deep"),
    Case("import-file-bad-record", lambda m, d: m.import_file(_write(d / "b.json", json.dumps([with_("type", "memo")]))),
         ValidationError, "record 0", "'memo'"),
    # ---------------------------------------------------------------- export_file
    Case("export-none-path", lambda m, d: m.export_file(None), ValidationError, "path", "None"),
    Case("export-missing-dir", lambda m, d: m.export_file(d / "no" / "such" / "x.json"), ValidationError,
         "path", "x.json"),
    Case("export-to-directory", lambda m, d: m.export_file(d), ValidationError, "path"),
    Case("export-ids-not-iterable", lambda m, d: m.export_file(d / "x.json", ids=5), ValidationError, "ids", "5"),
    Case("export-ids-string", lambda m, d: m.export_file(d / "x.json", ids="s1"), ValidationError, "ids", "'s1'"),
    Case("export-trust-string", lambda m, d: m.export_file(d / "x.json", trust="low"), ValidationError, "trust", "'low'"),
    Case("export-as-of-text", lambda m, d: m.export_file(d / "x.json", as_of="today"), ValidationError, "as_of", "'today'"),
]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _write_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# ---------------------------------------------------------------- curation (SPEC 6)

def _cur(name: str, call: Callable[[Membrane], Any], error: type[MembraneError], *mentions: str) -> Case:
    return Case(f"curate-{name}", lambda m, _: call(m), error, *mentions)


CURATION: list[Case] = []
for op in ("reinforce", "retract", "pin", "unpin", "delete", "restore"):
    CURATION += [
        _cur(f"{op}-missing", lambda m, op=op: getattr(m, op)("nope", "op", "why"), NotFoundError, "'nope'"),
        _cur(f"{op}-int-id", lambda m, op=op: getattr(m, op)(5, "op", "why"), ValidationError, "id", "5"),
        _cur(f"{op}-empty-actor", lambda m, op=op: getattr(m, op)("s1", "", "why"), ValidationError, "actor"),
        _cur(f"{op}-none-actor", lambda m, op=op: getattr(m, op)("s1", None, "why"), ValidationError, "actor"),
        _cur(f"{op}-blank-rationale", lambda m, op=op: getattr(m, op)("s1", "op", "  "), ValidationError, "rationale"),
    ]
CURATION += [
    _cur("reinforce-gain-nan", lambda m: m.reinforce("s1", "op", "why", gain=NAN), ValidationError, "gain", "nan"),
    _cur("reinforce-gain-inf", lambda m: m.reinforce("s1", "op", "why", gain=INF), ValidationError, "gain", "inf"),
    _cur("reinforce-gain-text", lambda m: m.reinforce("s1", "op", "why", gain="lots"), ValidationError, "gain", "'lots'"),
    _cur("penalize-negative", lambda m: m.penalize("s1", -0.2, "op", "why"), ValidationError, "amount", "-0.2"),
    _cur("penalize-nan", lambda m: m.penalize("s1", NAN, "op", "why"), ValidationError, "amount", "nan"),
    _cur("penalize-text", lambda m: m.penalize("s1", "x", "op", "why"), ValidationError, "amount", "'x'"),
    _cur("retract-episodic", lambda m: m.retract("e1", "op", "why"), EpisodicImmutableError, "e1"),
    _cur("contest-none-ref", lambda m: m.contest("s1", None, "op", "why"), ValidationError, "contesting_ref"),
    _cur("contest-episodic", lambda m: m.contest("e1", "s2", "op", "why"), EpisodicImmutableError, "e1"),
    _cur("supersede-invalid", lambda m: m.supersede("s1", with_("confidence", 1.5, new("sup-1")), "op", "why"),
         ValidationError, "confidence", "1.5"),
    _cur("supersede-kind-differs", lambda m: m.supersede("s1", with_("payload", {"kind": "entity"}, new("sup-2")),
                                                          "op", "why"), ValidationError, "payload.kind", "'entity'"),
    _cur("supersede-existing-id", lambda m: m.supersede("s1", new("s2"), "op", "why"), AlreadyExistsError, "'s2'"),
    _cur("supersede-dangling", lambda m: m.supersede("s1", with_("relations", [{"predicate": "p", "target_id": "ghost"}],
                                                                 new("sup-3")), "op", "why"),
         ValidationError, "target_id", "'ghost'"),
    _cur("supersede-not-a-record", lambda m: m.supersede("s1", "text", "op", "why"), ValidationError, "new_record", "str"),
    _cur("supersede-oversized", lambda m: m.supersede("s1", with_("payload.object", BIG, new("sup-4")), "op", "why"),
         ValidationError, "payload", str(MAX_RECORD_BYTES)),
    _cur("supersede-surrogate", lambda m: m.supersede("s1", with_("payload.subject", "\ud800", new("sup-5")), "op", "why"),
         ValidationError, "payload.subject", "\\ud800"),
    _cur("supersede-nan-object", lambda m: m.supersede("s1", with_("payload.object", NAN, new("sup-6")), "op", "why"),
         ValidationError, "payload.object", "NaN"),
    _cur("fork-invalid", lambda m: m.fork("s1", with_("sensitivity", "top", new("f-1")), "op", "why"),
         ValidationError, "sensitivity", "'top'"),
    _cur("fork-missing-source", lambda m: m.fork("nope", new("f-2"), "op", "why"), NotFoundError, "'nope'"),
    _cur("merge-empty", lambda m: m.merge([], new("m-1"), "op", "why"), ValidationError, "ids"),
    _cur("merge-string-ids", lambda m: m.merge("s1", new("m-2"), "op", "why"), ValidationError, "ids"),
    _cur("merge-int-ids", lambda m: m.merge([1, 2], new("m-3"), "op", "why"), ValidationError, "ids"),
    _cur("merge-missing", lambda m: m.merge(["s1", "nope"], new("m-4"), "op", "why"), NotFoundError, "'nope'"),
    _cur("merge-episodic", lambda m: m.merge(["s1", "e1"], new("m-5"), "op", "why"), EpisodicImmutableError, "e1"),
    _cur("merge-invalid-record", lambda m: m.merge(["s1", "s2"], with_("type", "memo", new("m-6")), "op", "why"),
         ValidationError, "type", "'memo'"),
    _cur("merge-existing-id", lambda m: m.merge(["s1", "s2"], new("c1"), "op", "why"), AlreadyExistsError, "'c1'"),
    _cur("reclassify-nothing", lambda m: m.reclassify("s1", "op", "why"), ValidationError, "sensitivity"),
    _cur("reclassify-sensitivity", lambda m: m.reclassify("s1", "op", "why", sensitivity="top"), ValidationError,
         "sensitivity", "'top'"),
    _cur("reclassify-scope-int", lambda m: m.reclassify("s1", "op", "why", scope=5), ValidationError, "scope", "5"),
    _cur("reclassify-tags-string", lambda m: m.reclassify("s1", "op", "why", tags="x"), ValidationError, "tags"),
    _cur("delete-never", lambda m: m.delete("keep", "op", "why"), ValidationError, "'keep'", "never"),
    _cur("restore-live", lambda m: m.restore("s1", "op", "why"), MembraneError, "'s1'"),
    _cur("prune-as-of-text", lambda m: m.prune("op", "why", as_of="soon", dry_run=False), ValidationError,
         "as_of", "'soon'"),
    _cur("prune-empty-actor", lambda m: m.prune("", "why", dry_run=False), ValidationError, "actor"),
    _cur("preview-unknown-op", lambda m: m.preview("explode", "s1"), ValidationError, "op", "'explode'"),
    # Strings stored in columns of their own: PostgreSQL refuses NUL and over-long values.
    _cur("reinforce-actor-nul", lambda m: m.reinforce("s2", "op\x00", "why"), ValidationError, "actor", "'op\\x00'"),
    _cur("reinforce-rationale-nul", lambda m: m.reinforce("s2", "op", "why\x00"), ValidationError, "rationale",
         "'why\\x00'"),
    _cur("reinforce-actor-long", lambda m: m.reinforce("s2", "o" * 300, "why"), ValidationError, "actor", "256"),
    _cur("reclassify-scope-long", lambda m: m.reclassify("s2", "op", "why", scope="s" * 300), ValidationError,
         "scope", "256"),
    _cur("reclassify-scope-nul", lambda m: m.reclassify("s2", "op", "why", scope="a\x00"), ValidationError,
         "scope", "'a\\x00'"),
    _cur("contest-ref-nul", lambda m: m.contest("s2", "ref\x00", "op", "why"), ValidationError, "contesting_ref",
         "'ref\\x00'"),
    _cur("merge-id-nul", lambda m: m.merge(["s1", "s\x002"], new("m-7"), "op", "why"), ValidationError, "ids",
         "'s\\x002'"),
]


def _run(case: Case, m: Membrane, tmp_path: Path) -> None:
    before = dump(m)
    with pytest.raises(MembraneError) as info:
        case.call(m, tmp_path)
    exc = info.value
    assert isinstance(exc, case.error), f"{case.name}: expected {case.error.__name__}, got {type(exc).__name__}: {exc}"
    message = str(exc)
    missing = [x for x in case.mentions if x not in message]
    assert not missing, f"{case.name}: message {message[:400]!r} does not name {missing}"
    assert "Traceback" not in message and len(message) < 5000, f"{case.name}: message too long or a traceback"
    assert dump(m) == before, f"{case.name}: the refused call wrote to the store"
    m.columns.invalidate()
    assert dump(m) == before


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_refused_naming_field_and_value(bad: Membrane, case: Case, tmp_path: Path):
    _run(case, bad, tmp_path)


@pytest.mark.parametrize("case", CURATION, ids=[c.name for c in CURATION])
def test_bad_curation_input_is_refused_and_writes_nothing(bad: Membrane, case: Case, tmp_path: Path):
    _run(case, bad, tmp_path)


def test_the_oversize_limit_is_8_mib_and_names_the_field(bad: Membrane):
    """A record over MAX_RECORD_BYTES is refused before validation, naming the biggest field."""
    assert MAX_RECORD_BYTES == 8 * 1024 * 1024
    before = dump(bad)
    with pytest.raises(ValidationError) as info:
        bad.import_records([new("huge-1"), with_("payload.object", BIG, new("huge-2"))])
    message = str(info.value)
    assert "record 1" in message and "payload" in message and str(MAX_RECORD_BYTES) in message
    assert dump(bad) == before
    # Just under the limit is fine (and is stored and read back whole).
    fits = with_("payload.object", "F" * (MAX_RECORD_BYTES - 4096), new("fits-1"))
    assert bad.import_records([fits]) == 1
    assert bad.get("fits-1").payload.object == fits["payload"]["object"]
    bad.delete("fits-1", "security-suite", "clean up the size probe")


def test_valid_input_next_to_the_bad_cases_is_accepted(bad: Membrane, tmp_path: Path):
    """The harness is not refusing everything: the same calls with good arguments work."""
    m = bad
    assert m.retrieve(RetrieveRequest(trust=CTX, limit=3, min_salience=0.0)).records
    assert m.retrieve_by_id("s1", CTX).id == "s1"
    assert m.retrieve_by_id("s1", {"max_sensitivity": "medium"}).id == "s1"
    assert m.explain("s1", CTX, as_of=T0, min_salience=0.1).verdict.value == "full"
    assert math.isfinite(m.salience_at("s1", T0))
    assert m.salience_at("s1", datetime(2026, 6, 1, 12, 0)) == m.salience_at("s1", T0)  # naive = UTC
    assert m.export_file(tmp_path / "ok.json", ids=["s1", "s2"], trust=CTX) == 2
