"""The fast retrieval path equals the naive reference on generated stores and random requests,
also after another connection changed the store between queries (the column cache catches up
through the change log)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.generate import NOW, SCOPE_NAMES, records
from bench.reference import naive_retrieve, same_response
from membrane_engine import Membrane, RetrieveRequest, TrustContext
from membrane_engine.errors import MembraneError
from membrane_engine.retrieval.layered import MAX_LIMIT, SELECTED_MAX, records_returned

TYPES = ["episodic", "working", "semantic", "competence", "plan_graph", "entity"]
LEVELS = ["public", "low", "medium", "high", "hyper"]

trusts = st.builds(
    TrustContext,
    max_sensitivity=st.sampled_from(LEVELS),
    authenticated=st.booleans(),
    actor_id=st.just("scale-test"),
    scopes=st.lists(st.sampled_from(SCOPE_NAMES[:8] + ["nowhere"]), max_size=3),
)
requests = st.builds(
    RetrieveRequest,
    trust=trusts,
    memory_types=st.lists(st.sampled_from(TYPES), max_size=3),
    min_salience=st.sampled_from([0.0, 0.0, 0.05, 0.2, 0.5, 0.9]),
    limit=st.sampled_from([0, 1, 5, 20, 10_000]),
    as_of=st.integers(-30, 30).map(lambda days: NOW + timedelta(days=days)),
)
PROPS = settings(max_examples=8, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def check(m: Membrane, req: RetrieveRequest) -> None:
    fast = m.retrieve(req)
    ref = naive_retrieve(m, req)
    assert same_response(fast, ref) == []
    if ref.selection is not None:
        assert len(fast.selection.selected) == min(len(ref.selection.selected), SELECTED_MAX)
        assert fast.selection.scores.keys() == ref.selection.scores.keys()


@pytest.fixture(scope="module")
def stores(request):
    """One generated store per database for the whole module (the data is the generator's;
    hypothesis varies the requests)."""
    made = {}
    yield made
    for m in made.values():
        m.close()


def _store(kind: str, request, stores) -> Membrane:
    if kind not in stores:
        url = request.getfixturevalue("sqlite_url" if kind == "sqlite" else "postgres_url")
        m = Membrane.open(url, load_sample=False, clock=lambda: NOW)
        m.import_records(list(records(800, seed=7)))
        stores[kind] = m
    return stores[kind]


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_fast_path_equals_reference_on_a_generated_store(kind, request, stores):
    m = _store(kind, request, stores)

    @PROPS
    @given(req=requests)
    def run(req):
        check(m, req)

    run()
    # and the benchmark's own request, with selection candidates beyond SELECTED_MAX
    req = RetrieveRequest(trust=TrustContext(max_sensitivity="medium", scopes=["project-alpha", "project-beta"]),
                          min_salience=0.2, limit=20, as_of=NOW)
    check(m, req)
    everything = RetrieveRequest(trust=TrustContext(max_sensitivity="hyper"), as_of=NOW)
    check(m, everything)
    assert len(m.retrieve(everything).selection.scores) > SELECTED_MAX


OPS = st.lists(st.tuples(st.sampled_from(["import", "reinforce", "penalize", "reclassify", "pin", "delete", "restore"]),
                         st.integers(0, 10**6)), min_size=1, max_size=5)


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_fast_path_follows_writes_by_another_connection(kind, request):
    url = request.getfixturevalue("sqlite_url" if kind == "sqlite" else "postgres_url")
    reader = Membrane.open(url, load_sample=False, clock=lambda: NOW)
    reader.import_records(list(records(300, seed=11)))
    counter = iter(range(10**6))

    @settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    @given(ops=OPS, reqs=st.lists(requests, min_size=1, max_size=2))
    def run(ops, reqs):
        check(reader, reqs[0])  # the reader's cache is warm before the writes
        writer = Membrane.open(url, load_sample=False, clock=lambda: NOW)
        try:
            for op, pick in ops:
                ids = writer.ids()
                target = ids[pick % len(ids)]
                try:
                    if op == "import":
                        k = next(counter)
                        batch = list(records(40, seed=1000 + k))  # relations stay inside the batch
                        writer.import_records(batch)
                    elif op == "reinforce":
                        writer.reinforce(target, "scale-test", "reinforce")
                    elif op == "penalize":
                        writer.penalize(target, 0.3, "scale-test", "penalize")
                    elif op == "reclassify":
                        writer.reclassify(target, "scale-test", "reclassify", sensitivity=LEVELS[pick % 5],
                                          scope=(SCOPE_NAMES[:3] + ["", "brand-new-scope"])[pick % 5])
                    elif op == "pin":
                        writer.pin(target, "scale-test", "pin")
                    elif op == "delete":
                        writer.delete(target, "scale-test", "delete")
                    elif op == "restore":
                        archived = writer.archived_ids()
                        if archived:
                            writer.restore(archived[pick % len(archived)], "scale-test", "restore")
                except MembraneError:
                    pass  # e.g. deleting a record whose policy is "never": nothing was written
        finally:
            writer.close()
        for req in reqs + [RetrieveRequest(trust=TrustContext(max_sensitivity="hyper"), as_of=NOW)]:
            check(reader, req)
        assert reader.count() == len(reader.ids())

    try:
        run()
    finally:
        reader.close()


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_limit_zero_returns_at_most_the_cap(kind, request):
    """Limit 0 (no limit of the caller's) returns the first MAX_LIMIT records, as limit
    MAX_LIMIT does and as the reference does; what passed gating is still counted in full and
    the selector still sees every candidate."""
    m = Membrane.open(request.getfixturevalue("sqlite_url" if kind == "sqlite" else "postgres_url"),
                      load_sample=False, clock=lambda: NOW)
    try:
        m.import_records(list(records(MAX_LIMIT + 400, seed=11)))
        everything = RetrieveRequest(trust=TrustContext(max_sensitivity="hyper"), as_of=NOW)
        sim = m.simulate(everything)
        assert sim.total_matching > MAX_LIMIT  # the generated store keeps enough records alive
        assert sum(c.full + c.redacted for c in sim.counts.values()) == sim.total_matching
        assert len(sim.response.records) == records_returned(sim.total_matching, 0) == MAX_LIMIT
        capped = m.retrieve(everything.model_copy(update={"limit": MAX_LIMIT}))
        assert [r.id for r in sim.response.records] == [r.id for r in capped.records]
        selector_types = {"competence", "plan_graph"}
        candidates = sum(c.full + c.redacted for t, c in sim.counts.items() if t in selector_types)
        assert len(sim.response.selection.scores) == candidates
        check(m, everything)  # the reference cuts at the cap too
        check(m, everything.model_copy(update={"min_salience": 0.05, "memory_types": ["episodic", "semantic"]}))
    finally:
        m.close()
