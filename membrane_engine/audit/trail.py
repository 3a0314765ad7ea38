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

import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from datetime import datetime
from hashlib import sha256
from collections.abc import Iterable, Sequence
from typing import Any

import orjson
from sqlalchemy import Boolean, Float, Integer, SmallInteger, and_, func, select
from sqlalchemy.engine import Connection

from membrane_engine.errors import AuditKeyError, StoreUnavailableError, ValidationError
from membrane_engine.model.records import (
    AuditAction,
    AuditEntry,
    check_instant,
    check_text,
    check_whole,
    format_time,
    parse_time,
    to_epoch,
)
from membrane_engine.storage.store import (
    AUDIT_TAIL_STATE,
    ROW_COLUMNS,
    Store,
    _driver_cursor,
    archive,
    audit_entries,
    audit_subjects,
    insert_tuples,
    meta,
    records,
    rows_in,
)

GENESIS = "0" * 64
_ENTRY_FIELDS = frozenset(AuditEntry.model_fields)


def signing_key() -> bytes | None:
    """The HMAC key of audit hashes (MEMBRANE_AUDIT_KEY), None for plain sha256."""
    key = os.environ.get("MEMBRANE_AUDIT_KEY")
    return key.encode() if key else None


def _canonical(fields: list[Any]) -> bytes:
    """What a hash covers: ``json.dumps(fields, separators=(",", ":"), ensure_ascii=False)`` in
    UTF-8. orjson writes the same bytes for strings (every code point escaped or not alike), ints
    and None, several times faster; anything else (and strings orjson refuses: lone surrogates)
    goes through json itself, so the bytes, and the errors, are json's."""
    for value in fields:
        if value is not None and type(value) is not str and type(value) is not int:
            break
    else:
        try:
            return orjson.dumps(fields)
        except TypeError:
            pass
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode()


def entry_hash(prev_hash: str, record_id: str, position: int, action: str, actor: str,
               timestamp: str, rationale: str, details: str | None, extra: str | None = None) -> str:
    """The hash of an entry written before schema 2 (no content digest, no store position)."""
    fields = [prev_hash, record_id, position, action, actor, timestamp, rationale, details]
    if extra is not None:  # entries without extra fields hash as they always have
        fields.append(extra)
    return _digest(_canonical(fields))


def entry_hash_v2(prev_hash: str, record_id: str, position: int, action: str, actor: str, timestamp: str,
                  rationale: str, details: str | None, extra: str | None, digest: str | None,
                  key: bytes | None | bool = False) -> str:
    """The hash of an entry: its content, place in the record's chain, the previous entry's hash
    and the record's content digest after the change (None on history an import brought). Ten
    fields, so no entry of the older form (eight or nine) hashes alike."""
    return _digest(_canonical([prev_hash, record_id, position, action, actor, timestamp, rationale, details,
                               extra, digest]), key)


def store_link(prev_store_hash: str, store_position: int, hash_: str, key: bytes | None | bool = False) -> str:
    """The store-wide chain value through the entry at ``store_position`` (whose hash is ``hash_``)."""
    return _digest(_canonical(["store", store_position, prev_store_hash, hash_]), key)


def _digest(content: bytes, key: bytes | None | bool = False) -> str:
    """sha256 of ``content`` (HMAC under ``MEMBRANE_AUDIT_KEY`` when set; ``key`` passes a key
    already read, or None for none)."""
    if key is False:
        key = signing_key()
    if key:
        return "hmac-sha256:" + hmac.new(key, content, hashlib.sha256).hexdigest()
    return "sha256:" + sha256(content).hexdigest()


def head_seal_v1(record_id: str, position: int, last_hash: str, key: bytes | None | bool = False) -> str:
    """A chain head as written before schema 2 (without the content digest)."""
    return _digest(_canonical(["head", record_id, position, last_hash]), key)


def head_seal(record_id: str, position: int, last_hash: str, digest: str | None,
              key: bytes | None | bool = False) -> str:
    """The chain head a record stores: a seal over its newest entry's position and hash and the
    digest of its stored content (None for subjects that are not records)."""
    return _digest(_canonical(["head", record_id, position, last_hash, digest]), key)


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


def _content_bytes(fields: list[Any]) -> bytes:
    try:
        return orjson.dumps(fields)
    except TypeError:  # a lone surrogate (refused on the way in, but verify reads what is there)
        return json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")


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
    return sha256(_content_bytes(fields)).hexdigest()


def row_digest(row: dict[str, Any]) -> str:
    """``live_digest`` of a row as ``store.record_row`` makes it."""
    return live_digest([row[c] for c in CONTENT_COLUMNS])


def archived_digest(record_id: str, doc_text: str) -> str:
    """sha256 (hex) of an archived record's stored content: its id and JSON text as archived."""
    return sha256(_content_bytes(["archived", record_id, doc_text])).hexdigest()


def new_chain(record_id: str, entries: list[tuple[str, str, str, float, str, str | None]],
              key: bytes | None, digest: str | None = None) -> tuple[list[tuple], str]:
    """The audit rows (``NEW_ENTRY_COLUMNS`` order: ``ENTRY_COLUMNS`` but the store-wide ones,
    which ``place`` adds when they are written) and chain head of a record that has no entries
    yet, from its ``entries`` of (action, actor, timestamp text, ts, rationale, extra text) in
    chain order; the last one binds ``digest`` (the record's content as it is written), hashed
    as ``entry_hash_v2`` and ``head_seal`` would, under ``key`` (from ``signing_key()``, read
    once by the caller)."""
    rows = []
    prev = GENESIS
    last = len(entries) - 1
    for position, (action, actor, stamp, ts, rationale, extra) in enumerate(entries):
        bound = digest if position == last else None
        hashed = _digest(_canonical([prev, record_id, position, action, actor, stamp, rationale, None, extra, bound]),
                         key)
        rows.append((record_id, position, action, actor, stamp, ts, rationale, None, extra, prev, hashed, bound))
        prev = hashed
    return rows, head_seal(record_id, last, prev, digest, key)


def _scheme(digest: str) -> str:
    return digest.split(":", 1)[0] if ":" in digest else ""


@dataclass(frozen=True)
class AuditRow:
    """An audit entry as stored: the Membrane entry plus where it sits in the chain."""

    seq: int
    record_id: str
    position: int
    entry: AuditEntry
    details: dict[str, Any] | None


def details_text(details: dict[str, Any] | None) -> str | None:
    """How ``details`` is stored and hashed (canonical JSON; None when empty)."""
    return json.dumps(details, sort_keys=True, ensure_ascii=False, allow_nan=False) if details else None


def extra_of(entry: AuditEntry) -> dict[str, Any] | None:
    """An entry's unknown extra JSON fields (SPEC 1: kept on import, written back on export),
    as JSON values; None when it has none."""
    if not entry.model_extra:
        return None
    dumped = entry.model_dump(mode="json")
    return {k: dumped[k] for k in entry.model_extra}


def extra_text(extra: dict[str, Any] | None) -> str | None:
    """How an entry's extra fields are stored (``audit_entries.extra``) and hashed: JSON in the
    order given (export writes them back in that order); None when there are none."""
    return json.dumps(extra, separators=(",", ":"), ensure_ascii=False, allow_nan=False) if extra else None


def _with_extra(entry: AuditEntry, text: str | None) -> AuditEntry:
    """``entry`` carrying the stored extra fields (set directly: any key, even one pydantic
    would read as an argument, stays a field of the entry)."""
    if text:
        extra = json.loads(text)
        if isinstance(extra, dict) and extra:
            object.__setattr__(entry, "__pydantic_extra__", {**(entry.__pydantic_extra__ or {}), **extra})
    return entry


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


def chain(entries: list[dict[str, Any]], last: dict[str, tuple[int, str]],
          digests: dict[str, str | None] | None = None) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The audit_entries rows (every column but ``seq`` and the store-wide ones, which ``place``
    adds) of ``entries`` (as ``append_batch`` takes them) appended, in list order per record,
    after each record's chain end in ``last`` ({record_id: (newest position, its hash)};
    absent: no entries yet), and the new chain head of every record touched. The last entry of
    each record binds ``digests[record_id]`` (None: not a record's content, or unknown)."""
    digests = digests or {}
    key = signing_key()
    last = dict(last)
    final = {e["record_id"]: k for k, e in enumerate(entries)}
    rows = []
    for k, e in enumerate(entries):
        rid = e["record_id"]
        position, prev = last.get(rid, (-1, GENESIS))
        position += 1
        action = e["action"]
        action_value = action.value if isinstance(action, AuditAction) else AuditAction(action).value
        when = e["timestamp"]
        stamp = format_time(when)
        text_ = details_text(e.get("details"))
        extra = extra_text(e.get("extra"))
        bound = digests.get(rid) if final[rid] == k else None
        hashed = entry_hash_v2(prev, rid, position, action_value, e["actor"], stamp, e["rationale"], text_, extra,
                               bound, key)
        rows.append({"record_id": rid, "position": position, "action": action_value, "actor": e["actor"],
                     "timestamp": stamp, "ts": to_epoch(when), "rationale": e["rationale"], "details": text_,
                     "extra": extra, "prev_hash": prev, "hash": hashed, "digest": bound})
        last[rid] = (position, hashed)
    return rows, {rid: head_seal(rid, *last[rid], digests.get(rid), key) for rid in final}


ENTRY_COLUMNS = ("record_id", "position", "action", "actor", "timestamp", "ts", "rationale", "details",
                 "extra", "prev_hash", "hash", "digest", "store_position", "store_hash")
NEW_ENTRY_COLUMNS = ENTRY_COLUMNS[:-2]  # what new_chain makes: place adds the store-wide columns


def insert_entries(conn: Connection, rows: list[tuple]) -> None:
    """Bulk insert of audit rows made by ``new_chain`` (an import's new records), in list
    order, each taking the next store-wide position."""
    insert_tuples(conn, audit_entries, ENTRY_COLUMNS, place(conn, rows))


# ----------------------------------------------------------------------------- the store-wide sequence


@dataclass(frozen=True)
class KeyState:
    """The ``audit_key`` row of ``meta``: the store is keyed from store-wide position
    ``start`` on (entries before it, and entries written before schema 2 unless ``legacy_keyed``,
    are plain sha256); ``check`` seals both under the key, so no one without it can move them."""

    start: int
    legacy_keyed: bool
    check: str

    @staticmethod
    def parse(text: str | None) -> KeyState | None:
        if text is None:
            return None
        try:
            data = json.loads(text)
            return KeyState(int(data["from"]), bool(data["legacy_keyed"]), str(data["check"]))
        except (ValueError, TypeError, KeyError):
            return KeyState(0, True, "")  # unreadable: keyed from the start, and no key checks out

    @staticmethod
    def seal(key: bytes, start: int, legacy_keyed: bool) -> str:
        return _digest(_canonical(["membrane-audit-key", start, legacy_keyed]), key)

    def fits(self, key: bytes) -> bool:
        return hmac.compare_digest(self.check, self.seal(key, self.start, self.legacy_keyed))

    def text(self) -> str:
        return json.dumps({"scheme": "hmac-sha256", "from": self.start, "legacy_keyed": self.legacy_keyed,
                           "check": self.check})

    def keyed_at(self, store_position: int | None) -> bool:
        """Whether the entry at ``store_position`` (None: written before schema 2) must be keyed."""
        return self.legacy_keyed if store_position is None else store_position >= self.start


def _refuse(reason: str) -> AuditKeyError:
    return AuditKeyError(f"{reason}; nothing was written")


def _tail(conn: Connection) -> list[Any]:
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
        if last_hash and _scheme(last_hash) == "hmac-sha256" and not key:
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
    state = _tail(conn)
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


STORE_SUBJECT = ""  # the store itself as an audit subject (no record has an empty id)


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


def _row_to_audit(r) -> AuditRow:
    entry = AuditEntry(action=r.action, actor=r.actor, timestamp=parse_time(r.timestamp), rationale=r.rationale)
    entry = _with_extra(entry, r.extra)
    return AuditRow(r.seq, r.record_id, r.position, entry, json.loads(r.details) if r.details else None)


def log_of(conn: Connection, record_id: str) -> list[AuditRow]:
    q = select(audit_entries).where(audit_entries.c.record_id == record_id).order_by(audit_entries.c.position)
    return [_row_to_audit(r) for r in conn.execute(q)]


def logs_of(conn: Connection, record_ids: list[str]) -> dict[str, list[AuditEntry]]:
    rows = rows_in(conn, "audit_entries", ("record_id", "action", "actor", "timestamp", "rationale", "extra"),
                   "record_id", record_ids, order_by=("record_id", "position"))
    return entries_by_record(record_ids, rows)


def entries_by_record(record_ids: list[str], rows: Iterable[tuple]) -> dict[str, list[AuditEntry]]:
    """Audit logs from rows of (record_id, [position,] action, actor, timestamp, rationale,
    extra), oldest first per record; every id of ``record_ids`` gets a (maybe empty) list."""
    out: dict[str, list[AuditEntry]] = {rid: [] for rid in record_ids}
    for row in rows:
        record_id, action, actor, timestamp, rationale, extra = row[0], *row[-5:]
        out[record_id].append(_with_extra(AuditEntry.model_construct(
            action=AuditAction(action), actor=actor, timestamp=parse_time(timestamp), rationale=rationale), extra))
    return out


# A retract is written as Membrane's ``delete`` (the record stays) with this rationale prefix;
# the console names it "retract" (``history.kind_of``, ``activity.action_counts``).
RETRACT_MARK = "retracted:"


def is_retract() -> Any:
    """SQL condition: the entry is a retract (a ``delete`` whose rationale carries the mark)."""
    return and_(audit_entries.c.action == AuditAction.DELETE.value,
                func.substr(audit_entries.c.rationale, 1, len(RETRACT_MARK)) == RETRACT_MARK)


def filter_conditions(actor: str | None = None, action: str | None = None, record_id: str | None = None,
                      since: datetime | None = None, until: datetime | None = None) -> list[Any]:
    """SQL conditions of the audit filters: exact actor / action / record id, inclusive time bounds."""
    actor, action, record_id, since, until = _checked_filters(actor, action, record_id, since, until)
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


def _checked_filters(actor: Any, action: Any, record_id: Any, since: Any, until: Any) -> tuple[Any, ...]:
    """The filters as SQL compares them, each refused with a ValidationError naming it when it is
    not what it says (an unknown action, a time that is not a datetime, ...)."""
    for name, value in (("actor", actor), ("record_id", record_id)):
        if value is not None and not isinstance(value, str):  # "" and None: no filter
            raise ValidationError(f"{name} must be a string (got {value!r:.80})", [(name, "not a string")])
        if value:
            check_text(value, name)
    if action is not None and not isinstance(action, AuditAction):
        try:
            action = AuditAction(action)
        except (ValueError, TypeError):
            known = ", ".join(a.value for a in AuditAction)
            raise ValidationError(f"action must be one of {known} (got {action!r:.80})", [("action", "unknown")]) from None
    since = check_instant(since, "since") if since is not None else None
    until = check_instant(until, "until") if until is not None else None
    return actor, action, record_id, since, until


MAX_QUERY_LIMIT = 100_000  # entries in one page: the console reads larger exports in pages


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
    return int(total), [_row_to_audit(r) for r in conn.execute(q)]




# ----------------------------------------------------------------------------- upgrading a store

UPGRADE_ACTOR = "membrane-engine"


def _reseal(conn: Connection, heads: dict[str, list[tuple[str, str]]]) -> None:
    """Set ``audit_head`` of every (head, id) per table. On PostgreSQL through a temporary table
    filled by COPY and one UPDATE (a million single-row updates would take minutes there)."""
    if conn.dialect.name != "postgresql":
        with _driver_cursor(conn) as cursor:
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
    legacy_keyed = first is not None and _scheme(first) == "hmac-sha256"
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
