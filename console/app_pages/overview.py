"""Overview: the store at a glance (SPEC 7 metrics and breakdowns, all computed by the engine)."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import streamlit as st

from console import keys
from console.components import glance
from console.components.colours import BRAND
from console.components import overview_data as counted
from console.components.clearance import key_of
from console.components.page import ignored, page_preamble
from console.components.safe import clean
from console.components.time_picker import from_param, instant_picker, set_instant, to_param
from console.components.words import SENSITIVITY_ORDER, plural
from console.keys import Param
from membrane_engine import BUCKETS, format_time

K = keys.OVERVIEW
MAX_SCOPES = 200  # rows of the scope table (the largest first): it scrolls


# What each number means and how the engine computes it (SPEC 7), shown on hover.
HELP = {
    "total_records": "Records in the store at the instant: the live records created at or before it (those your "
                     "clearance sees; every number on this page counts only them).",
    "active_records": "Records whose salience S(t) at the instant is above 0 (S decays from its anchor; a pinned "
                      "record keeps its value).",
    "pinned_records": "Records whose salience is frozen (pinned), among those counted.",
    "total_audit_entries": "Audit entries written at or before the instant, over every record.",
    "avg_salience": "The mean of S(t) at the instant over the records counted.",
    "avg_confidence": "The mean of the records' stored confidence (0 to 1).",
    "memory_growth_rate": "Records created in the 24 hours before the instant, divided by the records counted.",
    "revision_rate": "(revise + fork + merge audit entries) divided by all audit entries, up to the instant.",
    "retrieval_usefulness": "Retrieval usefulness: reinforce audit entries divided by all audit entries, up to the "
                            "instant.",
    "competence_success_rate": "Competence success rate: the mean of the stored performance.success_rate of the "
                               "competence records that have a performance block (as Membrane's GetMetrics; the selector's success signal "
                               "is computed differently).",
    "plan_reuse_frequency": "The mean execution_count of the plan_graph records that have metrics.",
    "unknown_sensitivity": "Unknown sensitivity: records whose sensitivity is not one of the known levels: the "
                           "engine hides them from every trust context.",
}


# Counts by label only, and only of the records the clearance sees (the view computes them); the
# rest is one total, counted now.
page = page_preamble(K, "Overview", clearance_caption=False)
view = page.view
clearance = key_of(page.clearance)
top = st.columns([3, 2])
top[0].caption("The memory store at a glance. Every number is computed by the engine at the chosen instant.")
# The instant lives in the URL (?as_of=...), so a link, a reload and Back / Forward restore it.
seed = page.seed_from_url((K("as_of"),), trust_prefix=None)
if seed is not None:
    moment, problem = from_param(Param.AS_OF, seed.get(Param.AS_OF, ""))
    set_instant(K("as_of"), moment)
    page.link_problems([ignored(problem)] if problem else [])
else:
    page.link_problems()
with top[1]:
    as_of = instant_picker(K("as_of"), "As of",
                           help="Every number counts the records created and the audit entries written by this "
                                "instant; salience is S(t) at it.")
page.keep_in_url({Param.AS_OF: to_param(as_of)} if as_of is not None else {}, trust_prefix=None)
now = view.now()
when = as_of or now
key_time = counted.minute_of(when) if as_of is None else when
url, seq = counted.store_key(view)
metrics = counted.metrics(view, url, seq, clearance, key_time.isoformat(), as_of is None)
breakdown = counted.breakdown(view, url, seq, clearance, key_time.isoformat(), as_of is None)

loaded = counted.sample_loaded(view, url)
if loaded is not None:
    st.info("This is the bundled demo store: the memory of kestrel, a coding agent working for Maya Chen across three "
            "projects, with its dates moved so that its “now” was the moment the store was first opened "
            f"({format_time(datetime.fromtimestamp(loaded, key_time.tzinfo))[:16].replace('T', ' ')} UTC).",
            icon=":material/science:")

with st.container(border=True):
    st.markdown("**Store**")
    st.text(view.url)  # not st.code: its highlighter was a ninth of the browser's work on this page
    st.caption(f"Metrics at {format_time(key_time)[:16].replace('T', ' ')} UTC"
               + (" (a past instant: only the records created and the audit entries written by then count; "
                  "salience figures are S at that instant from each record's current anchor; a record's true "
                  "past curve, from its audit trail, is on the Salience decay page)"
                  if as_of is not None and as_of < now else "")
               # The counter moves with every write, to records beyond the clearance too.
               + ("" if metrics["beyond_clearance"] else f" · change counter {seq:,}"))
    # Whatever the instant: counted now and never broken down, so two instants tell nothing
    # about when (or what) a record beyond the clearance was made.
    if metrics["beyond_clearance"]:
        st.caption(f"{plural(metrics['beyond_clearance'], 'record')} beyond your clearance: not counted below.")

row1 = st.columns(4)
row1[0].metric("Records", f"{metrics['total_records']:,}", help=HELP["total_records"])
row1[1].metric("Active (S > 0)", f"{metrics['active_records']:,}", help=HELP["active_records"])
row1[2].metric("Pinned", f"{metrics['pinned_records']:,}", help=HELP["pinned_records"])
row1[3].metric("Audit entries", f"{metrics['total_audit_entries']:,}", help=HELP["total_audit_entries"])
row2 = st.columns(4)
row2[0].metric("Avg salience", f"{metrics['avg_salience']:.3f}", help=HELP["avg_salience"])
row2[1].metric("Avg confidence", f"{metrics['avg_confidence']:.3f}", help=HELP["avg_confidence"])
row2[2].metric("Growth (24 h)", f"{metrics['memory_growth_rate']:.1%}", help=HELP["memory_growth_rate"])
row2[3].metric("Revision rate", f"{metrics['revision_rate']:.1%}", help=HELP["revision_rate"])
row3 = st.columns(4)  # labels short enough to read whole at 1024 px; the help says more
row3[0].metric("Usefulness", f"{metrics['retrieval_usefulness']:.1%}", help=HELP["retrieval_usefulness"])
row3[1].metric("Skill success", f"{metrics['competence_success_rate']:.1%}", help=HELP["competence_success_rate"])
row3[2].metric("Plan reuse", f"{metrics['plan_reuse_frequency']:.1f}", help=HELP["plan_reuse_frequency"])
row3[3].metric("Unlabelled", f"{breakdown['unknown_sensitivity']:,}", help=HELP["unknown_sensitivity"])

if not metrics["total_records"]:
    if as_of is not None and view.count():
        st.info("No record existed yet at this instant.", icon=":material/history:")
    else:
        st.info("The store is empty. Import records on the Import / export page, or start `membrane-console` "
                "without `--db` to open the bundled sample store.", icon=":material/inbox:")
    st.stop()

left, right = st.columns(2)
with left:
    st.subheader("Records by type and sensitivity")
    cells = breakdown["by_type_sensitivity"]
    frame = pd.DataFrame([{"type": t, **{s: cells[t][s] for s in SENSITIVITY_ORDER}} for t in cells])
    st.dataframe(glance.heat(frame, SENSITIVITY_ORDER), hide_index=True, width="stretch", key=K("heat"),
                 column_config={"type": st.column_config.TextColumn("type", pinned=True)})
with right:
    st.subheader("Records by scope")
    scopes = breakdown["by_scope"]
    shown = list(scopes.items())[:MAX_SCOPES]
    frame = pd.DataFrame({"scope": [clean(s, 80) if s else "(unscoped)" for s, _ in shown],
                          "records": [n for _, n in shown]})
    st.dataframe(frame, hide_index=True, width="stretch", key=K("scope"), column_config={
        "records": st.column_config.ProgressColumn("records", format="localized", min_value=0,
                                                   max_value=max([n for _, n in shown], default=1))})
    if len(scopes) > len(shown):
        st.caption(f"The {len(shown)} largest of {plural(len(scopes), 'scope')}.")

left, right = st.columns(2)
with left:
    st.subheader("Salience distribution")
    buckets = metrics["salience_distribution"]
    # Membrane's bands; the last counts everything from 0.8 up, pinned records above 1 included.
    frame = pd.DataFrame({"S(as of)": [b if b != BUCKETS[-1] else "0.8 and above" for b in buckets],
                          "records": list(buckets.values())})
    st.dataframe(frame, hide_index=True, width="stretch", key=K("hist"), column_config={
        "S(as of)": st.column_config.TextColumn(help="S at the instant, lower bound included; the last band "
                                                     "includes records above 1 (pinned by an operator)"),
        "records": st.column_config.ProgressColumn("records", format="localized", min_value=0,
                                                   max_value=max(metrics["total_records"], 1))})
with right:
    st.subheader("Audit activity")
    activity = counted.activity(view, url, seq, clearance, metrics["total_audit_entries"], key_time.isoformat(),
                                as_of is None)
    if not activity:
        st.info("No audit entries yet." if as_of is None else "No audit entry was written by this instant.")
    else:
        first, last, width, series = glance.counts_over_time(activity)
        frame = pd.DataFrame({"action": list(series), "entries": [sum(v) for v in series.values()],
                              "over time": list(series.values())}).sort_values("entries", ascending=False)
        st.dataframe(glance.action_colors(frame), hide_index=True, width="stretch", key=K("audit"), column_config={
            "entries": st.column_config.NumberColumn("entries", format="localized"),
            "over time": st.column_config.BarChartColumn(
                f"{'per day' if width == 1 else f'per {width} days'}, {first} to {last}", y_min=0, color=BRAND)})
        span = (last - first).days + 1
        active_days = len({ts for ts, _, _ in activity})
        st.caption(f"{plural(int(frame['entries'].sum()), 'entry')} from {first} to {last} "
                   f"({plural(span, 'day')}, {active_days:,} with activity). The Audit log page charts them "
                   "over time, by actor, action or record.")

st.subheader("Records by type")
by_type = metrics["records_by_type"]
st.dataframe(pd.DataFrame([by_type]), hide_index=True, width="stretch",
             column_config={t: st.column_config.NumberColumn(t, format="localized") for t in by_type})
