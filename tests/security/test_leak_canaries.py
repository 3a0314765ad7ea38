"""Leak canaries (SPEC 3, 4): for every trust context in a grid, nothing that context may not
see in full reaches retrieve, retrieve_by_type, explain, retrieve_by_id, exports or the
simulator's counts. Each record's withheld bytes carry unique CANARY strings (tests/support/canaries.py),
so a leak is a substring search over everything the engine hands out."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from membrane_engine import Membrane, RetrieveRequest, TrustContext
from membrane_engine.errors import AccessDeniedError, NotFoundError

from tests.support import canaries as cs
from tests.support.security import FULL

RECORDS = cs.build_canary_records()
BY_ID = {r["id"]: r for r in RECORDS}
SCOPE_SETS = {"none": [], "one": ["alpha"], "two": ["alpha", "beta"], "unknown": ["no-record-has-this"]}
# The whole grid runs on SQLite; gating is the same code on PostgreSQL (numpy over the column
# cache), so there a slice of it runs, the whole grid with MEMBRANE_SECURITY_FULL=1.
PG_SLICE = {("public", "one"), ("low", "none"), ("medium", "two"), ("high", "unknown"), ("high", "one"),
            ("hyper", "two")}
GRID = [
    pytest.param("sqlite", sens, scopes, auth, id=f"sqlite-{sens}-{name}-{'auth' if auth else 'anon'}")
    for sens, (name, scopes), auth in itertools.product(cs.SENSITIVITIES, SCOPE_SETS.items(), (True, False))
] + [
    pytest.param("postgres", sens, scopes, auth, id=f"postgres-{sens}-{name}-{'auth' if auth else 'anon'}",
                 marks=pytest.mark.postgres)
    for sens, (name, scopes), auth in itertools.product(cs.SENSITIVITIES, SCOPE_SETS.items(), (True, False))
    if FULL or ((sens, name) in PG_SLICE and auth)
]
# explain and retrieve_by_id go record by record: every record of the grid, and a few of the
# relation targets (all alike: semantic, hyper, scope vault).
ONE_BY_ONE = [r["id"] for r in RECORDS if not r["id"].startswith("CANARY-TGT-")] + \
    [r["id"] for r in RECORDS if r["id"].startswith("CANARY-TGT-")][:6]


def _ctx(sens: str, scopes: list[str], auth: bool) -> TrustContext:
    return TrustContext(max_sensitivity=sens, scopes=scopes, authenticated=auth, actor_id=f"agent-{sens}")


def _expected(sens: str, scopes: list[str]) -> dict[str, str]:
    return {rid: cs.verdict(r, sens, scopes) for rid, r in BY_ID.items()}


def _leaks(text: str, forbidden: set[str]) -> list[str]:
    # Canaries have one fixed shape, so one regex pass finds every one present.
    return sorted(set(cs.CANARY_RE.findall(text)) & forbidden)


def _assert_redacted_clean(doc: dict, where: str) -> None:
    """A redacted view is metadata only: no canary anywhere but its own id."""
    rest = {k: v for k, v in doc.items() if k != "id"}
    text = json.dumps(rest, ensure_ascii=False)
    assert "CANARY" not in text, f"{where}: redacted {doc['id']} carries a canary: {text[:300]}"
    assert doc.get("payload") is None and doc.get("redacted") is True, where
    # (An empty relation list is left out, as Membrane's omitempty writes it.)
    assert doc["provenance"]["sources"] == [] and doc.get("relations", []) == [] and doc["audit_log"] == [], where
    allowed = {"id", "type", "sensitivity", "confidence", "salience", "scope", "tags", "created_at",
               "updated_at", "lifecycle", "provenance", "relations", "payload", "audit_log", "redacted"}
    assert set(doc) <= allowed, f"{where}: redacted {doc['id']} has extra fields {set(doc) - allowed}"


def _check_records(docs: list[dict], expected: dict[str, str], forbidden: set[str], where: str,
                   wanted_ids: set[str]) -> None:
    text = json.dumps(docs, ensure_ascii=False)
    assert not _leaks(text, forbidden), f"{where}: leaked {_leaks(text, forbidden)[:5]}"
    got = {d["id"]: d for d in docs}
    assert len(got) == len(docs), f"{where}: duplicate records"
    visible = {rid for rid in wanted_ids if expected[rid] != "hidden"}
    assert set(got) == visible, f"{where}: extra {set(got) - visible}, missing {visible - set(got)}"
    for rid, doc in got.items():
        if expected[rid] == "redacted":
            _assert_redacted_clean(doc, where)
        else:
            assert not doc.get("redacted"), f"{where}: {rid} should be full"
            # The canaries the context may see are really there (so the search above can fail).
            mine = set(cs.canaries_for(BY_ID[rid]))
            present = set(cs.CANARY_RE.findall(json.dumps({k: v for k, v in doc.items() if k != "id"})))
            assert mine <= present, f"{where}: full {rid} lost content {sorted(mine - present)[:3]}"


@pytest.mark.parametrize("db, sens, scopes, auth", GRID)
def test_retrieve_simulate_and_by_type_leak_nothing(request, db, sens, scopes, auth):
    canary_membrane: Membrane = request.getfixturevalue(f"canary_{db}")
    ctx = _ctx(sens, scopes, auth)
    expected = _expected(sens, scopes)
    forbidden = cs.forbidden_canaries(RECORDS, sens, scopes)
    assert forbidden or sens == "hyper", "the grid must withhold something"

    sim = canary_membrane.simulate(RetrieveRequest(trust=ctx, limit=0))
    resp = sim.response
    body = resp.model_dump_json()
    assert not _leaks(body, forbidden), f"retrieve leaked {_leaks(body, forbidden)[:5]}"
    _check_records([r.to_json_dict() for r in resp.records], expected, forbidden, "retrieve", set(BY_ID))

    # The selector's view: scores name visible candidates only; selected records are gated too.
    sel = resp.selection
    assert sel is not None
    candidates = {rid for rid, r in BY_ID.items() if r["type"] in ("competence", "plan_graph")
                  and expected[rid] != "hidden"}
    assert set(sel.scores) == candidates
    for r in sel.selected:
        doc = r.to_json_dict()
        if expected[r.id] == "redacted":
            _assert_redacted_clean(doc, "selection")
        assert not _leaks(json.dumps(doc), forbidden)

    # Counts agree with the visible set, layer by layer.
    for type_ in cs.TYPES:
        layer = [rid for rid, r in BY_ID.items() if r["type"] == type_]
        c = sim.counts[type_]
        assert (c.full, c.redacted, c.hidden) == (
            sum(expected[r] == "full" for r in layer), sum(expected[r] == "redacted" for r in layer),
            sum(expected[r] == "hidden" for r in layer)), type_
        assert c.below_min_salience == 0
    assert sim.total_matching == sum(v != "hidden" for v in expected.values())

    # A page and a salience floor never widen what is shown.
    page = canary_membrane.retrieve(RetrieveRequest(trust=ctx, limit=7, min_salience=0.5))
    assert len(page.records) <= 7
    assert not _leaks(page.model_dump_json(), forbidden)
    for r in page.records:
        assert expected[r.id] != "hidden" and r.redacted == (expected[r.id] == "redacted")

    for type_ in cs.TYPES:
        docs = [r.to_json_dict() for r in canary_membrane.retrieve_by_type(type_, ctx)]
        _check_records(docs, expected, forbidden, f"retrieve_by_type({type_})",
                       {rid for rid, r in BY_ID.items() if r["type"] == type_})


@pytest.mark.parametrize("db, sens, scopes, auth", GRID)
def test_explain_and_retrieve_by_id_leak_nothing(request, db, sens, scopes, auth):
    canary_membrane: Membrane = request.getfixturevalue(f"canary_{db}")
    ctx = _ctx(sens, scopes, auth)
    expected = _expected(sens, scopes)
    for rid in ONE_BY_ONE:
        record = BY_ID[rid]
        ex = canary_membrane.explain(rid, ctx, as_of=None)
        text = ex.model_dump_json().replace(json.dumps(rid)[1:-1], "")
        assert "CANARY" not in text, f"explain({rid}) names content: {text[:300]}"
        assert ex.verdict.value == expected[rid], rid
        assert (ex.id, ex.type, ex.sensitivity, ex.scope) == (rid, record["type"], record["sensitivity"], record["scope"])

        if expected[rid] == "full":
            got = canary_membrane.retrieve_by_id(rid, ctx)
            assert got.id == rid and not got.redacted
        else:
            with pytest.raises(AccessDeniedError) as info:
                canary_membrane.retrieve_by_id(rid, ctx)
            message = str(info.value).replace(rid, "")
            assert "CANARY" not in message, message
    with pytest.raises(NotFoundError) as info:
        canary_membrane.retrieve_by_id("no-such-record", ctx)
    assert "CANARY" not in str(info.value)
    verdicts = canary_membrane.explain_many(list(BY_ID), ctx)
    assert {k: v.value for k, v in verdicts.items()} == expected


@pytest.mark.parametrize("db, sens, scopes, auth", GRID)
def test_exports_under_a_context_leak_nothing(request, db, sens, scopes, auth, tmp_path: Path):
    canary_membrane: Membrane = request.getfixturevalue(f"canary_{db}")
    ctx = _ctx(sens, scopes, auth)
    expected = _expected(sens, scopes)
    forbidden = cs.forbidden_canaries(RECORDS, sens, scopes)

    docs = list(canary_membrane.iter_export(trust=ctx))
    _check_records(docs, expected, forbidden, "iter_export", set(BY_ID))

    for name in ("out.json", "out.jsonl"):
        path = tmp_path / name
        n = canary_membrane.export_file(path, trust=ctx)
        raw = path.read_text(encoding="utf-8")
        assert not _leaks(raw, forbidden), f"{name} leaked {_leaks(raw, forbidden)[:5]}"
        parsed = json.loads(raw) if name.endswith(".json") else [json.loads(x) for x in raw.splitlines() if x]
        assert len(parsed) == n
        _check_records(parsed, expected, forbidden, name, set(BY_ID))


def test_hidden_canaries_never_appear_anywhere_for_the_narrowest_context(canary_membrane: Membrane, tmp_path: Path):
    """public, in a scope nobody has: only unscoped public records in full, unscoped low ones
    redacted; not one canary of anything else anywhere."""
    ctx = _ctx("public", ["no-record-has-this"], False)
    everything = cs.all_canaries(RECORDS)
    allowed = set()
    for r in RECORDS:
        if cs.verdict(r, "public", ["no-record-has-this"]) == "full":
            allowed.update(cs.canaries_for(r))
    outputs = [canary_membrane.retrieve(RetrieveRequest(trust=ctx)).model_dump_json()]
    outputs += [json.dumps([r.to_json_dict() for r in canary_membrane.retrieve_by_type(t, ctx)]) for t in cs.TYPES]
    outputs += [canary_membrane.explain(rid, ctx).model_dump_json() for rid in BY_ID]
    canary_membrane.export_file(tmp_path / "narrow.json", trust=ctx)
    outputs.append((tmp_path / "narrow.json").read_text(encoding="utf-8"))
    found = set()
    for text in outputs:
        found.update(cs.CANARY_RE.findall(text))
    # Explain names ids (relation targets' ids are CANARY-TGT-...); they are metadata, not content.
    found -= set(BY_ID)
    assert found <= allowed
    assert found, "the full records' canaries should be visible"
    assert not (found & (everything - allowed))


def test_the_fixture_is_what_it_claims():
    """Every record but the targets is covered; every high and hyper record carries canaries
    in each place the brief names."""
    types = {(r["type"], r["sensitivity"], r["scope"]) for r in RECORDS if not r["id"].startswith("CANARY-TGT-")}
    assert len(types) == len(cs.TYPES) * len(cs.SENSITIVITIES) * len(cs.SCOPES)
    for r in RECORDS:
        assert "CANARY" not in json.dumps([r["scope"], r["tags"], r["type"], r["sensitivity"]])
        canaries = set(cs.canaries_for(r))
        assert cs.CANARY_RE.findall(json.dumps(r["payload"]))
        for part in (r["provenance"], r["audit_log"], r["x_top_extra"], r["lifecycle"]):
            assert set(cs.CANARY_RE.findall(json.dumps(part))) <= canaries and cs.CANARY_RE.findall(json.dumps(part))
        if not r["id"].startswith("CANARY-TGT-"):
            assert r["relations"] and r["relations"][0]["target_id"] in canaries
            assert r["relations"][0]["predicate"] in canaries
    assert len(cs.all_canaries(RECORDS)) == sum(len(cs.canaries_for(r)) for r in RECORDS)
