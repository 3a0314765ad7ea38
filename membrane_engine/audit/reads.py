"""A stored record read with its audit trail, over an engine context (SPEC 6 and 8): the record
now (``get``, the operator's read: no trust gate), its entries, its versions and the record and
its salience as they were at past instants; entries across the store; the trail's verification
and checkpoints.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from membrane_engine.storage import audit_log as audit
from membrane_engine.audit import verify as audit_verify
from membrane_engine.context import EngineContext
from membrane_engine.errors import NotFoundError, ValidationError
from membrane_engine.model.records import AuditEntry, MemoryRecord, as_utc, check_id, check_instant
from membrane_engine.rules import history
from membrane_engine.rules.chain import AuditRow
from membrane_engine.rules.salience import salience_of

AUDIT_FILTERS = frozenset({"actor", "action", "record_id", "since", "until", "limit", "offset"})


def get(ctx: EngineContext, record_id: str, as_of: datetime | None = None) -> MemoryRecord:
    """The operator's read, no trust gate: the record with ``salience = S(as_of)`` (default
    now) and its audit log."""
    record_id = check_id(record_id)
    as_of = check_instant(as_of) if as_of is not None else None
    with ctx.store.read() as conn:
        rows = ctx.store.fetch(conn, [record_id])
        if record_id not in rows:
            raise NotFoundError(record_id)
        log = [r.entry for r in audit.log_of(conn, record_id)]
    row = rows[record_id]
    doc = row.doc
    doc["audit_log"] = []
    record = MemoryRecord.model_validate(doc)
    record.audit_log = log
    record.salience = salience_of(record, as_utc(as_of) if as_of else ctx.now(), (row.anchor_salience, row.anchor_at))
    return record


def audit_log(ctx: EngineContext, record_id: str) -> list[AuditEntry]:
    """The record's audit entries, oldest first (archived records keep theirs)."""
    record_id = check_id(record_id)
    with ctx.store.read() as conn:
        rows = audit.log_of(conn, record_id)
        if not rows and not ctx.store.existing_ids(conn, [record_id]):
            raise NotFoundError(record_id)
    return [r.entry for r in rows]


def audit_rows(ctx: EngineContext, record_id: str) -> list[AuditRow]:
    """The record's entries as stored (with their place in the chain), oldest first; [] for
    an id that has none."""
    record_id = check_id(record_id)
    with ctx.store.read() as conn:
        return audit.log_of(conn, record_id)


def existing(ctx: EngineContext, record_id: str) -> str:
    """``record_id`` checked, when it names a live record (NotFoundError otherwise)."""
    record_id = check_id(record_id)
    with ctx.store.read() as conn:
        if not ctx.store.existing_ids(conn, [record_id], include_archive=False):
            raise NotFoundError(record_id)
    return record_id


def with_trail(ctx: EngineContext, record_id: str) -> tuple[MemoryRecord, tuple[float, float], list[AuditRow]]:
    """The live record as stored, its anchor (salience, epoch seconds) and its audit rows, read
    in one transaction."""
    record_id = check_id(record_id)
    with ctx.store.read() as conn:
        rows = ctx.store.fetch(conn, [record_id])
        if record_id not in rows:
            raise NotFoundError(record_id)
        trail = audit.log_of(conn, record_id)
    row = rows[record_id]
    doc = row.doc
    doc["audit_log"] = []
    record = MemoryRecord.model_validate(doc)
    record.audit_log = [r.entry for r in trail]
    return record, (row.anchor_salience, row.anchor_at), trail


def versions(ctx: EngineContext, record_id: str) -> list[history.Version]:
    """The record's changes, oldest first, each with its before and after values."""
    return history.versions(audit_rows(ctx, existing(ctx, record_id)))


def record_at(ctx: EngineContext, record_id: str, when: datetime) -> MemoryRecord | None:
    """The record as it was at ``when`` (later changes undone, salience S(when) from the
    anchor in force then); None when it did not exist yet or was archived then."""
    when = check_instant(when, "when")
    record, anchor, rows = with_trail(ctx, record_id)
    return history.record_at(record, anchor, rows, when)


def salience_history(ctx: EngineContext, record_id: str, times: list[datetime]) -> list[float | None]:
    """S(t) over ``times`` as the record really was (its audit trail's anchors, not today's
    anchor); None before it existed and while archived."""
    if isinstance(times, (str, bytes, dict)) or not hasattr(times, "__iter__"):
        raise ValidationError(f"times must be a list of datetimes (got {times!r})", [("times", "not a list")])
    times = [check_instant(t, "times") for t in times]
    record, anchor, rows = with_trail(ctx, record_id)
    return history.salience_history(record, anchor, rows, times)


def query(ctx: EngineContext, **filters: Any) -> tuple[int, list[AuditRow]]:
    """Entries across the store, newest first: (total matching, one page). Filters: actor,
    action, record_id, since, until; the page: limit (default 1000), offset."""
    check_filters(filters)
    with ctx.store.read() as conn:
        return audit.query(conn, **filters)


def check_filters(filters: dict[str, Any]) -> None:
    """An unknown filter of ``query`` is refused by name (not a TypeError from inside)."""
    unknown = sorted(set(filters) - AUDIT_FILTERS)
    if unknown:
        known = ", ".join(sorted(AUDIT_FILTERS))
        raise ValidationError(f"audit_query has no filter {unknown[0]!r:.80} (filters: {known})",
                              [(unknown[0], "unknown filter")])


def verify(ctx: EngineContext, checkpoint: dict[str, Any] | str | None = None) -> list[audit_verify.Problem]:
    """Every problem with the audit trail (SPEC 6), [] when intact; with ``checkpoint`` (what
    ``checkpoint`` returned, or its JSON text) also whether the store still extends it."""
    cp = None if checkpoint is None else audit_verify.parse_checkpoint(checkpoint)
    with ctx.store.read() as conn:
        return audit_verify.verify(conn, cp)


def checkpoint(ctx: EngineContext) -> dict[str, Any]:
    """The store-wide audit sequence as it is now (position, head hash, time; signed when
    MEMBRANE_AUDIT_KEY is set), JSON-serialisable."""
    with ctx.store.read() as conn:
        return audit_verify.checkpoint(conn, ctx.now())


__all__ = ["AUDIT_FILTERS", "audit_log", "audit_rows", "check_filters", "checkpoint", "existing", "get", "query",
           "record_at", "salience_history", "verify", "versions", "with_trail"]
