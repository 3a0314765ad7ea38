"""The audit trail: append-only, hash-chained per record and across the store (SPEC 6).

Each entry's hash covers its content (action, actor, timestamp, rationale, the ``details``
of before/after values and, for an imported entry that has them, its unknown ``extra`` JSON
fields, SPEC 1), its record id and position, the previous entry's hash and the ``digest`` of
the record's stored content after the change (``live_digest``: every column of its row;
``archived_digest``: its archived JSON). Each record (live in ``records`` or in the
``archive``; other subjects, such as the store itself, in ``audit_subjects``) keeps its chain
head: a seal over the record id, the newest entry's position and hash and the content digest.

Every entry also takes the next place in one store-wide sequence (``store_position``), whose
chain value (``store_hash``) covers the one before it and the entry's hash. Writers are
serialised (SQLite's single writer, PostgreSQL's advisory lock: ``Store._lock_writers``), so
positions follow commit order. Erasing a record with all its entries leaves a hole in that
sequence; cutting entries off its end is caught against a checkpoint (``checkpoint``) that the
operator kept elsewhere.

With ``MEMBRANE_AUDIT_KEY`` set, hashes, chain values, heads and checkpoints are HMAC-SHA256
under that key: someone who can edit the database but does not hold the key cannot forge a
consistent chain. A store remembers that it is keyed (the ``audit_key`` row of ``meta``, sealed
under the key): a process without the key, or with another one, refuses to write to it. Nothing
in the engine updates or deletes an audit row.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, select
from sqlalchemy.engine import Connection

from membrane_engine.errors import StoreUnavailableError
from membrane_engine.model.records import AuditAction, check_whole, to_epoch
from membrane_engine.rules.chain import (
    MAX_QUERY_LIMIT,
    STORE_SUBJECT,
    AuditRow,
    KeyState,
    archived_digest,
    audit_row,
    chain,
    checked_filters,
    head_seal,
    head_seal_v1,
    scheme,
    signing_key,
)
from membrane_engine.storage.audit_log import (  # noqa: F401 (is_retract, insert_entries, logs_of re-exported)
    CONTENT_COLUMNS,
    insert_entries,
    is_retract,
    live_digest,
    logs_of,
    place,
)
from membrane_engine.storage.store import (
    driver_cursor,
    archive,
    audit_entries,
    audit_subjects,
    insert_tuples,
    meta,
)


def append(conn: Connection, record_id: str, action: AuditAction | str, actor: str, rationale: str,
           when: datetime, details: dict[str, Any] | None = None, digest: str | None = None) -> str:
    """Append one entry to a record's chain, binding ``digest`` (the record's content after the
    change: ``row_digest`` / ``archived_digest``); returns the new chain head (store it in
    ``records.audit_head`` or ``archive.audit_head``). The caller holds the store's write
    transaction, so positions cannot race. Subjects that are not records use ``append_subject``."""
    return append_batch(conn, [{"record_id": record_id, "action": action, "actor": actor, "timestamp": when,
                                "rationale": rationale, "details": details}], {record_id: digest})[record_id]


def append_batch(conn: Connection, entries: list[dict[str, Any]], digests: dict[str, str | None] | None = None
                 ) -> dict[str, str]:
    """Append entries (dicts of record_id, action, actor, timestamp (datetime), rationale,
    details and optionally extra) to existing or new chains, in list order per record, with one
    lookup of the chain ends per 900 records and one insert, each taking the next store-wide
    position. ``digests``: each record's content after the change, bound into its last entry
    here. Returns the new chain head of every record touched."""
    if not entries:
        return {}
    ids = list(dict.fromkeys(e["record_id"] for e in entries))
    last: dict[str, tuple[int, str]] = {}
    for start in range(0, len(ids), 900):
        chunk = ids[start:start + 900]
        ends = (select(audit_entries.c.record_id.label("rid"), func.max(audit_entries.c.position).label("pos"))
                .where(audit_entries.c.record_id.in_(chunk)).group_by(audit_entries.c.record_id).subquery())
        q = (select(audit_entries.c.record_id, audit_entries.c.position, audit_entries.c.hash)
             .join(ends, and_(audit_entries.c.record_id == ends.c.rid, audit_entries.c.position == ends.c.pos)))
        for r in conn.execute(q):
            last[r.record_id] = (r.position, r.hash)
    rows, heads = chain(entries, last, digests)
    place(conn, rows)
    conn.execute(audit_entries.insert(), rows)
    return heads


def append_subject(conn: Connection, subject: str, action: AuditAction | str, actor: str, rationale: str,
                   when: datetime, details: dict[str, Any] | None = None) -> str:
    """Append one entry to the chain of a subject that is not a record (the store itself:
    ``STORE_SUBJECT``; operators), in the store-wide sequence like any other; its head is kept in
    ``audit_subjects``. Returns the new head. Inside the caller's write transaction."""
    head = append_batch(conn, [{"record_id": subject, "action": action, "actor": actor, "timestamp": when,
                                "rationale": rationale, "details": details}])[subject]
    updated = conn.execute(audit_subjects.update().where(audit_subjects.c.subject == subject).values(audit_head=head))
    if updated.rowcount == 0:
        conn.execute(audit_subjects.insert().values(subject=subject, audit_head=head))
    return head


def row_to_audit(r: Any) -> AuditRow:
    """An ``AuditRow`` from a row of ``select(audit_entries)``."""
    return audit_row(r.seq, r.record_id, r.position, r.action, r.actor, r.timestamp, r.rationale, r.details, r.extra)


def log_of(conn: Connection, record_id: str) -> list[AuditRow]:
    q = select(audit_entries).where(audit_entries.c.record_id == record_id).order_by(audit_entries.c.position)
    return [row_to_audit(r) for r in conn.execute(q)]


def filter_conditions(actor: str | None = None, action: str | None = None, record_id: str | None = None,
                      since: datetime | None = None, until: datetime | None = None) -> list[Any]:
    """SQL conditions of the audit filters: exact actor / action / record id, inclusive time bounds."""
    actor, action, record_id, since, until = checked_filters(actor, action, record_id, since, until)
    conditions: list[Any] = []
    if actor:
        conditions.append(audit_entries.c.actor == actor)
    if action:
        conditions.append(audit_entries.c.action == AuditAction(action).value)
    if record_id:
        conditions.append(audit_entries.c.record_id == record_id)
    if since is not None:
        conditions.append(audit_entries.c.ts >= to_epoch(since))
    if until is not None:
        conditions.append(audit_entries.c.ts <= to_epoch(until))
    return conditions


def query(conn: Connection, actor: str | None = None, action: str | None = None, record_id: str | None = None,
          since: datetime | None = None, until: datetime | None = None, limit: int = 1000, offset: int = 0
          ) -> tuple[int, list[AuditRow]]:
    """Entries across the store, newest first, filtered in SQL; returns (total matching, page)."""
    limit = check_whole(limit, "limit", 0, MAX_QUERY_LIMIT)
    offset = check_whole(offset, "offset", 0, 2**63 - 1)  # a database integer
    conditions = filter_conditions(actor, action, record_id, since, until)
    total = conn.execute(select(func.count()).select_from(audit_entries).where(*conditions)).scalar()
    q = (select(audit_entries).where(*conditions)
         .order_by(audit_entries.c.ts.desc(), audit_entries.c.seq.desc()).limit(limit).offset(offset))
    return int(total), [row_to_audit(r) for r in conn.execute(q)]


# ----------------------------------------------------------------------------- upgrading a store

UPGRADE_ACTOR = "membrane-engine"


def _reseal(conn: Connection, heads: dict[str, list[tuple[str, str]]]) -> None:
    """Set ``audit_head`` of every (head, id) per table. On PostgreSQL through a temporary table
    filled by COPY and one UPDATE (a million single-row updates would take minutes there)."""
    if conn.dialect.name != "postgresql":
        with driver_cursor(conn) as cursor:
            for table, pairs in heads.items():
                if pairs:
                    cursor.executemany(f"UPDATE {table} SET audit_head = ? WHERE id = ?", pairs)
        return
    from sqlalchemy import Column, MetaData, Table, Text

    staging = Table("membrane_reseal", MetaData(), Column("audit_head", Text), Column("id", Text))
    for table, pairs in heads.items():
        if not pairs:
            continue
        conn.exec_driver_sql("CREATE TEMPORARY TABLE membrane_reseal (audit_head TEXT, id TEXT) ON COMMIT DROP")
        insert_tuples(conn, staging, ("audit_head", "id"), pairs)
        conn.exec_driver_sql(f"UPDATE {table} SET audit_head = s.audit_head FROM membrane_reseal s "
                             f"WHERE {table}.id = s.id")
        conn.exec_driver_sql("DROP TABLE membrane_reseal")


def upgrade(conn: Connection, from_version: int) -> None:
    """Bring a schema 1 store to schema 2 inside ``Store.create``'s write transaction: the new
    columns and tables; every chain head that still seals its chain resealed with the record's
    content digest (a head that does not is left as it is, so verify goes on reporting it); the
    entries written so far bound, by count and digest, into one entry of the store's own log,
    the first of the store-wide sequence; the schema version row. Nothing is deleted, and no
    audit row is changed."""
    from datetime import timezone

    from sqlalchemy import inspect

    from membrane_engine.audit.verify import legacy_digest, stream

    have = {c["name"] for c in inspect(conn).get_columns("audit_entries")}
    for name, kind in (("digest", "VARCHAR(64)"), ("store_position", "INTEGER"), ("store_hash", "VARCHAR(128)")):
        if name not in have:
            conn.exec_driver_sql(f"ALTER TABLE audit_entries ADD COLUMN {name} {kind}")
    conn.exec_driver_sql("CREATE UNIQUE INDEX IF NOT EXISTS uq_audit_store_position ON audit_entries (store_position)")
    audit_subjects.create(conn, checkfirst=True)
    if conn.execute(select(meta.c.value).where(meta.c.key == "store_id")).scalar() is None:
        import uuid

        conn.execute(meta.insert().values(key="store_id", value=str(uuid.uuid4())))
    key = signing_key()
    first = conn.execute(select(audit_entries.c.hash).order_by(audit_entries.c.seq).limit(1)).scalar()
    legacy_keyed = first is not None and scheme(first) == "hmac-sha256"
    if legacy_keyed and not key:
        raise StoreUnavailableError("this store's audit log is keyed and must be upgraded (schema 1 to 2) by a process "
                                    "that holds MEMBRANE_AUDIT_KEY: open it once with the key set; nothing was changed")
    digest, total = legacy_digest(conn)
    legacy_key = key if legacy_keyed else None
    newest = (select(audit_entries.c.record_id.label("rid"), func.max(audit_entries.c.position).label("pos"))
              .group_by(audit_entries.c.record_id).subquery())
    ends = {r.record_id: (r.position, r.hash) for r in conn.execute(
        select(audit_entries.c.record_id, audit_entries.c.position, audit_entries.c.hash).join(
            newest, and_(audit_entries.c.record_id == newest.c.rid, audit_entries.c.position == newest.c.pos)))}
    resealed: dict[str, list[tuple[str, str]]] = {"records": [], "archive": []}
    left: list[str] = []
    columns = ", ".join(("id", "audit_head", *CONTENT_COLUMNS))
    for chunk in stream(conn, f"SELECT {columns} FROM records"):
        for row in chunk:
            rid, head = row[0], row[1]
            end = ends.get(rid)
            if end is not None and head == head_seal_v1(rid, *end, legacy_key):
                resealed["records"].append((head_seal(rid, *end, live_digest(row[2:]), key), rid))
            else:
                left.append(rid)
    for rid, head, doc in conn.execute(select(archive.c.id, archive.c.audit_head, archive.c.doc)):
        end = ends.get(rid)
        if end is not None and head == head_seal_v1(rid, *end, legacy_key):
            resealed["archive"].append((head_seal(rid, *end, archived_digest(rid, doc), key), rid))
        else:
            left.append(rid)
    _reseal(conn, resealed)
    if key:
        conn.execute(meta.insert().values(key="audit_key", value=KeyState(0, legacy_keyed, KeyState.seal(
            key, 0, legacy_keyed)).text()))
    resealed_count = len(resealed["records"]) + len(resealed["archive"])
    details = {"upgrade": {"from_schema": from_version, "to_schema": 2},
               "legacy": {"entries": total, "digest": digest},
               "heads_resealed": resealed_count, "heads_not_resealed": len(left),
               "not_resealed_examples": sorted(left)[:20]}
    append_subject(conn, STORE_SUBJECT, AuditAction.REVISE, UPGRADE_ACTOR,
                   f"audit log upgraded to schema 2 (a store-wide chain and content digests): the {total} earlier "
                   f"entries are bound by count and digest; {resealed_count} chain heads resealed with their "
                   f"record's content" + (f"; {len(left)} heads did not seal their chain and were left as they were"
                                          if left else ""),
                   datetime.now(timezone.utc), details)
    conn.execute(meta.update().where(meta.c.key == "schema_version").values(value="2"))


def __getattr__(name: str) -> Any:
    """``audit.verify``, ``audit.Problem`` and ``audit.checkpoint`` live in audit_verify (which
    imports this module); kept reachable here for callers of the older names."""
    if name in ("verify", "Problem", "checkpoint", "parse_checkpoint"):
        from membrane_engine.audit import verify as audit_verify

        return getattr(audit_verify, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
