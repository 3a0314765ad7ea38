"""The audit log as an operator's clearance sees it (SPEC 10): its entries, counts by action (in
all, or per time bucket) and actors, limited to the records the clearance sees.

A live record is seen by its row's label columns (``record_queries.visible_condition``, the
trust rule in SQL); an archived one by the labels its archived document had, decided with the
engine's rule (``rules.trust.decide``). The caller passes a clearance only when it may hide
something (one that sees everything needs none of this: its queries are the unfiltered ones).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Integer, cast, func, or_, select
from sqlalchemy.engine import Connection

from membrane_engine.rules.chain import AuditRow
from membrane_engine.rules.trust import TrustContext, Verdict, decide
from membrane_engine.storage.audit_log import action_counts, filter_conditions, row_to_audit
from membrane_engine.storage.record_queries import archived_labels, visible_condition
from membrane_engine.storage.store import Store, audit_entries, records


def seen_condition(conn: Connection, clearance: TrustContext, full_only: bool = False) -> Any:
    """SQL: audit entries of records ``clearance`` sees (in full or redacted; with ``full_only``,
    in full), live or archived. The archived ones are decided here, in Python, on their labels."""
    wanted = {Verdict.FULL} if full_only else {Verdict.FULL, Verdict.REDACTED}
    archived = [rid for rid, (sens, scope) in archived_labels(conn).items()
                if decide(sens, scope, clearance).verdict in wanted]
    live = audit_entries.c.record_id.in_(select(records.c.id).where(visible_condition(clearance, full_only)))
    return or_(live, audit_entries.c.record_id.in_(archived)) if archived else live


def full_ids(conn: Connection, ids: list[str], clearance: TrustContext) -> set[str]:
    """Those of ``ids`` whose record, live or archived, ``clearance`` sees in full."""
    ids = list(dict.fromkeys(ids))
    full = set(conn.execute(select(records.c.id).where(records.c.id.in_(ids),
                                                        visible_condition(clearance, full_only=True))).scalars())
    rest = [rid for rid in ids if rid not in full]
    if rest:
        full |= {rid for rid, (sens, scope) in archived_labels(conn, rest).items()
                 if decide(sens, scope, clearance).verdict is Verdict.FULL}
    return full


def entries_seen(store: Store, clearance: TrustContext, actor: str | None = None, action: str | None = None,
                 record_id: str | None = None, since: datetime | None = None, until: datetime | None = None,
                 limit: int = 1000, offset: int = 0) -> tuple[int, list[AuditRow], set[str]]:
    """(how many entries of records ``clearance`` sees match the filters, one page of them newest
    first, the ids of the page's records it sees in full), from one read."""
    conditions = filter_conditions(actor, action, record_id, since, until)
    with store.read() as conn:
        # Who wrote an entry is withheld on a record seen redacted, so filtering by actor may only
        # match entries of records the clearance sees in full (else the match itself would tell).
        conditions.append(seen_condition(conn, clearance, full_only=bool(actor)))
        total = conn.execute(select(func.count()).select_from(audit_entries).where(*conditions)).scalar()
        q = (select(audit_entries).where(*conditions)
             .order_by(audit_entries.c.ts.desc(), audit_entries.c.seq.desc()).limit(limit).offset(offset))
        rows = [row_to_audit(r) for r in conn.execute(q)]
        full = full_ids(conn, [r.record_id for r in rows], clearance) if rows else set()
    return int(total), rows, full


def activity_counts(store: Store, bucket_seconds: float, actor: str | None = None, action: str | None = None,
                    record_id: str | None = None, since: datetime | None = None, until: datetime | None = None,
                    clearance: TrustContext | None = None) -> dict[tuple[int, str], int]:
    """(bucket number, action in words) -> entries matching the filters (``audit_log.action_counts``:
    a retract as "retract"), buckets ``bucket_seconds`` long from the epoch. With ``clearance``,
    of the entries of records it sees only."""
    scaled = audit_entries.c.ts / bucket_seconds
    # SQLite may lack floor(); timestamps are positive, so truncation is the floor there.
    bucket = cast(scaled, Integer) if store.is_sqlite else func.floor(scaled)
    conditions = filter_conditions(actor, action, record_id, since, until)
    with store.read() as conn:
        newest = conn.execute(select(func.max(audit_entries.c.seq))).scalar() or 0
        if clearance is not None:
            # Counting by actor only over records seen in full, as entries_seen filters: who wrote
            # an entry is withheld on a record seen redacted.
            conditions.append(seen_condition(conn, clearance, full_only=bool(actor)))
        return action_counts(conn, bucket, [*conditions, audit_entries.c.seq <= newest])


def action_totals(store: Store, until: float, clearance: TrustContext) -> dict[str, int]:
    """Entries by action written at or before epoch ``until`` on the records ``clearance`` sees."""
    with store.read() as conn:
        q = (select(audit_entries.c.action, func.count())
             .where(audit_entries.c.ts <= until, seen_condition(conn, clearance))
             .group_by(audit_entries.c.action))
        return {str(action): int(n) for action, n in conn.execute(q)}


def actors_seen(store: Store, limit: int, clearance: TrustContext | None = None) -> list[str]:
    """Actors of the entries of live records ``clearance`` sees in full (None: of every entry),
    most frequent first, at most ``limit``."""
    q = select(audit_entries.c.actor, func.count().label("n"))
    if clearance is not None:
        q = q.where(audit_entries.c.record_id.in_(select(records.c.id).where(visible_condition(clearance, True))))
    q = q.group_by(audit_entries.c.actor).order_by(func.count().desc(), audit_entries.c.actor).limit(limit)
    with store.read() as conn:
        return [r.actor for r in conn.execute(q)]


__all__ = ["action_totals", "activity_counts", "actors_seen", "entries_seen", "full_ids", "seen_condition"]
