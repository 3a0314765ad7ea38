"""Tag counts and the tag filter on the column cache's tag-set codes equal the SQL answer, through
an operator's clearance, also after another connection changed the store (records imported,
re-tagged, reclassified, deleted, restored) between queries."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import cast, distinct, func, literal_column, select, true
from sqlalchemy.dialects.postgresql import JSONB

from bench.generate import NOW, SCOPE_NAMES, TAGS, records
from membrane_engine import Membrane, TrustContext
from membrane_engine.storage.record_queries import visible_condition
from membrane_engine.errors import MembraneError
from membrane_engine.oversight.record_query import MAX_PAGE, Filters, search, tag_counts
from membrane_engine.storage.store import records as records_table

LEVELS = ["public", "low", "medium", "high", "hyper"]
NEW_TAGS = ["brand-new-tag", "Café \"quoted\"", "ops"]  # new ones, and one that differs only in case from none

clearances = st.one_of(st.none(), st.builds(
    TrustContext, max_sensitivity=st.sampled_from(LEVELS), actor_id=st.just("operator:scale-test"),
    scopes=st.lists(st.sampled_from(list(SCOPE_NAMES[:8]) + ["nowhere"]), max_size=3)))
wanted_tags = st.lists(st.sampled_from(list(TAGS[:6]) + NEW_TAGS + ["absent-tag"]), min_size=1, max_size=2)
ALL_TAGS = list(TAGS) + NEW_TAGS
OPS = st.lists(st.tuples(st.sampled_from(["import", "retag", "reclassify", "delete", "restore", "reinforce"]),
                         st.integers(0, 10**6)), min_size=1, max_size=6)


def sql_tag_counts(m: Membrane, clearance: TrustContext | None) -> dict[str, int]:
    """The database's answer: unpack every visible record's tags (json_each / jsonb) and count
    distinct records per tag."""
    store = m.store
    unpack = (func.json_each(records_table.c.tags) if store.is_sqlite
              else func.jsonb_array_elements_text(cast(records_table.c.tags, JSONB))).table_valued("value")
    row = literal_column("records.rowid") if store.is_sqlite else records_table.c.id
    q = (select(unpack.c.value, func.count(distinct(row)))
         .select_from(records_table.join(unpack, true())).group_by(unpack.c.value))
    if clearance is not None:
        q = q.where(visible_condition(clearance))
    with store.read() as conn:
        counted = [(str(tag), int(n)) for tag, n in conn.execute(q)]
    return dict(sorted(counted, key=lambda kv: (-kv[1], kv[0])))


def sql_tagged(m: Membrane, clearance: TrustContext | None, tags: list[str]) -> list[str]:
    """Ids (sorted) of the visible records carrying every tag of ``tags``, read from the store."""
    q = select(records_table.c.id, records_table.c.tags)
    if clearance is not None:
        q = q.where(visible_condition(clearance))
    with m.store.read() as conn:
        rows = conn.execute(q).all()
    return sorted(rid for rid, raw in rows if set(tags) <= set(json.loads(raw)))


def check(m: Membrane, clearance: TrustContext | None, tags: list[str]) -> None:
    counted = tag_counts(m, clearance=clearance)
    assert counted == sql_tag_counts(m, clearance)
    assert list(counted) == list(sql_tag_counts(m, clearance))  # the same order too
    total, page = search(m, Filters(tags=tags), limit=MAX_PAGE, sort="id", as_of=NOW, clearance=clearance)
    expected = sql_tagged(m, clearance, tags)
    assert total == len(expected)
    assert [r.id for r in page] == expected[:MAX_PAGE]
    if len(tags) == 1 and tags[0] in counted:
        assert total == counted[tags[0]]


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_tag_counts_and_filter_follow_writes_by_another_connection(kind, request):
    url = request.getfixturevalue("sqlite_url" if kind == "sqlite" else "postgres_url")
    reader = Membrane.open(url, load_sample=False, clock=lambda: NOW)
    reader.import_records(list(records(300, seed=11)))
    counter = iter(range(10**6))

    @settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    @given(ops=OPS, clearance=clearances, tags=wanted_tags)
    def run(ops, clearance, tags):
        check(reader, clearance, tags)  # the reader's cache is warm before the writes
        writer = Membrane.open(url, load_sample=False, clock=lambda: NOW)
        try:
            for op, pick in ops:
                ids = writer.ids()
                target = ids[pick % len(ids)]
                try:
                    if op == "import":
                        writer.import_records(list(records(30, seed=2000 + next(counter))))
                    elif op == "retag":
                        chosen = [ALL_TAGS[(pick >> k) % len(ALL_TAGS)] for k in range(pick % 4)]
                        writer.reclassify(target, "scale-test", "retag", tags=chosen)
                    elif op == "reclassify":
                        writer.reclassify(target, "scale-test", "reclassify", sensitivity=LEVELS[pick % 5],
                                          scope=(list(SCOPE_NAMES[:3]) + ["", "brand-new-scope"])[pick % 5])
                    elif op == "delete":
                        writer.delete(target, "scale-test", "delete")
                    elif op == "restore":
                        archived = writer.archived_ids()
                        if archived:
                            writer.restore(archived[pick % len(archived)], "scale-test", "restore")
                    elif op == "reinforce":
                        writer.reinforce(target, "scale-test", "reinforce")
                except MembraneError:
                    pass  # e.g. deleting a record whose policy is "never": nothing was written
        finally:
            writer.close()
        check(reader, clearance, tags)
        check(reader, None, tags[:1])

    try:
        run()
    finally:
        reader.close()
