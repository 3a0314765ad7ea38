"""Salience decay: S(t) of chosen records and hypothetical profiles, thresholds, prune preview."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from console import keys
from console.components.audit_table import action_color
from console.components.chart_safety import plot_text, short_id, tidy
from console.components.colours import INK, MARKER_EDGE, MUTED, PALETTE, THRESHOLD
from console.components.record_detail import UNKNOWN_LABEL, UNKNOWN_NOTE, unknown_band, unknown_flags
from console.components.page import page_preamble
from console.components.record_picker import record_picker
from console.components.safe import clean, md
from console.components.time_picker import UTC, instant_picker
from console.components.when import human_duration, relative
from membrane_engine import PRUNE_THRESHOLD, columns_of, salience_at, time_below, to_epoch, validate_record
from membrane_engine.errors import MembraneError, ValidationError

K = keys.DECAY
GRID_POINTS = 400
PAGE_SIZE = 50
HORIZONS = {
    "6 hours": 6 * 3600, "1 day": 86400, "3 days": 3 * 86400, "1 week": 7 * 86400, "2 weeks": 14 * 86400,
    "30 days": 30 * 86400, "90 days": 90 * 86400, "180 days": 180 * 86400, "1 year": 365 * 86400,
    "2 years": 730 * 86400,
}
HALF_LIFE_UNITS = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400}
PROFILES_KEY = K("profiles")
# The changes that re-anchor a record's salience, each with its marker symbol.
RE_ANCHORS = {"reinforce": "triangle-up", "penalize": "triangle-down", "retract": "x", "pin": "square",
              "unpin": "square-open", "restore version": "star", "restore": "diamond"}


page = page_preamble(K, "Salience decay",
                     "S(t) as the engine computes it (SPEC 2): stored records as they really were, from the anchors of "
                     "their audit trails; hypothetical profiles from the window start. Read when each one fades below "
                     "a threshold.")
view = page.view
now = view.now()

# ----------------------------------------------------------------------------- what to plot

left, right = st.columns([3, 2], gap="large")
with left:
    st.subheader("Records")
    # A decay profile is part of what a redacted view withholds: only records seen in full.
    chosen = record_picker(view, K.prefix, "Records to plot", full_only=True, max_selections=12,
                           help="Up to 12 records; `?id=` in the URL preselects")

with right:
    st.subheader("Hypothetical profiles")
    profiles: list[dict] = st.session_state.setdefault(PROFILES_KEY, [])
    with st.expander("Add a profile", expanded=not profiles and not chosen):
        with st.form(K("profile_form"), clear_on_submit=False, border=False):
            name = st.text_input("Name", value=f"profile {len(profiles) + 1}", key=K("p_name"))
            c1, c2 = st.columns(2)
            curve = c1.selectbox("Curve", ["exponential", "linear", "custom"], key=K("p_curve"))
            start_salience = c2.number_input("Start salience", min_value=0.0, value=1.0, step=0.05,
                                             key=K("p_start"))
            c3, c4 = st.columns(2)
            half_value = c3.number_input("Half-life", min_value=0.0, value=1.0, step=1.0, key=K("p_half"))
            half_unit = c4.selectbox("unit", list(HALF_LIFE_UNITS), index=3, key=K("p_unit"))
            c5, c6 = st.columns(2)
            min_salience = c5.number_input("Min salience", min_value=0.0, value=0.0, step=0.01, format="%.3f",
                                           key=K("p_min"))
            max_age_days = c6.number_input("Max age (days, 0 = none)", min_value=0.0, value=0.0, step=1.0,
                                           key=K("p_maxage"))
            pinned = st.checkbox("Pinned", key=K("p_pinned"))
            points_text = st.text_input(
                "Custom points (JSON, seconds → factor)", key=K("p_points"),
                placeholder="[[0, 1], [86400, 0.6], [604800, 0.1]]",
                help="Only for the custom curve; without points a custom profile decays exponentially")
            add = st.form_submit_button("Add profile")
        if add:
            decay = {"curve": curve, "half_life_seconds": int(round(half_value * HALF_LIFE_UNITS[half_unit])),
                     "min_salience": float(min_salience), "max_age_seconds": int(round(max_age_days * 86400)),
                     "reinforcement_gain": 0.1}
            problem = None
            if curve == "custom" and points_text.strip():
                try:
                    decay["points"] = json.loads(points_text)
                except ValueError as exc:
                    problem = f"custom points are not valid JSON: {exc}"
            candidate = {"name": name.strip() or f"profile {len(profiles) + 1}", "decay": decay,
                         "pinned": bool(pinned), "start_salience": float(start_salience)}
            if problem is None:
                try:  # the engine's own validation names the bad field
                    validate_record({"id": "hypothetical", "type": "semantic", "sensitivity": "public",
                                     "salience": candidate["start_salience"],
                                     "lifecycle": {"decay": decay, "pinned": candidate["pinned"]},
                                     "payload": {"kind": "semantic"}})
                except ValidationError as exc:
                    problem = "; ".join(f"{loc}: {msg}" for loc, msg in exc.problems) or str(exc)
            if problem:
                st.error(f"Profile not added: {md(problem, 500)}")
            else:
                profiles.append(candidate)
                st.rerun()
    for k, profile in enumerate(list(profiles)):
        d = profile["decay"]
        row = st.columns([5, 1])
        row[0].text(f"{clean(profile['name'], 60)}: {d['curve']}, half-life {human_duration(d['half_life_seconds'])}, "
                    f"min {d['min_salience']:g}, start {profile['start_salience']:g}"
                    + (", pinned" if profile["pinned"] else "")
                    + (f", max age {human_duration(d['max_age_seconds'])}" if d["max_age_seconds"] else ""))
        if row[1].button("✕", key=K("drop", k), help="Remove this profile"):
            profiles.pop(k)
            st.rerun()

st.divider()
w1, w2, w3 = st.columns([3, 2, 2])
with w1:
    start = instant_picker(K("start"), "Window start", default=now - timedelta(days=7), now_if_empty=False,
                           help="Hypothetical profiles start here; stored records follow their own anchors")
horizon_label = w2.select_slider("Horizon", list(HORIZONS), value="30 days", key=K("horizon"))
threshold = w3.number_input("Drop-below threshold", min_value=0.0, max_value=10.0, value=0.1, step=0.01,
                            format="%.3f", key=K("threshold"),
                            help="The table below says when each curve first drops under this value")
log_scale = w3.toggle("Log scale", key=K("log"))
horizon = HORIZONS[horizon_label]
end = start + timedelta(seconds=horizon)

# ----------------------------------------------------------------------------- the curves

# Stored records: one vectorized call over the grid. Hypothetical profiles: the same function
# (salience.salience_at) over their in-memory decay columns, anchored at the window start.
grid = [start + timedelta(seconds=horizon * k / (GRID_POINTS - 1)) for k in range(GRID_POINTS)]
grid_epoch = np.array([to_epoch(t) for t in grid])

series: list[dict] = []
if chosen:
    # Stored records: their true past from the audit trail's anchors (each reinforce, penalize,
    # retract, pin, unpin or restored version re-anchors), through the operator's clearance.
    names = view.labels(chosen, limit=40)
    for rid in chosen:
        try:
            record = view.get(rid)
            if record.redacted:  # reclassified above the clearance since it was picked
                continue
            curve = view.past_curve(rid)
            versions = view.history(rid)
        except MembraneError:
            st.warning(f"A chosen record is no longer in the store (it may have been pruned or deleted): {md(rid, 80)}")
            continue
        past = curve(grid)
        name = plot_text(names[rid], 80) if rid in names else short_id(rid)
        if any(s["label"] == name for s in series):
            name = f"{name} ({short_id(rid)})"
        series.append({"key": rid, "label": name, "full": rid, "name": names.get(rid, rid), "curve": curve, "record": record,
                       "values": np.array([np.nan if v is None else v for v in past], dtype=float),
                       "unknown": unknown_flags(curve, grid),
                       "versions": versions, "anchor": (record.salience, to_epoch(start)),
                       "min": record.lifecycle.decay.min_salience, "stored": True})

hypotheticals = []
for k, profile in enumerate(profiles):
    rec = validate_record({
        "id": f"hypothetical-{k}", "type": "semantic", "sensitivity": "public",
        "salience": profile["start_salience"], "created_at": start, "updated_at": start,
        "lifecycle": {"decay": profile["decay"], "pinned": profile["pinned"]},
        "payload": {"kind": "semantic"},
    })
    hypotheticals.append(rec)
if hypotheticals:
    anchors = [(p["start_salience"], to_epoch(start)) for p in profiles]
    values = salience_at(columns_of(hypotheticals, anchors), grid_epoch[:, None])
    for k, (rec, profile) in enumerate(zip(hypotheticals, profiles)):
        series.append({"key": rec.id, "label": plot_text(profile["name"], 40) + " (hypothetical)",
                       "full": profile["name"], "values": values[:, k], "record": rec, "anchor": anchors[k],
                       "min": profile["decay"]["min_salience"], "stored": False})

if not series:
    st.info("Pick one or more records above, or add a hypothetical profile, to draw their salience over time.")
else:
    fig = go.Figure()
    times = pd.to_datetime((grid_epoch * 1000).round().astype("int64"), unit="ms", utc=True)
    ymax = max(float(np.nanmax(s["values"])) if np.isfinite(s["values"]).any() else 0.0 for s in series)
    marks: dict[str, dict[str, list]] = {}
    for k, s in enumerate(series):
        color = PALETTE[k % len(PALETTE)]
        values = s["values"].astype(float).copy()
        if not s["stored"]:  # a hypothetical profile starts at the window start
            values[grid_epoch < s["anchor"][1]] = np.nan
        fig.add_trace(go.Scatter(
            x=times, y=values, mode="lines", name=s["label"], line=dict(color=color, width=2,
                                                                        dash="solid" if s["stored"] else "dash"),
            # No <extra> part: Plotly shows the trace name there by itself, so the label never
            # goes through the hover template's %{…} substitution; the id is the trace's meta.
            meta=[f"id {plot_text(s['key'], 80)}" if s["stored"] else "hypothetical"],
            hovertemplate="%{x|%Y-%m-%d %H:%M} UTC<br>S = %{y:.4f}<br>%{meta[0]}"))
        if s["stored"] and s["unknown"].any():  # not a flat line: a band, named, in the record's colour
            low, high = ((PRUNE_THRESHOLD / 10, max(ymax, threshold, 1e-3) * 1.2) if log_scale
                         else (0.0, max(ymax, threshold, 0.05) * 1.08))
            fig.add_trace(unknown_band(list(times), s["unknown"], low, high, name=f"{s['label']}: {UNKNOWN_LABEL}",
                                       color=color))
        if s["stored"]:
            for v in s["versions"]:
                t = to_epoch(v.timestamp)
                if v.kind not in RE_ANCHORS or v.withheld or not grid_epoch[0] <= t <= grid_epoch[-1]:
                    continue
                after = s["curve"]([v.timestamp])[0]
                if after is None:
                    continue
                change = v.changes.get("salience")
                moved = f"S {change[0]:.4f} → {change[1]:.4f}" if change and all(
                    isinstance(x, (int, float)) for x in change) else f"S {after:.4f}"
                mark = marks.setdefault(v.kind, {"x": [], "y": [], "text": []})
                mark["x"].append(v.timestamp)
                mark["y"].append(after)
                mark["text"].append(f"<b>{v.kind}</b> of {s['label']}<br>{moved}<br>by {plot_text(v.actor, 40)}: "
                                    f"{plot_text(v.rationale, 80)}<br>id {plot_text(s['key'], 80)}")
    # One marker trace per action, in the action's colour, named in the legend and the hover.
    for kind in [k for k in RE_ANCHORS if k in marks]:
        mark = marks[kind]
        fig.add_trace(go.Scatter(
            x=mark["x"], y=mark["y"], mode="markers", name=kind, showlegend=True,
            marker=dict(symbol=RE_ANCHORS[kind], size=12, color=action_color(kind), line=dict(color=MARKER_EDGE, width=1)),
            text=mark["text"], hovertemplate="%{x|%Y-%m-%d %H:%M} UTC<br>%{text}<extra></extra>"))
    # Thresholds as legend entries (annotations on a log axis misplace their text).
    x_span = [times[0], times[-1]]
    for value in sorted({float(s["min"]) for s in series if s["min"] > 0}):
        fig.add_trace(go.Scatter(x=x_span, y=[value, value], mode="lines", name=f"min salience {value:g}",
                                 line=dict(color=MUTED, dash="dot", width=1), hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=x_span, y=[PRUNE_THRESHOLD] * 2, mode="lines", name=f"prune threshold {PRUNE_THRESHOLD:g}",
                             line=dict(color=INK, dash="dash", width=1), hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=x_span, y=[threshold] * 2, mode="lines", name=f"threshold {threshold:g}",
                             line=dict(color=THRESHOLD, dash="longdash", width=1), hoverinfo="skip"))
    if start <= now <= end:
        # Named in the legend, not by an annotation (which would sit under the legend's last row).
        fig.add_vline(x=now.timestamp() * 1000, line=dict(color=INK, width=1, dash="dot"))
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name="now", hoverinfo="skip",
                                 line=dict(color=INK, width=1, dash="dot")))
    fig.update_layout(xaxis_title="time (UTC)", yaxis_title="salience S(t)")
    if log_scale:
        fig.update_yaxes(type="log", range=[np.log10(PRUNE_THRESHOLD / 10), np.log10(max(ymax, threshold, 1e-3) * 1.2)])
    else:
        fig.update_yaxes(range=[0, max(ymax, threshold, 0.05) * 1.08])
    st.markdown(f"**Salience from {start:%Y-%m-%d %H:%M} UTC over {horizon_label}**")
    st.plotly_chart(tidy(fig, height=460), key=K("chart"))
    st.caption("Solid lines: stored records as they really were, from the anchors of their audit trail (each "
               "reinforce, penalize, retract, pin, unpin and restored version re-anchors the curve; the markers "
               "show them, coloured by action). A gap: the record did not exist yet, sat in the archive, or its "
               "labels then were beyond your clearance. Dashed lines: hypothetical profiles, anchored at the "
               "window start."
               + (" " + UNKNOWN_NOTE if any(s["stored"] and s["unknown"].any() for s in series) else ""))

    # ------------------------------------------------------------------------- time below threshold
    st.subheader(f"When does each curve drop below {threshold:g}?")
    rows = []
    for s in series:
        if s["stored"]:
            below = view.time_below(s["key"], threshold, start, end)
            first = to_epoch(below) if below is not None else None
        else:
            first = time_below(s["record"], threshold, start, horizon, anchor=s["anchor"])
        s_start, s_end = (None if np.isnan(x) else float(x) for x in (s["values"][0], s["values"][-1]))
        if first is None and s["stored"] and s["unknown"].all():
            when, status, until_then = None, "unknown: imported history without values", ""
        elif first is None:
            when, status, until_then = None, f"stays at or above within {horizon_label}", ""
        else:
            when = datetime.fromtimestamp(first, UTC)
            status = "already below at the window start" if first <= to_epoch(start) else "drops below"
            until_then = relative(first - now.timestamp())
        if s["stored"] and s["unknown"].any() and not s["unknown"].all():
            status += " (where known: part of the window is unknown)"
        # The verdict first, where the eye is; an empty time, not "None", when it never drops below.
        rows.append({"curve": clean(s["name"], 80) if s["stored"] else clean(s["full"], 80),
                     "status": status, "below at (UTC)": pd.Timestamp(when) if when is not None else pd.NaT,
                     "relative to now": until_then, "S(start)": s_start, "S(end)": s_end,
                     "kind": "record" if s["stored"] else "hypothetical",
                     "id": clean(s["key"], 80) if s["stored"] else ""})
    st.dataframe(pd.DataFrame(rows), hide_index=True, key=K("below_table"),
                 column_config={"S(start)": st.column_config.NumberColumn(format="%.4f"),
                                "S(end)": st.column_config.NumberColumn(format="%.4f"),
                                "below at (UTC)": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm")})

# ----------------------------------------------------------------------------- prune preview

st.divider()
st.subheader("Prune preview")
st.caption(f"Which records a prune would archive at a given instant: not pinned, deletion policy auto_prune, "
           f"S(as of) < {PRUNE_THRESHOLD:g}. The preview writes nothing.")
allowed, why_not = view.may("prune")
if not allowed:
    st.info(f"The prune preview needs the role that may prune ({md(why_not, 200)}); the Review page lists the "
            "records about to be pruned.", icon=":material/lock:")
else:
    p1, p2 = st.columns([3, 2], vertical_alignment="bottom")
    with p1:
        prune_at = instant_picker(K("prune_at"), "Prune as of", default=now + timedelta(days=30), now_if_empty=False)
    if p2.button("Preview prune", type="primary", key=K("prune_go")):
        try:
            ids = view.prune("decay page: prune preview", as_of=prune_at, dry_run=True)  # of records seen in full
            st.session_state[K("prune_result")] = (prune_at, list(ids))
            st.session_state[K("prune_page")] = 1
        except MembraneError as exc:
            st.error(f"The engine refused the preview: {md(exc, 500)}")
    result = st.session_state.get(K("prune_result"))
    if result is not None:
        when, ids = result
        if when != prune_at:
            st.caption("The preview below is for an earlier instant; press the button to refresh it.")
        st.metric(f"Would be pruned at {when:%Y-%m-%d %H:%M} UTC", f"{len(ids):,}")
        st.caption("Of the records your clearance sees in full: a prune you run archives no other.")
        if ids:
            pages = max(1, -(-len(ids) // PAGE_SIZE))
            page_no = st.number_input(f"Page (of {pages})", min_value=1, max_value=pages, step=1, key=K("prune_page"))
            chunk = ids[(page_no - 1) * PAGE_SIZE: page_no * PAGE_SIZE]
            info = view.briefs(chunk)
            live = [rid for rid in chunk if rid in info]
            try:
                at_when = view.salience_curves(live, [when]) if live else {}
            except MembraneError:  # one was reclassified or archived since the preview
                at_when = {}
            named = view.labels(chunk)
            st.dataframe(pd.DataFrame([{
                "record": clean(named.get(rid, ""), 120), "id": clean(rid, 200), "type": info[rid].type if rid in info else "(gone)",
                "scope": clean(info[rid].scope, 200) if rid in info else "",
                "S(as of)": at_when[rid][0] if rid in at_when else None,
            } for rid in chunk]), hide_index=True, key=K("prune_table"),
                column_config={"S(as of)": st.column_config.NumberColumn(format="%.2e")})
