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

from console import keys, state
from console.components.graph_view import render_graph
from console.components.guard import engine_call
from console.components.page import page_preamble
from console.components.time_picker import instant_picker
from console.components.trust_form import LAYERS, RequestParams, seed_request_form, trust_context_form
from console.components.words import plural
from console.keys import TRUST_FIELDS, Param
from membrane_engine import (DEFAULT_EDGE_LIMIT, DEFAULT_NODE_LIMIT, DEFAULT_ROOT_LIMIT, MAX_TASK_LENGTH,
                             RetrieveGraphRequest)

K = keys.GRAPH
HOPS = {"1": 1, "2": 2, "3": 3, "none": -1}

# What is drawn is limited to the signed-in operator's clearance (the view cuts the graph).
page = page_preamble(K, "What graph would this agent receive?",
                     "The memory graph the engine returns for one trust context and task: ranked roots, the records "
                     "their relations reach, and the typed edges between them. Redacted records are drawn locked, "
                     "with their labels only; hidden ones are not drawn at all.", clearance_caption=False)
view = page.view


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
URL_WIDGETS = (*state.trust_widgets(K.prefix), *(K(w) for w in ("task", "types", "hops", "roots", "nodes", "edges", "as_of")))
URL_PARAMETERS = (*TRUST_FIELDS, Param.TASK, Param.MEMORY_TYPES, Param.AS_OF, Param.HOPS, Param.ROOTS, Param.NODES,
                  Param.EDGES)
seed = page.seed_from_url(URL_WIDGETS, drawn=K("roots"))
if seed is not None:
    _, problems = seed_request_form(K.prefix, seed)
    if Param.HOPS in seed and seed[Param.HOPS] not in HOPS:
        problems.append(state.ignored_parameter(Param.HOPS, seed[Param.HOPS], ", ".join(HOPS)))
    st.session_state[K("hops")] = seed.get(Param.HOPS) if seed.get(Param.HOPS) in HOPS else "1"
    st.session_state[K("roots")] = _bounded(Param.ROOTS, seed.get(Param.ROOTS), 1, 100, DEFAULT_ROOT_LIMIT, problems)
    st.session_state[K("nodes")] = _bounded(Param.NODES, seed.get(Param.NODES), 1, 500, DEFAULT_NODE_LIMIT, problems)
    st.session_state[K("edges")] = _bounded(Param.EDGES, seed.get(Param.EDGES), 1, 2000, DEFAULT_EDGE_LIMIT, problems)
    page.link_problems(problems + state.unknown_parameters(seed, URL_PARAMETERS))
else:
    page.link_problems()

controls, results = st.columns([2, 4], gap="medium")  # the form stays readable at 1024 px
with controls:
    st.subheader("Agent and task")
    # Only the scopes of records your clearance sees are offered (a scope is a label too).
    trust = trust_context_form(K.prefix, view.scopes())
    task = st.text_input("Task descriptor", key=K("task"), max_chars=MAX_TASK_LENGTH, placeholder="e.g. fix flaky pytest test in CI",
                         help="Ranks the roots (and finds entities it names); empty ranks by salience")
    types = st.multiselect("Memory types of the roots", LAYERS, key=K("types"), help="Empty: every type")
    hops = st.segmented_control("Hops from the roots", list(HOPS), key=K("hops"),
                                help="How far the walk over relations goes; none: the roots only")
    # One above the other: three side by side in the form's column cut the numbers at 1024 px.
    root_limit = st.number_input("Roots, at most", 1, 100, key=K("roots"))
    node_limit = st.number_input("Nodes, at most", 1, 500, key=K("nodes"))
    edge_limit = st.number_input("Edges, at most", 1, 2000, key=K("edges"))
    as_of = instant_picker(K("as_of"), "As of", help="Salience S(t) at this instant")

query = RequestParams(trust=trust, task=task, memory_types=tuple(t for t in LAYERS if t in types), as_of=as_of).to_query()
query = {k: v for k, v in query.items() if k not in (Param.MIN_SALIENCE, Param.LIMIT)}
query.update({Param.HOPS: hops or "1", Param.ROOTS: str(int(root_limit)), Param.NODES: str(int(node_limit)),
              Param.EDGES: str(int(edge_limit))})
page.keep_in_url(query)

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
                     key=K("predicates", f"{zlib.crc32('|'.join(predicates).encode()):08x}"),
                     help="Which typed edges to draw") if predicates else []
    render_graph(graph, key=K.prefix, predicates=list(shown or []))
