"""Aggregates of the audit log the console's metrics and pickers read: entries by action after
an instant, the log's time span and newest entry, when one actor first wrote (its actors by
frequency are ``audit_seen.actors_seen``).

Each is one or two indexed statements (the ``ts`` and ``(ts, action)`` indexes, the primary
key, the actor index); none reads every entry of a large log unless the question covers it.
"""

from __future__ import annotations

from sqlalchemy import func, literal_column, select

from membrane_engine.storage.store import Store, audit_entries


def actions_written_after(store: Store, t: float, through_seq: int | None = None,
                          after_seq: int | None = None) -> dict[str, int]:
    """Audit entries by action written after epoch ``t`` (and, with ``through_seq``, at or
    before that sequence number; with ``after_seq``, after that one): one range of the ``ts``
    index, or of the primary key between the two sequence numbers; empty in one look when ``t``
    is after the newest entry."""
    if after_seq is not None:
        q = (select(audit_entries.c.action, func.count())
             .where(audit_entries.c.seq > int(after_seq), audit_entries.c.seq <= int(through_seq),
                    audit_entries.c.ts > t).group_by(audit_entries.c.action))
        with store.read() as conn:
            return {str(action): int(n) for action, n in conn.execute(q)}
    conditions = [audit_entries.c.ts > t]
    if through_seq is not None:
        # "+ 0" keeps the planner on the ts index: offered the primary key for "seq <=", SQLite
        # walked the whole log to find the few entries after ``t`` (bench/README.md).
        conditions.append(audit_entries.c.seq + 0 <= int(through_seq))
    # Grouped by an expression, not the column: offered the action index for the GROUP BY,
    # SQLite walks every entry by action instead of the (ts, action) range alone.
    action = audit_entries.c.action.op("||")(literal_column("''")).label("action")
    q = select(action, func.count()).where(*conditions).group_by(action)
    newest = select(func.max(audit_entries.c.ts))
    with store.read() as conn:
        top = conn.execute(newest).scalar()
        if top is None or float(top) <= t:  # the usual "now": one look into the ts index
            return {}
        return {str(action): int(n) for action, n in conn.execute(q)}


def span(store: Store) -> tuple[float, float] | None:
    """(oldest, newest) entry time in epoch seconds, or None for an empty log."""
    # One subquery per bound: each is then one look into the ts index (both aggregates in one
    # SELECT made SQLite scan the whole log).
    lo_q = select(func.min(audit_entries.c.ts)).scalar_subquery()
    hi_q = select(func.max(audit_entries.c.ts)).scalar_subquery()
    with store.read() as conn:
        lo, hi = conn.execute(select(lo_q, hi_q)).one()
    return None if lo is None else (float(lo), float(hi))


def newest_seq(store: Store) -> int:
    """The newest entry's sequence number (0 for an empty log)."""
    with store.read() as conn:
        return int(conn.execute(select(func.max(audit_entries.c.seq))).scalar() or 0)


def first_written_by(store: Store, actor: str) -> float | None:
    """When ``actor`` wrote its first entry (epoch seconds), or None when it wrote none: one look
    into the actor index."""
    q = select(func.min(audit_entries.c.ts)).where(audit_entries.c.actor == actor)
    with store.read() as conn:
        value = conn.execute(q).scalar()
    return None if value is None else float(value)


__all__ = ["actions_written_after", "first_written_by", "newest_seq", "span"]
