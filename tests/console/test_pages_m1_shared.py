"""The simulator, selector and graph pages through the operator's view (SPEC 10, "One door"), on
test_pages_m1_view.py's store: what a narrow clearance gets of records beyond it, what a
sensitive record shown in full leaves in the access log, what a forged widget value gets.
(Pages another engineer edits at the same time, hence a file of their own.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from membrane_engine import Membrane
from tests.console.test_pages_m1_view import (  # noqa: F401
    BEYOND, HYPER, LATE_HYPER, LOW_ALPHA, LOW_CURATOR, SECRET_SCOPE, canaries, cs, no_exception, page, sent, store,
    store_env)


# ---------------------------------------------------------------------------- simulator


def accesses(store: str, record_id: str) -> list:
    m = Membrane.open(store, load_sample=False)
    try:
        return m.access_log(record_id=record_id, limit=1000)[1]
    finally:
        m.close()


def test_simulator_showing_a_hyper_record_in_full_names_the_operator_in_the_access_log(store: str) -> None:
    before = len(accesses(store, LATE_HYPER["id"]))
    at = page("simulator", HYPER)
    at.query_params.update({"max_sensitivity": "hyper", "scopes": "", "limit": "0"})
    at.run()
    no_exception(at)
    assert cs._canary(LATE_HYPER["id"], "skill") in sent(at)  # shown in full on the ranked tab
    after = accesses(store, LATE_HYPER["id"])
    entries = after[: len(after) - before]  # newest first
    assert [(a.actor, a.via) for a in entries] == [("operator:hal", "page:simulator")]


def test_simulator_for_a_wide_context_sends_a_narrow_clearance_no_id_or_content_beyond_it(store: str) -> None:
    at = page("simulator", LOW_ALPHA)
    at.query_params.update({"max_sensitivity": "hyper", "scopes": "", "limit": "0"})
    at.run()
    no_exception(at)
    text = sent(at)
    for rec in BEYOND:
        assert rec["id"] not in text
        assert not canaries(rec) & set(cs.CANARY_RE.findall(text))
    assert "seen-semantic" in text  # not blind


def test_simulator_explain_of_a_forged_id_beyond_the_clearance_says_nothing_of_it(store: str) -> None:
    at = page("simulator", LOW_ALPHA)
    at.session_state["sim_explain_id"] = LATE_HYPER["id"]
    at.run()
    no_exception(at)
    text = sent(at)
    assert not canaries(LATE_HYPER) & set(cs.CANARY_RE.findall(text)) and SECRET_SCOPE not in text
    assert any("within your clearance" in e.value for e in at.error)


# ---------------------------------------------------------------------------- graph


def linked(rid: str, type_: str, sensitivity: str, targets: list[str]) -> dict:
    """A canary record in scope alpha whose relations (canary predicates) point at ``targets``."""
    out = cs._record(rid, type_, sensitivity, "alpha", None)
    out["relations"] = [{"predicate": cs._canary(rid, f"relation.predicate.{t}"), "target_id": t, "weight": 0.5,
                         "created_at": cs.CREATED} for t in targets]
    return out


# The root (an entity, low) links to a medium record (redacted to a low clearance) and a hyper
# one (withheld from it); each links on to a low record reached only through it.
GRAPH = [linked("g-root", "entity", "low", ["g-redacted", "g-withheld"]),
         linked("g-redacted", "semantic", "medium", ["g-behind-redacted"]),
         linked("g-withheld", "semantic", "hyper", ["g-behind-withheld"]),
         linked("g-behind-redacted", "semantic", "low", []),
         linked("g-behind-withheld", "semantic", "low", [])]


@pytest.fixture
def graph_store(tmp_path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'graph.db'}"
    m = Membrane.open(url, load_sample=False)
    m.import_records(cs.copy_records(GRAPH))
    m.close()
    monkeypatch.setenv("MEMBRANE_DB_URL", url)
    st.cache_resource.clear()
    yield url
    st.cache_resource.clear()


def graph_page(who) -> AppTest:
    at = page("graph", who)
    # An administrator's context (every record in full), roots of type entity, two hops.
    at.query_params.update({"max_sensitivity": "hyper", "scopes": "", "memory_types": "entity", "hops": "2"})
    return at.run()


def test_graph_draws_no_relation_of_a_redacted_node_and_nothing_reached_only_through_one(graph_store: str) -> None:
    at = graph_page(LOW_ALPHA)
    no_exception(at)
    text = sent(at)
    drawn = set(at.dataframe[0].value["id"])
    assert drawn == {"g-root", "g-redacted"}  # the redacted node itself is drawn, locked
    assert "Withheld" not in {m.label for m in at.metric}  # a count per context: no
    assert any(c.value.startswith("1 record in the store is beyond your clearance") for c in at.caption)
    for rid in ("g-withheld", "g-behind-redacted", "g-behind-withheld"):
        assert rid not in text
    # The redacted node's relation (its predicate and target) is payload the clearance withholds.
    assert cs._canary("g-redacted", "relation.predicate.g-behind-redacted") not in text
    forbidden = cs.forbidden_canaries(GRAPH, "low", ["alpha"])
    assert not forbidden & set(cs.CANARY_RE.findall(text))


def test_graph_showing_a_hyper_record_in_full_names_the_operator_in_the_access_log(graph_store: str) -> None:
    at = graph_page(HYPER)
    no_exception(at)
    assert "g-behind-withheld" in set(at.dataframe[0].value["id"])
    m = Membrane.open(graph_store, load_sample=False)
    try:
        entries = m.access_log(record_id="g-withheld", limit=100)[1]
    finally:
        m.close()
    assert [(a.actor, a.via) for a in entries] == [("operator:hal", "page:graph")]


# ---------------------------------------------------------------------------- selector


def test_selector_showing_a_hyper_candidate_names_the_operator_in_the_access_log(store: str) -> None:
    before = len(accesses(store, LATE_HYPER["id"]))
    at = page("selector", HYPER)
    at.query_params.update({"max_sensitivity": "hyper", "scopes": "", "as_of": "2026-07-01T00:00:00Z"})
    at.run()
    no_exception(at)
    assert cs._canary(LATE_HYPER["id"], "skill") in sent(at)  # named by its skill, which is payload
    after = accesses(store, LATE_HYPER["id"])
    assert [(a.actor, a.via) for a in after[: len(after) - before]] == [("operator:hal", "page:selector")]


def test_selector_for_a_wide_context_sends_a_narrow_clearance_nothing_beyond_it(store: str) -> None:
    at = page("selector", LOW_CURATOR)
    at.query_params.update({"max_sensitivity": "hyper", "scopes": "", "as_of": "2026-07-01T00:00:00Z"})
    at.run()
    no_exception(at)
    text = sent(at)
    for rec in BEYOND:
        assert rec["id"] not in text and not canaries(rec) & set(cs.CANARY_RE.findall(text))
    assert SECRET_SCOPE not in text and "seen-competence" in text


# ---------------------------------------------------------------------------- probing by context


def simulator_numbers(at: AppTest) -> dict[str, object]:
    out: dict[str, object] = {f"metric {m.label}": m.value for m in at.metric}
    out["tabs"] = [t.label for t in at.tabs]
    out["infos"] = [i.value for i in at.info]
    out["captions"] = [c.value for c in at.caption]
    for frame in at.dataframe:
        out[f"table {len(out)}"] = frame.value.astype(str).to_dict("list")
    return out


def test_a_context_naming_a_scope_beyond_the_clearance_moves_no_number(store: str) -> None:
    """A scope typed into the link is a context the simulator, the selector and the graph run:
    the numbers a low/[alpha] viewer gets for scope "zeta-secret-scope" (which holds records
    beyond the clearance) and for a scope nobody uses must be the same, or trying names finds
    the hidden ones."""
    shown = {}
    for scope in (SECRET_SCOPE, "no-such-scope"):
        for name in ("simulator", "selector", "graph"):
            at = page(name, LOW_CURATOR)
            at.query_params.update({"max_sensitivity": "hyper", "scopes": scope, "limit": "0",
                                    "as_of": "2026-07-01T00:00:00Z"})
            at.run()
            no_exception(at)
            numbers = simulator_numbers(at)
            shown[scope, name] = {k: str(v).replace(scope, "SCOPE") for k, v in numbers.items()}
    assert shown[SECRET_SCOPE, "simulator"] == shown["no-such-scope", "simulator"]
    assert shown[SECRET_SCOPE, "selector"] == shown["no-such-scope", "selector"]
    assert shown[SECRET_SCOPE, "graph"] == shown["no-such-scope", "graph"]


def test_the_simulations_selection_names_no_candidate_beyond_the_clearance(store: str) -> None:
    """``view.simulate``: the selector's scores are of the candidates the clearance sees, and
    the confidence is ranked over them (the engine's rule), so no id and no lead of a candidate
    beyond the clearance is in it."""
    from membrane_engine import RetrieveRequest, TrustContext

    m = Membrane.open(store, load_sample=False)
    try:
        m.operators.add("lara", "viewer", "low", ["alpha"], actor="test")
        view = m.as_operator("lara", via="page:test")
        request = RetrieveRequest(trust=TrustContext(max_sensitivity="hyper", authenticated=True),
                                  memory_types=["competence", "plan_graph"])
        everything = m.simulate(request).response.selection
        assert LATE_HYPER["id"] in everything.scores  # a candidate of this context, beyond the clearance
        selection = view.simulate(request).response.selection
        assert set(selection.scores) == {"seen-competence", "seen-plan"}
        ranked = sorted(selection.scores.values(), reverse=True)
        assert selection.confidence == pytest.approx((ranked[0] - ranked[1]) / ranked[0])
        assert selection.needs_more == (selection.confidence < selection.threshold)
    finally:
        m.close()


def test_a_layer_tab_lists_the_records_of_that_layer_within_the_clearance(store: str) -> None:
    """The layer counts are over what the clearance sees already: the semantic tab of a wide
    context lists the one semantic record the low/[alpha] viewer sees (taking the records beyond
    the clearance off that count again left it at none)."""
    at = page("simulator", LOW_ALPHA)
    at.query_params.update({"max_sensitivity": "hyper", "scopes": "", "limit": "0"})
    at.run()
    tab = next(t.label for t in at.tabs if t.label.startswith("semantic ("))
    assert tab == "semantic (1)"
    at.session_state["sim_view"] = tab
    at.run()
    no_exception(at)
    assert cs._canary("seen-semantic", "subject") in sent(at)
