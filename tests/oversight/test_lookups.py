"""Store-wide lookups the console uses: one encoding for tag searches, one audit filter."""

from __future__ import annotations

from datetime import timedelta

from tests.support.records import T0, rec as make_record

from membrane_engine.storage import audit_log as audit_module
from membrane_engine.oversight.record_query import Filters, search, tag_counts
from membrane_engine.oversight.finders import audit_activity, audit_newest, audit_span, search_records


def test_tag_filters_match_non_ascii_tags(membrane):
    membrane.import_records([
        make_record("r-cafe", tags=["café", "naïve \"quoted\""]),
        make_record("r-plain", tags=["cafe"]),
    ])
    total, found = search(membrane, Filters(tags=["café"]), as_of=T0)
    assert (total, [r.id for r in found]) == (1, ["r-cafe"])
    total, found = search(membrane, Filters(tags=['naïve "quoted"']), as_of=T0)
    assert (total, [r.id for r in found]) == (1, ["r-cafe"])
    assert [f.id for f in search_records(membrane, "café")] == ["r-cafe"]


def test_like_wildcards_in_a_search_are_literal(membrane):
    membrane.import_records([make_record("a_b", tags=["50%"]), make_record("axb", tags=["500"])])
    assert [f.id for f in search_records(membrane, "a_b")] == ["a_b"]
    total, found = search(membrane, Filters(tags=["50%"]), as_of=T0)
    assert [r.id for r in found] == ["a_b"]


def test_audit_activity_counts_what_the_audit_query_lists(membrane):
    membrane.import_records([make_record("r1"), make_record("r2")])
    since = T0 - timedelta(days=3650)
    for actor in (None, "nobody"):
        total, rows = membrane.audit_query(actor=actor, since=since, limit=1000)
        buckets = audit_activity(membrane, actor=actor, since=since)
        assert sum(n for _, _, n in buckets) == total == len(rows)
    assert audit_module.filter_conditions() == []


def test_audit_span_and_newest_follow_the_log(membrane):
    assert audit_span(membrane) is None and audit_newest(membrane) == 0
    older = make_record("r1")
    older["audit_log"] = [{"action": "create", "actor": "a", "timestamp": "2025-01-01T00:00:00Z", "rationale": "x"}]
    membrane.import_records([older, make_record("r2")])
    _, rows = membrane.audit_query(limit=1000)
    stamps = [r.entry.timestamp.timestamp() for r in rows]
    assert audit_span(membrane) == (min(stamps), max(stamps)) and min(stamps) < max(stamps)
    assert audit_newest(membrane) == max(r.seq for r in rows)
    membrane.reinforce("r2", actor="op", rationale="seen again")
    _, after = membrane.audit_query(limit=1000)
    assert audit_newest(membrane) == max(r.seq for r in after) > max(r.seq for r in rows)


def test_tag_counts_count_records_not_mentions(membrane):
    membrane.import_records([
        make_record("r1", tags=["ops", "ops", "café"]),  # a tag twice in one record counts once
        make_record("r2", tags=["ops", "db"]),
        make_record("r3", tags=[]),
        make_record("r4", tags=["db", "zeta", "\"quoted\""]),
    ])
    assert list(tag_counts(membrane).items()) == [("db", 2), ("ops", 2), ("\"quoted\"", 1), ("café", 1), ("zeta", 1)]


def test_tag_counts_skip_a_tags_value_that_is_not_json(tmp_path):
    import sqlite3

    from membrane_engine import Membrane

    path = tmp_path / "m.db"
    m = Membrane.open(f"sqlite:///{path}", load_sample=False)
    try:
        m.import_records([make_record("r1", tags=["ops"]), make_record("r2", tags=["ops", "db"])])
        with sqlite3.connect(path) as conn:  # written around the engine (and its change log)
            conn.execute("UPDATE records SET tags = 'not json' WHERE id = 'r2'")
    finally:
        m.close()
    m = Membrane.open(f"sqlite:///{path}", load_sample=False)  # a cache that loads the store as it is now
    try:
        assert tag_counts(m) == {"ops": 1}
        assert search(m, Filters(tags=["ops"]), as_of=T0)[0] == 1
    finally:
        m.close()


def test_tag_filter_is_exact(membrane):
    """A tag matches itself only: not another case of it, not a tag that contains it."""
    membrane.import_records([make_record("r1", tags=["Ops"]), make_record("r2", tags=["ops", "ops-night"]),
                             make_record("r3", tags=["ops-night"])])
    assert search(membrane, Filters(tags=["ops"]), sort="id")[0] == 1
    assert [r.id for r in search(membrane, Filters(tags=["ops-night"]), sort="id")[1]] == ["r2", "r3"]
    assert search(membrane, Filters(tags=["Ops", "ops"]))[0] == 0
    assert tag_counts(membrane) == {"ops-night": 2, "Ops": 1, "ops": 1}



def test_hidden_records_lists_only_what_the_clearance_sees(membrane):
    """The simulator's hidden list: records the context does not see, counted whole, listed (by
    id) only when the operator's clearance sees them; the verdicts are the engine's (explain)."""
    from membrane_engine import TrustContext
    from membrane_engine.oversight.finders import hidden_records

    membrane.import_records([
        make_record("a-low-beta", sensitivity="low", scope="beta"),
        make_record("b-high", sensitivity="high"),
        make_record("c-medium-beta", sensitivity="medium", scope="beta"),
        make_record("d-hyper", "working", sensitivity="hyper"),
        make_record("e-public", sensitivity="public"),
        make_record("f-low-alpha", sensitivity="low", scope="alpha"),
    ])
    context = TrustContext(max_sensitivity="low", scopes=["alpha"])
    clearance = TrustContext(max_sensitivity="medium")  # sees high redacted, hyper not at all
    explained = membrane.explain_many(membrane.ids(), context)
    hidden = sorted(rid for rid, v in explained.items() if v.value == "hidden")
    assert hidden == ["a-low-beta", "b-high", "c-medium-beta", "d-hyper"]
    page = hidden_records(membrane, context, clearance)
    assert (page.total, page.seen) == (4, 3)
    assert [b.id for b in page.records] == ["a-low-beta", "b-high", "c-medium-beta"]  # d-hyper: counted only
    assert page.records[1].sensitivity == "high" and page.records[0].scope == "beta"
    assert [b.id for b in hidden_records(membrane, context, clearance, offset=1, limit=1).records] == ["b-high"]
    working = hidden_records(membrane, context, clearance, memory_types=["working"])
    assert (working.total, working.seen, working.records) == (1, 0, [])
