"""Graph: "What would this agent receive as a graph for this task?" The engine's
retrieve_graph (SPEC 9) for one trust context and task: the roots it ranks, the records their
relations reach within the hops asked, the typed edges between them.

What is drawn is the operator's view's graph (``OperatorView.graph``): retrieved for the stricter
of the agent's context and the signed-in operator's clearance, so nothing beyond the clearance is
drawn or counted, and no relation of a node the clearance sees redacted is drawn.
"""

from __future__ import annotations

import zlib

import streamlit as st

from console import state
from console.components.clearance import operator_view
from console.components.graph_view import render_graph
from console.components.guard import engine_call
from console.components.safe import md
from console.components.time_input import as_of_input
from console.components.trust_form import (LAYERS, RequestParams, seed_request_form, show_ignored_parameters,
                                           trust_context_form)
from console.components.words import plural
from membrane_engine import (DEFAULT_EDGE_LIMIT, DEFAULT_NODE_LIMIT, DEFAULT_ROOT_LIMIT, MAX_TASK_LENGTH,
                             RetrieveGraphRequest)

K = "gr"
HOPS = {"1": 1, "2": 2, "3": 3, "none": -1}

st.title("What graph would this agent receive?")
st.caption("The memory graph the engine returns for one trust context and task: ranked roots, the records their "
           "relations reach, and the typed edges between them. Redacted records are drawn locked, with their labels "
           "only; hidden ones are not drawn at all.")

# What is drawn is limited to the signed-in operator's clearance (the view cuts the graph).
view = operator_view("graph")
operator = view.operator



def _bounded(name: str, value: str | None, low: int, high: int, default: int, problems: list[str]) -> int:
    """The whole number ``value`` of link parameter ``name`` in ``low``..``high``; else ``default``
    and a warning in ``problems`` (a default taken silently would pass for what the link said)."""
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or not low <= number <= high:
        problems.append(state.ignored_parameter(name, value, f"a whole number {low}-{high}"))
        return default
    return number


# The request lives in the URL (a link, a reload, Back / Forward restore it); the trust context is
# the session's shared one when the URL names none (console/state.py).
URL_WIDGETS = (*state.trust_widgets(K), *(f"{K}_{w}" for w in ("task", "types", "hops", "roots", "nodes", "edges", "as_of")))
URL_PARAMETERS = (*state.TRUST_FIELDS, "task", "memory_types", "as_of", "hops", "roots", "nodes", "edges")
seed = state.page_query("graph", widgets=URL_WIDGETS)
if seed is None and f"{K}_roots" not in st.session_state:  # widgets gone with a page change
    seed = st.query_params.to_dict()
if seed is not None:
    seed_request_form(K, seed)
    problems: list[str] = []
    if "hops" in seed and seed["hops"] not in HOPS:
        problems.append(state.ignored_parameter("hops", seed["hops"], ", ".join(HOPS)))
    st.session_state[f"{K}_hops"] = seed.get("hops") if seed.get("hops") in HOPS else "1"
    st.session_state[f"{K}_roots"] = _bounded("roots", seed.get("roots"), 1, 100, DEFAULT_ROOT_LIMIT, problems)
    st.session_state[f"{K}_nodes"] = _bounded("nodes", seed.get("nodes"), 1, 500, DEFAULT_NODE_LIMIT, problems)
    st.session_state[f"{K}_edges"] = _bounded("edges", seed.get("edges"), 1, 2000, DEFAULT_EDGE_LIMIT, problems)
    st.session_state[f"{K}_link_problems"] = problems + state.unknown_parameters(seed, URL_PARAMETERS)
show_ignored_parameters(K)
for problem in st.session_state.get(f"{K}_link_problems", []):
    st.warning(md(problem, 300), icon=":material/link_off:")

controls, results = st.columns([2, 4], gap="medium")  # the form stays readable at 1024 px
with controls:
    st.subheader("Agent and task")
    # Only the scopes of records your clearance sees are offered (a scope is a label too).
    trust = trust_context_form(K, view.scopes())
    task = st.text_input("Task descriptor", key=f"{K}_task", max_chars=MAX_TASK_LENGTH, placeholder="e.g. fix flaky pytest test in CI",
                         help="Ranks the roots (and finds entities it names); empty ranks by salience")
    types = st.multiselect("Memory types of the roots", LAYERS, key=f"{K}_types", help="Empty: every type")
    hops = st.segmented_control("Hops from the roots", list(HOPS), key=f"{K}_hops",
                                help="How far the walk over relations goes; none: the roots only")
    # One above the other: three side by side in the form's column cut the numbers at 1024 px.
    root_limit = st.number_input("Roots, at most", 1, 100, key=f"{K}_roots")
    node_limit = st.number_input("Nodes, at most", 1, 500, key=f"{K}_nodes")
    edge_limit = st.number_input("Edges, at most", 1, 2000, key=f"{K}_edges")
    as_of = as_of_input(f"{K}_as_of", label="As of (UTC)", help="Salience S(t) at this instant")

query = RequestParams(trust=trust, task=task, memory_types=tuple(t for t in LAYERS if t in types), as_of=as_of).to_query()
query = {k: v for k, v in query.items() if k not in ("min_salience", "limit")}
query.update({"hops": hops or "1", "roots": str(int(root_limit)), "nodes": str(int(node_limit)),
              "edges": str(int(edge_limit))})
state.keep_page_query("graph", query)

request = RetrieveGraphRequest(trust=trust, task_descriptor=task, memory_types=types, root_limit=int(root_limit),
                               node_limit=int(node_limit), edge_limit=int(edge_limit),
                               max_hops=HOPS.get(hops or "1", 1), as_of=as_of)
with results:
    with engine_call("The engine refused the request"):
        # Cut to the clearance by the view (graph.within): no edge out of a node it sees
        # redacted, no node reached only through one it withholds.
        graph, _ = view.graph(request)
    redacted = sum(n.record.redacted for n in graph.nodes)
    cols = st.columns(4)
    cols[0].metric("Roots", len(graph.root_ids),
                   help="The best-ranked records for the task (by salience when there is none), up to the Roots limit")
    cols[1].metric("Nodes", len(graph.nodes), help="The roots and the records their relations reach within the hops, "
                                                   "that this agent sees and you may see, up to the Nodes limit")
    cols[2].metric("Edges", len(graph.edges), help="Typed relations between the nodes drawn, up to the Edges limit")
    cols[3].metric("Redacted", redacted, help="Drawn locked: metadata only")
    # Not how many nodes of this graph were withheld: a count per context would tell, to anyone
    # trying contexts, which scopes and levels the records beyond the clearance have. The
    # store's one total instead, counted now.
    beyond = view.beyond_clearance()
    if beyond:
        st.caption(f"{plural(beyond, 'record')} in the store {'is' if beyond == 1 else 'are'} beyond your clearance: "
                   "a graph that reaches them is drawn without them, and without what only they lead to.")
    predicates = sorted({e.predicate for e in graph.edges})
    # Keyed by the set of edge types: another graph starts with all of its types drawn.
    shown = st.pills("Edge types", predicates, selection_mode="multi", default=predicates,
                     key=f"{K}_predicates_{zlib.crc32('|'.join(predicates).encode()):08x}",
                     help="Which typed edges to draw") if predicates else []
    render_graph(graph, key=K, predicates=list(shown or []))
