"""Audit entries as a pandas frame (for tables and the CSV download)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from membrane_engine import Membrane

from .safe import clean

COLUMNS = ["timestamp", "record_id", "position", "action", "actor", "rationale", "seq"]
CSV_CHUNK = 5000


def frame(rows: Iterable[Any]) -> pd.DataFrame:
    """AuditRows (engine) to a frame with one column per field, newest first as given."""
    data = [{"timestamp": r.entry.timestamp, "record_id": r.record_id, "position": r.position,
             "action": r.entry.action.value, "actor": r.entry.actor, "rationale": r.entry.rationale,
             "seq": r.seq} for r in rows]
    return pd.DataFrame(data, columns=COLUMNS)


def shown(data: pd.DataFrame) -> pd.DataFrame:
    """A copy of a ``frame`` for st.dataframe: record strings (ids, actors, rationales) made inert
    (control and bidi characters shown as U+FFFD). The frame itself keeps the stored values."""
    out = data.copy()
    for column, limit in (("record_id", 200), ("actor", 200), ("rationale", 2000)):
        if column in out:
            out[column] = out[column].map(lambda v, n=limit: clean(v, n))
    return out


def spreadsheet_safe(value: object) -> str:
    """A cell a spreadsheet will not run as a formula: text starting with = + - @ (or a tab or
    carriage return) gets a leading apostrophe (OWASP's CSV-injection advice)."""
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def filtered_csv(membrane: Membrane, filters: dict[str, Any]) -> bytes:
    """Every entry matching ``filters`` (the audit_query keywords), read in pages, as CSV."""
    parts = []
    offset = 0
    while True:
        total, rows = membrane.audit_query(**filters, limit=CSV_CHUNK, offset=offset)
        if not rows:
            break
        parts.append(frame(rows))
        offset += len(rows)
        if offset >= total:
            break
    data = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)
    if len(data):
        for column in ("record_id", "actor", "rationale"):
            data[column] = data[column].map(spreadsheet_safe)
        data["timestamp"] = data["timestamp"].map(lambda t: t.isoformat().replace("+00:00", "Z"))
    return data.to_csv(index=False).encode("utf-8")
