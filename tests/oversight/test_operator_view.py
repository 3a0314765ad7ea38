"""The operator's view, SPEC 10 "One door": every read and write on an operator's behalf is held
to their role and clearance as stored at each call, whatever the caller sends."""

from __future__ import annotations

import pytest

from tests.support.records import DAY, T0, ago, later, rec, trust
from membrane_engine import Filters, Membrane, RetrieveGraphRequest, RetrieveRequest
from membrane_engine.errors import AccessDeniedError, NotFoundError, ValidationError

# low/[alpha] sees public and low records in alpha or unscoped in full, medium ones redacted.
STORE = [
    rec("a-low", sensitivity="low", scope="alpha", tags=["seen"],
        relations=[{"predicate": "mentions", "target_id": "b-medium", "weight": 1.0}]),
    rec("b-medium", sensitivity="medium", scope="alpha",
        relations=[{"predicate": "secret_link", "target_id": "c-low", "weight": 1.0}]),
    rec("c-low", sensitivity="low", scope="alpha"),
    rec("d-public", "competence", sensitivity="public",
        payload={"kind": "competence", "skill_name": "lint",
                 "performance": {"success_count": 3, "failure_count": 1, "success_rate": 0.75}}),
    rec("e-hyper", "competence", sensitivity="hyper", scope="vault", created_at=ago(DAY),
        payload={"kind": "competence", "skill_name": "vault-skill",
                 "performance": {"success_count": 9, "failure_count": 0, "success_rate": 0.99}}),
    rec("f-high", sensitivity="high", scope="alpha"),
    rec("g-episodic", "episodic", sensitivity="low", scope="alpha"),
]


@pytest.fixture
def store(mem: Membrane) -> Membrane:
    mem.import_records(STORE)
    mem.operators.add("cur", "curator", "low", ["alpha"], actor="test")
    mem.operators.add("low-admin", "admin", "low", ["alpha"], actor="test")
    mem.operators.add("root", "admin", "hyper", [], actor="test")
    mem.operators.add("viewer", "viewer", "hyper", [], actor="test")
    return mem


def audit_count(m: Membrane) -> int:
    return m.audit_query(limit=0)[0]


# ------------------------------------------------------------------------------ who


def test_an_unknown_or_removed_operator_has_no_view(store):
    with pytest.raises(NotFoundError):
        store.as_operator("nobody")
    view = store.as_operator("cur")
    store.operators.remove("cur", actor="test")
    with pytest.raises(NotFoundError):
        view.get("a-low")


def test_a_demoted_operator_loses_the_right_at_once(store):
    view = store.as_operator("cur")
    view.pin("a-low", "first")
    before = audit_count(store)
    store.operators.set("cur", actor="test", role="viewer")
    with pytest.raises(AccessDeniedError, match="curator"):
        view.unpin("a-low", "second")
    assert audit_count(store) == before
    assert store.get("a-low").lifecycle.pinned


def test_a_narrowed_clearance_applies_at_the_next_call(store):
    view = store.as_operator("cur")
    assert not view.get("a-low").redacted
    store.operators.set("cur", actor="test", max_sensitivity="public")
    assert view.get("a-low").redacted
    store.operators.set("cur", actor="test", scopes=["beta"])
    with pytest.raises(NotFoundError):
        view.get("a-low")


def test_every_write_names_the_operator_and_takes_no_actor(store):
    view = store.as_operator("cur")
    view.reinforce("a-low", "useful", gain=0.1)
    assert store.audit_log("a-low")[-1].actor == "operator:cur"
    with pytest.raises(ValidationError, match="actor"):
        view.preview("reinforce", "a-low", "why", actor="someone-else")


# ------------------------------------------------------------------------------ hidden = absent


@pytest.mark.parametrize("call", [
    lambda v, rid: v.get(rid),
    lambda v, rid: v.explain(rid),
    lambda v, rid: v.history(rid),
    lambda v, rid: v.audit_log(rid),
    lambda v, rid: v.salience_at(rid, T0),
    lambda v, rid: v.record_at(rid, T0),
    lambda v, rid: v.referencing(rid),
    lambda v, rid: v.retrieve_by_id(rid, trust("hyper")),
    lambda v, rid: v.neighbourhood(rid, trust("hyper")),
    lambda v, rid: v.reclassify(rid, "forged", sensitivity="public"),
    lambda v, rid: v.pin(rid, "forged"),
    lambda v, rid: v.fork(rid, rec("fork-1", sensitivity="low", scope="alpha"), "forged"),
], ids=["get", "explain", "history", "audit_log", "salience_at", "record_at", "referencing", "retrieve_by_id",
        "neighbourhood", "reclassify", "pin", "fork"])
def test_a_hidden_record_is_indistinguishable_from_an_absent_one(store, call):
    view = store.as_operator("cur")
    before = audit_count(store)
    with pytest.raises(NotFoundError) as hidden:
        call(view, "e-hyper")
    with pytest.raises(NotFoundError) as absent:
        call(view, "no-such-record")
    assert str(hidden.value) == str(absent.value).replace("no-such-record", "e-hyper")
    assert audit_count(store) == before  # nothing written, not even for the refused write
    assert store.get("e-hyper").sensitivity.value == "hyper"


def test_a_forged_reclassify_of_a_hidden_record_by_an_admin_changes_nothing(store):
    admin = store.as_operator("low-admin")
    for op in (lambda: admin.reclassify("e-hyper", "x", sensitivity="public", scope=""),
               lambda: admin.delete("e-hyper", "x"),
               lambda: admin.bulk_apply(admin.bulk_preview("delete", ["e-hyper"], "x"))):
        try:
            result = op()
        except NotFoundError:
            continue
        assert not result.applied  # the bulk path refuses per record
    assert store.get("e-hyper").sensitivity.value == "hyper"
    assert "e-hyper" not in store.archived_ids()


def test_a_redacted_record_is_metadata_only_and_cannot_be_changed(store):
    view = store.as_operator("cur")
    shown = view.get("b-medium")
    assert shown.redacted and shown.payload is None and shown.relations == []
    before = audit_count(store)
    for write in (lambda: view.pin("b-medium", "x"), lambda: view.reinforce("b-medium", "x"),
                  lambda: view.merge(["a-low", "b-medium"], rec("m-1", sensitivity="low", scope="alpha",
                                                              provenance={"sources": [{"kind": "event", "ref": "x"}]}),
                                     "x")):
        with pytest.raises(AccessDeniedError):
            write()
    with pytest.raises(AccessDeniedError, match="lifecycle"):
        view.salience_at("b-medium", T0)
    assert audit_count(store) == before


def test_nobody_writes_a_record_beyond_their_clearance(store):
    view = store.as_operator("cur")
    before = audit_count(store)
    with pytest.raises(AccessDeniedError, match="beyond your clearance"):
        view.fork("a-low", rec("fork-hyper", sensitivity="hyper", scope="vault",
                               provenance={"sources": [{"kind": "event", "ref": "x"}]}), "leak it up")
    assert audit_count(store) == before
    with pytest.raises(NotFoundError):
        store.get("fork-hyper")


def test_a_contest_naming_a_hidden_record_reads_as_a_free_text_reference(store):
    view = store.as_operator("cur")
    hidden = view.preview("contest", "c-low", "e-hyper", "why").change("c-low").after
    absent = view.preview("contest", "c-low", "not-a-record", "why").change("c-low").after
    assert [r.target_id for r in hidden.relations] == [r.target_id for r in absent.relations] == []


def test_prune_through_a_clearance_archives_only_what_it_sees_in_full(store):
    pruned = store.as_operator("low-admin").prune("tidy", as_of=later(400 * DAY), dry_run=True)
    everything = store.as_operator("root").prune("tidy", as_of=later(400 * DAY), dry_run=True)
    assert set(pruned) == {"a-low", "c-low", "d-public", "g-episodic"}
    assert set(pruned) < set(everything) and "e-hyper" in everything


# ------------------------------------------------------------------------------ aggregates


def test_metrics_at_two_instants_tell_a_low_viewer_nothing_about_a_hidden_record(store):
    view = store.as_operator("cur")
    # e-hyper was created a day before T0: an instant before and one after it.
    then, now = view.metrics(as_of=ago(2 * DAY)), view.metrics(as_of=T0)
    assert then["beyond_clearance"] == now["beyond_clearance"] == 2  # e-hyper, f-high: now, one total
    assert now["records_by_type"]["competence"] == 1  # d-public only
    assert now["competence_success_rate"] == pytest.approx(0.75)
    assert then["total_records"] == 0 and now["total_records"] == 5
    breakdown = view.store_breakdown(as_of=T0)
    assert set(breakdown["by_scope"]) <= {"alpha", ""} and "vault" not in str(breakdown)
    assert breakdown["by_type_sensitivity"]["competence"]["hyper"] == 0
    assert view.scopes() == ["alpha"]


def test_the_audit_actor_filter_matches_only_where_the_actor_is_shown(store):
    root = store.as_operator("root")
    root.pin("b-medium", "only on a record cur sees redacted")
    total, rows = store.as_operator("cur").audit_query(actor="operator:root")
    assert (total, rows) == (0, [])
    assert "operator:root" not in store.as_operator("cur").audit_actors()
    assert root.audit_query(actor="operator:root")[0] == 1


def test_a_simulation_counts_only_what_the_clearance_sees(store):
    sim = store.as_operator("cur").simulate(RetrieveRequest(trust=trust("hyper"), limit=0))
    ids = {r.id for r in sim.response.records}
    assert ids <= {"a-low", "b-medium", "c-low", "d-public", "g-episodic"} and "e-hyper" not in ids
    counted = sum(c.full + c.redacted + c.hidden + c.below_min_salience for c in sim.counts.values())
    assert counted == 5 and sim.withheld == 0 and store.as_operator("cur").beyond_clearance() == 2
    assert next(r for r in sim.response.records if r.id == "b-medium").redacted


def test_what_if_counts_what_the_clearance_sees_and_one_total_beyond(store):
    out = store.as_operator("cur").compare(trust("public"), trust("hyper"), limit=50)
    assert out.beyond == 2 and sum(out.counts_b.values()) == 5
    assert {c.id for c in out.rows} <= {"a-low", "b-medium", "c-low", "g-episodic"}


def test_search_and_listings_stop_at_the_clearance(store):
    view = store.as_operator("cur")
    total, page = view.search(Filters(), limit=50)
    assert total == 5 and {r.id for r in page} == {"a-low", "b-medium", "c-low", "d-public", "g-episodic"}
    assert view.count() == 5 and view.beyond_clearance() == 2
    assert "e-hyper" not in {f.id for f in view.find("")}
    assert set(view.briefs(["a-low", "b-medium", "e-hyper"])) == {"a-low"}  # pinned: withheld when redacted
    assert set(view.labels(["a-low", "e-hyper"])) == {"a-low"}


# ------------------------------------------------------------------------------ the graph


def test_the_graph_keeps_no_relation_of_a_redacted_node_nor_what_only_it_reaches(store):
    request = RetrieveGraphRequest(trust=trust("hyper"), task_descriptor="", root_limit=1, node_limit=25,
                                   max_hops=3, memory_types=["semantic"])
    agent = store.retrieve_graph(request)
    assert {"secret_link"} <= {e.predicate for e in agent.edges}
    graph, withheld = store.as_operator("cur").graph(request)
    nodes = {n.record.id: n for n in graph.nodes}
    assert "secret_link" not in {e.predicate for e in graph.edges}
    assert all(not nodes[e.source_id].record.redacted for e in graph.edges)
    # The walk a-low -> b-medium (seen redacted) -> c-low: c-low is reached only through b-medium.
    assert agent.root_ids == graph.root_ids == ["a-low"] and "c-low" in {n.record.id for n in agent.nodes}
    assert nodes["b-medium"].record.redacted and set(nodes) == {"a-low", "b-medium"}
    # The roots, the walk and the limits are over what the clearance sees: no count tells of hidden
    # records, whatever scopes the agent's context names.
    probe = request.model_copy(update={"trust": trust("hyper", ["alpha", "vault"]), "memory_types": [],
                                       "root_limit": 10})
    other = request.model_copy(update={"trust": trust("hyper", ["alpha", "nothing-here"]), "memory_types": [],
                                       "root_limit": 10})
    a, b = store.as_operator("cur").graph(probe), store.as_operator("cur").graph(other)
    assert ([n.record.id for n in a[0].nodes], a[0].root_ids, a[1]) == ([n.record.id for n in b[0].nodes],
                                                                         b[0].root_ids, b[1])


# ------------------------------------------------------------------------------ who looked


def test_content_sending_calls_append_to_the_access_log(store, tmp_path):
    root = store.as_operator("root", via="page:test")
    base = store.access_log(limit=0)[0]
    root.get("f-high")
    assert store.access_log(limit=0)[0] == base + 1
    root.simulate(RetrieveRequest(trust=trust("hyper"), limit=0))
    root.search(Filters(), limit=50)
    root.export_file(tmp_path / "out.jsonl")
    total, entries = store.access_log(record_id="e-hyper", limit=100)
    assert total == 3 and {e.via for e in entries} == {"page:test"} and {e.actor for e in entries} == {"operator:root"}
    # What the clearance shows redacted, or below the logging level, is not logged as read.
    store.as_operator("cur").get("b-medium")
    assert store.access_log(actor="operator:cur", limit=0)[0] == 0


def test_a_preview_made_by_one_operator_cannot_be_applied_by_another(store):
    preview = store.as_operator("root").bulk_preview("pin", ["a-low"], "x")
    with pytest.raises(AccessDeniedError, match="operator:root"):
        store.as_operator("low-admin").bulk_apply(preview)


def test_no_number_of_a_simulation_moves_with_a_scope_the_clearance_does_not_see(store):
    # A viewer probing scope names: "vault" holds only e-hyper, which the clearance does not see.
    view = store.as_operator("cur")
    with_vault = view.simulate(RetrieveRequest(trust=trust("hyper", ["alpha", "vault"]), limit=0))
    without = view.simulate(RetrieveRequest(trust=trust("hyper", ["alpha", "nothing-here"]), limit=0))
    for sim in (with_vault, without):
        assert sim.withheld == 0
    assert with_vault.total_matching == without.total_matching
    assert with_vault.counts == without.counts and with_vault.revised == without.revised
    assert [r.id for r in with_vault.response.records] == [r.id for r in without.response.records]
