"""Showing a curation plan (the engine's preview, or what an operation wrote): each touched
record before and after, and the audit entries. Everything from a record stays inert."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from membrane_engine import MemoryRecord, OperatorView, kind_of, label

from .safe import clean, md

KIND_LABELS = {
    "update": "changed", "create": "created", "audit": "audit entry only", "archive": "moved to the archive",
    "restore": "restored from the archive",
}


def plan_names(view: OperatorView, plan: Any) -> dict[str, str]:
    """What each record the plan touches says, as the operator's view sees it now; a record the
    plan creates is named by the content the operator wrote for it."""
    ids = list(dict.fromkeys([c.record_id for c in plan.changes] + [e.record_id for e in plan.audit]))
    names = view.labels(ids) if ids else {}
    for c in plan.changes:
        if c.kind == "create" and c.record_id not in names:
            names[c.record_id] = label(c.after)
    return names


def _name(names: dict[str, str] | None, record_id: str) -> str:
    return (names or {}).get(record_id) or record_id


def status_of(record: MemoryRecord | None) -> str:
    if record is None:
        return ""
    return record.revision_status or "—"


def facts(record: MemoryRecord | None) -> dict[str, Any]:
    """The fields an operator checks before and after a change."""
    if record is None:
        return {}
    return {
        "salience": f"{record.salience:.6g}",
        "status": status_of(record),
        "pinned": "yes" if record.lifecycle.pinned else "no",
        "sensitivity": record.sensitivity.value,
        "scope": record.scope or "(unscoped)",
        "tags": ", ".join(record.tags),
        "relations": str(len(record.relations)),
        "last_reinforced_at": (record.lifecycle.last_reinforced_at.strftime("%Y-%m-%d %H:%M:%S")
                               if record.lifecycle.last_reinforced_at else ""),
        "updated_at": record.updated_at.strftime("%Y-%m-%d %H:%M:%S") if record.updated_at else "",
    }


def what_changes(change: Any) -> str:
    """A RecordChange's kind in words; an update that changes none of the fields an operator
    checks (a retract of a retracted record, a pin of a pinned one) says so."""
    if change.kind == "update" and change.before is not None:
        before, after = facts(change.before), facts(change.after)
        if all(before.get(name) == value for name, value in after.items() if name != "updated_at"):
            return "already so: only its updated time and the audit entry are new"
    return KIND_LABELS.get(change.kind, change.kind)


def change_table(change: Any) -> pd.DataFrame:
    """Field / before / after rows for one RecordChange, changed rows flagged."""
    before, after = facts(change.before), facts(change.after)
    rows = []
    for name in after:
        b, a = before.get(name, ""), after[name]
        rows.append({"field": name, "before": clean(b, 200), "after": clean(a, 200),
                     "changed": "●" if change.before is not None and b != a else ""})
    return pd.DataFrame(rows)


def entries_frame(plan: Any, names: dict[str, str] | None = None) -> pd.DataFrame:
    return pd.DataFrame([{
        "record": clean(_name(names, e.record_id), 120), "record_id": clean(e.record_id, 200),
        "action": kind_of(e.action, e.rationale, e.details), "actor": clean(e.actor, 200),
        "rationale": clean(e.rationale, 2000),
        "details": clean(json.dumps(e.details, ensure_ascii=False, default=str), 2000) if e.details else "",
    } for e in plan.audit], columns=["record", "record_id", "action", "actor", "rationale", "details"])


def render_plan(plan: Any, key: str, names: dict[str, str] | None = None, show_records: bool = True) -> None:
    """One plan: a before/after table per touched record (named by ``names``, from plan_names),
    then the audit entries."""
    for k, change in enumerate(plan.changes):
        with st.container(border=True):
            st.markdown(f"**{md(_name(names, change.record_id), 160)}** · {what_changes(change)} "
                        f"({change.after.type.value})", help=f"id {md(change.record_id, 160)}")
            st.dataframe(change_table(change), hide_index=True, key=f"{key}_change_{k}",
                         column_config={"changed": st.column_config.TextColumn("", width="small")})
            if show_records and change.kind in ("create", "restore"):
                with st.expander("The record as it will be stored"):
                    st.json(change.after.to_json_dict(), expanded=False)
    st.text(f"Audit entries to be written ({len(plan.audit)}):")
    st.dataframe(entries_frame(plan, names), hide_index=True, key=f"{key}_audit",
                 column_config={"rationale": st.column_config.TextColumn(width="large")})


def outcome_line(plan: Any, names: dict[str, str] | None = None) -> str:
    """A one-line plain-text summary of what an applied plan did (new salience and status)."""
    parts = []
    for c in plan.changes:
        if c.kind == "audit":
            continue
        s = c.after.salience
        before = f"{c.before.salience:.4g} → " if c.before is not None else ""
        status = status_of(c.after)
        bits = [f"salience {before}{s:.4g}"]
        if status and status != "—":
            bits.append(f"status {status}")
        if c.after.lifecycle.pinned:
            bits.append("pinned")
        parts.append(f"“{clean(_name(names, c.record_id), 80)}” {KIND_LABELS.get(c.kind, c.kind)} ({', '.join(bits)})")
    return "; ".join(parts) or "audit entries written"
