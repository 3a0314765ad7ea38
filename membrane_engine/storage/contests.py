"""Contested records and their contest entries, as the review queue reads them.

Each read goes through one of the partial indexes ``store.py`` keeps for this (contested
records: ``CONTESTED``; contest entries: ``CONTEST_ENTRY``), using the index's very condition
as SQL text, or by record id; none reads the whole table. The functions take the caller's
connection so that the queue is counted and listed from one read.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from sqlalchemy import func, select, text
from sqlalchemy.engine import Connection

from membrane_engine.model.records import UTC, AuditAction
from membrane_engine.storage.store import CONTEST_ENTRY, CONTESTED, audit_entries, records

CHUNK = 900  # ids per statement: under SQLite's parameter limit


def contested_labels(conn: Connection) -> list[tuple[str, str, str]]:
    """(id, sensitivity, scope) of every contested record, from the partial index alone."""
    return [tuple(r) for r in conn.execute(select(records.c.id, records.c.sensitivity, records.c.scope)
                                           .where(text(CONTESTED)))]


def newest_contests(conn: Connection) -> dict[str, float]:
    """Per record, when its newest contest entry was written (epoch seconds). One scan of the
    partial index of contest entries (few, and no list of ids to send: at 17k contested records
    the parameters alone cost PostgreSQL more than the scan)."""
    q = (select(audit_entries.c.record_id, func.max(audit_entries.c.ts))
         .where(text(CONTEST_ENTRY)).group_by(audit_entries.c.record_id))  # the index's condition
    return {rid: float(ts) for rid, ts in conn.execute(q)}


def revise_entries(conn: Connection, ids: list[str]) -> Iterator[tuple[str, str | None, datetime, str]]:
    """(record id, details, time, rationale) of the revise entries of ``ids``, each record's
    oldest first. Looked up by record (the log's (record_id, position) key): filtering on the
    action in SQL would lead a planner to the action index and a scan of every revise entry for
    each chunk."""
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start:start + CHUNK]
        q = (select(audit_entries.c.record_id, audit_entries.c.action, audit_entries.c.details, audit_entries.c.ts,
                    audit_entries.c.rationale)
             .where(audit_entries.c.record_id.in_(chunk)).order_by(audit_entries.c.record_id, audit_entries.c.position))
        for rid, action, details, ts, rationale in conn.execute(q):
            if action == AuditAction.REVISE.value:
                yield rid, details, datetime.fromtimestamp(ts, UTC), rationale


def contested_docs(conn: Connection, ids: list[str]) -> dict[str, str]:
    """The stored JSON of those of ``ids`` that are still contested."""
    if not ids:
        return {}
    return dict(conn.execute(select(records.c.id, records.c.doc).where(records.c.id.in_(ids), text(CONTESTED))).all())


__all__ = ["contested_docs", "contested_labels", "newest_contests", "revise_entries"]
