"""Trust simulator: "What can this agent see?" Layered retrieval for one trust context, with
per-layer counts, the ranked result, the selector's choice and the reason behind every verdict.

The simulation lives in the URL (parameters of RequestParams.to_query), so a link reproduces it.
"""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from console import keys, state
from console.components.clearance import key_of
from console.components.charts import style
from console.components.colours import VERDICT_COLORS
from console.components.page import page_preamble
from console.components.record_card import explorer_href, record_card, show_explanation
from console.components.safe import clean, md
from console.components.time_picker import instant_picker
from console.components.trust_form import LAYERS, RequestParams, seed_request_form, trust_context_form
from console.components.words import distinct_names, plural
from console.keys import TRUST_FIELDS, Param
from membrane_engine import MAX_LIMIT, MAX_TASK_LENGTH, OperatorView, RetrieveRequest, TrustContext, records_returned
from membrane_engine import label as record_label
from membrane_engine.errors import MembraneError, NotFoundError

K = keys.SIMULATOR
PAGE_SIZE = 10
LAYER_COLUMNS = ["full", "redacted", "hidden", "below_min_salience"]
COUNT_LABELS = {"full": "full", "redacted": "redacted", "hidden": "hidden", "below_min_salience": "below min"}
COUNT_HELP = {"full": "Visible in full", "redacted": "Metadata only (sensitivity one level above max)",
              "hidden": "Not visible at all", "below_min_salience": "Visible but below the min salience filter"}

page = page_preamble(K, "What can this agent see?",
                     "Layered retrieval as the engine runs it for one trust context: what comes back in full, what "
                     "comes back redacted (metadata only), what stays hidden, and why.")
view = page.view
clearance = page.clearance

# ---------------------------------------------------------------------------- defaults from the URL

# The URL holds the simulation (a link, a reload, Back / Forward restore it); the trust context is
# the session's shared one when the URL names none (console/state.py).
URL_WIDGETS = (*state.trust_widgets(K.prefix), *(K(w) for w in ("task", "types", "min_salience", "limit", "as_of")))
URL_PARAMETERS = (*TRUST_FIELDS, Param.TASK, Param.MEMORY_TYPES, Param.MIN_SALIENCE, Param.LIMIT, Param.AS_OF)
seed = page.seed_from_url(URL_WIDGETS, drawn=K("limit"))
if seed is not None:
    defaults, problems = seed_request_form(K.prefix, seed)
    st.session_state[K("min_salience")] = float(defaults.get("min_salience", 0.0))
    st.session_state[K("limit")] = int(defaults.get("limit", 20))
    page.link_problems(problems + state.unknown_parameters(seed, URL_PARAMETERS))
else:
    page.link_problems()

# ---------------------------------------------------------------------------- the form

form_left, form_right = st.columns(2, gap="large")
with form_left:
    st.subheader("Trust context")
    trust = trust_context_form(K.prefix, view.scopes())
with form_right:
    st.subheader("Request")
    task = st.text_input("Task descriptor", key=K("task"), max_chars=MAX_TASK_LENGTH, help="What the agent is about to do (used by the selector)")
    types = st.multiselect("Memory types", LAYERS, key=K("types"), help="Empty means every layer")
    c1, c2 = st.columns(2)
    min_salience = c1.number_input("Min salience", min_value=0.0, step=0.05, format="%.3f", key=K("min_salience"),
                                   help="Records with S(as of) below this are dropped (0 disables the filter)")
    limit = c2.number_input("Limit", min_value=0, max_value=MAX_LIMIT, step=1, key=K("limit"),
                            help=f"0 means no limit: the first {MAX_LIMIT:,} records are returned")
    as_of = instant_picker(K("as_of"), "As of", help="Salience is evaluated at this instant.")

params = RequestParams(trust=trust, task=task, memory_types=tuple(t for t in LAYERS if t in types),
                       min_salience=float(min_salience), limit=int(limit), as_of=as_of)
page.keep_in_url(params.to_query())
# "Now" is taken to the minute, so the reruns of one minute (paging, tabs, "why?") share one
# simulation from the cache below.
when = as_of or view.now().replace(second=0, microsecond=0)

# ---------------------------------------------------------------------------- simulate


CHUNK = 100  # records materialized per step while paging the ranked list


@st.cache_resource(show_spinner="Simulating…", max_entries=16, ttl=600)
def _simulation(_view: OperatorView, url: str, seq: int, operator_name: str, cleared: tuple, trust_key: tuple,
                task_: str, types_: tuple[str, ...], min_s: float, limit_: int, when_iso: str):
    """One simulation through the operator's view, kept while the store is unchanged (keyed by
    its change counter). Shared, never mutated by the page. The trust context travels as a tuple
    of its fields; counts and records come through the clearance (``cleared``): over what it
    sees, content within it. Keyed by the operator as well: the view lists what it shows in full under their
    name in the access log, so another operator's look is a computation (and an entry) of its own."""
    max_sensitivity, authenticated, actor_id, scopes = trust_key
    ctx = TrustContext(max_sensitivity=max_sensitivity, authenticated=authenticated, actor_id=actor_id,
                       scopes=list(scopes))
    return _view.simulate(RetrieveRequest(
        trust=ctx, task_descriptor=task_, memory_types=list(types_), min_salience=min_s, limit=limit_,
        as_of=datetime.fromisoformat(when_iso)))


def simulate(memory_types: list[str], limit_: int):
    trust_key = (trust.max_sensitivity.value, trust.authenticated, trust.actor_id, tuple(trust.scopes))
    return _simulation(view, *view.state(), view.name, key_of(clearance), trust_key, task, tuple(memory_types),
                       float(min_salience), int(limit_), when.isoformat())


def materialized(total_wanted: int) -> int:
    """A limit covering ``total_wanted`` records, rounded up so nearby pages share a simulation."""
    return min(MAX_LIMIT, -(-total_wanted // CHUNK) * CHUNK)


def pager(total: int, key: str) -> int:
    """Page picker for ``total`` items; returns the offset of the page shown."""
    pages = max(1, -(-total // PAGE_SIZE))
    page_no = st.pagination(pages, key=key) if pages > 1 else 1
    page_no = min(max(1, int(page_no or 1)), pages)
    return (page_no - 1) * PAGE_SIZE


def explainer(record_id: str):
    return lambda: view.explain(record_id, trust, as_of=when, min_salience=float(min_salience))


def cards(records: list, offset: int, key: str) -> None:
    for rank, record in enumerate(records, start=offset + 1):
        record_card(record, explain=explainer(record.id), key=f"{key}_{rank}", rank=rank)


layer_page_key = K("page_ranked")
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

# Every number is over the records your clearance sees. Those beyond it are one total, counted
# now whatever the context: a count per context (``withheld``) would tell which scopes, levels
# and types they have to anyone who tries contexts (a scope typed into the link included).
matching = sim.total_matching - sim.withheld
returned = records_returned(matching, int(limit))
listed_total = returned
beyond = view.beyond_clearance()
totals = {c: sum(getattr(lc, c) for lc in sim.counts.values()) for c in LAYER_COLUMNS}

st.divider()
# Fixed-width metrics in a row that wraps (five side by side cut their labels at 1024 px).
with st.container(horizontal=True, wrap=True, gap="small"):
    st.metric("Returned", f"{returned:,}", width=140,
              help=f"{plural(matching, 'record')} pass gating and the salience filter"
                   + (f"; the limit keeps {int(limit):,}" if limit else f"; no limit, so the first {MAX_LIMIT:,} at most"))
    st.metric("Full", f"{totals['full']:,}", width=140, help="Visible in full (sensitivity within max, scope allowed)")
    st.metric("Redacted", f"{totals['redacted']:,}", width=140, help="Sensitivity one level above max: metadata only")
    st.metric("Hidden", f"{totals['hidden']:,}", width=140, help="Not visible at all (too sensitive or scope not allowed)")
    st.metric("Below min salience", f"{totals['below_min_salience']:,}", width=170,
              help="Visible but dropped by the salience filter")

# A retract leaves the record in the store at salience 0: with min salience 0 it still reaches
# the agent, in full (as Membrane). The engine counts them among the records that pass.
revised = sim.revised
if revised["retracted"] or revised["superseded"]:
    both = (f"{plural(revised['retracted'], 'retracted record')} and "
            f"{plural(revised['superseded'], 'superseded record')}")
    within = " (of those within your clearance)" if beyond else ""
    if returned >= matching:
        st.warning(f"{both} would reach this agent{within}, in full: their salience is 0, and a min salience "
                   "above 0 keeps them out.", icon=":material/warning:")
    else:
        st.warning(f"{both} pass this context's gate and salience filter{within}: the limit of {returned:,} lets them "
                   "reach the agent only when they rank within it (by salience they come last; a task can put "
                   "them first). A min salience above 0 keeps them out.", icon=":material/warning:")

counts_frame = pd.DataFrame(
    [{"layer": layer, **{c: getattr(lc, c) for c in LAYER_COLUMNS}} for layer, lc in sim.counts.items()])
# Table and chart side by side where they fit, one above the other where they do not.
layers_row = st.container(horizontal=True, wrap=True, gap="medium")
left, right = layers_row.container(width=390), layers_row.container(width=420)
with left:
    st.markdown("**Per layer** (canonical order)")
    # Short headers and narrow columns so every count is in view (the metrics above spell them out).
    st.dataframe(counts_frame, hide_index=True, width="stretch", key=K("counts"),
                 column_config={"layer": st.column_config.TextColumn("layer", width=90),
                                **{c: st.column_config.NumberColumn(COUNT_LABELS[c], help=COUNT_HELP[c], width=64)
                                   for c in LAYER_COLUMNS}})
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
    st.plotly_chart(fig, width="stretch", key=K("bar"))

# ---------------------------------------------------------------------------- selection

selection = sim.response.selection
if selection is not None:
    with st.container(border=True):
        st.markdown("**Selector** (competence and plan candidates)")
        n_candidates = max(len(selection.scores), len(selection.signals))
        with st.container(horizontal=True, wrap=True, gap="small"):
            st.metric("Confidence", f"{selection.confidence:.3f}", width=140,
                      help="(best score − runner-up's score) / best score with two or more candidates; the score "
                           "itself with one. Each score is the mean of applicability, success and recency. The "
                           "Selector inspector shows the terms")
            st.metric("Needs more", "yes" if selection.needs_more else "no", width=140,
                      help=f"confidence < threshold {selection.threshold:g}")
            st.metric("Candidates", f"{n_candidates:,}", width=140, help="Competence and plan records that passed "
                      "gating and the salience filter (the selector sees them all, even those the limit cuts)")
        # Named as the cards name them: through the narrower of the context and your clearance;
        # candidates that say the same thing with a short id beside.
        seen = {r.id: record_label(r, 100) for r in selection.selected}
        names = distinct_names({s.record_id: seen.get(s.record_id, "(redacted)") for s in selection.signals[:200]})
        sig_rows = [{"rank": i + 1, "record": clean(names[s.record_id], 120), "score": s.score,
                     "applicability": s.applicability, "success": s.success, "recency": s.recency,
                     "redacted": s.redacted, "id": clean(s.record_id, 200)}
                    for i, s in enumerate(selection.signals[:200])]

        def score_column(label: str):
            return st.column_config.NumberColumn(label, format="%.4f", width=64)

        st.dataframe(pd.DataFrame(sig_rows), hide_index=True, width="stretch", key=K("selection"), column_config={
            "rank": st.column_config.NumberColumn("#", width=40),
            "record": st.column_config.TextColumn("record", width=180, pinned=True),
            "score": score_column("score"), "applicability": score_column("applic."),
            "success": score_column("success"), "recency": score_column("recency"),
            "redacted": st.column_config.CheckboxColumn("redacted", width=70),
            "id": st.column_config.TextColumn("id", width=120)})
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
tabs = st.tabs(labels, key=K("view"), on_change="rerun")
with tabs[0]:
    if tabs[0].open:
        st.caption("All layers merged, sorted by salience at the as-of instant; the limit applies here"
                   + (f" (with no limit, the first {MAX_LIMIT:,} of {matching:,})."
                      if returned < matching and not limit else "."))
        if beyond:
            st.info(f"{plural(beyond, 'record')} in the store {'is' if beyond == 1 else 'are'} beyond your clearance: "
                    "neither counted nor listed here, whatever the context.", icon=":material/lock:")
        if not returned:
            st.info("Nothing is returned for this context and request.")
        elif not listed_total:
            st.caption("No returned record is within your clearance.")
        else:
            offset = pager(listed_total, layer_page_key)
            shown = sim.response.records[offset:offset + PAGE_SIZE]
            st.caption(f"Showing {offset + 1:,}–{offset + len(shown):,} of {listed_total:,}"
                       + (" within your clearance." if beyond else "."))
            cards(shown, offset, "ranked")
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
        # A layer lists what a retrieve of that layer alone returns, within the clearance (the
        # counts are over what it sees already).
        listed = records_returned(n, 0)
        offset = pager(listed, K("page", layer))
        sub = simulate([layer], materialized(offset + PAGE_SIZE))
        shown = sub.response.records[offset:offset + PAGE_SIZE]
        st.caption(f"Showing {offset + 1:,}–{offset + len(shown):,} of {n:,}"
                   + (f" (the first {listed:,} by salience can be listed)." if listed < n else "."))
        cards(shown, offset, f"layer_{layer}")

# ---------------------------------------------------------------------------- what stays hidden


def why_hidden(record_id: str) -> str:
    """The engine's reasons for the hidden verdict (the ones that say so; all when none does)."""
    try:
        reasons = view.explain(record_id, trust, as_of=when, min_salience=float(min_salience)).reasons
    except NotFoundError:
        return "(no longer in the store)"
    return "; ".join([r for r in reasons if "hidden" in r] or reasons)


with tabs[-1]:
    if tabs[-1].open:
        st.caption("Records this context does not see at all, with the engine's reason for each. The "
                   "simulated agent learns nothing of them, not even that they exist.")
        first = view.hidden_records(trust, list(params.memory_types), offset=0, limit=0)
        # Only those within your clearance: how many beyond it this context does not see would
        # tell which scopes and levels they have.
        if not first.seen:
            st.info("This context sees every record of these layers within your clearance (in full or redacted).")
        elif first.seen:
            offset = pager(first.seen, K("page_hidden"))
            hp = view.hidden_records(trust, list(params.memory_types), offset=offset, limit=PAGE_SIZE)
            ids = [b.id for b in hp.records]
            # Named by what it says only when your clearance sees it in full; a record it sees
            # redacted is named as explain may name it: id, type, sensitivity and scope.
            names = distinct_names({rid: n for rid, n in view.labels(ids).items()
                                    if not n.startswith("redacted ")})
            rows = [{"record": clean(names.get(b.id, "(beyond your clearance: metadata only)"), 120),
                     "why hidden": clean(why_hidden(b.id), 1000), "type": b.type, "sensitivity": b.sensitivity,
                     "scope": clean(b.scope, 200) if b.scope else "(unscoped)", "id": clean(b.id, 200),
                     "explorer": explorer_href(b.id)} for b in hp.records]
            st.caption(f"Showing {offset + 1:,}–{offset + len(rows):,} of {first.seen:,} within your clearance, by id.")
            st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key=K("hidden"),
                         column_order=["record", "why hidden", "type", "sensitivity", "scope", "explorer", "id"],
                         column_config={"record": st.column_config.TextColumn(width=300, pinned=True),
                                        "why hidden": st.column_config.TextColumn(width=330),
                                        "type": st.column_config.TextColumn(width=95),
                                        "sensitivity": st.column_config.TextColumn(width=80),
                                        "explorer": st.column_config.LinkColumn("explorer", display_text="Open",
                                                                                width="small")})

# ---------------------------------------------------------------------------- any record

with st.expander("Explain any record (including hidden ones)"):
    rid = st.text_input("Record id", key=K("explain_id"))
    if rid.strip():
        try:
            show_explanation(view.explain(rid.strip(), trust, as_of=when, min_salience=float(min_salience)))
        except NotFoundError:
            st.error(f"No record with id {md(rid, 200)} within your clearance.")
