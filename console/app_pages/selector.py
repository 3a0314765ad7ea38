"""Selector inspector: which competence / plan the selector prefers for a trust context, and how sure it is."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from console import state
from console.components.clearance import clearance_caption, signed_in
from console.components.chart_safety import plot_text, tidy
from console.components.safe import clean, md
from console.components.trust_form import RequestParams, fill, params_from_query, trust_context_form
from console.components.when import UTC, instant_input
from console.components.words import plural
from console.state import TRUST_FIELDS
from membrane_engine import RetrieveRequest
from membrane_engine.clearance import scopes_seen
from membrane_engine.errors import MembraneError
from membrane_engine.labels import label as record_label
from membrane_engine.selector import select

SELECTOR_TYPES = ["competence", "plan_graph"]
SIGNAL_COLORS = {"applicability": "#60a5fa", "success": "#34d399", "recency": "#fbbf24", "score": "#1e3a8a"}

operator = signed_in()
clearance = operator.clearance
m = state.membrane()
now = m.now()

st.title("Selector inspector")
st.caption("Retrieval restricted to competence and plan_graph records, then the selector (SPEC 5): three equally "
           "weighted signals per candidate, a confidence from the gap between the best two, and `needs_more` "
           "when that confidence is under the threshold.")
clearance_caption(operator)

# The request lives in the URL (a link, a reload, Back / Forward restore it); the trust context is
# the session's shared one when the URL names none (console/state.py).
URL_WIDGETS = (*state.trust_widgets("sel"), "sel_task", "sel_as_of", "sel_min_salience", "sel_threshold")
seed = state.page_query("selector", widgets=URL_WIDGETS)
if seed is None and "sel_max_sensitivity" not in st.session_state:  # widgets gone with a page change
    seed = st.query_params.to_dict()
if seed is not None:
    url_defaults, url_problems = params_from_query(seed)
    st.session_state["sel_url_problems"] = url_problems
    fill("sel", {k: v for k, v in url_defaults.items() if k in TRUST_FIELDS})
    st.session_state["sel_task"] = url_defaults.get("task", "")
    moment = (url_defaults.get("as_of") or now).astimezone(UTC)
    st.session_state["sel_as_of_date"] = moment.date()
    st.session_state["sel_as_of_time"] = moment.time().replace(second=0, microsecond=0, tzinfo=None)
    st.session_state["sel_min_salience"] = float(url_defaults.get("min_salience", 0.0))
    try:
        threshold_ = float(seed.get("threshold", m.selector_threshold))
        st.session_state["sel_threshold"] = threshold_ if 0.0 <= threshold_ <= 1.0 else float(m.selector_threshold)
    except ValueError:
        st.session_state["sel_threshold"] = float(m.selector_threshold)
for problem in st.session_state.get("sel_url_problems", []):
    st.warning(f"Ignored from the URL: {md(problem, 300)}")

controls, results = st.columns([2, 3], gap="large")
with controls:
    st.subheader("Request")
    trust = trust_context_form("sel", scopes_seen(m, clearance))
    task = st.text_input("Task descriptor", key="sel_task",
                         help="Passed to the selector: with the ranking provider on (the default), applicability is the "
                              "similarity of each candidate's text to this task")
    as_of = instant_input("As of", "sel_as_of", now, help="Recency and S(t) are evaluated at this instant")
    min_salience = st.number_input("Min salience", min_value=0.0, step=0.05, format="%.3f",
                                   key="sel_min_salience", help="Candidates with S(as of) below this are dropped; 0 disables")
    threshold = st.slider("needs_more threshold", min_value=0.0, max_value=1.0, step=0.01, key="sel_threshold",
                          help="needs_more is true when the confidence is below this (engine default "
                               f"{m.selector_threshold:g})")

query = RequestParams(trust=trust, task=task, min_salience=float(min_salience), as_of=as_of).to_query()
query = {k: v for k, v in query.items() if k not in ("memory_types", "limit")}
query["threshold"] = f"{threshold:g}"
state.keep_page_query("selector", query)

# The selector sees every candidate whatever the limit (SPEC 4, step 6), and this page shows the
# selection, not the returned records: limit 1 spares reading thousands of them.
request = RetrieveRequest(trust=trust, task_descriptor=task, memory_types=SELECTOR_TYPES,
                          min_salience=min_salience, limit=1, as_of=as_of)
with results:
    try:
        # The decision is the context's; the candidates shown come through the operator's clearance.
        simulation = m.simulate(request, clearance=clearance)
    except MembraneError as exc:
        st.error(f"The engine refused the request: {md(exc, 500)}")
        st.stop()
    selection = simulation.response.selection
    # Every candidate is scored; signals and records come for the best SELECTED_MAX of them.
    candidates = len(selection.scores) if selection is not None else 0
    if selection is not None and abs(threshold - selection.threshold) > 1e-12:
        # The engine's selector at the operator's threshold over the best candidates: the
        # confidence depends only on the best two, which are among them.
        selection = select(selection.selected, as_of, threshold=threshold, task_descriptor=task,
                           embedder=m.embedder)

    hidden = sum(c.hidden for c in simulation.counts.values())
    below = sum(c.below_min_salience for c in simulation.counts.values())
    redacted = sum(c.redacted for c in simulation.counts.values())
    if simulation.withheld:
        st.info(f"Of the records this context gets, {plural(simulation.withheld, 'record')} beyond your clearance "
                "are counted, not listed; the candidates below are the ones within it.", icon=":material/lock:")
    if selection is not None and not selection.signals and candidates:
        st.subheader("No candidate within your clearance")
        st.info(f"The selector has {plural(candidates, 'candidate')} for this context, none within your clearance.")
        st.stop()
    if selection is None or not selection.signals:
        st.subheader("No candidates")
        st.info("No competence or plan_graph record passes this trust context and salience filter, so the selector "
                f"has nothing to choose from (needs_more would be true). Hidden by trust: {hidden}; "
                f"below min salience: {below}.")
        st.stop()

    signals = selection.signals
    by_id = {r.id: r for r in selection.selected}
    best = signals[0]
    runner = signals[1] if len(signals) > 1 else None

    st.subheader("Decision")
    c1, c2, c3, c4 = st.columns([6, 5, 5, 6])  # c1 holds up to a 7-digit count
    c1.metric("Candidates", f"{candidates:,}", help=f"Competence and plan records that passed gating and the "
                                                    f"salience filter ({redacted:,} of them redacted); {hidden:,} "
                                                    f"hidden by trust, {below:,} below min salience")
    # A candidate your clearance sees redacted has no score shown (NaN from the engine).
    scored = math.isfinite(best.score) and (runner is None or math.isfinite(runner.score))
    c2.metric("Best score", f"{best.score:.4f}" if math.isfinite(best.score) else "—",
              delta=f"{best.score - runner.score:+.4f} lead" if runner and scored else None, delta_color="off",
              help="The selected candidate's score; the delta is its lead over the runner-up's score"
              if runner else "The selected candidate's score (no runner-up)")
    c3.metric("Confidence", f"{selection.confidence:.4f}",
              help="(best − runner-up) / best with two or more candidates; the score itself with one")
    with c4:
        st.markdown("**needs_more**")
        if selection.needs_more:
            st.badge("TRUE", icon=":material/search:", color="red")
            st.caption(f"confidence {selection.confidence:.4f} < threshold {threshold:.2f}: ask for more")
        else:
            st.badge("FALSE", icon=":material/check_circle:", color="green")
            st.caption(f"confidence {selection.confidence:.4f} ≥ threshold {threshold:.2f}")

    def name_of(record_id: str) -> str:
        """What the candidate says (skill name, plan intent), as the narrower of the context and
        your clearance shows it: a redacted view is named only as redacted."""
        record = by_id.get(record_id)
        return record_label(record) if record is not None else "(redacted)"

    st.text(f"Selected: {clean(name_of(best.record_id), 120)}", help=f"id {clean(best.record_id, 200)}")
    if runner is not None:
        st.text(f"Runner-up: {clean(name_of(runner.record_id), 120)}", help=f"id {clean(runner.record_id, 200)}")
    if len(signals) == 1:
        st.caption("One candidate: the confidence is its own score.")

    st.subheader("Signals per candidate")
    shown = st.slider("Candidates in the chart", min_value=1, max_value=max(1, len(signals)),
                      value=min(15, len(signals)), key="sel_top") if len(signals) > 1 else 1
    top = signals[:shown]
    labels = [f"{k + 1}. {plot_text(name_of(s.record_id), 40)}" for k, s in enumerate(top)]
    hover = [plot_text(f"{s.record_id} · {name_of(s.record_id)}", 120) for s in top]
    fig = go.Figure()
    for signal in ("applicability", "success", "recency", "score"):
        fig.add_trace(go.Bar(
            name=signal, y=labels, x=[getattr(s, signal) for s in top], orientation="h",
            marker_color=SIGNAL_COLORS[signal], customdata=hover,
            hovertemplate="%{customdata}<br>" + signal + " = %{x:.4f}<extra></extra>"))
    # The best score as a dotted line named in the legend (a text annotation on the line would
    # sit in the top margin and collide with the legend).
    if math.isfinite(best.score):
        fig.add_vline(x=best.score, line=dict(color=SIGNAL_COLORS["score"], dash="dot", width=1))
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=f"best {best.score:.3f}", hoverinfo="skip",
                             visible=True if math.isfinite(best.score) else False,
                             line=dict(color=SIGNAL_COLORS["score"], dash="dot", width=1)))
    fig.update_layout(barmode="group", bargroupgap=0.05, xaxis=dict(range=[0, 1.05], title="signal value"),
                      yaxis=dict(autorange="reversed", title=None))
    tidy(fig, height=110 + 64 * len(top))
    st.caption("Applicability, success and recency per candidate, ranked; the score (dark) is their mean.")
    st.plotly_chart(fig, key="sel_chart")

    table = pd.DataFrame([{
        "rank": k + 1, "record": clean(name_of(s.record_id), 120),
        "type": by_id[s.record_id].type.value if s.record_id in by_id else "", "redacted": s.redacted, "applicability": s.applicability,
        "success": s.success, "recency": s.recency, "score": s.score,
        "salience": by_id[s.record_id].salience if s.record_id in by_id else None, "id": clean(s.record_id, 200),
    } for k, s in enumerate(signals)])
    number = st.column_config.NumberColumn(format="%.4f")
    if candidates > len(signals):
        st.caption(f"The {len(signals):,} best of {candidates:,} candidates.")
    st.dataframe(table, hide_index=True, key="sel_table",
                 column_config={c: number for c in ("applicability", "success", "recency", "score", "salience")})
    if redacted:
        st.caption("Redacted candidates (one level above the context's max sensitivity) have no payload and score "
                   "0.5 on every signal; those only your clearance redacts are shown without success, recency and "
                   "score (they come from what a redacted view withholds).")
