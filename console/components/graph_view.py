"""A memory graph drawn with Plotly on a networkx layout: nodes coloured by type, roots ringed,
redacted nodes drawn as grey locked squares with nothing but their labels, typed edges with
arrows (one legend entry per predicate), and a table of the nodes below.

Why Plotly and networkx rather than a Cytoscape component: the console already draws every
chart with Plotly, whose labels go through ``chart_safety.plot_text`` and whose figures the
browser tests already read; networkx is installed with it. Pan, zoom and hover cover what an
operator does with a graph of at most a few hundred nodes; dragging nodes (what Cytoscape adds)
is not worth a component served in its own iframe and one more dependency (README, "The Graph
page", has the comparison).

Only what the caller passes is drawn: the caller passes a graph already gated for the agent's
context and the operator's clearance (``OperatorView.graph`` and ``neighbourhood``).
"""

from __future__ import annotations

import math

import networkx as nx
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from console.components.chart_safety import plot_text, short_id, tidy
from console.components.colours import INK, MEMORY_TYPE_COLORS, OTHER_TYPE, PALETTE, REDACTED_NODE
from console.components.safe import clean
from membrane_engine import MemoryRecord, RetrieveGraphResponse

LOCK = "\U0001F512"


def node_label(record: MemoryRecord, limit: int = 32) -> str:
    """A short name for a node, inert for a figure (cut with an ellipsis, no note of the rest)."""
    text = " ".join(name(record).split())
    return plot_text(text if len(text) <= limit else text[:limit - 1] + "…", limit + 1)


def name(record: MemoryRecord) -> str:
    """What the record is called; a lock and its type when redacted."""
    p = record.payload
    if p is None:
        return f"{LOCK} {record.type.value}"
    kind = p.kind
    if kind == "entity":
        text = p.canonical_name
    elif kind == "competence":
        text = p.skill_name
    elif kind == "plan_graph":
        text = p.intent or p.plan_id
    elif kind == "semantic":
        text = f"{p.subject} {p.predicate}"
    elif kind == "episodic":
        text = p.timeline[0].summary if p.timeline else "episode"
    else:
        text = p.context_summary or p.thread_id
    return str(text or record.id)


def entity_lines(record: MemoryRecord) -> list[str]:
    """An entity's aliases and identifiers, inert, for its hover text."""
    p = record.payload
    if p is None or p.kind != "entity":
        return []
    aliases = p.alias_values
    out = []
    if aliases:
        out.append("aliases: " + plot_text(", ".join(a for a in aliases if a), 160))
    if p.identifiers:
        out.append("identifiers: " + plot_text(", ".join(f"{i.namespace}:{i.value}" for i in p.identifiers), 160))
    return out


def hover(record: MemoryRecord, root: bool, hop: int) -> str:
    head = "redacted (metadata only)" if record.redacted else node_label(record, 80)
    lines = [head, f"{record.type.value} · {record.sensitivity.value} · scope {plot_text(record.scope or '(unscoped)', 60)}",
             f"salience {record.salience:.3f} · {'root' if root else f'hop {hop}'}", f"id {short_id(record.id, 13)}"]
    return "<br>".join(lines + entity_lines(record))


def layout(graph: RetrieveGraphResponse, seed: int = 7) -> dict[str, tuple[float, float]]:
    g = nx.DiGraph()
    g.add_nodes_from(n.record.id for n in graph.nodes)
    g.add_edges_from((e.source_id, e.target_id) for e in graph.edges)
    if not len(g):
        return {}
    k = 1.6 / math.sqrt(len(g))  # a little wider than networkx's default: labels need room
    return nx.spring_layout(g, k=k, seed=seed, iterations=80)


def figure(graph: RetrieveGraphResponse, predicates: list[str] | None = None, height: int = 560) -> go.Figure:
    """The graph as a Plotly figure; ``predicates``: the edge types to draw (all when None)."""
    pos = layout(graph)
    fig = go.Figure()
    edges = [e for e in graph.edges if predicates is None or e.predicate in predicates]
    kinds = sorted({e.predicate for e in edges})
    for i, predicate in enumerate(kinds):
        xs, ys = [], []
        for e in edges:
            if e.predicate == predicate and e.source_id in pos and e.target_id in pos:
                (x0, y0), (x1, y1) = pos[e.source_id], pos[e.target_id]
                xs += [x0, x1, None]
                ys += [y0, y1, None]
                fig.add_annotation(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y", text="",
                                   showarrow=True, arrowhead=2, arrowsize=1.2, arrowwidth=1,
                                   arrowcolor=PALETTE[(i + 6) % len(PALETTE)], standoff=9, opacity=0.7)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=plot_text(predicate, 40), hoverinfo="skip",
                                 line=dict(width=1.4, color=PALETTE[(i + 6) % len(PALETTE)])))
    labelled = [n.record.id for n in graph.nodes if n.record.id in pos and is_labelled(n)]
    where = label_positions({rid: pos[rid] for rid in labelled})
    groups: dict[str, list] = {}
    for n in graph.nodes:
        key = "redacted" if n.record.redacted else n.record.type.value
        groups.setdefault(key, []).append(n)
    for key in sorted(groups, key=lambda k: (k == "redacted", k)):
        nodes = [n for n in groups[key] if n.record.id in pos]
        redacted = key == "redacted"
        fig.add_trace(go.Scatter(
            x=[pos[n.record.id][0] for n in nodes], y=[pos[n.record.id][1] for n in nodes],
            mode="markers+text", name=f"{LOCK} redacted" if redacted else key,
            # Labels for the roots, entities and locked nodes; every node has its hover text.
            text=[node_label(n.record, 22) if is_labelled(n) else "" for n in nodes],
            textposition=[where.get(n.record.id, "top center") for n in nodes], textfont=dict(size=11),
            hovertext=[hover(n.record, n.root, n.hop) for n in nodes], hoverinfo="text",
            marker=dict(size=[22 if n.root else 14 for n in nodes], symbol="square" if redacted else "circle",
                        color=REDACTED_NODE if redacted else MEMORY_TYPE_COLORS.get(key, OTHER_TYPE),
                        line=dict(width=[3 if n.root else 1 for n in nodes], color=INK)),
        ))
    fig.update_xaxes(visible=False, range=padded([x for x, _ in pos.values()], 0.22))
    fig.update_yaxes(visible=False, range=padded([y for _, y in pos.values()], 0.12))
    return tidy(fig, height=height, legend_below=True)


def is_labelled(node) -> bool:
    """Roots, entities and locked nodes carry a label; every node has its hover text."""
    return node.root or node.record.redacted or node.record.type.value == "entity"


def label_positions(points: dict[str, tuple[float, float]], near: float = 0.3) -> dict[str, str]:
    """Above its node, or below when another labelled node sits just above it (labels are
    wider than high: what collides is a neighbour at about the same x, a little higher)."""
    out = {}
    for rid, (x, y) in points.items():
        crowded = any(0 < oy - y < near / 2 and abs(ox - x) < near
                      for other, (ox, oy) in points.items() if other != rid)
        out[rid] = "bottom center" if crowded else "top center"
    return out


def padded(values: list[float], share: float) -> list[float] | None:
    """An axis range with room on both sides for the labels of the outermost nodes."""
    if not values:
        return None
    lo, hi = min(values), max(values)
    pad = max(hi - lo, 0.2) * share
    return [lo - pad, hi + pad]


# Pixel widths: in the half of a 1400-pixel window the graph has, every column but the id shows
# without scrolling.
NODE_COLUMNS = {
    "node": st.column_config.TextColumn("node", width=56, help="a root the ranking chose, or how many hops "
                                                                     "from one"),
    "redacted": st.column_config.CheckboxColumn("redacted", width=72, help="drawn locked: metadata only"),
    "type": st.column_config.TextColumn("type", width=88),
    "name": st.column_config.TextColumn("name", width=180),
    "sensitivity": st.column_config.TextColumn("sensitivity", width=80),
    "scope": st.column_config.TextColumn("scope", width=96),
    "salience": st.column_config.NumberColumn("salience", width=64, format="%.3f"),
}


def node_table(graph: RetrieveGraphResponse) -> pd.DataFrame:
    return pd.DataFrame([{
        "node": ("root" if n.root else f"hop {n.hop}"), "redacted": n.record.redacted, "type": n.record.type.value,
        "name": clean(name(n.record), 80),
        "sensitivity": n.record.sensitivity.value, "scope": clean(n.record.scope or "(unscoped)", 80),
        "salience": round(n.record.salience, 3), "id": clean(n.record.id, 200),
    } for n in graph.nodes])


def render_graph(graph: RetrieveGraphResponse, key: str, predicates: list[str] | None = None, height: int = 560,
                 with_table: bool = True) -> None:
    """The figure, then (``with_table``) the nodes as a table."""
    if not graph.nodes:
        st.info("No node to draw.")
        return
    st.plotly_chart(figure(graph, predicates, height), key=f"{key}_figure", config={"displaylogo": False})
    if with_table:
        st.dataframe(node_table(graph), hide_index=True, width="stretch", key=f"{key}_nodes", column_config=NODE_COLUMNS)


def neighbourhood(view, record_id: str, key: str, as_of=None) -> None:
    """The record explorer's neighbourhood view: the records linked to one record both ways
    (supersedes chains, derived_from, contested_by, entity mentions), through the operator's
    view (``view.neighbourhood``: cut to the clearance), in an expander drawn on demand."""
    from membrane_engine.errors import MembraneError

    with st.expander("Neighbourhood graph", icon=":material/hub:"):
        hops = st.segmented_control("Hops", [1, 2, 3], default=2, key=f"{key}_hops")
        try:
            graph, _ = view.neighbourhood(record_id, view.clearance, max_hops=hops or 2, as_of=as_of)
        except MembraneError as exc:
            st.error(f"The engine refused: {clean(exc, 300)}")
            return
        if not graph.nodes:
            st.info("This record is beyond your clearance.")
            return
        st.caption(f"{len(graph.nodes)} records and {len(graph.edges)} links within {hops or 2} hops; entities show "
                   "their aliases and identifiers on hover.")
        render_graph(graph, key=key, height=460)


__all__ = ["neighbourhood", "figure", "render_graph", "node_label", "name", "node_table", "layout", "hover"]
