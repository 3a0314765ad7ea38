"""The audit log as stored (SPEC 6): appending entries to the per-record and store-wide chains, a
record's content digest read from its row's columns, reading entries back, the statements
``audit.verify`` and ``audit.activity`` read the log with, and the upgrade of a schema 1 store's
log.

What each hash covers is ``rules.chain``'s; this module writes and reads the rows. Each record
(live in ``records`` or in the ``archive``; other subjects, such as the store itself, in
``audit_subjects``) keeps its chain head. Every entry takes the next place in one store-wide
sequence (``store_position``); writers are serialised (SQLite's single writer, PostgreSQL's
advisory lock: ``Store._lock_writers``), so positions follow commit order.

A store remembers that it is keyed (the ``audit_key`` row of ``meta``, sealed under
``MEMBRANE_AUDIT_KEY``): a process without the key, or with another one, refuses to write to it
(``sequence_tail``). Nothing in the engine updates or deletes an audit row.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timezone
from hashlib import sha256
from typing import Any

from sqlalchemy import Boolean, Column, Float, Integer, MetaData, SmallInteger, Table, Text, and_, cast, func, inspect, select
from sqlalchemy.engine import Connection

from membrane_engine.errors import AuditKeyError, StoreUnavailableError
from membrane_engine.model.records import AuditAction, AuditEntry, check_whole, to_epoch
from membrane_engine.rules.chain import (
    ENTRY_COLUMNS,
    GENESIS,
    MAX_QUERY_LIMIT,
    RETRACT_MARK,
    STORE_SUBJECT,
    AuditRow,
    KeyState,
    archived_digest,
    audit_row,
    chain,
    checked_filters,
    content_bytes,
    entries_by_record,
    head_seal,
    head_seal_v1,
    scheme,
    signing_key,
    store_link,
)
from membrane_engine.storage.store import (
    AUDIT_TAIL_STATE,
    ROW_COLUMNS,
    Store,
    archive,
    audit_entries,
    audit_subjects,
    driver_cursor,
    insert_tuples,
    meta,
    records,
    rows_in,
    stream_rows,
)

# ----------------------------------------------------------------------------- content digests

# A record's content is every column of its row but the chain head (the gate reads the label
# columns, prune the policy ones, reads the document), each in a canonical Python type: drivers
# give booleans back as 0/1 (SQLite) or bool (PostgreSQL), numbers as int or float.
CONTENT_COLUMNS = ROW_COLUMNS[:-1]
assert ROW_COLUMNS[-1] == "audit_head"


# Columns whose stored value may come back in another Python type than it was written in:
# booleans (SQLite gives 0/1) and floats written as ints. Every other column reads back as written.
_BOOL_AT = tuple(k for k, name in enumerate(CONTENT_COLUMNS) if isinstance(records.c[name].type, Boolean))
_FLOAT_AT = tuple(k for k, name in enumerate(CONTENT_COLUMNS) if isinstance(records.c[name].type, Float))
_INT_AT = tuple(k for k, name in enumerate(CONTENT_COLUMNS)
                if isinstance(records.c[name].type, (Integer, SmallInteger)) and k not in _BOOL_AT)


def live_digest(values: Sequence[Any]) -> str:
    """sha256 (hex) of a live record's stored content: ``values`` in CONTENT_COLUMNS order (a
    ``store.record_values`` tuple, its head left out, or the columns as read back), each in a
    canonical type (booleans as 0/1, floats as floats, integers as ints)."""
    fields = ["live", *values]
    for k in _BOOL_AT:
        v = fields[k + 1]
        if v is not None:
            fields[k + 1] = 1 if v else 0
    for k in _FLOAT_AT:
        v = fields[k + 1]
        if v is not None and type(v) is not float:
            fields[k + 1] = float(v)
    for k in _INT_AT:
        v = fields[k + 1]
        if v is not None and type(v) is not int:
            fields[k + 1] = int(v)
    return sha256(content_bytes(fields)).hexdigest()


def row_digest(row: dict[str, Any]) -> str:
    """``live_digest`` of a row as ``store.record_row`` makes it."""
    return live_digest([row[c] for c in CONTENT_COLUMNS])


# ----------------------------------------------------------------------------- reads


def is_retract() -> Any:
    """SQL condition: the entry is a retract (a ``delete`` whose rationale carries the mark)."""
    return and_(audit_entries.c.action == AuditAction.DELETE.value,
                func.substr(audit_entries.c.rationale, 1, len(RETRACT_MARK)) == RETRACT_MARK)


def last_creates(store: Store, record_ids: Iterable[str]) -> dict[str, tuple[int, str]]:
    """Each record's last ``create`` entry as (position, rationale): the entry by which this
    engine took it in (``history.taken_in``); records without one are left out. One look-up
    per 900 records."""
    ids = list(dict.fromkeys(record_ids))
    taken: dict[str, tuple[int, str]] = {}
    with store.read() as conn:
        for start in range(0, len(ids), 900):
            q = (select(audit_entries.c.record_id, audit_entries.c.position, audit_entries.c.rationale)
                 .where(audit_entries.c.record_id.in_(ids[start:start + 900]),
                        audit_entries.c.action == AuditAction.CREATE.value))
            for rid, position, rationale in conn.execute(q):
                if rid not in taken or position > taken[rid][0]:
                    taken[rid] = (int(position), rationale or "")
    return taken


def logs_of(conn: Connection, record_ids: list[str]) -> dict[str, list[AuditEntry]]:
    """The audit entries of each of ``record_ids``, oldest first."""
    rows = rows_in(conn, "audit_entries", ("record_id", "action", "actor", "timestamp", "rationale", "extra"),
                   "record_id", record_ids, order_by=("record_id", "position"))
    return entries_by_record(record_ids, rows)


# ----------------------------------------------------------------------------- the store-wide sequence


def _refuse(reason: str) -> AuditKeyError:
    return AuditKeyError(f"{reason}; nothing was written")


def sequence_tail(conn: Connection) -> list[Any]:
    """[next store-wide position, the chain value before it, the key] of this write transaction:
    read once (``Store.audit_tail``), after the key is checked against the store's."""
    state = conn.info.get(AUDIT_TAIL_STATE)
    if state is not None:
        return state
    key_text, position, last_hash = Store.audit_tail(conn)
    key = signing_key()
    next_position = 0 if position is None else int(position) + 1
    keyed = KeyState.parse(key_text)
    if keyed is None:
        if last_hash and scheme(last_hash) == "hmac-sha256" and not key:
            raise _refuse("this store's audit log is keyed (its entries are HMAC-sealed) and MEMBRANE_AUDIT_KEY "
                          "is not set in this process: a keyless writer would break the chain")
        if key:  # the first keyed writer: from here on the store is keyed
            conn.execute(meta.insert().values(key="audit_key", value=KeyState(
                next_position, False, KeyState.seal(key, next_position, False)).text()))
    elif not key:
        raise _refuse("this store's audit log is keyed (MEMBRANE_AUDIT_KEY was set when it was written) and "
                      "MEMBRANE_AUDIT_KEY is not set in this process")
    elif not keyed.fits(key):
        raise _refuse("MEMBRANE_AUDIT_KEY is not the key this store's audit log is written with")
    state = [next_position, last_hash or GENESIS, key]
    conn.info[AUDIT_TAIL_STATE] = state
    return state


def place(conn: Connection, rows: list[Any]) -> list[Any]:
    """Give audit rows (dicts, completed in place, or ``NEW_ENTRY_COLUMNS`` tuples, returned
    completed) the next store-wide positions in list order, with their chain values. Inside the
    caller's write transaction (writers are serialised, so the order is commit order)."""
    state = sequence_tail(conn)
    position, prev, key = state
    out: list[Any] = []
    for row in rows:
        if isinstance(row, dict):
            prev = store_link(prev, position, row["hash"], key)
            row["store_position"] = position
            row["store_hash"] = prev
            out.append(row)
        else:
            prev = store_link(prev, position, row[10], key)
            out.append((*row, position, prev))
        position += 1
    state[0], state[1] = position, prev
    return out


def insert_entries(conn: Connection, rows: list[tuple]) -> None:
    """Bulk insert of audit rows made by ``new_chain`` (an import's new records), in list
    order, each taking the next store-wide position."""
    insert_tuples(conn, audit_entries, ENTRY_COLUMNS, place(conn, rows))


# ----------------------------------------------------------------------------- appending


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


# ----------------------------------------------------------------------------- entries across the store


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


# ----------------------------------------------------------------------------- what verify reads


def first_details(conn: Connection, subject: str, actor: str) -> str | None:
    """The ``details`` text of ``subject``'s first entry by ``actor`` (None: no such entry, or
    it has none)."""
    return conn.execute(select(audit_entries.c.details).where(
        (audit_entries.c.record_id == subject) & (audit_entries.c.actor == actor))
        .order_by(audit_entries.c.position).limit(1)).scalar()


def meta_value(conn: Connection, key: str) -> str | None:
    """The ``meta`` row ``key`` (the audit key check, the store id, chain heads), or None."""
    return conn.execute(select(meta.c.value).where(meta.c.key == key)).scalar()


def put_meta(conn: Connection, key: str, value: str) -> None:
    """Set the ``meta`` row ``key``, inside the caller's write transaction."""
    if conn.execute(meta.update().where(meta.c.key == key).values(value=value)).rowcount == 0:
        conn.execute(meta.insert().values(key=key, value=value))


def one_snapshot(conn: Connection) -> None:
    """On PostgreSQL, make this read transaction REPEATABLE READ when nothing has run in it yet:
    under READ COMMITTED each statement sees its own snapshot, and a chain head read before a
    concurrent append would not match the entries read after it. (SQLite read transactions
    already see one snapshot.)"""
    if conn.dialect.name != "postgresql":
        return
    try:
        from psycopg.pq import TransactionStatus

        idle = conn.connection.driver_connection.info.transaction_status == TransactionStatus.IDLE
    except (ImportError, AttributeError):
        return
    if idle:
        conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")


def store_chain_end(conn: Connection) -> tuple[int, str]:
    """(newest store-wide position, its chain value); (-1, GENESIS) when the sequence is empty."""
    row = conn.execute(select(audit_entries.c.store_position, audit_entries.c.store_hash)
                       .where(audit_entries.c.store_position.is_not(None))
                       .order_by(audit_entries.c.store_position.desc()).limit(1)).first()
    return (-1, GENESIS) if row is None else (int(row[0]), row[1])


def record_contents(conn: Connection) -> Iterator[list[tuple]]:
    """Every live record as (id, chain head, *its CONTENT_COLUMNS), in chunks, streamed."""
    columns = ", ".join(("id", "audit_head", *CONTENT_COLUMNS))
    return stream_rows(conn, f"SELECT {columns} FROM records")


def archived_contents(conn: Connection) -> Iterator[Any]:
    """Every archived record as (id, chain head, archived JSON text)."""
    return iter(conn.execute(select(archive.c.id, archive.c.audit_head, archive.c.doc)))


def subject_heads(conn: Connection) -> Iterator[Any]:
    """The chain head of every subject that is not a record, as (subject, head)."""
    return iter(conn.execute(select(audit_subjects.c.subject, audit_subjects.c.audit_head)))


ENTRY_READ = ("seq", "record_id", "position", "action", "actor", "timestamp", "ts", "rationale", "details", "extra",
              "prev_hash", "hash", "digest", "store_position")


def entries_in_chain_order(conn: Connection) -> Iterator[list[tuple]]:
    """Every audit entry (``ENTRY_READ`` columns) by record and position, in chunks, streamed."""
    return stream_rows(conn, f"SELECT {', '.join(ENTRY_READ)} FROM audit_entries ORDER BY record_id, position")


def store_sequence(conn: Connection) -> Iterator[list[tuple]]:
    """The store-wide sequence in order, as chunks of (store_position, record_id, position, hash,
    store_hash), streamed."""
    return stream_rows(conn, "SELECT store_position, record_id, position, hash, store_hash FROM audit_entries "
                             "WHERE store_position IS NOT NULL ORDER BY store_position", 10000)


def legacy_digest(conn: Connection) -> tuple[str, int]:
    """sha256 over the hashes of the entries written before schema 2, in the order they were
    stored, and how many there are (what the upgrade entry records)."""
    h = hashlib.sha256()
    total = 0
    for chunk in stream_rows(conn, "SELECT hash FROM audit_entries WHERE store_position IS NULL ORDER BY seq", 10000):
        for (hash_,) in chunk:
            h.update(hash_.encode() + b"\n")
        total += len(chunk)
    return h.hexdigest(), total


# ----------------------------------------------------------------------------- what activity counts


def hash_at(conn: Connection, seq: int) -> str | None:
    """The hash of the entry with sequence number ``seq``, or None when there is none."""
    return conn.execute(select(audit_entries.c.hash).where(audit_entries.c.seq == seq)).scalar()


def newest_seq(conn: Connection) -> int:
    """The sequence number of the newest entry (0: none)."""
    return conn.execute(select(func.max(audit_entries.c.seq))).scalar() or 0


def hour_counts(conn: Connection, after_seq: int, through_seq: int, hour: int) -> dict[tuple[int, str], int]:
    """(hour since the epoch, action in words) -> entries with ``after_seq < seq <= through_seq``
    (``action_counts``), ``hour`` seconds long."""
    scaled = audit_entries.c.ts / hour
    bucket = cast(scaled, Integer) if conn.dialect.name == "sqlite" else func.floor(scaled)
    return action_counts(conn, bucket, [audit_entries.c.seq > after_seq, audit_entries.c.seq <= through_seq])


def action_counts(conn: Connection, bucket: Any, conditions: list[Any]) -> dict[tuple[int, str], int]:
    """(bucket, action in words) -> entries matching ``conditions``, a retract as "retract".

    Two GROUP BYs: every entry by its stored action (from the ``(ts, action)`` index alone), then
    the retracts among the deletes (few; found through the action index) moved to their own
    name. ``conditions`` must bound the entries by sequence number when other writers may
    append between the two statements (PostgreSQL reads each statement afresh)."""
    q = (select(bucket, audit_entries.c.action, func.count()).where(*conditions)
         .group_by(bucket, audit_entries.c.action))
    counts = {(int(b), str(a)): int(n) for b, a, n in conn.execute(q)}
    retracts = select(bucket, func.count()).where(*conditions, is_retract()).group_by(bucket)
    delete = AuditAction.DELETE.value
    for b, n in conn.execute(retracts):
        b, n = int(b), int(n)
        left = counts.get((b, delete), 0) - n
        if left > 0:
            counts[(b, delete)] = left
        else:
            counts.pop((b, delete), None)
        counts[(b, "retract")] = n
    return counts


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
    have = {c["name"] for c in inspect(conn).get_columns("audit_entries")}
    for name, kind in (("digest", "VARCHAR(64)"), ("store_position", "INTEGER"), ("store_hash", "VARCHAR(128)")):
        if name not in have:
            conn.exec_driver_sql(f"ALTER TABLE audit_entries ADD COLUMN {name} {kind}")
    conn.exec_driver_sql("CREATE UNIQUE INDEX IF NOT EXISTS uq_audit_store_position ON audit_entries (store_position)")
    audit_subjects.create(conn, checkfirst=True)
    if conn.execute(select(meta.c.value).where(meta.c.key == "store_id")).scalar() is None:
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
    for chunk in record_contents(conn):
        for row in chunk:
            rid, head = row[0], row[1]
            end = ends.get(rid)
            if end is not None and head == head_seal_v1(rid, *end, legacy_key):
                resealed["records"].append((head_seal(rid, *end, live_digest(row[2:]), key), rid))
            else:
                left.append(rid)
    for rid, head, doc in archived_contents(conn):
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
