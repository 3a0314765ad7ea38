"""One record in full, for operators: metadata, payload, relations, provenance, lifecycle, audit.

Relations are drawn as buttons that call ``on_open(target_id)`` (the explorer sets ``?id=``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import streamlit as st

from membrane_engine import MemoryRecord
from membrane_engine.schema import format_time

from .payload import as_text, render_payload, table
from .record_card import verdict_badge
from .safe import md

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
    table([{"#": i, "timestamp": e.timestamp, "action": e.action.value, "actor": e.actor, "rationale": e.rationale}
           for i, e in enumerate(entries)], "no audit entries")


def render_record(record: MemoryRecord, on_open: Callable[[str], None] | None = None, key: str = "",
                  known: set[str] | None = None, referenced_by: list[str] | None = None,
                  as_of: datetime | None = None) -> None:
    """Everything about one record, in tabs (payload first)."""
    render_metadata(record)
    tabs = st.tabs(["Payload", f"Relations ({len(record.relations)})", "Provenance", "Lifecycle",
                    f"Audit trail ({len(record.audit_log)})", "JSON"])
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


__all__ = ["render_record", "render_metadata", "render_relations", "render_provenance", "render_lifecycle",
           "render_audit", "human_seconds"]
