"""Audit entries as a pandas frame (for tables and the CSV download): each entry's action in
words (a retract reads "retract", not Membrane's ``delete``), the values it changed before and
after, the record's link into the explorer, and whether the entry is only claimed (it came with
an imported record: this engine did not write it, ``history.claimed_by``)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

import pandas as pd

from console.keys import Param
from membrane_engine import OperatorView, kind_of

from .safe import clean
from . import colours

COLUMNS = ["timestamp", "record_id", "record", "position", "action", "before", "after", "actor", "rationale", "seq",
           "claimed"]
CSV_CHUNK = 5000
# The stored action an action in words is written as (the audit filter takes stored actions).
STORED = {"retract": "delete", "penalize": "decay", "pin": "revise", "unpin": "revise", "restore": "revise",
          "restore version": "revise", "reclassify": "revise"}


def action_color(name: str) -> str:
    """The colour of an action in words (a penalize is Membrane's ``decay`` entry)."""
    return colours.action_color(name, STORED)


def record_link(record_id: str) -> str:
    """The explorer's URL for a record (the explorer opens ``?id=``)."""
    return f"/records?{Param.ID}=" + quote(str(record_id), safe="")


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, str):
        return value if value else '""'
    return json.dumps(value, default=str, ensure_ascii=False)


def changed(details: Mapping[str, Any] | None) -> tuple[str, str]:
    """An entry's before and after values as text ("salience: 0.25; status: active"); other
    details (a gain, a version restored) go with the after values."""
    before, after, other = [], [], []
    for name, value in (details or {}).items():
        if isinstance(value, dict) and set(value) == {"before", "after"}:
            before.append(f"{name}: {_value(value['before'])}")
            after.append(f"{name}: {_value(value['after'])}")
        elif name not in ("archived", "restored", "ref_is_record"):
            other.append(f"{name}: {_value(value)}")
    return "; ".join(before), "; ".join(after + other)


def claimed_text(who: str) -> str:
    return f"claimed by {who}"


def frame(rows: Iterable[Any], names: Mapping[str, str] | None = None, view: OperatorView | None = None
          ) -> pd.DataFrame:
    """AuditRows (engine) to a frame with one column per field, newest first as given;
    ``names``: record labels (``labels.labels`` through the operator's clearance); ``claimed``:
    "claimed by the import" (or "by its creator") for an entry that came with its record, ""
    for one this engine wrote, as the operator's ``view`` tells (without a view: not said)."""
    rows = list(rows)
    claimed = view.claimed(rows) if view is not None and rows else {}
    data = []
    for r in rows:
        before, after = changed(r.details)
        data.append({"timestamp": r.entry.timestamp, "record": (names or {}).get(r.record_id, ""),
                     "record_id": r.record_id, "position": r.position,
                     "action": kind_of(r.entry.action, r.entry.rationale, r.details),
                     "before": before, "after": after, "actor": r.entry.actor, "rationale": r.entry.rationale,
                     "seq": r.seq, "claimed": claimed_text(claimed[r.seq]) if r.seq in claimed else ""})
    return pd.DataFrame(data, columns=COLUMNS)


def shown(data: pd.DataFrame) -> pd.DataFrame:
    """A copy of a ``frame`` for st.dataframe: record strings (labels, values, actors,
    rationales) made inert (control and bidi characters shown as U+FFFD), the record id as the
    explorer's link (``record_id`` column: show it with ``link_column``). The frame itself keeps
    the stored values."""
    out = data.copy()
    for column, limit in (("record", 120), ("actor", 200), ("rationale", 2000), ("before", 2000), ("after", 2000)):
        if column in out:
            out[column] = out[column].map(lambda v, n=limit: clean(v, n))
    if "claimed" in out and "actor" in out:
        # An imported entry's actor is the file's word, not a fact: said where the actor is read.
        out["actor"] = [f"{actor} ({claimed})" if claimed else actor for actor, claimed in zip(out["actor"], out["claimed"])]
    if "record_id" in out:
        out["record_id"] = out["record_id"].map(record_link)
    return out


def link_column(label: str = "record id") -> Any:
    """The column config that shows a ``shown`` frame's record_id as a link into the explorer."""
    import streamlit as st

    return st.column_config.LinkColumn(label, display_text=r"/records\?id=(.*)", width="medium",
                                       help="Open the record in the explorer")


def spreadsheet_safe(value: object) -> str:
    """A cell a spreadsheet will not run as a formula: text starting with = + - @ (or a tab or
    carriage return) gets a leading apostrophe (OWASP's CSV-injection advice)."""
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def filtered_csv(view: OperatorView, filters: dict[str, Any], names: Any = None) -> bytes:
    """Every entry matching ``filters`` (``view.audit_query``'s keywords), read in pages through
    the operator's view, as CSV, with before/after values; ``names(ids)``: labels of those
    records (through the clearance)."""
    parts = []
    offset = 0
    while True:
        total, rows = view.audit_query(**filters, limit=CSV_CHUNK, offset=offset)
        if not rows:
            break
        parts.append(frame(rows, names(list({r.record_id for r in rows})) if names else None,
                           view if isinstance(view, OperatorView) else None))
        offset += len(rows)
        if offset >= total:
            break
    data = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)
    if len(data):
        for column in ("record", "record_id", "before", "after", "actor", "rationale", "claimed"):
            data[column] = data[column].map(spreadsheet_safe)
        data["timestamp"] = data["timestamp"].map(lambda t: t.isoformat().replace("+00:00", "Z"))
    return data.to_csv(index=False).encode("utf-8")
