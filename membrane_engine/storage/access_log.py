"""Reading the access log ("who looked", SPEC 10): its entries, newest first, filtered by record,
actor and the labels the record had when it was opened.

Entries are written (chained and sealed under the audit key) by ``audit.row_seal``; this
module only reads them.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, or_, select

from membrane_engine.storage.store import Store, access_log

# (seq, record_id, actor, sensitivity, scope, ts in epoch seconds, via)
AccessRow = tuple[int, str, str, str, str, float, str]


def access_entries(store: Store, record_id: str | None = None, actor: str | None = None,
                   sensitivities: Sequence[str] | None = None, scopes: Sequence[str] | None = None,
                   limit: int = 100, offset: int = 0) -> tuple[int, list[AccessRow]]:
    """(how many entries match, one page of them newest first). ``sensitivities``: only entries
    of records opened at one of these levels; ``scopes``: only those of unscoped records or of
    one of these scopes (None: no limit; an empty list: unscoped ones only)."""
    conditions = []
    if record_id:
        conditions.append(access_log.c.record_id == record_id)
    if actor:
        conditions.append(access_log.c.actor == actor)
    if sensitivities is not None:
        conditions.append(access_log.c.sensitivity.in_(list(sensitivities)))
    if scopes is not None:
        conditions.append(or_(access_log.c.scope == "", access_log.c.scope.in_(list(scopes))))
    with store.read() as conn:
        total = conn.execute(select(func.count()).select_from(access_log).where(*conditions)).scalar()
        q = (select(access_log).where(*conditions).order_by(access_log.c.ts.desc(), access_log.c.seq.desc())
             .limit(limit).offset(offset))
        rows = [(r.seq, r.record_id, r.actor, r.sensitivity, r.scope, r.ts, r.via or "") for r in conn.execute(q)]
    return int(total), rows


__all__ = ["AccessRow", "access_entries"]
