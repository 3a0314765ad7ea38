"""Selector inspector: which competence / plan the selector prefers for a trust context, and how sure it is."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from console import keys, state
from console.components.chart_safety import plot_text, tidy
from console.components.colours import SIGNAL_COLORS
from console.components.page import ignored, page_preamble
from console.components.safe import clean, md
from console.components.time_picker import instant_picker, set_instant, to_minute
from console.components.trust_form import RequestParams, fill, params_from_query, trust_context_form
from console.components.words import distinct_names, number, plural
from console.keys import TRUST_FIELDS, Param
from membrane_engine import MAX_TASK_LENGTH, RetrieveRequest, confidence_terms
from membrane_engine import label as record_label
from membrane_engine.errors import MembraneError

K = keys.SELECTOR
SELECTOR_TYPES = ["competence", "plan_graph"]

page = page_preamble(K, "Selector inspector",
                     "Retrieval restricted to competence and plan_graph records, then the selector (SPEC 5): three "
                     "equally weighted signals per candidate, a confidence from the gap between the best two, and "
                     "`needs_more` when that confidence is under the threshold.")
view = page.view
now = view.now()

# The request lives in the URL (a link, a reload, Back / Forward restore it); the trust context is
# the session's shared one when the URL names none (console/state.py).
URL_WIDGETS = (*state.trust_widgets(K.prefix), K("task"), K("as_of"), K("min_salience"), K("threshold"))
URL_PARAMETERS = (*TRUST_FIELDS, Param.TASK, Param.AS_OF, Param.MIN_SALIENCE, Param.THRESHOLD)
seed = page.seed_from_url(URL_WIDGETS, drawn=K("max_sensitivity"))
if seed is not None:
    url_defaults, url_problems = params_from_query(seed)
    url_problems = [ignored(p) for p in url_problems]
    fill(K.prefix, {k: v for k, v in url_defaults.items() if k in TRUST_FIELDS})
    st.session_state[K("task")] = url_defaults.get("task", "")
    set_instant(K("as_of"), to_minute(url_defaults.get("as_of") or now))
    st.session_state[K("min_salience")] = float(url_defaults.get("min_salience", 0.0))
    st.session_state[K("threshold")] = view.selector_threshold
    if Param.THRESHOLD in seed:
        try:
            threshold_ = float(seed[Param.THRESHOLD])
        except ValueError:
            threshold_ = math.nan
        if 0.0 <= threshold_ <= 1.0:
            st.session_state[K("threshold")] = round(threshold_, 2)  # the slider's step
        else:
            url_problems.append(state.ignored_parameter(Param.THRESHOLD, seed[Param.THRESHOLD], "a number from 0 to 1"))
    page.link_problems(url_problems + state.unknown_parameters(seed, URL_PARAMETERS))
else:
    page.link_problems()

controls, results = st.columns([2, 3], gap="large")
with controls:
    st.subheader("Request")
    trust = trust_context_form(K.prefix, view.scopes())
    task = st.text_input("Task descriptor", key=K("task"), max_chars=MAX_TASK_LENGTH,
                         help="Passed to the selector: with the ranking provider on (the default), applicability is the "
                              "similarity of each candidate's text to this task")
    as_of = instant_picker(K("as_of"), "As of", default=now, now_if_empty=False,
                           help="Recency and S(t) are evaluated at this instant")
    min_salience = st.number_input("Min salience", min_value=0.0, step=0.05, format="%.3f",
                                   key=K("min_salience"), help="Candidates with S(as of) below this are dropped; 0 disables")
    threshold = st.slider("needs_more threshold", min_value=0.0, max_value=1.0, step=0.01, key=K("threshold"),
                          help="needs_more is true when the confidence is below this (engine default "
                               f"{view.selector_threshold:g})")

query = RequestParams(trust=trust, task=task, min_salience=float(min_salience), as_of=as_of).to_query()
query = {k: v for k, v in query.items() if k not in (Param.MEMORY_TYPES, Param.LIMIT)}
query[Param.THRESHOLD] = f"{threshold:g}"
page.keep_in_url(query)

# The selector sees every candidate whatever the limit (SPEC 4, step 6), and this page shows the
# selection, not the returned records: limit 1 spares reading thousands of them.
request = RetrieveRequest(trust=trust, task_descriptor=task, memory_types=SELECTOR_TYPES,
                          min_salience=min_salience, limit=1, as_of=as_of)
with results:
    try:
        # The decision is the context's; the candidates shown come through the operator's clearance.
        simulation = view.simulate(request)
    except MembraneError as exc:
        st.error(f"The engine refused the request: {md(exc, 500)}")
        st.stop()
    selection = simulation.response.selection
    # Every candidate is scored; signals and records come for the best SELECTED_MAX of them.
    candidates = len(selection.scores) if selection is not None else 0
    # The confidence does not depend on the threshold: needs_more at the operator's threshold
    # is the engine's answer for the same scores.
    terms = confidence_terms(selection, threshold)

    hidden = sum(c.hidden for c in simulation.counts.values())
    below = sum(c.below_min_salience for c in simulation.counts.values())
    redacted = sum(c.redacted for c in simulation.counts.values())
    # The candidates and the decision are over what your clearance sees (the view ranks them
    # again); what is beyond it is one total, counted now whatever the context.
    beyond = view.beyond_clearance()
    if beyond:
        st.info(f"{plural(beyond, 'record')} in the store {'is' if beyond == 1 else 'are'} beyond your clearance: "
                "neither candidates nor counted here.", icon=":material/lock:")
    if selection is not None and not selection.signals and candidates:
        st.subheader("No candidate within your clearance")
        st.info(f"The selector has {plural(candidates, 'candidate')} for this context, none within your clearance.")
        st.stop()
    if selection is None or not selection.signals:
        st.subheader("No candidates")
        st.info("No competence or plan_graph record passes this trust context and salience filter, so the selector "
                f"has nothing to choose from (needs_more would be true). Hidden by trust: {hidden:,}; "
                f"below min salience: {below:,}.")
        st.stop()

    signals = selection.signals
    by_id = {r.id: r for r in selection.selected}
    best = signals[0]
    runner = signals[1] if len(signals) > 1 else None

    def name_of(record_id: str) -> str:
        """What the candidate says (skill name, plan intent), as the narrower of the context and
        your clearance shows it: a redacted view is named only as redacted."""
        record = by_id.get(record_id)
        return record_label(record) if record is not None else "(redacted)"

    # Candidates that say the same thing get a short id beside their name.
    names = distinct_names({s.record_id: name_of(s.record_id) for s in signals})

    st.subheader("Decision")
    # Fixed-width metrics in a row that wraps: in a narrow column they go two by two rather
    # than cutting their labels and numbers.
    with st.container(horizontal=True, wrap=True, gap="small"):
        st.metric("Candidates", f"{candidates:,}", width=130,
                  help=f"Competence and plan records that passed gating and the salience filter ({redacted:,} of "
                       f"them redacted); {hidden:,} hidden by trust, {below:,} below min salience")
        st.metric("Best score", number(terms.best, ".4f"), width=130,
                  help="The selected candidate's score: the mean of its applicability, success and recency")
        st.metric("Confidence", number(terms.confidence, ".4f"), width=130,
                  help="(best − runner-up) / best with two or more candidates; the score itself with one")
        st.metric("Threshold", f"{threshold:.2f}", width=130,
                  help=f"needs_more is true when the confidence is below it (engine default {view.selector_threshold:g})")
    st.markdown("**needs_more** " + (":red-badge[:material/search: TRUE]" if terms.needs_more
                                     else ":green-badge[:material/check_circle: FALSE]"))

    st.markdown("**How the confidence is computed** (SPEC 5)")
    if terms.second is not None:
        # Short lines: the formula reads whole in the narrow column at 1024 px.
        st.code(f"confidence\n  = (best − runner-up) / best\n"
                f"  = ({terms.best:.4f} − {terms.second:.4f}) / {terms.best:.4f}\n"
                f"  = {terms.confidence:.4f}\n"
                f"margin = confidence − threshold\n"
                f"  = {terms.confidence:.4f} − {threshold:.2f} = {terms.margin:+.4f}", language=None)
        share = terms.lead / terms.best if terms.best else 0.0
        if terms.needs_more:
            bar = terms.best * (1 - threshold)
            st.markdown(f"needs_more is **true** because the confidence {terms.confidence:.4f} is below the threshold "
                        f"{threshold:.2f}: the best candidate leads the runner-up by {terms.lead:.4f}, "
                        f"{share:.1%} of its score. It would be false with a runner-up scoring at most {bar:.4f} "
                        f"(a lead of {threshold:.0%} of the best score), or with a threshold of "
                        f"{terms.confidence:.4f} or less.")
        else:
            st.markdown(f"needs_more is **false**: the confidence {terms.confidence:.4f} is at or above the threshold "
                        f"{threshold:.2f} (the best candidate leads the runner-up by {share:.1%} of its score).")
    else:
        st.code(f"confidence = min(best, 1)   (one candidate)\n"
                f"  = min({terms.best:.4f}, 1) = {terms.confidence:.4f}\n"
                f"margin = confidence − threshold\n"
                f"  = {terms.confidence:.4f} − {threshold:.2f} = {terms.margin:+.4f}", language=None)
        st.markdown(f"needs_more is **{'true' if terms.needs_more else 'false'}**: with one candidate the confidence "
                    f"is its own score, {'below' if terms.needs_more else 'at or above'} the threshold {threshold:.2f}.")
    shown_terms = [s for s in signals[:2] if math.isfinite(s.score)]
    if shown_terms:
        st.caption("Each score is the mean of three signals: " + "; ".join(
            f"{'best' if k == 0 else 'runner-up'} {md(names[s.record_id], 60)}: ({s.applicability:.4f} + "
            f"{s.success:.4f} + {s.recency:.4f}) / 3 = {s.score:.4f}" for k, s in enumerate(shown_terms)))
    listed = [s.score for s in signals[:2]]
    if any(math.isfinite(x) and (y is None or abs(x - y) > 1e-9) for x, y in zip(listed, (terms.best, terms.second))):
        st.caption("One of the two best candidates by score is beyond your clearance: its score is in the formula, "
                   "not its record (the names below are the best ones within your clearance).")

    # The help of an element is Markdown: the id is data, escaped as such.
    st.text(f"Selected: {clean(names[best.record_id], 140)}", help=f"id {md(best.record_id, 200)}")
    if runner is not None:
        st.text(f"Runner-up: {clean(names[runner.record_id], 140)}", help=f"id {md(runner.record_id, 200)}")

# The candidates below the two columns, at the page's full width: the table's scores fit
# without scrolling sideways.
st.subheader("Signals per candidate")
shown = st.slider("Candidates in the chart", min_value=1, max_value=max(1, len(signals)),
                  value=min(15, len(signals)), key=K("top")) if len(signals) > 1 else 1
top = signals[:shown]
labels = [f"{k + 1}. {plot_text(names[s.record_id], 40)}" for k, s in enumerate(top)]
hover = [plot_text(f"{s.record_id} · {names[s.record_id]}", 120) for s in top]
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
fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=f"best {number(best.score, '.3f')}", hoverinfo="skip",
                         visible=True if math.isfinite(best.score) else False,
                         line=dict(color=SIGNAL_COLORS["score"], dash="dot", width=1)))
fig.update_layout(barmode="group", bargroupgap=0.05, xaxis=dict(range=[0, 1.05], title="signal value"),
                  yaxis=dict(autorange="reversed", title=None))
tidy(fig, height=110 + 64 * len(top))
st.caption("Applicability, success and recency per candidate, ranked; the score (dark) is their mean.")
st.plotly_chart(fig, key=K("chart"))

table = pd.DataFrame([{
    "rank": k + 1, "record": clean(names[s.record_id], 120), "score": s.score, "applicability": s.applicability,
    "success": s.success, "recency": s.recency,
    "salience": by_id[s.record_id].salience if s.record_id in by_id else math.nan,
    "type": by_id[s.record_id].type.value if s.record_id in by_id else "", "redacted": s.redacted,
    "id": clean(s.record_id, 200),
} for k, s in enumerate(signals)])
if candidates > len(signals):
    st.caption(f"The {len(signals):,} best of {candidates:,} candidates.")


def score_column(label: str, help_: str | None = None):
    return st.column_config.NumberColumn(label, format="%.4f", width=64, help=help_)


# Narrow number columns first, the record pinned: every score is in view without scrolling
# sideways at 1024 px.
st.dataframe(table, hide_index=True, key=K("table"), width="stretch", column_config={
    "rank": st.column_config.NumberColumn("#", width=40),
    "record": st.column_config.TextColumn("record", width=180, pinned=True),
    "score": score_column("score", "Mean of the three signals"),
    "applicability": score_column("applic.", "Applicability: the confidence, or the task's similarity with the "
                                             "ranking provider on"),
    "success": score_column("success"),
    "recency": score_column("recency"),
    "salience": score_column("salience", "S(as of)"),
    "type": st.column_config.TextColumn("type", width=90),
    "redacted": st.column_config.CheckboxColumn("redacted", width=70),
    "id": st.column_config.TextColumn("id", width=120),
})
if redacted:
    st.caption("Redacted candidates (one level above the context's max sensitivity) have no payload and score "
               "0.5 on every signal; those only your clearance redacts are shown without success, recency and "
               "score (they come from what a redacted view withholds).")
