"""Audit log: every entry across the store, filtered and paged in SQL; timelines; chain verification."""

from __future__ import annotations

import json
from datetime import datetime

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from console import keys
from console.components.clearance import key_of
from console.components.audit_table import action_color, filtered_csv, frame, link_column, record_link, shown
from console.components.chart_safety import plot_text, tidy
from console.components.colours import FAINT, MARKER_RING
from console.components.page import page_preamble
from console.components.record_picker import ids_from_url
from console.components.safe import clean, md
from console.components.time_picker import UTC, day_picker
from console.components.words import action_word, plural
from membrane_engine import ACCESS_LOG_LEVEL_ENV, AuditAction, access_log_level
from membrane_engine.errors import MembraneError

K = keys.AUDIT
ANY = "(any)"
ACTIONS = [a.value for a in AuditAction]
# Actions in words, in the order the timeline lists them (a retract is a `delete` entry whose
# record stays; pins, unpins and restores are `revise` entries).
WORDS = ["create", "reinforce", "penalize", "revise", "pin", "unpin", "restore version", "fork", "merge", "retract",
         "delete", "restore"]
VERIFY_KEY = K("verification")

page = page_preamble(K, "Audit log",
                     "Every audit entry in the store, newest first. Entries are append-only, hash-chained per record "
                     "and in one store-wide sequence, and each binds a digest of its record's stored content. "
                     "Verification walks every chain and reports edited, deleted, reordered or truncated history, "
                     "records changed or moved outside the engine and, against a checkpoint you kept, a store rolled "
                     "back or cut short.")
view = page.view
clearance = page.clearance
st.caption("Entries of records beyond your clearance are left out; of records you see redacted, the actor, "
           "rationale and details are withheld.")


# Every audit entry comes with a write to its record, so the store's change counter
# (``view.state()``) keys these caches with the clearance (a write anywhere shows at the next run).


@st.cache_data(show_spinner=False, max_entries=16)
def facets(_view, store: tuple, cleared: tuple) -> list[str]:
    """Actors for the filter: a GROUP BY over the entries of records the clearance sees in full
    (who wrote an entry is withheld on a record seen redacted)."""
    return _view.audit_actors()


@st.cache_data(show_spinner=False, max_entries=64)
def entries(_view, store: tuple, cleared: tuple, filters: tuple, limit: int, offset: int) -> tuple[int, list]:
    """One page of matching entries and how many match, through the view."""
    return _view.audit_query(**dict(filters), limit=limit, offset=offset)


@st.cache_data(show_spinner=False, max_entries=64)
def activity(_view, store: tuple, cleared: tuple, bucket: int, filters: tuple) -> list[tuple[float, str, int]]:
    """Entries per bucket and action, of the records the clearance sees (a GROUP BY over every
    matching entry: seconds on a large store)."""
    return _view.audit_activity(bucket_seconds=bucket, **dict(filters))



# ----------------------------------------------------------------------------- verification


def problem_rows(problems: list) -> pd.DataFrame:
    """Problems as an operator reads them: which record (or place in the store-wide sequence),
    what kind of problem, what that means, and the engine's own account."""
    def where(p) -> str:
        if p.record_id is None:
            return "whole store" if p.store_position is None else f"store-wide position {p.store_position:,}"
        subject = "the store's own log" if p.record_id == "" else f"record {clean(p.record_id, 200)}"
        return subject if p.position is None else f"{subject}, entry {p.position}"

    def said(p) -> str:
        if p.record_id is None and "record " in p.problem:  # it may name a record beyond the clearance
            return p.meaning + " (`membrane-console audit verify` names the records)"
        return clean(p.problem, 1000)

    return pd.DataFrame([{"where": where(p), "problem": said(p), "kind": p.kind, "what it means": p.meaning,
                          "record_id": clean(p.record_id or "", 200)} for p in problems],
                        columns=["where", "problem", "kind", "what it means", "record_id"])


def run_verification(checkpoint: dict | None) -> None:
    with st.spinner("Walking every chain…"):
        try:
            problems = view.verify_audit(checkpoint=checkpoint)
            st.session_state[VERIFY_KEY] = (datetime.now(UTC), problems, None, checkpoint)
        except MembraneError as exc:
            st.session_state[VERIFY_KEY] = (datetime.now(UTC), None, str(exc), checkpoint)


# The button as wide as its label (in a fifth of the page it read "Verify the c…" at 1024 px).
verify_row = st.container(horizontal=True, vertical_alignment="center", gap="medium")
v1, v2 = verify_row.container(width="content"), verify_row.container()
if v1.button("Verify the chains", type="primary", key=K("verify")):
    run_verification(None)
with st.expander("Checkpoints: prove later that nothing was rolled back or cut off", expanded=False):
    st.markdown("A checkpoint records where the store-wide audit sequence stands now (its position and head hash, "
                "signed when `MEMBRANE_AUDIT_KEY` is set). Keep it **away from the database** (another machine, a "
                "ticket, a mail). Verifying against it later reports a store rolled back to an older copy, "
                "truncated, or rewritten since. The command line does the same: `membrane-console audit "
                "checkpoint` and `membrane-console audit verify --checkpoint FILE`.")
    c1, c2 = st.columns(2)
    c1.download_button("Download a checkpoint of the audit log now", key=K("checkpoint_download"),
                       data=lambda: json.dumps(view.audit_checkpoint(), indent=2),
                       file_name=f"membrane_audit_checkpoint_{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json",
                       mime="application/json", on_click="ignore")
    uploaded = c2.file_uploader("Verify against a checkpoint file", type=["json"], key=K("checkpoint_upload"))
    if uploaded is not None and c2.button("Verify against this checkpoint", key=K("verify_checkpoint")):
        try:
            checkpoint = json.loads(uploaded.getvalue().decode("utf-8-sig"))
        except (UnicodeDecodeError, ValueError) as exc:
            st.session_state[VERIFY_KEY] = (datetime.now(UTC), None,
                                            f"{uploaded.name} is not a checkpoint (not JSON: {exc})", None)
        else:
            run_verification(checkpoint)
verification = st.session_state.get(VERIFY_KEY)
with v2:
    if verification is None:
        st.caption("Not verified in this session yet.")
    else:
        when, problems, failure, against = verification
        of = (f" against the checkpoint of {md(str(against.get('taken_at')), 40)}"
              if isinstance(against, dict) else "")
        if failure is not None:
            st.error(f"Verification could not run: {md(failure, 500)}")
        elif not problems:
            st.success(f"Audit chains intact{of}: no problem found (checked {when:%Y-%m-%d %H:%M:%S} UTC).",
                       icon=":material/verified:")
        else:
            st.error(f"{plural(len(problems), 'problem')} found in the audit chains{of} "
                     f"(checked {when:%Y-%m-%d %H:%M:%S} UTC).", icon=":material/report:")
if verification is not None and verification[1]:
    found = verification[1]
    # Every problem is counted above; the records named are those the clearance sees. Problems of
    # the store-wide sequence are listed by place and meaning (their own text may name a record).
    named = view.labels(sorted({p.record_id for p in found if p.record_id}))  # the records the clearance sees
    listed = [p for p in found if not p.record_id or p.record_id in named]
    if len(listed) < len(found):
        st.caption(f"{len(found) - len(listed):,} problem(s) concern records beyond your clearance "
                   "(or no longer in the store): counted, not listed.")
    counts: dict[str, int] = {}
    for p in listed:
        counts[p.kind] = counts.get(p.kind, 0) + 1
    if counts:
        st.markdown("What was found:\n" + "\n".join(
            f"- **{kind}** ({n}): {md(next(p for p in listed if p.kind == kind).meaning, 300)}."
            for kind, n in counts.items()))
    st.dataframe(problem_rows(listed), hide_index=True, key=K("problems"),
                 column_config={"where": st.column_config.TextColumn(width="medium"),
                                "problem": st.column_config.TextColumn(width="large")})

# ----------------------------------------------------------------------------- filters

url_ids = ids_from_url()
if K("record") not in st.session_state and url_ids:
    st.session_state[K("record")] = url_ids[0]
store = view.state()
actors = facets(view, store, key_of(clearance))
st.subheader("Filter")
# Filters of fixed widths in a row that wraps: five columns cut the dates and choices at 1024 px.
filter_row = st.container(horizontal=True, wrap=True, gap="small")
f1, f2, f3 = filter_row.container(width=180), filter_row.container(width=180), filter_row.container(width=210)
f4, f5 = filter_row.container(width=150), filter_row.container(width=150)  # one row at 1400 px, two at 1024
actor = f1.selectbox("Actor", [ANY] + actors, key=K("actor"), format_func=lambda a: clean(a, 80))
action = f2.selectbox("Action", [ANY] + ACTIONS, key=K("action"),
                      format_func=lambda a: {"delete": "delete or retract", "decay": "penalize (stored as decay)",
                                             "revise": "revise (pin, restore, …)"}.get(a, a),
                      help="The action as stored: a retract is a delete entry whose record stays")
record_id = f3.text_input("Record id", key=K("record"), help="Exact id; `?id=` in the URL fills it").strip()
with f4:
    since = day_picker(K("since"), "Since")
with f5:
    until = day_picker(K("until"), "Until", until=True)
filters = {
    "actor": None if actor == ANY else actor,
    "action": None if action == ANY else action,
    "record_id": record_id or None,
    "since": since,
    "until": until,
}
if filters["since"] and filters["until"] and filters["since"] > filters["until"]:
    st.warning("“Since” is after “Until”: no entry can match.")

p1, p2, p3 = st.columns([2, 2, 6])
page_size = p1.selectbox("Rows per page", [25, 50, 100, 250], index=1, key=K("page_size"))
# The page asked for first, and the count with it: a second count only when the filter now
# matches fewer pages than the page asked for (a count over millions of entries is most of a run).
wanted = max(1, int(st.session_state.get(K("page"), 1) or 1))
total, rows = entries(view, store, key_of(clearance), tuple(filters.items()), page_size, (wanted - 1) * page_size)
pages = max(1, -(-total // page_size))
if wanted > pages:
    st.session_state[K("page")] = wanted = pages
    total, rows = entries(view, store, key_of(clearance), tuple(filters.items()), page_size,
                          (wanted - 1) * page_size)
p2.number_input(f"Page (of {pages:,})", min_value=1, max_value=pages, step=1, key=K("page"))
active = [f"{k}={md(v, 60) if not isinstance(v, datetime) else v.strftime('%Y-%m-%d %H:%M')}"
          for k, v in filters.items() if v]
with p3:
    st.metric("Matching entries", f"{total:,}", help="; ".join(active) if active else "no filter")

table = frame(rows, view.labels(list({r.record_id for r in rows})), view)
TABLE_COLUMNS = {
    "timestamp": st.column_config.DatetimeColumn("time (UTC)", format="YYYY-MM-DD HH:mm:ss", width=150),
    "record": st.column_config.TextColumn("record", width=220, help="What the record says (archived: blank)"),
    "action": st.column_config.TextColumn("action", width=80),
    "record_id": link_column(),
    "before": st.column_config.TextColumn("before", width="medium"),
    "after": st.column_config.TextColumn("after", width="medium"),
    "actor": st.column_config.TextColumn("actor", width=170),  # "operator:…" names read whole
    "rationale": st.column_config.TextColumn(width="large"),
}
# Who and why before the values changed: what an operator reads first, without scrolling.
ORDER = ["timestamp", "record", "action", "actor", "rationale", "before", "after", "record_id", "position", "seq"]
st.dataframe(shown(table), hide_index=True, key=K("table"), column_config=TABLE_COLUMNS, column_order=ORDER)
st.download_button(
    f"Download the {total:,} matching entries as CSV",
    data=lambda: filtered_csv(view, filters, view.labels),
    file_name="membrane_audit.csv", mime="text/csv", key=K("csv"), disabled=total == 0, on_click="ignore",
    help="Every matching entry, not only this page. Cells that a spreadsheet would run as a formula get a "
         "leading apostrophe")

# ----------------------------------------------------------------------------- activity

st.subheader("Activity")
if total:
    # The span of the entries the clearance sees, from their daily counts (the log's own span
    # would date entries beyond it), unless the filter bounds it.
    daily = activity(view, store, key_of(clearance), 86400, tuple(filters.items()))
    seen_span = (min(b for b, _, _ in daily), max(b for b, _, _ in daily) + 86400) if daily else (0, 0)
    lo = filters["since"].timestamp() if filters["since"] else seen_span[0]
    hi = filters["until"].timestamp() if filters["until"] else seen_span[1]
    width = max(hi - lo, 1)
    bucket = 3600 if width <= 3 * 86400 else 86400 if width <= 180 * 86400 else 7 * 86400
    counts = daily if bucket == 86400 else activity(view, store, key_of(clearance), bucket, tuple(filters.items()))
    act = pd.DataFrame(counts, columns=["bucket", "action", "count"])
    act["action"] = act["action"].map(action_word)  # a penalize by its name, not Membrane's stored `decay`
    act["bucket"] = pd.to_datetime(act["bucket"].round().astype("int64"), unit="s", utc=True)
    fig = go.Figure()
    for name in [w for w in WORDS if w in set(act["action"])] + sorted(set(act["action"]) - set(WORDS)):
        part = act[act["action"] == name]
        if len(part):
            fig.add_trace(go.Bar(x=part["bucket"], y=part["count"], name=name, marker_color=action_color(name),
                                 width=bucket * 1000 * 0.85, offset=0,
                                 hovertemplate="%{x|%Y-%m-%d %H:%M}<br>" + name + ": %{y}<extra></extra>"))
    unit = {3600: "hour", 86400: "day", 7 * 86400: "week"}[bucket]
    fig.update_layout(barmode="stack", xaxis_title="time (UTC)", yaxis_title="entries")
    st.caption(f"Matching entries per {unit}, by action (a retract apart from the deletes it is stored as): counts "
               "over the entries of the records your clearance sees.")
    st.plotly_chart(tidy(fig, height=320), key=K("activity"))
else:
    st.caption("No entry matches the filter.")

# ----------------------------------------------------------------------------- per-record timeline

st.subheader("Record timeline")
candidates = list(dict.fromkeys(([record_id] if record_id else []) + list(table["record_id"])))
if not candidates:
    st.caption("Filter by a record id, or find entries above, to draw a record's history.")
else:
    named = view.labels(candidates)
    chosen = st.selectbox("Record", candidates, key=K("timeline_record"),
                          format_func=lambda r: f"{clean(named[r], 80)} ({clean(r, 40)})" if r in named else clean(r, 120),
                          help="The record filter, or any record on this page")
    try:
        history = view.audit_rows(chosen)
    except MembraneError:  # not a record the clearance sees: as if it had no entries
        history = []
    if not history:
        st.info("This id has no audit entries (it may not exist).")
    else:
        hist = frame(history, named, view)
        fig = go.Figure()
        fig.add_trace(go.Scatter(x=hist["timestamp"], y=hist["action"], mode="lines", showlegend=False,
                                 line=dict(color=FAINT, width=1), hoverinfo="skip"))
        kinds = [k for k in WORDS if k in set(hist["action"])] + sorted(set(hist["action"]) - set(WORDS))
        for name in kinds:
            part = hist[hist["action"] == name]
            fig.add_trace(go.Scatter(
                x=part["timestamp"], y=part["action"], mode="markers", name=name,
                marker=dict(size=13, color=action_color(name), line=dict(color=MARKER_RING, width=1)),
                customdata=[[int(p), plot_text(a, 40), plot_text(r, 100), plot_text(b or "—", 120), plot_text(f or "—", 120)]
                            for p, a, r, b, f in zip(part["position"], part["actor"], part["rationale"],
                                                     part["before"], part["after"])],
                hovertemplate="#%{customdata[0]} %{x|%Y-%m-%d %H:%M:%S} UTC<br>by %{customdata[1]}"
                              "<br>%{customdata[2]}<br>before: %{customdata[3]}<br>after: %{customdata[4]}"
                              "<extra>" + name + "</extra>"))
        fig.update_layout(xaxis_title="time (UTC)",
                          yaxis=dict(title="action", categoryorder="array", categoryarray=kinds))
        first, last_at = hist["timestamp"].min(), hist["timestamp"].max()
        if (last_at - first).total_seconds() < 3600:  # one entry (or a burst): give the axis a day
            fig.update_xaxes(range=[first - pd.Timedelta(hours=12), last_at + pd.Timedelta(hours=12)])
        st.caption(f"{plural(len(hist), 'entry')} of this record, oldest first in the table; "
                   f"[open it in the explorer]({record_link(chosen)}).")
        st.plotly_chart(tidy(fig, height=300), key=K("timeline"))
        st.dataframe(shown(hist.sort_values("position")), hide_index=True, key=K("timeline_table"),
                     column_config=TABLE_COLUMNS, column_order=["position"] + [c for c in ORDER if c not in ("position", "record")])

# ----------------------------------------------------------------------------- who looked

st.subheader("Who looked")
st.caption(f"Each time an operator opened a record of sensitivity {access_log_level().value} or above in full "
           f"(set {ACCESS_LOG_LEVEL_ENV} to change the level). Append-only; entries of records beyond your "
           "clearance are left out.")
looked_total, looked = view.access_log(record_id=record_id or None, limit=200)
if not looked_total:
    st.caption("Nobody has opened such a record" + (" with this id." if record_id else "."))
else:
    looked_names = view.labels(list({a.record_id for a in looked}))
    st.dataframe(pd.DataFrame([{"time (UTC)": a.at, "operator": clean(a.actor, 200),
                                "record": clean(looked_names.get(a.record_id, ""), 120),
                                "record_id": record_link(a.record_id), "sensitivity": a.sensitivity} for a in looked]),
                 hide_index=True, key=K("who_looked"),
                 column_config={"time (UTC)": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm:ss"),
                                "record_id": link_column()})
    if looked_total > len(looked):
        st.caption(f"The newest {len(looked):,} of {looked_total:,} entries" + (" of this record." if record_id else
                                                                               "; filter by a record id above."))
