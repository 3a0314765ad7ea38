"""The audit trail: append-only, hash-chained per record (SPEC 6).

Each entry's hash covers its content (action, actor, timestamp, rationale, the ``details``
of before/after values and, for an imported entry that has them, its unknown ``extra`` JSON
fields, SPEC 1), its record id and position, and the previous entry's hash. Each record
(live in ``records`` or in the ``archive``) keeps its chain head: a seal over the record id, the
newest entry's position and that entry's hash. Because the head names the position, cutting
entries off the end and pointing the head at the new last entry is caught too.

With ``MEMBRANE_AUDIT_KEY`` set, hashes and heads are HMAC-SHA256 under that key: someone who can
edit the database but does not hold the key cannot forge a consistent chain (recomputed plain
sha256 hashes are reported). Without a key the chain still catches every edit that does not
recompute the hashes. Nothing in the engine updates or deletes an audit row.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from datetime import datetime
from hashlib import sha256
from collections.abc import Iterable
from typing import Any

import orjson
from sqlalchemy import and_, func, select
from sqlalchemy.engine import Connection

from .errors import ValidationError
from .schema import (AuditAction, AuditEntry, check_instant, check_text, check_whole, format_time,
                     parse_time, to_epoch)
from .store import archive, audit_entries, insert_tuples, records, rows_in

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
    fields = [prev_hash, record_id, position, action, actor, timestamp, rationale, details]
    if extra is not None:  # entries without extra fields hash as they always have
        fields.append(extra)
    return _digest(_canonical(fields))


def _digest(content: bytes, key: bytes | None | bool = False) -> str:
    """sha256 of ``content`` (HMAC under ``MEMBRANE_AUDIT_KEY`` when set; ``key`` passes a key
    already read, or None for none)."""
    if key is False:
        key = signing_key()
    if key:
        return "hmac-sha256:" + hmac.new(key, content, hashlib.sha256).hexdigest()
    return "sha256:" + sha256(content).hexdigest()


def head_seal(record_id: str, position: int, last_hash: str) -> str:
    """The chain head a record stores: a seal over its newest entry's position and hash."""
    return _digest(_canonical(["head", record_id, position, last_hash]))


def new_chain(record_id: str, entries: list[tuple[str, str, str, float, str, str | None]],
              key: bytes | None) -> tuple[list[tuple], str]:
    """The audit rows (``ENTRY_COLUMNS`` order) and chain head of a record that has no entries
    yet, from its ``entries`` of (action, actor, timestamp text, ts, rationale, extra text) in
    chain order, hashed as ``entry_hash`` and ``head_seal`` would, under ``key`` (from
    ``signing_key()``, read once by the caller)."""
    rows = []
    prev = GENESIS
    position = 0
    for action, actor, stamp, ts, rationale, extra in entries:
        fields = [prev, record_id, position, action, actor, stamp, rationale, None]
        if extra is not None:
            fields.append(extra)
        digest = _digest(_canonical(fields), key)
        rows.append((record_id, position, action, actor, stamp, ts, rationale, None, extra, prev, digest))
        prev = digest
        position += 1
    return rows, _digest(_canonical(["head", record_id, position - 1, prev]), key)


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
           when: datetime, details: dict[str, Any] | None = None) -> str:
    """Append one entry to a record's chain; returns the new chain head (store it in
    ``records.audit_head`` or ``archive.audit_head``). The caller holds the store's write
    transaction, so positions cannot race."""
    return append_batch(conn, [{"record_id": record_id, "action": action, "actor": actor,
                                "timestamp": when, "rationale": rationale, "details": details}])[record_id]


def append_batch(conn: Connection, entries: list[dict[str, Any]]) -> dict[str, str]:
    """Append entries (dicts of record_id, action, actor, timestamp (datetime), rationale,
    details and optionally extra) to existing or new chains, in list order per record, with one
    lookup of the chain ends per 900 records and one insert. Returns the new chain head of every
    record touched."""
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
    rows, heads = chain(entries, last)
    conn.execute(audit_entries.insert(), rows)
    return heads


def chain(entries: list[dict[str, Any]], last: dict[str, tuple[int, str]]
          ) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The audit_entries rows (every column but ``seq``) of ``entries`` (as ``append_batch``
    takes them) appended, in list order per record, after each record's chain end in ``last``
    ({record_id: (newest position, its hash)}; absent: no entries yet), and the new chain head
    of every record touched."""
    last = dict(last)
    rows = []
    for e in entries:
        rid = e["record_id"]
        position, prev = last.get(rid, (-1, GENESIS))
        position += 1
        action = e["action"]
        action_value = action.value if isinstance(action, AuditAction) else AuditAction(action).value
        when = e["timestamp"]
        stamp = format_time(when)
        text_ = details_text(e.get("details"))
        extra = extra_text(e.get("extra"))
        digest = entry_hash(prev, rid, position, action_value, e["actor"], stamp, e["rationale"], text_, extra)
        rows.append({"record_id": rid, "position": position, "action": action_value, "actor": e["actor"],
                     "timestamp": stamp, "ts": to_epoch(when), "rationale": e["rationale"], "details": text_,
                     "extra": extra, "prev_hash": prev, "hash": digest})
        last[rid] = (position, digest)
    return rows, {rid: head_seal(rid, *last[rid]) for rid in dict.fromkeys(e["record_id"] for e in entries)}


ENTRY_COLUMNS = ("record_id", "position", "action", "actor", "timestamp", "ts", "rationale", "details",
                  "extra", "prev_hash", "hash")


def insert_entries(conn: Connection, rows: list[tuple]) -> None:
    """Bulk insert of audit rows made by ``new_chain`` (an import's new records)."""
    insert_tuples(conn, audit_entries, ENTRY_COLUMNS, rows)


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


@dataclass(frozen=True)
class Problem:
    record_id: str
    position: int | None
    problem: str

    def __str__(self) -> str:
        where = f"entry {self.position}" if self.position is not None else "chain"
        return f"record {self.record_id}, {where}: {self.problem}"


def _consistent_snapshot(conn: Connection) -> None:
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


def verify(conn: Connection) -> list[Problem]:
    """Walk every chain; report edited, deleted, reordered, inserted or truncated entries, heads
    that do not seal their chain, and archived copies of a log that differ from the chain.
    Problems come sorted by record id, then position. Reads one consistent snapshot (see
    ``_consistent_snapshot``), so writers committing meanwhile cause no false reports."""
    _consistent_snapshot(conn)
    keyed = signing_key() is not None
    expected_scheme = "hmac-sha256" if keyed else "sha256"
    heads: dict[str, str | None] = dict(conn.execute(select(records.c.id, records.c.audit_head)).all())
    archived_docs: dict[str, str] = {}
    for rid, head, doc in conn.execute(select(archive.c.id, archive.c.audit_head, archive.c.doc)):
        heads[rid] = head
        archived_docs[rid] = doc
    problems: list[Problem] = []
    # archived ids -> (action, actor, timestamp, rationale, extra fields)
    chains: dict[str, list[tuple[str, str, str, str, dict[str, Any]]]] = {}

    state: dict[str, Any] = {"id": None}
    with_entries: set[str] = set()

    def close() -> None:
        rid = state["id"]
        if rid is None:
            return
        head = heads.get(rid, None)
        if rid not in heads:
            problems.append(Problem(rid, None, "entries exist for a record that is neither in the store nor in the archive"))
        elif head is None:
            problems.append(Problem(rid, None, "record has entries but no chain head"))
        elif head != head_seal(rid, state["last_position"], state["prev"]):
            if _scheme(head) != expected_scheme and _scheme(head) in ("sha256", "hmac-sha256"):
                problems.append(Problem(rid, None, f"chain head is sealed with {_scheme(head)}, expected "
                                                   f"{expected_scheme}: forged or written under another key setting"))
            else:
                problems.append(Problem(rid, state["expected"],
                                        f"chain head does not seal the last stored entry (position "
                                        f"{state['last_position']}): entries missing at the end (truncated) "
                                        "or head altered"))

    q = (select(audit_entries).order_by(audit_entries.c.record_id, audit_entries.c.position)
         .execution_options(yield_per=5000))
    for r in conn.execute(q):
        if r.record_id != state["id"]:
            close()
            with_entries.add(r.record_id)
            state.update(id=r.record_id, prev=GENESIS, expected=0, last_position=-1, last_seq=None,
                         scheme_reported=False)
            if r.record_id in archived_docs:
                chains[r.record_id] = []
        rid = r.record_id
        gap = r.position != state["expected"]
        if gap:
            if r.position > state["expected"]:
                missing = (f"position {state['expected']} is missing" if r.position == state["expected"] + 1 else
                           f"positions {state['expected']}..{r.position - 1} are missing")
                problems.append(Problem(rid, state["expected"], f"{missing} (next stored is {r.position}): entry deleted"))
            else:
                problems.append(Problem(rid, r.position, f"position {r.position} appears again: entry inserted"))
        elif r.prev_hash != state["prev"]:
            problems.append(Problem(rid, r.position, "does not link to the entry before it (deleted, inserted or reordered)"))
        if state["last_seq"] is not None and r.seq < state["last_seq"]:
            problems.append(Problem(rid, r.position, "stored before the entry that precedes it in the chain (reordered)"))
        scheme = _scheme(r.hash)
        if scheme != expected_scheme and not state["scheme_reported"]:
            state["scheme_reported"] = True
            if keyed:
                problems.append(Problem(rid, r.position, f"hash is {scheme or 'unkeyed'} but the store is keyed "
                                                         "(MEMBRANE_AUDIT_KEY): recomputed without the key (forged)"))
            else:
                problems.append(Problem(rid, r.position, f"hash is {scheme}: set MEMBRANE_AUDIT_KEY to verify it"))
        elif scheme == expected_scheme:
            digest = entry_hash(r.prev_hash, rid, r.position, r.action, r.actor, r.timestamp, r.rationale, r.details,
                                r.extra)
            if digest != r.hash:
                problems.append(Problem(rid, r.position, "content does not match its hash (edited or moved)"))
        try:
            ts_ok = abs(to_epoch(parse_time(r.timestamp)) - r.ts) < 1e-3
        except (ValueError, TypeError):
            ts_ok = False
        if not ts_ok:
            problems.append(Problem(rid, r.position, "time index (ts) does not match the entry's timestamp (edited)"))
        if rid in chains:
            try:
                extra = json.loads(r.extra) if r.extra else {}
            except ValueError:
                extra = None  # unreadable: the hash check above reports the edit
            chains[rid].append((r.action, r.actor, r.timestamp, r.rationale, extra))
        state["prev"] = r.hash
        state["last_position"] = r.position
        state["last_seq"] = r.seq
        state["expected"] = max(state["expected"], r.position) + 1
    close()

    for rid, head in heads.items():
        if rid in with_entries:
            continue
        if head is not None:
            problems.append(Problem(rid, 0, "has a chain head but no entries (history deleted)"))
        else:
            problems.append(Problem(rid, None, "has no audit history and no chain head"))

    for rid, doc_text in archived_docs.items():
        try:
            logged = json.loads(doc_text).get("audit_log") or []
            copy = [(e["action"], e["actor"], format_time(parse_time(e["timestamp"])), e["rationale"],
                     {k: v for k, v in e.items() if k not in _ENTRY_FIELDS}) for e in logged]
        except (ValueError, TypeError, KeyError, AttributeError):
            problems.append(Problem(rid, None, "archived record's JSON is unreadable"))
            continue
        chain = [(a, b, format_time(parse_time(c)), d, x) for a, b, c, d, x in chains.get(rid, [])]
        if copy != chain:  # the copy ends with the entry that archived the record, as the chain does
            problems.append(Problem(rid, None, "archived copy of the audit log differs from the chain"))
    problems.sort(key=lambda p: (p.record_id, -1 if p.position is None else p.position))
    return problems

