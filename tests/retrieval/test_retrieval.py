"""SPEC 4: layered retrieval, request validation, by-id and by-type reads, ordering."""

from __future__ import annotations

import math

import pytest

from membrane_engine import MemoryType, RetrieveRequest, RetrieveResponse
from membrane_engine.errors import AccessDeniedError, NilTrustError, NotFoundError, ValidationError
from membrane_engine.retrieval.layered import MAX_LIMIT

from tests.support.records import DAY, HOUR, T0, ago, competence, later, rec, trust

ALL_TYPES = ["episodic", "plan_graph", "competence", "semantic", "entity", "working"]


def ids(resp: RetrieveResponse) -> list[str]:
    return [r.id for r in resp.records]


def req(**kw) -> RetrieveRequest:
    kw.setdefault("trust", trust("hyper"))
    kw.setdefault("as_of", T0)
    return RetrieveRequest(**kw)


# --------------------------------------------------------------------------- layers


def test_layer_order_on_equal_salience(mem):
    # Same salience, same created_at: only the canonical layer order decides.
    mem.import_records([rec(f"{t}-rec", t, salience=0.5, pinned=True) for t in ALL_TYPES])
    assert ids(mem.retrieve(req())) == ["working-rec", "entity-rec", "semantic-rec", "competence-rec",
                                        "plan_graph-rec", "episodic-rec"]


def test_memory_types_restrict_and_duplicates_count_once(mem):
    mem.import_records([rec(f"{t}-rec", t, salience=0.5, pinned=True) for t in ALL_TYPES])
    resp = mem.retrieve(req(memory_types=["episodic", "working", "episodic", MemoryType.WORKING]))
    assert ids(resp) == ["working-rec", "episodic-rec"]
    assert resp.selection is None
    resp = mem.retrieve(req(memory_types=["plan_graph", "competence", "plan_graph"]))
    assert ids(resp) == ["competence-rec", "plan_graph-rec"]
    assert sorted(resp.selection.scores) == ["competence-rec", "plan_graph-rec"]
    assert len(resp.selection.selected) == 2


def test_higher_salience_beats_layer_order(mem):
    mem.import_records([rec("w", "working", salience=0.3, pinned=True), rec("e", "episodic", salience=0.9, pinned=True)])
    assert ids(mem.retrieve(req())) == ["e", "w"]


# --------------------------------------------------------------------------- min_salience


def test_min_salience_is_inclusive(mem):
    mem.import_records([
        rec("at", salience=0.5, pinned=True),
        rec("decayed-to-half", salience=1.0, half_life=DAY, created_at=ago(DAY)),  # exactly 0.5 at T0
        rec("below", salience=0.4999999, pinned=True),
        rec("above", salience=0.9, pinned=True),
    ])
    assert ids(mem.retrieve(req(min_salience=0.5))) == ["above", "at", "decayed-to-half"]
    assert ids(mem.retrieve(req(min_salience=0.9))) == ["above"]
    assert ids(mem.retrieve(req(min_salience=0.90000001))) == []


def test_min_salience_zero_disables_the_filter(mem):
    mem.import_records([rec("zero", salience=0.0), rec("gone", salience=1.0, max_age=HOUR, created_at=ago(DAY))])
    assert sorted(ids(mem.retrieve(req(min_salience=0)))) == ["gone", "zero"]
    assert ids(mem.retrieve(req(min_salience=1e-9))) == []


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -0.1, "abc", None])
def test_bad_min_salience_is_a_validation_error(lite, bad):
    with pytest.raises(ValidationError) as info:
        lite.retrieve(req(min_salience=bad))
    assert "min_salience" in str(info.value)


# --------------------------------------------------------------------------- limit


def test_limit_values(mem):
    mem.import_records([rec(f"r{i:02d}", salience=i / 100, pinned=True) for i in range(1, 21)])
    assert len(ids(mem.retrieve(req(limit=0)))) == 20
    assert ids(mem.retrieve(req(limit=3))) == ["r20", "r19", "r18"]
    assert len(ids(mem.retrieve(req(limit=10000)))) == 20
    assert len(ids(mem.retrieve(req(limit=20)))) == 20


@pytest.mark.parametrize("bad", [10001, -1, 2.5, "3", True])
def test_bad_limit_is_a_validation_error(lite, bad):
    with pytest.raises(ValidationError) as info:
        lite.retrieve(req(limit=bad))
    assert "limit" in str(info.value)


@pytest.mark.parametrize("bad", ["dream", "", "Semantic", 3])
def test_unknown_memory_type_is_a_validation_error(lite, bad):
    with pytest.raises(ValidationError) as info:
        lite.retrieve(req(memory_types=["semantic", bad]))
    assert "memory_types" in str(info.value)


def test_validation_comes_before_any_work_and_trust_first(lite):
    # A request without trust can be built; the call refuses it, before other checks.
    request = RetrieveRequest(min_salience=-1, limit=-5, memory_types=["dream"])
    assert request.trust is None
    with pytest.raises(NilTrustError):
        lite.retrieve(request)
    with pytest.raises(NilTrustError):
        lite.retrieve(None)


# --------------------------------------------------------------------------- nil trust, by id, by type


def test_nil_trust_everywhere(mem):
    mem.import_records([rec("x")])
    with pytest.raises(NilTrustError):
        mem.retrieve(RetrieveRequest(as_of=T0))
    with pytest.raises(NilTrustError):
        mem.retrieve_by_id("x", None)
    with pytest.raises(NilTrustError):
        mem.retrieve_by_id("absent", None)
    with pytest.raises(NilTrustError):
        mem.retrieve_by_type("semantic", None)


def test_retrieve_by_id_not_found_vs_denied(mem):
    mem.import_records([
        rec("full", sensitivity="medium", scope="alpha", salience=0.8, half_life=DAY),
        rec("redacted", sensitivity="high", scope="alpha"),
        rec("hidden-level", sensitivity="hyper", scope="alpha"),
        rec("hidden-scope", sensitivity="low", scope="beta"),
    ])
    ctx = trust("medium", ["alpha"])
    got = mem.retrieve_by_id("full", ctx, as_of=later(DAY))
    assert got.id == "full" and not got.redacted and got.payload is not None
    assert got.salience == pytest.approx(0.4)
    for rid in ("redacted", "hidden-level", "hidden-scope"):
        with pytest.raises(AccessDeniedError):
            mem.retrieve_by_id(rid, ctx)
    with pytest.raises(NotFoundError):
        mem.retrieve_by_id("absent", ctx)


def test_retrieve_by_type_sorted_gated_and_unlimited(mem):
    docs = [rec(f"s{i:03d}", salience=(i % 17) / 17, pinned=True, scope=("alpha" if i % 3 else "beta"),
                sensitivity=("high" if i % 5 == 0 else "low")) for i in range(60)]
    docs.append(rec("other-type", "working", salience=1.0))
    mem.import_records(docs)
    ctx = trust("medium", ["alpha"])
    got = mem.retrieve_by_type("semantic", ctx, as_of=T0)
    expected = [d for d in docs if d["type"] == "semantic" and d["scope"] == "alpha"]
    assert sorted(r.id for r in got) == sorted(d["id"] for d in expected)
    assert [r.salience for r in got] == sorted((r.salience for r in got), reverse=True)
    assert all(r.redacted == (r.sensitivity.value == "high") for r in got)
    assert mem.retrieve_by_type(MemoryType.WORKING, ctx, as_of=T0)[0].id == "other-type"
    with pytest.raises(ValidationError):
        mem.retrieve_by_type("dream", ctx)


def test_limit_zero_stops_at_the_cap_and_retrieve_by_type_does_not(mem):
    mem.import_records([rec(f"s{i:05d}", salience=0.5, pinned=True) for i in range(MAX_LIMIT + 5)])
    ctx = trust("medium")
    capped = ids(mem.retrieve(req(trust=ctx, limit=0)))
    assert len(capped) == MAX_LIMIT
    by_type = mem.retrieve_by_type("semantic", ctx, as_of=T0)
    assert len(by_type) == MAX_LIMIT + 5  # SPEC 4: no limit
    assert [r.id for r in by_type[:MAX_LIMIT]] == capped


# --------------------------------------------------------------------------- ordering


def test_deterministic_order_with_ties(mem):
    mem.import_records([
        rec("sem-old-b", salience=0.5, pinned=True, created_at=ago(2 * DAY)),
        rec("sem-old-a", salience=0.5, pinned=True, created_at=ago(2 * DAY)),
        rec("sem-new", salience=0.5, pinned=True, created_at=ago(DAY)),
        rec("work-old", "working", salience=0.5, pinned=True, created_at=ago(10 * DAY)),
        rec("epi-new", "episodic", salience=0.5, pinned=True, created_at=T0),
        rec("top", "episodic", salience=0.6, pinned=True, created_at=ago(30 * DAY)),
        rec("comp-z", "competence", salience=0.5, pinned=True, created_at=ago(DAY)),
        rec("comp-a", "competence", salience=0.5, pinned=True, created_at=ago(DAY)),
    ])
    expected = ["top", "work-old", "sem-new", "sem-old-a", "sem-old-b", "comp-a", "comp-z", "epi-new"]
    assert ids(mem.retrieve(req())) == expected
    for limit in range(1, 9):
        assert ids(mem.retrieve(req(limit=limit))) == expected[:limit]


def test_records_carry_salience_at_as_of(mem):
    mem.import_records([rec("e", salience=0.8, half_life=DAY), rec("l", salience=0.6, curve="linear", half_life=DAY)])
    resp = mem.retrieve(req(as_of=later(DAY)))
    got = {r.id: r.salience for r in resp.records}
    assert got == {"e": pytest.approx(0.4), "l": pytest.approx(0.3)}
    assert ids(resp) == ["e", "l"]
    resp = mem.retrieve(req(as_of=later(1.5 * DAY)))
    assert ids(resp) == ["e", "l"]
    assert [r.salience for r in resp.records] == pytest.approx([0.8 * 2 ** -1.5, 0.15])
    assert resp.records[0].lifecycle.anchor_salience == 0.8  # the lifecycle shows the anchor


def test_as_of_defaults_to_the_membranes_now(mem):
    mem.import_records([rec("x", salience=0.8, half_life=HOUR, created_at=T0)])
    resp = mem.retrieve(RetrieveRequest(trust=trust()))
    assert resp.records[0].salience == pytest.approx(0.8)
    assert mem.retrieve_by_id("x", trust()).salience == pytest.approx(0.8)
    assert mem.retrieve_by_type("semantic", trust())[0].salience == pytest.approx(0.8)
    assert mem.get("x").salience == pytest.approx(0.8)


def test_records_carry_their_audit_log(mem):
    mem.import_records([rec("x")], actor="importer-7")
    r = mem.retrieve(req()).records[0]
    assert [(e.action.value, e.actor) for e in r.audit_log] == [("create", "importer-7")]


# --------------------------------------------------------------------------- selection


def test_selection_is_null_without_candidates(mem):
    mem.import_records([
        rec("s", salience=0.9), rec("w", "working"),
        competence("c-hidden", confidence=0.9, successes=1, failures=0, reinforced=T0, sensitivity="hyper"),
        competence("c-faint", confidence=0.9, successes=1, failures=0, reinforced=T0, salience=0.01, pinned=True),
    ])
    assert mem.retrieve(req(trust=trust("medium"), min_salience=0.1)).selection is None
    assert mem.retrieve(req(memory_types=["semantic", "working"])).selection is None
    sel = mem.retrieve(req(trust=trust("medium"))).selection
    assert sel is not None and list(sel.scores) == ["c-faint"]


def test_selection_may_name_records_cut_by_limit(mem):
    mem.import_records([
        rec("s1", salience=0.9, pinned=True), rec("s2", salience=0.8, pinned=True),
        competence("c1", confidence=0.9, successes=9, failures=1, reinforced=T0, salience=0.2, pinned=True),
        rec("p1", "plan_graph", salience=0.1, pinned=True),
    ])
    resp = mem.retrieve(req(limit=2))
    assert ids(resp) == ["s1", "s2"]
    sel = resp.selection
    assert [r.id for r in sel.selected] == ["c1", "p1"]
    assert set(sel.scores) == {"c1", "p1"}
    assert sel.selected[0].payload is not None and sel.selected[0].salience == pytest.approx(0.2)


def test_naive_as_of_is_utc_everywhere(mem):
    from datetime import datetime

    mem.import_records([rec("x", salience=0.8, half_life=DAY, created_at=T0)])
    naive = datetime(2026, 6, 2, 12, 0)  # T0 + one half-life, read as UTC
    assert mem.retrieve(req(as_of=naive)).records[0].salience == pytest.approx(0.4)
    assert mem.retrieve_by_id("x", trust(), as_of=naive).salience == pytest.approx(0.4)
    assert mem.retrieve_by_type("semantic", trust(), as_of=naive)[0].salience == pytest.approx(0.4)
    assert mem.explain("x", trust(), as_of=naive).salience == pytest.approx(0.4)
    assert mem.metrics(as_of=naive)["avg_salience"] == pytest.approx(0.4)
    assert mem.salience_curves(["x"], [naive]) == {"x": [pytest.approx(0.4)]}
