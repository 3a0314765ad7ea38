"""Which records may be retracted or superseded, narrowed in SQL: a semantic record's revision
status is a column; another type says so only in its audit entries (a retract, or the
supersede's "superseded by" entry, ``history.SUPERSEDED_MARK``)."""

from __future__ import annotations

from sqlalchemy import and_, or_, select

from membrane_engine.rules.history import SUPERSEDED_MARK
from membrane_engine.storage.audit_log import is_retract
from membrane_engine.storage.store import Store, audit_entries, records


def maybe_revised(store: Store, ids: list[str]) -> list[str]:
    """Of ``ids``, the records that may be retracted or superseded: a record whose status column
    says retracted, or one of another type than semantic with a retract or supersede entry in
    its audit log. A narrowing only: whether each is retracted or superseded now is read from
    the record (``layered.revision_flag``), as a later restored version may undo it."""
    marked = select(audit_entries.c.record_id).where(or_(is_retract(), and_(
        audit_entries.c.action == "revise", audit_entries.c.rationale.like(SUPERSEDED_MARK + "%"))))
    flagged: list[str] = []
    with store.read() as conn:
        for start in range(0, len(ids), 900):
            chunk = ids[start:start + 900]
            flagged += conn.execute(select(records.c.id).where(records.c.id.in_(chunk), or_(
                records.c.status == "retracted",
                and_(records.c.type != "semantic", records.c.id.in_(marked))))).scalars()
    return flagged
