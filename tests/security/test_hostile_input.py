"""Hostile input (issue 18, finding 5): every public call of SPEC 8 refuses wrong types and
out-of-range values with a MembraneError subclass naming the argument and writes nothing; blank
ids are refused wherever ids come in; metrics stay finite for extreme (valid) saliences; store
files are private to their owner. The import's bounded memory is test_hostile_import.py.

The first table (FINDINGS) is what the issue found leaking plain Python errors or accepted; the
second (SWEEP) goes through every call of SPEC 8 argument by argument."""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from membrane_engine import Membrane, RetrieveRequest, TrustContext
from membrane_engine.errors import MembraneError, NilTrustError, NotFoundError, ValidationError

from tests.support.security import T0, dump, forget, open_loaded, simple
from tests.security.test_bad_input import Case, _run

CTX = TrustContext(max_sensitivity="medium", scopes=[], authenticated=True, actor_id="t")
NAN, INF = float("nan"), float("inf")
BLANK = "   "


@pytest.fixture(scope="module")
def hostile_input_sqlite(tmp_path_factory) -> Iterator[Membrane]:
    yield from open_loaded("sqlite", tmp_path_factory, [simple("s1"), simple("s2"), simple("e1", "episodic")])


@pytest.fixture(scope="module")
def hostile_input_postgres(tmp_path_factory) -> Iterator[Membrane]:
    yield from open_loaded("postgres", tmp_path_factory, [simple("s1"), simple("s2"), simple("e1", "episodic")])


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request) -> Membrane:
    return request.getfixturevalue(f"hostile_input_{request.param}")


def _file(path: Path, records: list[Any], jsonl: bool = False) -> Path:
    text = "\n".join(json.dumps(r) for r in records) if jsonl else json.dumps(records)
    path.write_text(text, encoding="utf-8")
    return path


def case(name: str, call, error: type[MembraneError] = ValidationError, *mentions: str) -> Case:
    return Case(name, call, error, *mentions)


FINDINGS: list[Case] = [
    case("audit-query-unknown-action", lambda m, _: m.audit_query(action="bogus"), ValidationError, "action", "'bogus'"),
    case("audit-query-limit-text", lambda m, _: m.audit_query(limit="x"), ValidationError, "limit", "'x'"),
    case("audit-query-since-text", lambda m, _: m.audit_query(since="yesterday"), ValidationError, "since", "'yesterday'"),
    case("metrics-as-of-text", lambda m, _: m.metrics(as_of="x"), ValidationError, "as_of", "'x'"),
    case("iter-export-batch-zero", lambda m, _: list(m.iter_export(batch=0)), ValidationError, "batch", "0"),
    case("iter-export-batch-negative", lambda m, _: list(m.iter_export(batch=-1)), ValidationError, "batch", "-1"),
    case("preview-without-arguments", lambda m, _: m.preview("reinforce"), ValidationError, "reinforce", "'id'"),
    case("prune-dry-run-text", lambda m, _: m.prune("op", "why", dry_run="no"), ValidationError, "dry_run", "'no'"),
    # Blank ids, everywhere an id comes in.
    case("import-blank-id", lambda m, _: m.import_records([simple(BLANK)]), ValidationError, "id", repr(BLANK)),
    case("import-tab-id", lambda m, _: m.import_records([simple("\t\n")]), ValidationError, "id", "'\\t\\n'"),
    case("import-file-blank-id", lambda m, d: m.import_file(_file(d / "blank.json", [simple(BLANK)])),
         ValidationError, "record 0", "id", repr(BLANK)),
    case("import-jsonl-blank-id", lambda m, d: m.import_file(_file(d / "blank.jsonl", [simple("ok-1"), simple(BLANK)],
                                                                   jsonl=True)), ValidationError, "record 1", repr(BLANK)),
    case("supersede-blank-new-id", lambda m, _: m.supersede("s1", simple(BLANK), "op", "why"), ValidationError,
         "new_record", repr(BLANK)),
    case("get-blank-id", lambda m, _: m.get(BLANK), ValidationError, "record_id", repr(BLANK)),
    case("get-empty-id", lambda m, _: m.get(""), ValidationError, "record_id", "''"),
    case("by-id-blank-id", lambda m, _: m.retrieve_by_id(BLANK, CTX), ValidationError, "record_id", repr(BLANK)),
    case("explain-blank-id", lambda m, _: m.explain(BLANK, CTX), ValidationError, "record_id", repr(BLANK)),
    case("audit-log-blank-id", lambda m, _: m.audit_log(BLANK), ValidationError, "record_id", repr(BLANK)),
    case("salience-at-blank-id", lambda m, _: m.salience_at(BLANK, T0), ValidationError, "record_id", repr(BLANK)),
    case("reinforce-blank-id", lambda m, _: m.reinforce(BLANK, "op", "why"), ValidationError, "id", repr(BLANK)),
    case("merge-blank-id", lambda m, _: m.merge(["s1", BLANK], simple("m-1"), "op", "why"), ValidationError, "ids"),
    case("export-blank-id", lambda m, d: m.export_file(d / "x.json", ids=[BLANK]), ValidationError, "ids", repr(BLANK)),
    case("curves-blank-id", lambda m, _: m.salience_curves([BLANK], [T0]), ValidationError, "record_ids", repr(BLANK)),
    case("explain-many-blank-id", lambda m, _: m.explain_many([BLANK], CTX), ValidationError, "record_ids", repr(BLANK)),
]


def _sweep() -> list[Case]:
    """Each public call of SPEC 8 with one argument wrong at a time (the others valid)."""
    out: list[Case] = []

    def add(call: str, arg: str, value: Any, fn, *mentions: str, error: type[MembraneError] = ValidationError) -> None:
        out.append(Case(f"{call}-{arg}-{value!r:.20}", fn, error, arg, *mentions))

    for v in (5, 1.5, True, b"x"):
        add("open", "url", v, lambda m, d, v=v: Membrane.open(v), repr(v))
    add("open", "load_sample", "yes", lambda m, d: Membrane.open(f"sqlite:///{d}/o.db", load_sample="yes"), "'yes'")
    for v in (5, None, "x", b"[]"):
        add("import_records", "items", v, lambda m, d, v=v: m.import_records(v), type(v).__name__)
    for v in (None, 5, "", BLANK):
        add("import_records", "actor", v, lambda m, d, v=v: m.import_records([simple("n-1")], actor=v), repr(v))
    for v in (5, "x", []):
        add("import_records", "progress", v, lambda m, d, v=v: m.import_records([simple("n-1")], progress=v), repr(v))
    for v in (5, None, ""):
        add("import_file", "path", v, lambda m, d, v=v: m.import_file(v), repr(v))
    for v in (0, -1, 1.5, True, "2", 10**6):
        add("import_file", "workers", v, lambda m, d, v=v: m.import_file(_file(d / "w.jsonl", [], True), workers=v),
            repr(v))
    add("import_file", "actor", 7, lambda m, d: m.import_file(_file(d / "a.json", [simple("n-2")]), actor=7), "7")
    add("import_file", "progress", "x", lambda m, d: m.import_file(_file(d / "p.json", [simple("n-3")]), progress="x"),
        "'x'")
    for v in (5, None, ""):
        add("export_file", "path", v, lambda m, d, v=v: m.export_file(v), repr(v))
    for v in (5, "s1", {"s1": 1}, [5]):
        add("export_file", "ids", v, lambda m, d, v=v: m.export_file(d / "e.json", ids=v), repr(v).strip("[]"))
    for v in ("low", 5, {"max_sensitivity": "top"}):
        add("export_file", "trust", v, lambda m, d, v=v: m.export_file(d / "e.json", trust=v),
            "'top'" if isinstance(v, dict) else repr(v))
    for v in ("today", 5, T0.timestamp()):
        add("export_file", "as_of", v, lambda m, d, v=v: m.export_file(d / "e.json", as_of=v), repr(v))
    for v in (0, -1, 1.5, "10", True, 10**9):
        add("iter_export", "batch", v, lambda m, d, v=v: m.iter_export(batch=v), repr(v))
    add("iter_export", "ids", 5, lambda m, d: m.iter_export(ids=5), "5")
    add("iter_export", "trust", "low", lambda m, d: m.iter_export(trust="low"), "'low'")
    add("iter_export", "as_of", "now", lambda m, d: m.iter_export(as_of="now"), "'now'")
    for v in (5, None, ["s1"]):
        add("get", "record_id", v, lambda m, d, v=v: m.get(v), repr(v))
    add("get", "as_of", "now", lambda m, d: m.get("s1", as_of="now"), "'now'")
    add("retrieve_by_id", "as_of", 5, lambda m, d: m.retrieve_by_id("s1", CTX, as_of=5), "5")
    add("retrieve_by_type", "memory_type", 5, lambda m, d: m.retrieve_by_type(5, CTX), "5")
    add("retrieve_by_type", "memory_type", ["semantic"], lambda m, d: m.retrieve_by_type(["semantic"], CTX), "semantic")
    add("explain", "min_salience", "x", lambda m, d: m.explain("s1", CTX, min_salience="x"), "'x'")
    add("explain", "min_salience", INF, lambda m, d: m.explain("s1", CTX, min_salience=INF), "inf")
    for v in ("s1", 5, None):
        add("explain_many", "record_ids", v, lambda m, d, v=v: m.explain_many(v, CTX), repr(v))
    out.append(Case("explain_many-trust-None", lambda m, d: m.explain_many(["s1"], None), NilTrustError, "trust"))
    for v in ("s1", 5, [5]):
        add("salience_curves", "record_ids", v, lambda m, d, v=v: m.salience_curves(v, [T0]), repr(v).strip("[]"))
    for v in ("now", 5, ["now"], [None]):
        add("salience_curves", "times", v, lambda m, d, v=v: m.salience_curves(["s1"], v),
            repr(v[0] if isinstance(v, list) else v))
    for v in (None, "t", 1.5):
        add("salience_at", "when", v, lambda m, d, v=v: m.salience_at("s1", v), repr(v))
    for v in ("x", 5):
        add("metrics", "as_of", v, lambda m, d, v=v: m.metrics(as_of=v), repr(v))
    for v in ("bogus", 5, ["create"]):
        add("audit_query", "action", v, lambda m, d, v=v: m.audit_query(action=v), repr(v))
    for v in (-1, 1.5, "x", True, 10**6):
        add("audit_query", "limit", v, lambda m, d, v=v: m.audit_query(limit=v), repr(v))
    for v in (-1, "x", 10**30):
        add("audit_query", "offset", v, lambda m, d, v=v: m.audit_query(offset=v), repr(v))
    for arg in ("since", "until"):
        for v in ("yesterday", 5):
            add("audit_query", arg, v, lambda m, d, v=v, arg=arg: m.audit_query(**{arg: v}), repr(v))
    for arg in ("actor", "record_id"):
        for v in (5, ["a"], "a\x00"):
            add("audit_query", arg, v, lambda m, d, v=v, arg=arg: m.audit_query(**{arg: v}), repr(v))
    add("audit_query", "colour", "red", lambda m, d: m.audit_query(colour="red"), "'colour'")
    for v in ("yes", 1, None):
        add("simulate", "counts", v, lambda m, d, v=v: m.simulate(RetrieveRequest(trust=CTX), counts=v), repr(v))
    add("simulate", "request", "r", lambda m, d: m.simulate("r"), "'r'")
    out.append(Case("simulate-request-None", lambda m, d: m.simulate(None), NilTrustError, "trust"))
    add("preview", "op", 5, lambda m, d: m.preview(5, "s1", "op", "why"), "5")
    add("preview", "op", "explode", lambda m, d: m.preview("explode"), "'explode'")
    out.append(Case("preview-too-many-arguments", lambda m, d: m.preview("pin", "s1", "op", "why", "extra"),
                    ValidationError, "'pin'", "too many"))
    out.append(Case("preview-unknown-argument", lambda m, d: m.preview("pin", "s1", "op", "why", colour=1),
                    ValidationError, "'pin'", "'colour'"))
    # Curation: ids, actors, rationales, numbers and flags of every operation.
    single = ("reinforce", "retract", "pin", "unpin", "delete", "restore")
    for op in single:
        for v in (None, 5, "", BLANK, ["s1"]):
            add(op, "id", v, lambda m, d, v=v, op=op: getattr(m, op)(v, "op", "why"), repr(v))
        for v in (None, 5, "", BLANK, "a" * 300):
            add(op, "actor", v, lambda m, d, v=v, op=op: getattr(m, op)("s1", v, "why"), repr(v)[:20])
        for v in (None, 5, "", BLANK):
            add(op, "rationale", v, lambda m, d, v=v, op=op: getattr(m, op)("s1", "op", v), repr(v))
    for v in ("x", -0.1, NAN, INF, True):
        add("reinforce", "gain", v, lambda m, d, v=v: m.reinforce("s1", "op", "why", gain=v), repr(v))
    for v in ("x", -0.1, NAN, INF, None, True):
        add("penalize", "amount", v, lambda m, d, v=v: m.penalize("s1", v, "op", "why"), repr(v))
    for v in (None, 5):
        add("contest", "contesting_ref", v, lambda m, d, v=v: m.contest("s1", v, "op", "why"), repr(v))
    for op, first in (("supersede", "old_id"), ("fork", "source_id")):
        for v in (None, 5, BLANK):
            add(op, first, v, lambda m, d, v=v, op=op: getattr(m, op)(v, simple("n-4"), "op", "why"), repr(v))
        record_arg = "new_record" if op == "supersede" else "forked_record"
        for v in (None, 5, "text", [simple("n-5")]):
            add(op, record_arg, v, lambda m, d, v=v, op=op: getattr(m, op)("s1", v, "op", "why"), type(v).__name__)
    for v in (None, "s1", 5, [], [5]):
        add("merge", "ids", v, lambda m, d, v=v: m.merge(v, simple("n-6"), "op", "why"))
    for v in (None, 5, "text"):
        add("merge", "merged_record", v, lambda m, d, v=v: m.merge(["s1", "s2"], v, "op", "why"), type(v).__name__)
    for v in ("top", 5):
        add("reclassify", "sensitivity", v, lambda m, d, v=v: m.reclassify("s1", "op", "why", sensitivity=v), repr(v))
    for v in (5, ["a"], "a\x00"):
        add("reclassify", "scope", v, lambda m, d, v=v: m.reclassify("s1", "op", "why", scope=v), repr(v))
    for v in ("a,b", 5, {"a": 1}, [5]):
        add("reclassify", "tags", v, lambda m, d, v=v: m.reclassify("s1", "op", "why", tags=v))
    for v in ("no", 0, None, "False"):
        add("prune", "dry_run", v, lambda m, d, v=v: m.prune("op", "why", dry_run=v), repr(v))
    for v in ("soon", 5):
        add("prune", "as_of", v, lambda m, d, v=v: m.prune("op", "why", as_of=v), repr(v))
    for v in (None, "", 5):
        add("prune", "actor", v, lambda m, d, v=v: m.prune(v, "why"), repr(v))
        add("prune", "rationale", v, lambda m, d, v=v: m.prune("op", v), repr(v))
    for v in (None, 5, BLANK):
        add("audit_log", "record_id", v, lambda m, d, v=v: m.audit_log(v), repr(v))
    out.append(Case("audit_log-missing", lambda m, d: m.audit_log("nope"), NotFoundError, "'nope'"))
    return out


SWEEP = _sweep()


@pytest.mark.parametrize("case", FINDINGS, ids=[c.name for c in FINDINGS])
def test_findings_are_refused_naming_the_argument(store: Membrane, case: Case, tmp_path: Path):
    _run(case, store, tmp_path)


@pytest.mark.parametrize("case", SWEEP, ids=[c.name for c in SWEEP])
def test_every_public_call_refuses_bad_arguments(store: Membrane, case: Case, tmp_path: Path):
    _run(case, store, tmp_path)


def test_the_same_calls_with_good_arguments_work(store: Membrane, tmp_path: Path):
    """The tables refuse only what is wrong: the arguments they vary, when right, are taken."""
    m = store
    assert m.audit_query(action="create", limit=0, offset=0)[0] >= 3
    assert m.audit_query(since=T0, until=datetime(2100, 1, 1), actor="", record_id="")[0] >= 3
    assert math.isfinite(m.metrics(as_of=T0)["avg_salience"])
    assert len(list(m.iter_export(batch=1))) == len(m.ids())
    assert m.preview("reinforce", "s1", "op", "why").ids == ["s1"]
    assert m.prune("op", "why", dry_run=True) == []
    assert m.simulate(RetrieveRequest(trust=CTX), counts=False).response.records


def test_metrics_stay_finite_with_extreme_saliences(tmp_path_factory):
    """A valid salience of 1e308 (SPEC 1: >= 0 and finite) must not make any metric inf or NaN:
    the mean of three such values overflows a plain sum."""
    gen = open_loaded("sqlite", tmp_path_factory, [simple(f"big-{i}", salience=1e308) for i in range(3)]
                      + [simple("small", salience=0.5)])
    m = next(gen)
    try:
        metrics = m.metrics(as_of=T0)
        numbers = [v for v in metrics.values() if isinstance(v, float)]
        assert all(math.isfinite(v) for v in numbers), metrics
        assert metrics["avg_salience"] == pytest.approx(0.75e308)
        assert metrics["salience_distribution"]["0.8-1.0"] == 3  # not bucketed by an inf cast to int
        assert metrics["salience_distribution"]["0.4-0.6"] == 1
    finally:
        gen.close()


# ---------------------------------------------------------------- store files are private


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The usual umask, under which files are created world-readable (0644)."""
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_store_and_its_directories_are_private(tmp_path: Path, umask_022, monkeypatch):
    """The default store (the only one whose directory the engine makes: a store named by URL
    must be in a directory that exists) and every directory made for it."""
    home = tmp_path / "home" / ".membrane"
    monkeypatch.setenv("MEMBRANE_HOME", str(home))
    monkeypatch.delenv("MEMBRANE_DB_URL", raising=False)
    m = Membrane.open(load_sample=False, clock=lambda: T0)
    url = m.store.url
    try:
        m.import_records([simple("p-1")])  # writes: the -wal and -shm files exist now
        files = sorted(p.name for p in home.iterdir())
        assert {"membrane.db", "membrane.db-wal", "membrane.db-shm"} <= set(files), files
        assert {p.name: oct(_mode(p)) for p in home.iterdir()} == {name: oct(0o600) for name in files}
        assert _mode(home) == 0o700 and _mode(home.parent) == 0o700  # every directory it made
    finally:
        m.close()
        forget(url)


def test_a_bulk_import_journal_is_private_too(tmp_path: Path, umask_022):
    """An import into an empty store runs with a rollback journal (Store._direct_pages): SQLite
    gives the -journal file the database file's mode."""
    from membrane_engine.storage.store import BULK_ROWS

    url = f"sqlite:///{tmp_path / 'bulk.db'}"
    m = Membrane.open(url, load_sample=False, clock=lambda: T0)
    seen: set[tuple[str, int]] = set()

    def watch(done: int, total: int) -> None:
        seen.update((p.name, _mode(p)) for p in tmp_path.iterdir() if p.name.startswith("bulk.db"))

    try:
        m.import_records([simple(f"b-{i}") for i in range(BULK_ROWS)], progress=watch)
        seen.update((p.name, _mode(p)) for p in tmp_path.iterdir() if p.name.startswith("bulk.db"))
        assert seen and all(mode == 0o600 for _, mode in seen), seen
    finally:
        m.close()
        forget(url)


def test_existing_files_and_directories_keep_their_modes(tmp_path: Path, umask_022):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    db = shared / "team.db"
    url = f"sqlite:///{db}"
    Membrane.open(url, load_sample=False).close()
    os.chmod(db, 0o640)  # the owner's choice
    m = Membrane.open(url, load_sample=False, clock=lambda: T0)
    try:
        m.import_records([simple("k-1")])
        assert _mode(shared) == 0o755 and _mode(db) == 0o640
    finally:
        m.close()
        forget(url)


def test_exports_follow_the_umask_and_keep_a_replaced_files_mode(store: Membrane, tmp_path: Path, umask_022):
    """An export is the user's own file at a path they chose: made with their umask, like any
    file they write; written again over a file they made private, it stays private."""
    fresh = tmp_path / "fresh.json"
    store.export_file(fresh, ids=["s1"])
    assert _mode(fresh) == 0o644
    private = tmp_path / "private.jsonl"
    private.write_text("")
    os.chmod(private, 0o600)
    store.export_file(private, ids=["s1"])
    assert _mode(private) == 0o600 and private.read_text().count("\n") == 1


def test_a_blank_id_is_refused_even_among_valid_records(store: Membrane):
    before = dump(store)
    with pytest.raises(ValidationError) as info:
        store.import_records([simple("ok-a"), simple(" \u3000 "), simple("ok-b")])  # U+3000: ideographic space
    assert "record 1: id" in str(info.value)
    assert dump(store) == before


def test_ids_with_inner_or_surrounding_spaces_are_still_ids(store: Membrane):
    """Only blank ids are refused: an id is an opaque string, spaces and all."""
    store.import_records([simple(" padded "), simple("two words")], actor="t")
    assert store.get(" padded ").id == " padded " and store.get("two words").id == "two words"
    for rid in (" padded ", "two words"):
        store.delete(rid, "t", "clean up")
