"""The audit log as an operator's clearance sees it (SPEC 10): its entries, counts by action and
actors, limited to the records the clearance sees.

A live record is seen by its row's label columns (``record_queries.visible_condition``, the
trust rule in SQL); an archived one by the labels its archived document had, decided with the
engine's rule (``rules.trust.decide``). The caller passes a clearance only when it may hide
something (one that sees everything needs none of this: its queries are the unfiltered ones).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.engine import Connection

from membrane_engine.rules.trust import TrustContext, Verdict, decide
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


__all__ = ["action_totals", "actors_seen", "full_ids", "seen_condition"]
