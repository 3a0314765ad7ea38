"""An operator's clearance in the engine (SPEC 10): the console's reads through a clearance, on
the canary store (every withheld byte a unique CANARY string, tests/support/canaries.py), on each database.

- ``trust.narrowest`` gives, record by record, the stricter of two contexts' verdicts (checked
  against tests/support/canaries.py's independent SPEC 3 rule over every pair of a grid of contexts);
- the record explorer's search, counts, facets, incoming links and detail view leave out what a
  clearance does not see, redact what it sees redacted, and never match text it does not see;
- a simulation wider than the clearance keeps its counts and shows no record beyond it;
- the audit log through a clearance: entries of hidden records absent, of redacted ones masked;
- "who looked": an access entry for each opening in full at or above the configured level.
"""

from __future__ import annotations

import itertools
import json
import math

import pytest
from sqlalchemy import select

from membrane_engine import Membrane, RetrieveRequest, TrustContext
from membrane_engine.oversight import clearance as gate
from membrane_engine.errors import NotFoundError, ValidationError
from membrane_engine.oversight.record_query import Filters, referencing, search, tag_counts
from membrane_engine.oversight.finders import search_records
from membrane_engine.storage.store import access_log
from membrane_engine.rules.trust import Verdict, narrowest, stricter
from membrane_engine.oversight.trust_diff import compare

from tests.support import canaries as cs

RECORDS = cs.build_canary_records()
BY_ID = {r["id"]: r for r in RECORDS}
DATABASES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
SCOPE_SETS = [(), ("alpha",), ("alpha", "beta"), ("vault",), ("nowhere",)]
CONTEXTS = [(s, scopes) for s in cs.SENSITIVITIES for scopes in SCOPE_SETS]
LOW_ALPHA = TrustContext(max_sensitivity="low", scopes=["alpha"])


def ctx(sens: str, scopes) -> TrustContext:
    return TrustContext(max_sensitivity=sens, scopes=list(scopes))


def expected(sens: str, scopes) -> dict[str, str]:
    return {rid: cs.verdict(r, sens, scopes) for rid, r in BY_ID.items()}


def forbidden(sens: str, scopes) -> set[str]:
    return cs.forbidden_canaries(RECORDS, sens, scopes)


def leaks(value, bad: set[str]) -> list[str]:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return sorted(set(cs.CANARY_RE.findall(text)) & bad)


@pytest.fixture(params=DATABASES)
def canary(request) -> Membrane:
    return request.getfixturevalue(f"canary_{request.param}")


# ------------------------------------------------------------------------------ the combined gate


def test_narrowest_is_the_stricter_verdict_of_the_two_for_every_record_and_pair(canary_sqlite):
    rank = {"hidden": 0, "redacted": 1, "full": 2}
    for (sa, pa), (sb, pb) in itertools.product(CONTEXTS, repeat=2):
        got = canary_sqlite.explain_many(list(BY_ID), narrowest(ctx(sa, pa), ctx(sb, pb)))
        want_a, want_b = expected(sa, pa), expected(sb, pb)
        for rid, verdict in got.items():
            want = min(want_a[rid], want_b[rid], key=rank.get)
            assert verdict.value == want, (sa, pa, sb, pb, rid)


def test_stricter_orders_verdicts():
    assert stricter(Verdict.FULL, Verdict.REDACTED) is Verdict.REDACTED
    assert stricter(Verdict.HIDDEN, Verdict.FULL) is Verdict.HIDDEN
    assert stricter(Verdict.FULL, Verdict.FULL) is Verdict.FULL


def test_disjoint_scopes_leave_only_unscoped_records(canary_sqlite):
    both = narrowest(ctx("hyper", ["alpha"]), ctx("hyper", ["beta"]))
    seen = {rid for rid, v in canary_sqlite.explain_many(list(BY_ID), both).items() if v is not Verdict.HIDDEN}
    assert seen and all(BY_ID[rid]["scope"] == "" for rid in seen)


# ------------------------------------------------------------------------------ record explorer


@pytest.mark.parametrize("sens,scopes", [("public", ()), ("low", ("alpha",)), ("medium", ()), ("high", ("beta",)),
                                         ("hyper", ("alpha", "beta"))])
def test_search_leaves_out_hidden_and_redacts_before_counting_and_paging(canary, sens, scopes):
    clearance = ctx(sens, scopes)
    want = expected(sens, scopes)
    visible = {rid for rid, v in want.items() if v != "hidden"}
    total, page = search(canary, Filters(), offset=0, limit=1000, sort="id", clearance=clearance)
    assert total == len(visible)
    assert {r.id for r in page} == visible
    for record in page:
        assert record.redacted == (want[record.id] == "redacted"), record.id
    assert not leaks([r.to_json_dict() for r in page], forbidden(sens, scopes))
    # Paging works on the gated list: two halves make the whole.
    _, first = search(canary, Filters(), offset=0, limit=total // 2, sort="id", clearance=clearance)
    _, second = search(canary, Filters(), offset=total // 2, limit=1000, sort="id", clearance=clearance)
    assert [r.id for r in first + second] == sorted(visible)


def test_search_text_never_matches_content_the_clearance_does_not_see(canary):
    record = next(r for r in RECORDS if r["sensitivity"] == "medium" and r["scope"] == "alpha")
    needle = record["payload"]["x_payload_extra"]  # a CANARY only inside the withheld payload
    for sens, found in (("public", 0), ("low", 0), ("medium", 1), ("hyper", 1)):
        total, page = search(canary, Filters(text=needle), limit=10, clearance=ctx(sens, ["alpha"]))
        assert total == found, sens
    # Metadata a redacted view shows (its id) still finds it.
    total, page = search(canary, Filters(text=record["id"]), limit=10, clearance=ctx("low", ["alpha"]))
    assert total == 1 and page[0].redacted


def test_facets_links_and_pickers_follow_the_clearance(canary):
    all_tags = tag_counts(canary)
    low = tag_counts(canary, LOW_ALPHA)
    want = expected("low", ["alpha"])
    assert low["canary"] == sum(1 for v in want.values() if v != "hidden") < all_tags["canary"]
    assert "hyper" not in low  # the tag of records two levels above: none visible
    # Incoming links: only records the clearance sees in full name it.
    target = next(r for r in RECORDS if r["sensitivity"] == "public" and r["scope"] == "")["relations"][0]["target_id"]
    assert referencing(canary, target) and referencing(canary, target, clearance=LOW_ALPHA)
    hyper_target = next(r for r in RECORDS if r["sensitivity"] == "hyper")["relations"][0]["target_id"]
    assert referencing(canary, hyper_target) and not referencing(canary, hyper_target, clearance=LOW_ALPHA)
    found = {f.id for f in search_records(canary, "rec-", limit=1000, clearance=LOW_ALPHA)}
    assert found == {rid for rid, v in want.items() if v != "hidden" and rid.startswith("rec-")}
    full = {f.id for f in search_records(canary, "rec-", limit=1000, clearance=LOW_ALPHA, full_only=True)}
    assert full == {rid for rid, v in want.items() if v == "full" and rid.startswith("rec-")}


def test_view_gives_whole_redacted_or_absent(canary):
    want = expected("low", ["alpha"])
    for rid in [r["id"] for r in RECORDS if r["id"].startswith("rec-")][::7]:
        if want[rid] == "hidden":
            with pytest.raises(NotFoundError):
                canary.view(rid, LOW_ALPHA)
            continue
        record = canary.view(rid, LOW_ALPHA)
        assert record.redacted == (want[rid] == "redacted")
        if record.redacted:
            assert not leaks(record.to_json_dict(), forbidden("low", ["alpha"])) and not record.audit_log
        else:
            assert record.audit_log  # whole, with its audit log


# ------------------------------------------------------------------------------ simulations


@pytest.mark.parametrize("sens,scopes", [("public", ()), ("low", ("alpha",)), ("medium", ("beta",))])
def test_a_wider_simulation_shows_its_counts_and_nothing_beyond_the_clearance(canary, sens, scopes):
    clearance = ctx(sens, scopes)
    wide = RetrieveRequest(trust=ctx("hyper", []), limit=0)
    plain = canary.simulate(wide)
    seen = canary.simulate(wide, clearance=clearance)
    want = expected(sens, scopes)
    # One door (SPEC 10): the counts are over the records the clearance sees; what lies beyond it is
    # the one total ``withheld``, in no layer's count.
    assert seen.total_matching == plain.total_matching
    assert sum(c.full + c.redacted + c.hidden + c.below_min_salience for c in seen.counts.values()) == \
        sum(1 for v in want.values() if v != "hidden")
    assert seen.withheld == sum(1 for v in want.values() if v == "hidden")
    assert {r.id for r in seen.response.records} == {rid for rid, v in want.items() if v != "hidden"}
    for record in seen.response.records:
        assert record.redacted == (want[record.id] == "redacted")
    sel = seen.response.selection
    assert sel is not None and sel.confidence == plain.response.selection.confidence
    assert all(want[s.record_id] != "hidden" for s in sel.signals)
    for s in sel.signals:  # seen redacted by the clearance only: nothing made from withheld content
        assert math.isnan(s.success) == math.isnan(s.score) == (want[s.record_id] == "redacted"), s
    assert not leaks([r.to_json_dict() for r in seen.response.records + sel.selected], forbidden(sens, scopes))


def test_a_narrower_simulation_is_unchanged_by_a_wider_clearance(canary):
    request = RetrieveRequest(trust=ctx("low", ["alpha"]), limit=0)
    plain, seen = canary.simulate(request), canary.simulate(request, clearance=ctx("hyper", []))
    assert [r.id for r in seen.response.records] == [r.id for r in plain.response.records]
    assert seen.withheld == 0


def test_explain_through_a_clearance(canary):
    hyper = next(r["id"] for r in RECORDS if r["sensitivity"] == "hyper" and r["scope"] == "")
    medium = next(r["id"] for r in RECORDS if r["sensitivity"] == "medium" and r["scope"] == "")
    with pytest.raises(NotFoundError):
        gate.explain(canary, hyper, ctx("hyper", []), LOW_ALPHA)
    shown = gate.explain(canary, medium, ctx("hyper", []), LOW_ALPHA)
    assert shown.verdict is Verdict.REDACTED and shown.rules[-1] == "clearance"


def test_what_if_lists_only_changes_the_clearance_sees(canary):
    a, b = ctx("public", []), ctx("hyper", [])
    whole = compare(canary, a, b, limit=0)
    narrow = compare(canary, a, b, limit=10_000, clearance=LOW_ALPHA)
    want = expected("low", ["alpha"])
    # One door (SPEC 10): counted over what the clearance sees, the rest one total.
    assert sum(narrow.counts_a.values()) == sum(1 for v in want.values() if v != "hidden")
    assert narrow.beyond == sum(1 for v in want.values() if v == "hidden") and narrow.changed < whole.changed
    assert {c.id for c in narrow.rows} == {rid for rid, v in want.items() if v != "hidden"} & \
        {c.id for c in compare(canary, a, b, limit=10_000).rows}
    assert narrow.listed == len(narrow.rows) == narrow.changed


# ------------------------------------------------------------------------------ audit log


def test_audit_through_a_clearance_hides_and_masks(canary):
    want = expected("low", ["alpha"])
    bad = forbidden("low", ["alpha"])
    total_all, _ = canary.audit_query(limit=0)
    total, rows = canary.audit_query(clearance=LOW_ALPHA, limit=100_000)
    assert total == len(rows) < total_all
    assert {r.record_id for r in rows} == {rid for rid, v in want.items() if v != "hidden"}
    for row in rows:
        if want[row.record_id] == "redacted":
            assert row.entry.rationale == gate.WITHHELD and row.entry.actor == gate.WITHHELD and row.details is None
            assert not row.entry.model_extra
        else:
            assert row.entry.rationale != gate.WITHHELD
    assert not leaks([(r.record_id, r.entry.model_dump(mode="json"), r.details) for r in rows], bad)
    assert not leaks(gate.audit_actors(canary, LOW_ALPHA), bad)
    assert len(gate.audit_actors(canary, ctx("hyper", []))) > len(gate.audit_actors(canary, LOW_ALPHA))
    # One record's history: absent when hidden.
    hidden = next(rid for rid, v in want.items() if v == "hidden")
    assert gate.audit_rows(canary, hidden, LOW_ALPHA) == []


def test_audit_of_an_archived_record_follows_its_labels(store_url):
    m = Membrane.open(store_url, load_sample=False)
    try:
        m.import_records([r for r in RECORDS if r["id"] in ("rec-semantic-hyper-unscoped", "rec-semantic-low-alpha")]
                         + [BY_ID[r["relations"][0]["target_id"]] for r in RECORDS
                            if r["id"] in ("rec-semantic-hyper-unscoped", "rec-semantic-low-alpha")])
        m.delete("rec-semantic-hyper-unscoped", "operator:root", "test")
        m.delete("rec-semantic-low-alpha", "operator:root", "test")
        ids = {r.record_id for r in m.audit_query(clearance=LOW_ALPHA, limit=1000)[1]}
        assert "rec-semantic-low-alpha" in ids and "rec-semantic-hyper-unscoped" not in ids
    finally:
        m.close()


# ------------------------------------------------------------------------------ who looked


def test_opening_in_full_at_the_level_logs_an_access(store_url, monkeypatch):
    from datetime import datetime, timezone

    opened_at = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
    m = Membrane.open(store_url, load_sample=False, clock=lambda: opened_at)
    try:
        m.import_records([r for r in RECORDS if r["id"] in ("rec-semantic-high-alpha", "rec-semantic-medium-alpha",
                                                            "rec-semantic-hyper-alpha")]
                         + [BY_ID[r["relations"][0]["target_id"]] for r in RECORDS
                            if r["id"] in ("rec-semantic-high-alpha", "rec-semantic-medium-alpha",
                                           "rec-semantic-hyper-alpha")])
        root, medium = ctx("hyper", []), ctx("medium", [])
        m.view("rec-semantic-high-alpha", root, actor="operator:ann")  # high, in full: logged
        m.view("rec-semantic-medium-alpha", root, actor="operator:ann")  # below the level: not logged
        m.view("rec-semantic-high-alpha", medium, actor="operator:bob")  # redacted: not opened in full
        m.view("rec-semantic-high-alpha", root)  # no actor: a read, not an opening
        total, entries = m.access_log()
        assert total == 1 and entries[0].record_id == "rec-semantic-high-alpha" and entries[0].actor == "operator:ann"
        assert entries[0].sensitivity == "high" and entries[0].at == opened_at
        monkeypatch.setenv(gate.ACCESS_LOG_LEVEL_ENV, "medium")
        m.view("rec-semantic-medium-alpha", root, actor="operator:ann")
        assert m.access_log()[0] == 2
        # Through a clearance, entries of records it does not see are absent.
        m.view("rec-semantic-hyper-alpha", root, actor="operator:ann")
        assert m.access_log()[0] == 3
        assert m.access_log(clearance=ctx("medium", []))[0] == 2
        assert m.access_log(clearance=ctx("hyper", ["beta"]))[0] == 0
        assert m.access_log(record_id="rec-semantic-medium-alpha")[0] == 1
        monkeypatch.setenv(gate.ACCESS_LOG_LEVEL_ENV, "secret")
        with pytest.raises(ValidationError, match="MEMBRANE_ACCESS_LOG_LEVEL"):
            m.view("rec-semantic-high-alpha", root, actor="operator:ann")
        # Append-only: entries are never rewritten by later reads.
        with m.store.read() as conn:
            seqs = list(conn.execute(select(access_log.c.seq).order_by(access_log.c.seq)).scalars())
        assert seqs == sorted(seqs) and len(seqs) == 3
    finally:
        m.close()


def test_log_access_refuses_an_empty_actor(store_url):
    m = Membrane.open(store_url, load_sample=False)
    try:
        m.import_records([BY_ID["rec-semantic-high-alpha"], BY_ID[BY_ID["rec-semantic-high-alpha"]["relations"][0]["target_id"]]])
        with pytest.raises(ValidationError, match="actor"):
            m.log_access("rec-semantic-high-alpha", " ")
        with pytest.raises(NotFoundError):
            m.log_access("no-such-record", "operator:ann")
        m.log_access("rec-semantic-high-alpha", "operator:ann")
        assert m.access_log()[0] == 1
    finally:
        m.close()
