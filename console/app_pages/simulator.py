"""Trust simulator: "What can this agent see?" Layered retrieval for one trust context, with
per-layer counts, the ranked result, the selector's choice and the reason behind every verdict.

The simulation lives in the URL (parameters of RequestParams.to_query), so a link reproduces it.
"""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from console import state
from console.components.clearance import clearance_caption, from_key, key_of, signed_in
from console.components.charts import VERDICT_COLORS, style
from console.components.record_card import explorer_href, record_card, show_explanation
from console.components.safe import clean, md
from console.components.time_input import as_of_input
from console.components.trust_form import (LAYERS, RequestParams, seed_request_form, show_ignored_parameters,
                                           trust_context_form)
from console.components.words import plural
from membrane_engine import RetrieveRequest, TrustContext
from membrane_engine import clearance as gate
from membrane_engine.errors import MembraneError, NotFoundError
from membrane_engine.labels import label as record_label, labels as record_labels
from membrane_engine.lookups import hidden_records
from membrane_engine.retrieval import MAX_LIMIT, records_returned

K = "sim"
PAGE_SIZE = 10
LAYER_COLUMNS = ["full", "redacted", "hidden", "below_min_salience"]
COUNT_LABELS = {"full": "full", "redacted": "redacted", "hidden": "hidden", "below_min_salience": "below min"}
COUNT_HELP = {"full": "Visible in full", "redacted": "Metadata only (sensitivity one level above max)",
              "hidden": "Not visible at all", "below_min_salience": "Visible but below the min salience filter"}

operator = signed_in()
clearance = operator.clearance
m = state.membrane()
st.title("What can this agent see?")
st.caption("Layered retrieval as the engine runs it for one trust context: what comes back in full, what comes back "
           "redacted (metadata only), what stays hidden, and why.")
clearance_caption(operator)

# ---------------------------------------------------------------------------- defaults from the URL

# The URL holds the simulation (a link, a reload, Back / Forward restore it); the trust context is
# the session's shared one when the URL names none (console/state.py).
URL_WIDGETS = (*state.trust_widgets(K), *(f"{K}_{w}" for w in ("task", "types", "min_salience", "limit", "as_of")))
seed = state.page_query("simulator", widgets=URL_WIDGETS)
if seed is None and f"{K}_limit" not in st.session_state:  # widgets gone with a page change
    seed = st.query_params.to_dict()
if seed is not None:
    defaults = seed_request_form(K, seed)
    st.session_state[f"{K}_min_salience"] = float(defaults.get("min_salience", 0.0))
    st.session_state[f"{K}_limit"] = int(defaults.get("limit", 20))
show_ignored_parameters(K)

# ---------------------------------------------------------------------------- the form

form_left, form_right = st.columns(2, gap="large")
with form_left:
    st.subheader("Trust context")
    trust = trust_context_form(K, gate.scopes_seen(m, clearance))
with form_right:
    st.subheader("Request")
    task = st.text_input("Task descriptor", key=f"{K}_task", help="What the agent is about to do (used by the selector)")
    types = st.multiselect("Memory types", LAYERS, key=f"{K}_types", help="Empty means every layer")
    c1, c2 = st.columns(2)
    min_salience = c1.number_input("Min salience", min_value=0.0, step=0.05, format="%.3f", key=f"{K}_min_salience",
                                   help="Records with S(as of) below this are dropped (0 disables the filter)")
    limit = c2.number_input("Limit", min_value=0, max_value=MAX_LIMIT, step=1, key=f"{K}_limit",
                            help=f"0 means no limit: the first {MAX_LIMIT:,} records are returned")
    as_of = as_of_input(f"{K}_as_of", help="Salience is evaluated at this instant.")

params = RequestParams(trust=trust, task=task, memory_types=tuple(t for t in LAYERS if t in types),
                       min_salience=float(min_salience), limit=int(limit), as_of=as_of)
state.keep_page_query("simulator", params.to_query())
# "Now" is taken to the minute, so the reruns of one minute (paging, tabs, "why?") share one
# simulation from the cache below.
when = as_of or m.now().replace(second=0, microsecond=0)

# ---------------------------------------------------------------------------- simulate


CHUNK = 100  # records materialized per step while paging the ranked list


@st.cache_resource(show_spinner="Simulating…", max_entries=16, ttl=600)
def _simulation(url: str, seq: int, trust_key: tuple, task_: str, types_: tuple[str, ...], min_s: float, limit_: int,
                when_iso: str, cleared: tuple):
    """One simulation, kept while the store is unchanged (keyed by its change counter). Shared,
    never mutated by the page. The trust context travels as a tuple of its fields; the records
    come through the operator's clearance (``cleared``): counts whole, content within it."""
    max_sensitivity, authenticated, actor_id, scopes = trust_key
    ctx = TrustContext(max_sensitivity=max_sensitivity, authenticated=authenticated, actor_id=actor_id,
                       scopes=list(scopes))
    return state.membrane().simulate(RetrieveRequest(
        trust=ctx, task_descriptor=task_, memory_types=list(types_), min_salience=min_s, limit=limit_,
        as_of=datetime.fromisoformat(when_iso)), clearance=from_key(cleared))


def simulate(memory_types: list[str], limit_: int):
    trust_key = (trust.max_sensitivity.value, trust.authenticated, trust.actor_id, tuple(trust.scopes))
    return _simulation(m.url, m.columns.current().seq, trust_key, task, tuple(memory_types), float(min_salience),
                       int(limit_), when.isoformat(), key_of(clearance))


def materialized(total_wanted: int) -> int:
    """A limit covering ``total_wanted`` records, rounded up so nearby pages share a simulation."""
    return min(MAX_LIMIT, -(-total_wanted // CHUNK) * CHUNK)


def pager(total: int, key: str) -> int:
    """Page picker for ``total`` items; returns the offset of the page shown."""
    pages = max(1, -(-total // PAGE_SIZE))
    page = st.pagination(pages, key=key) if pages > 1 else 1
    page = min(max(1, int(page or 1)), pages)
    return (page - 1) * PAGE_SIZE


def explainer(record_id: str):
    return lambda: gate.explain(m, record_id, trust, clearance, as_of=when, min_salience=float(min_salience))


def cards(records: list, offset: int, key: str) -> None:
    for rank, record in enumerate(records, start=offset + 1):
        record_card(record, explain=explainer(record.id), key=f"{key}_{rank}", rank=rank)


layer_page_key = f"{K}_page_ranked"
ranked_offset = st.session_state.get(layer_page_key, 1)
ranked_offset = (max(1, int(ranked_offset or 1)) - 1) * PAGE_SIZE
# Only the records up to the page shown are materialized: the ranking is a prefix, so a smaller
# limit gives the same first records, and counts and the selection do not depend on the limit.
wanted = materialized(ranked_offset + PAGE_SIZE)
effective_limit = min(int(limit), wanted) if limit else wanted
try:
    sim = simulate(list(params.memory_types), effective_limit)
except MembraneError as exc:
    st.error(f"The engine refused the request: {exc}")
    st.stop()

returned = records_returned(sim.total_matching, int(limit))
# The records the operator may be shown: those the context gets that the clearance does not hide.
listed_total = records_returned(sim.total_matching - sim.withheld, int(limit))
totals = {c: sum(getattr(lc, c) for lc in sim.counts.values()) for c in LAYER_COLUMNS}

st.divider()
mc = st.columns(5)
mc[0].metric("Returned", f"{returned:,}", help=f"{plural(sim.total_matching, 'record')} pass gating and the salience filter"
             + (f"; the limit keeps {int(limit):,}" if limit else f"; no limit, so the first {MAX_LIMIT:,} at most"))
mc[1].metric("Full", f"{totals['full']:,}", help="Visible in full (sensitivity within max, scope allowed)")
mc[2].metric("Redacted", f"{totals['redacted']:,}", help="Sensitivity one level above max: metadata only")
mc[3].metric("Hidden", f"{totals['hidden']:,}", help="Not visible at all (too sensitive or scope not allowed)")
mc[4].metric("Below min salience", f"{totals['below_min_salience']:,}", help="Visible but dropped by the salience filter")

counts_frame = pd.DataFrame(
    [{"layer": layer, **{c: getattr(lc, c) for c in LAYER_COLUMNS}} for layer, lc in sim.counts.items()])
left, right = st.columns([1, 1])
with left:
    st.markdown("**Per layer** (canonical order)")
    # Short headers so every column fits the narrow column (the metrics above spell them out).
    st.dataframe(counts_frame, hide_index=True, width="stretch", key=f"{K}_counts",
                 column_config={c: st.column_config.NumberColumn(COUNT_LABELS[c], help=COUNT_HELP[c])
                                for c in LAYER_COLUMNS})
with right:
    fig = go.Figure()
    for column in LAYER_COLUMNS:
        fig.add_bar(y=counts_frame["layer"], x=counts_frame[column], name=column.replace("_", " "), orientation="h",
                    marker_color=VERDICT_COLORS[column], hovertemplate="%{y}: %{x} " + column.replace("_", " ") + "<extra></extra>")
    # The legend sits above the plot area (in the top margin), so it never covers the x-axis
    # labels whatever the number of layers; the height has a floor for a single layer.
    fig.update_layout(barmode="stack",
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0, traceorder="normal"))
    fig.update_yaxes(autorange="reversed", type="category")
    style(fig, height=max(170, 90 + 34 * len(counts_frame)))
    fig.update_layout(margin=dict(t=40))
    st.plotly_chart(fig, width="stretch", key=f"{K}_bar")

# ---------------------------------------------------------------------------- selection

selection = sim.response.selection
if selection is not None:
    with st.container(border=True):
        st.markdown("**Selector** (competence and plan candidates)")
        sc = st.columns(3)
        sc[0].metric("Confidence", f"{selection.confidence:.3f}",
                     help="(best score − runner-up's score) / best score with two or more candidates; the score "
                          "itself with one. Each score is the mean of applicability, success and recency")
        sc[1].metric("Needs more", "yes" if selection.needs_more else "no",
                     help=f"confidence < threshold {selection.threshold:g}")
        n_candidates = max(len(selection.scores), len(selection.signals))
        sc[2].metric("Candidates", f"{n_candidates:,}", help="Competence and plan records that passed gating and "
                     "the salience filter (the selector sees them all, even those the limit cuts)")
        # Named as the cards name them: through the narrower of the context and your clearance.
        names = {r.id: record_label(r, 100) for r in selection.selected}
        sig_rows = [{"rank": i + 1, "record": clean(names.get(s.record_id, "(redacted)"), 120),
                     "score": round(s.score, 4), "applicability": round(s.applicability, 4),
                     "success": round(s.success, 4), "recency": round(s.recency, 4), "redacted": s.redacted,
                     "id": clean(s.record_id, 200)}
                    for i, s in enumerate(selection.signals[:200])]
        st.dataframe(pd.DataFrame(sig_rows), hide_index=True, width="stretch", key=f"{K}_selection")
        if any(s.redacted for s in selection.signals[:200]):
            st.caption("Redacted candidates (one level above the context's max sensitivity) have no payload: the "
                       "selector scores them 0.5 flat, whatever the task (SPEC 5, as Membrane).")
        if n_candidates > len(sig_rows):
            st.caption(f"The {len(sig_rows):,} best of {n_candidates:,} candidates.")
elif any(t in ("competence", "plan_graph") for t in (params.memory_types or LAYERS)):
    st.caption("Selector: no competence or plan candidate passed gating and the salience filter.")

# ---------------------------------------------------------------------------- results

st.subheader("Results")
layer_names = list(sim.counts)
labels = [f"Ranked result ({returned:,})"] + [
    f"{layer} ({sim.counts[layer].full + sim.counts[layer].redacted:,})" for layer in layer_names] + [
    f"Hidden ({totals['hidden']:,})"]
tabs = st.tabs(labels, key=f"{K}_view", on_change="rerun")
with tabs[0]:
    if tabs[0].open:
        st.caption("All layers merged, sorted by salience at the as-of instant; the limit applies here"
                   + (f" (with no limit, the first {MAX_LIMIT:,} of {sim.total_matching:,})."
                      if returned < sim.total_matching and not limit else "."))
        if sim.withheld:
            st.info(f"{sim.withheld:,} of the {plural(sim.total_matching, 'record')} this context gets are beyond your "
                    "clearance: they are counted above, not listed.", icon=":material/lock:")
        if not returned:
            st.info("Nothing is returned for this context and request.")
        elif not listed_total:
            st.caption("No returned record is within your clearance.")
        else:
            offset = pager(listed_total, layer_page_key)
            page = sim.response.records[offset:offset + PAGE_SIZE]
            st.caption(f"Showing {offset + 1:,}–{offset + len(page):,} of {listed_total:,}"
                       + (" within your clearance." if sim.withheld else "."))
            cards(page, offset, "ranked")
for tab, layer in zip(tabs[1:-1], layer_names):
    with tab:
        if not tab.open:
            continue
        lc = sim.counts[layer]
        n = lc.full + lc.redacted
        st.caption(f"{layer}: {lc.full:,} full, {lc.redacted:,} redacted, {lc.hidden:,} hidden, "
                   f"{lc.below_min_salience:,} below min salience. Before the limit, sorted by salience.")
        if not n:
            st.info("No record of this layer is visible to this context.")
            continue
        # A layer lists what a retrieve of that layer alone returns, within the clearance.
        n -= simulate([layer], CHUNK).withheld
        if not n:
            st.info("No record of this layer the context sees is within your clearance.")
            continue
        listed = records_returned(n, 0)
        offset = pager(listed, f"{K}_page_{layer}")
        sub = simulate([layer], materialized(offset + PAGE_SIZE))
        page = sub.response.records[offset:offset + PAGE_SIZE]
        st.caption(f"Showing {offset + 1:,}–{offset + len(page):,} of {n:,}"
                   + (f" (the first {listed:,} by salience can be listed)." if listed < n else "."))
        cards(page, offset, f"layer_{layer}")

# ---------------------------------------------------------------------------- what stays hidden


def why_hidden(record_id: str) -> str:
    """The engine's reasons for the hidden verdict (the ones that say so; all when none does)."""
    try:
        reasons = gate.explain(m, record_id, trust, clearance, as_of=when, min_salience=float(min_salience)).reasons
    except NotFoundError:
        return "(no longer in the store)"
    return "; ".join([r for r in reasons if "hidden" in r] or reasons)


with tabs[-1]:
    if tabs[-1].open:
        st.caption("Records this context does not see at all, with the engine's reason for each. The "
                   "simulated agent learns nothing of them, not even that they exist.")
        first = hidden_records(m, trust, clearance, list(params.memory_types), 0, 0)
        if first.total > first.seen:
            st.info(f"{plural(first.total - first.seen, 'hidden record')} beyond your clearance: counted, not listed.",
                    icon=":material/lock:")
        if not first.total:
            st.info("This context sees every record of these layers (in full or redacted).")
        elif first.seen:
            offset = pager(first.seen, f"{K}_page_hidden")
            hp = hidden_records(m, trust, clearance, list(params.memory_types), offset, PAGE_SIZE)
            ids = [b.id for b in hp.records]
            # Named by what it says only when your clearance sees it in full; a record it sees
            # redacted is named as explain may name it: id, type, sensitivity and scope.
            names = {rid: n for rid, n in record_labels(m, ids, clearance).items() if not n.startswith("redacted ")}
            rows = [{"record": clean(names.get(b.id, "(beyond your clearance: metadata only)"), 120),
                     "why hidden": clean(why_hidden(b.id), 1000), "type": b.type, "sensitivity": b.sensitivity,
                     "scope": clean(b.scope, 200) if b.scope else "(unscoped)", "id": clean(b.id, 200),
                     "explorer": explorer_href(b.id)} for b in hp.records]
            st.caption(f"Showing {offset + 1:,}–{offset + len(rows):,} of {first.seen:,} within your clearance, by id.")
            st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key=f"{K}_hidden",
                         column_order=["record", "why hidden", "type", "sensitivity", "scope", "explorer", "id"],
                         column_config={"record": st.column_config.TextColumn(width=300, pinned=True),
                                        "why hidden": st.column_config.TextColumn(width=330),
                                        "type": st.column_config.TextColumn(width=95),
                                        "sensitivity": st.column_config.TextColumn(width=80),
                                        "explorer": st.column_config.LinkColumn("explorer", display_text="Open",
                                                                                width="small")})

# ---------------------------------------------------------------------------- any record

with st.expander("Explain any record (including hidden ones)"):
    rid = st.text_input("Record id", key=f"{K}_explain_id")
    if rid.strip():
        try:
            show_explanation(gate.explain(m, rid.strip(), trust, clearance, as_of=when,
                                          min_salience=float(min_salience)))
        except NotFoundError:
            st.error(f"No record with id {md(rid, 200)} within your clearance.")
