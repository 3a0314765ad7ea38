"""One record in full, for operators: metadata, payload, relations, provenance, lifecycle, audit,
and its history (versions, the record at any instant, its true salience curve, "restore this
version").

Relations are drawn as buttons that call ``on_open(target_id)`` (the explorer sets ``?id=``).
Everything of the history goes through the signed-in operator's view (``Membrane.as_operator``:
a version whose labels then were beyond the clearance shows no content).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from membrane_engine import (MAX_RATIONALE_LENGTH, MemoryRecord, MemoryType, OperatorView, format_time,
                             kind_of, plan_exposures)
from membrane_engine.errors import MembraneError

from .audit_table import action_color
from .chart_safety import plot_text, tidy
from .colours import INK, MARKER_EDGE, UNKNOWN, UNKNOWN_FILL
from .payload import as_text, render_payload, table
from .record_card import revision_notice, verdict_badge
from .safe import clean, md
from .time_picker import instant_picker
from .words import plural

MAX_LINKS = 40


def human_seconds(seconds: float) -> str:
    if not seconds:
        return "0"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            value = seconds / size
            return f"{value:,.1f} {unit}".replace(".0 ", " ")
    return f"{seconds:g} s"


def render_metadata(record: MemoryRecord) -> None:
    cols = st.columns(5)
    cols[0].metric("Type", record.type.value)
    cols[1].metric("Sensitivity", record.sensitivity.value)
    cols[2].metric("Salience now", f"{record.salience:.3f}")
    cols[3].metric("Confidence", f"{record.confidence:.2f}")
    cols[4].metric("Revision", record.revision_status or "—")
    st.markdown(f"**Scope:** {md(record.scope) if record.scope else '(unscoped)'} · "
                f"**Tags:** {', '.join(md(t, 80) for t in record.tags) or '—'}")
    st.markdown(f"**Created:** {format_time(record.created_at)} · **Updated:** "
                f"{format_time(record.updated_at) if record.updated_at else '—'}")
    if record.redacted:
        verdict_badge("redacted")
    revision_notice(record)


def render_relations(record: MemoryRecord, on_open: Callable[[str], None] | None = None, key: str = "",
                     known: set[str] | None = None, referenced_by: list[str] | None = None) -> None:
    rows = [{"predicate": r.predicate, "target_id": r.target_id, "weight": f"{r.weight:.2f}",
             "created_at": r.created_at, "in store": ("yes" if r.target_id in known else "no") if known is not None else ""}
            for r in record.relations]
    st.markdown(f"**Outgoing** ({len(rows)})")
    table(rows, "no relations")
    if on_open is not None:
        targets: dict[str, str] = {}
        for r in record.relations:
            if (known is None or r.target_id in known) and r.target_id not in targets:
                targets[r.target_id] = r.predicate
        _links(list(targets), on_open, f"{key}_out", list(targets.values()))
    if referenced_by is not None:
        st.markdown(f"**Incoming** ({len(referenced_by)}): records whose relations point here")
        if not referenced_by:
            st.text("(none)")
        elif on_open is not None:
            _links(referenced_by, on_open, f"{key}_in")
        else:
            st.text("\n".join(referenced_by))


def _links(ids: list[str], on_open: Callable[[str], None], key: str, predicates: list[str] | None = None) -> None:
    if not ids:
        return
    cols = st.columns(3)
    for k, target in enumerate(ids[:MAX_LINKS]):
        label = f"↗ {md(predicates[k], 30)}: {md(target, 60)}" if predicates else f"↗ {md(target, 60)}"
        cols[k % 3].button(label, key=f"rel_{key}_{k}", on_click=on_open, args=(target,),
                           help="Open this record", width="stretch")
    if len(ids) > MAX_LINKS:
        st.caption(f"{len(ids) - MAX_LINKS:,} more not shown as links.")


def render_provenance(record: MemoryRecord) -> None:
    prov = record.provenance
    st.markdown(f"**Created by:** {md(prov.created_by) if prov.created_by else '—'}")
    table([{"kind": s.kind.value, "ref": s.ref, "hash": s.hash, "created_by": s.created_by, "timestamp": s.timestamp}
           for s in prov.sources], "no sources")


def render_lifecycle(record: MemoryRecord, as_of: datetime | None = None) -> None:
    life = record.lifecycle
    decay = life.decay
    cols = st.columns(3)
    cols[0].metric("Salience (S now)" if as_of is None else "Salience at as-of", f"{record.salience:.4f}",
                   help="S(t) from the anchor (SPEC 2)")
    cols[1].metric("Anchor S_a", f"{life.anchor_salience:.4f}" if life.anchor_salience is not None else "—",
                   help="The salience value at the anchor instant")
    cols[2].metric("Pinned", "yes" if life.pinned else "no")
    rows = [
        {"field": "anchored at", "value": life.anchor_at},
        {"field": "curve", "value": decay.curve.value},
        {"field": "half-life", "value": f"{human_seconds(decay.half_life_seconds)} ({decay.half_life_seconds:,} s)"},
        {"field": "min salience", "value": f"{decay.min_salience:g}"},
        {"field": "max age", "value": human_seconds(decay.max_age_seconds) if decay.max_age_seconds else "none"},
        {"field": "reinforcement gain", "value": f"{decay.reinforcement_gain:g}"},
        {"field": "last reinforced", "value": life.last_reinforced_at if life.last_reinforced_at
         and life.last_reinforced_at.year > 1 else "never"},
        {"field": "deletion policy", "value": life.deletion_policy.value if life.deletion_policy else "none (not auto-pruned)"},
    ]
    if decay.points:
        rows.append({"field": "custom points", "value": as_text(decay.points)})
    table(rows)


def render_audit(record: MemoryRecord) -> None:
    entries = record.audit_log
    st.markdown(f"**Audit trail** ({len(entries)} entries, oldest first)")
    table([{"#": i, "timestamp": e.timestamp, "action": kind_of(e.action, e.rationale, None), "actor": e.actor,
            "rationale": e.rationale} for i, e in enumerate(entries)], "no audit entries")


RE_ANCHORS = {"reinforce": "triangle-up", "penalize": "triangle-down", "retract": "x", "pin": "square",
              "unpin": "square-open", "restore version": "star", "restore": "diamond"}
CURVE_POINTS = 300


def _changes_text(changes: dict, side: int) -> str:
    return "; ".join(f"{name}: {as_text(values[side])}" for name, values in changes.items())


def claimed_word(versions: list) -> str:
    """Who claims a record's ``claimed`` versions: its import, or its creator's own entries."""
    taken = [v for v in versions if v.kind == "create" and not v.claimed]
    return "claimed by the import" if taken and taken[-1].rationale.startswith("imported") else "claimed by its creator"


def version_rows(versions: list) -> pd.DataFrame:
    """A record's versions as rows: when, who, the action in words, what changed before -> after,
    and whether this engine wrote it or the record came with it (``source``)."""
    claimed = claimed_word(versions)
    return pd.DataFrame([{
        "#": v.position, "when (UTC)": v.timestamp, "action": v.kind, "who": clean(v.actor, 120),
        "source": claimed if getattr(v, "claimed", False) else "",
        "before": clean(_changes_text(v.changes, 0), 600) if not v.withheld else "",
        "after": clean(_changes_text(v.changes, 1), 600) if not v.withheld else "",
        "why": clean(v.rationale, 600),
    } for v in versions], columns=["#", "when (UTC)", "action", "who", "source", "before", "after", "why"])


UNKNOWN_LABEL = "unknown (imported history without values)"
UNKNOWN_NOTE = ("A grey dashed band: the salience then is unknown, not flat: the record's imported history "
                "reinforced, penalized, retracted or pinned it without saying from what to what, or it came with "
                "an anchor later than its creation.")


def unknown_flags(curve: Callable, times: list[datetime]) -> np.ndarray:
    """Where ``curve`` (``clearance.past_curve``) is None because its trail tells no value, not
    because the instant is withheld or the record absent."""
    unknown = getattr(curve, "unknown", None)
    return np.array(unknown(times) if unknown is not None and times else [False] * len(times), dtype=bool)


def unknown_band(times: list, flags: np.ndarray, low: float, high: float, name: str = UNKNOWN_LABEL,
                 color: str = UNKNOWN) -> go.Scatter | None:
    """A grey dashed band over each run of unknown instants (None when there is none): drawn
    apart from a gap, which means withheld or absent."""
    xs: list = []
    ys: list = []
    k, n = 0, len(flags)
    while k < n:
        if not flags[k]:
            k += 1
            continue
        j = k
        while j + 1 < n and flags[j + 1]:
            j += 1
        end = times[j + 1] if j + 1 < n else times[j]
        xs += [times[k], times[k], end, end, times[k], None]
        ys += [low, high, high, low, low, None]
        k = j + 1
    if not xs:
        return None
    return go.Scatter(x=xs, y=ys, mode="lines", fill="toself", name=name, fillcolor=UNKNOWN_FILL,
                      line=dict(color=color, dash="dash", width=1), hoverinfo="text", hoveron="fills",
                      text="salience unknown: imported history without values")


def salience_figure(record: MemoryRecord, versions: list, curve: Callable, now: datetime) -> go.Figure:
    """The record's true salience from its creation to now (piecewise: each re-anchoring
    change starts a new piece), a marker per change in its action's colour."""
    start = record.created_at
    span = max((now - start).total_seconds(), 3600.0)
    grid = [start + timedelta(seconds=span * k / (CURVE_POINTS - 1)) for k in range(CURVE_POINTS)]
    # The grid plus each change's instant and the instant before it, so a drop is drawn as one.
    extra = [t for v in versions if not v.withheld and start <= v.timestamp <= now
             for t in (v.timestamp - timedelta(milliseconds=1), v.timestamp)]
    times = sorted(set(grid + extra))
    values = [np.nan if x is None else x for x in curve(times)]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=times, y=values, mode="lines", name="salience", line=dict(color=INK, width=2),
                             hovertemplate="%{x|%Y-%m-%d %H:%M} UTC<br>S = %{y:.4f}<extra></extra>"))
    known = [v for v in values if not np.isnan(v)]
    band = unknown_band(times, unknown_flags(curve, times), 0.0, max(max(known, default=0.0), record.salience, 0.05) * 1.05)
    if band is not None:
        fig.add_trace(band)
    for kind, symbol in RE_ANCHORS.items():
        picked = [v for v in versions if v.kind == kind and not v.withheld and start <= v.timestamp <= now]
        ys = curve([v.timestamp for v in picked]) if picked else []
        picked = [(v, y) for v, y in zip(picked, ys) if y is not None]
        if picked:
            fig.add_trace(go.Scatter(
                x=[v.timestamp for v, _ in picked], y=[y for _, y in picked], mode="markers", name=kind,
                marker=dict(symbol=symbol, size=12, color=action_color(kind), line=dict(color=MARKER_EDGE, width=1)),
                text=[f"<b>{kind}</b> by {plot_text(v.actor, 40)}<br>{plot_text(_changes_text(v.changes, 0), 80)} → "
                      f"{plot_text(_changes_text(v.changes, 1), 80)}" for v, _ in picked],
                hovertemplate="%{x|%Y-%m-%d %H:%M} UTC<br>%{text}<extra></extra>"))
    fig.update_layout(xaxis_title="time (UTC)", yaxis_title="salience S(t)")
    fig.update_yaxes(rangemode="tozero")
    return fig


def render_history(view: OperatorView, record: MemoryRecord, key: str = "") -> None:
    """Versions, the record at a chosen instant, its true salience curve and "restore this
    version" (curators and admins), all through the signed-in operator's clearance."""
    if record.redacted:
        st.info("The history of a record you see redacted is withheld.", icon=":material/lock:")
        return
    try:
        versions = view.history(record.id)
        curve = view.past_curve(record.id)
    except MembraneError as exc:
        st.error(f"The history cannot be read: {md(exc, 300)}")
        return
    if not versions:
        st.text("(no history within your clearance)")
        return
    now = view.now()
    st.markdown(f"**Versions** ({plural(len(versions), 'change')}, oldest first)")
    st.dataframe(version_rows(versions), hide_index=True, key=f"{key}_hist_versions",
                 column_config={"when (UTC)": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm:ss"),
                                "before": st.column_config.TextColumn(width="medium"),
                                "after": st.column_config.TextColumn(width="medium")})
    if any(v.withheld for v in versions):
        st.caption("Changes made while the record's labels were beyond your clearance show no content.")
    if any(getattr(v, "claimed", False) for v in versions):
        st.caption(f"Source “{claimed_word(versions)}”: the change came with the record; this engine did not write "
                   "it, and its time, actor and values are only as good as the file.")

    st.markdown("**Salience over its life** (from the anchors of its audit trail)")
    st.plotly_chart(tidy(salience_figure(record, versions, curve, now), height=280), key=f"{key}_hist_curve")
    if unknown_flags(curve, [record.created_at, now]).any() or any(
            v.kind in RE_ANCHORS and getattr(v, "claimed", False) and "salience" not in v.changes for v in versions):
        st.caption(UNKNOWN_NOTE)

    st.markdown("**The record as it was**")
    options = [v.position for v in versions]
    by_position = {v.position: v for v in versions}
    c1, c2 = st.columns([3, 2])
    chosen = c1.selectbox("Version", options, index=len(options) - 1, key=f"{key}_hist_version",
                          format_func=lambda p: f"#{p} {format_time(by_position[p].timestamp)[:19].replace('T', ' ')} "
                                                f"· {by_position[p].kind}"
                                                + ("" if by_position[p].withheld else f" by {clean(by_position[p].actor, 40)}"),
                          help="The record right after this change")
    any_instant = c2.toggle("Any instant instead", key=f"{key}_hist_any")
    when = by_position[chosen].timestamp
    if any_instant:
        when = instant_picker(f"{key}_hist_at", "Instant", default=by_position[chosen].timestamp, now_if_empty=False)
    try:
        past = view.record_at(record.id, when)
    except MembraneError as exc:
        st.error(f"That instant cannot be read: {md(exc, 300)}")
        return
    if past is None:
        st.info(f"At {format_time(when)} the record did not exist yet or sat in the archive.")
        return
    if past.redacted:
        st.info(f"At {format_time(when)} the record's labels were beyond your clearance: its content then is "
                "withheld.", icon=":material/lock:")
        return
    from .plan_view import facts

    then, current = facts(past), facts(record)
    if unknown_flags(curve, [when]).any():  # record_at's value there is the anchors' guess, not a fact
        then["salience"] = UNKNOWN_LABEL
    try:
        current["salience"] = f"{view.salience_at(record.id, now):.6g}"
    except MembraneError:  # reclassified beyond the clearance since the page read it
        current["salience"] = "(withheld)"
    table([{"field": k, f"then ({format_time(when)[:16].replace('T', ' ')})": then[k], "now": current.get(k, ""),
            "changed": "●" if then[k] != current.get(k, "") else ""} for k in then if k != "updated_at"],
          key=f"{key}_hist_then")
    st.caption("Payload and confidence are the same in every version: curation never changes them in place "
               "(a new text is a supersede, a new record).")
    _restore(view, record, past, when, key)


def _restore(view: OperatorView, record: MemoryRecord, past: MemoryRecord, when: datetime, key: str) -> None:
    """"Restore this version": preview, who gains access, confirmation, then the engine's op."""
    from .exposure_view import preview_profiles, show_exposures, widening_confirmed
    from .plan_view import outcome_line, plan_names, render_plan

    done = st.session_state.pop(f"{key}_hist_done", None)
    if done:
        st.success(done)
    allowed, reason = view.may("restore_version")
    if not allowed:
        st.caption(f"Curators and admins can restore a version ({md(reason, 200)}).")
        return
    if record.type == MemoryType.EPISODIC:
        st.caption("An episodic record is immutable: its versions cannot be restored (SPEC 6).")
        return
    st.markdown("**Restore this version**: brings back its sensitivity, scope, tags, pinned, revision status and "
                "relations; its salience then, re-anchored now. One audit entry names the version.")
    rationale = st.text_input("Why restore it?", key=f"{key}_hist_why", max_chars=MAX_RATIONALE_LENGTH, placeholder="required: the audit entry keeps it")
    if not rationale.strip():
        return
    try:
        plan = view.preview("restore_version", record.id, when, rationale)
    except MembraneError as exc:
        from .guard import describe

        st.error(describe(exc, "The restore cannot be previewed"))
        return
    named = plan_names(view, plan)
    render_plan(plan, key=f"{key}_hist_plan", names=named)
    profiles, origin = preview_profiles(view)
    exposures = plan_exposures([plan], profiles)
    if exposures.counts and any(exposures.counts.values()):
        show_exposures(exposures, origin, key=f"{key}_hist_exposure")
    access_ok = widening_confirmed(exposures, f"{key}_hist_widen")
    confirmed = st.checkbox(f"I confirm: restore the version of {format_time(when)} as shown above.",
                            key=f"{key}_hist_confirm")
    if st.button("Restore this version", type="primary", key=f"{key}_hist_restore",
                 disabled=not (confirmed and access_ok)):
        if not (confirmed and access_ok):
            st.error("Not restored: confirm the change (and any widening of access) first.")
            return
        try:
            applied = view.restore_version(record.id, when, rationale)  # role and clearance checked now
        except MembraneError as exc:
            from .guard import describe

            st.error(describe(exc, "The restore was refused"))
            return
        st.session_state[f"{key}_hist_done"] = f"Restored the version of {format_time(when)}: {outcome_line(applied, named)}"
        for name in (f"{key}_hist_why", f"{key}_hist_confirm"):
            st.session_state.pop(name, None)
        st.rerun()


def render_record(view: OperatorView, record: MemoryRecord, on_open: Callable[[str], None] | None = None, key: str = "",
                  known: set[str] | None = None, referenced_by: list[str] | None = None,
                  as_of: datetime | None = None) -> None:
    """Everything about one record, in tabs (payload first)."""
    render_metadata(record)
    tabs = st.tabs(["Payload", f"Relations ({len(record.relations)})", "Provenance", "Lifecycle",
                    f"Audit trail ({len(record.audit_log)})", "JSON", "History"])
    with tabs[0]:
        render_payload(record)
    with tabs[1]:
        render_relations(record, on_open, key, known, referenced_by)
    with tabs[2]:
        render_provenance(record)
    with tabs[3]:
        render_lifecycle(record, as_of)
    with tabs[4]:
        render_audit(record)
    with tabs[5]:
        st.json(record.to_json_dict(), expanded=False)
    with tabs[6]:
        render_history(view, record, key)


__all__ = ["render_record", "render_metadata", "render_relations", "render_provenance", "render_lifecycle",
           "render_audit", "render_history", "human_seconds"]
