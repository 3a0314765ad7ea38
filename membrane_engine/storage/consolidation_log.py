"""The entries consolidation keeps on the store's own audit chain (``STORE_SUBJECT``), in SQL:
its runs, the proposals operators rejected and the auto-apply setting (``consolidation.ledger``
writes them with ``audit_log.append_subject`` and says what they mean). They are found by the
``kind`` their details name; the store's chain holds few entries beside them (an upgrade, a
seal), and it is read by the (record_id, position) index.
"""

from __future__ import annotations

from sqlalchemy import or_, select
from sqlalchemy.engine import Connection

from membrane_engine.rules.chain import STORE_SUBJECT, AuditRow
from membrane_engine.storage.audit_log import row_to_audit
from membrane_engine.storage.store import audit_entries


def store_entries(conn: Connection, kinds: tuple[str, ...], limit: int | None = None) -> list[AuditRow]:
    """The store's own entries whose details name one of ``kinds`` (``{"kind": ...}``), newest
    first, at most ``limit``. The LIKE only narrows: callers check the parsed details."""
    marks = [audit_entries.c.details.like(f'%"kind": "{kind}"%') for kind in kinds]
    q = (select(audit_entries).where(audit_entries.c.record_id == STORE_SUBJECT, or_(*marks))
         .order_by(audit_entries.c.position.desc()))
    if limit is not None:
        q = q.limit(limit)
    return [row_to_audit(r) for r in conn.execute(q)]


__all__ = ["store_entries"]
