"""The audit trail: append-only, hash-chained per record (SPEC 6).

Each entry's hash covers its content and the previous entry's hash; each record keeps the hash
of its newest entry (the chain head). With ``MEMBRANE_AUDIT_KEY`` set the hash is an HMAC, so
someone who can edit the database but does not hold the key cannot forge a consistent chain.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from .schema import AuditAction, AuditEntry, format_time, parse_time, to_epoch
from .store import archive, audit_entries, records

GENESIS = "0" * 64


def _key() -> bytes | None:
    key = os.environ.get("MEMBRANE_AUDIT_KEY")
    return key.encode() if key else None


def entry_hash(prev_hash: str, record_id: str, position: int, action: str, actor: str,
               timestamp: str, rationale: str, details: str | None) -> str:
    content = json.dumps([prev_hash, record_id, position, action, actor, timestamp, rationale, details],
                         separators=(",", ":"), ensure_ascii=False).encode()
    key = _key()
    if key:
        return "hmac-sha256:" + hmac.new(key, content, hashlib.sha256).hexdigest()
    return "sha256:" + hashlib.sha256(content).hexdigest()


@dataclass(frozen=True)
class AuditRow:
    """An audit entry as stored: the Membrane entry plus where it sits in the chain."""

    seq: int
    record_id: str
    position: int
    entry: AuditEntry
    details: dict[str, Any] | None


def append(conn: Connection, record_id: str, action: AuditAction | str, actor: str, rationale: str,
           when: datetime, details: dict[str, Any] | None = None) -> str:
    """Append one entry to a record's chain; returns the new chain head. The caller holds the
    record's write lock, so positions cannot race."""
    last = conn.execute(
        select(audit_entries.c.position, audit_entries.c.hash)
        .where(audit_entries.c.record_id == record_id)
        .order_by(audit_entries.c.position.desc())
        .limit(1)
    ).first()
    position = 0 if last is None else last.position + 1
    prev = GENESIS if last is None else last.hash
    action_value = action.value if isinstance(action, AuditAction) else AuditAction(action).value
    stamp = format_time(when)
    details_text = json.dumps(details, sort_keys=True, ensure_ascii=False) if details else None
    digest = entry_hash(prev, record_id, position, action_value, actor, stamp, rationale, details_text)
    conn.execute(audit_entries.insert().values(
        record_id=record_id, position=position, action=action_value, actor=actor, timestamp=stamp,
        ts=to_epoch(when), rationale=rationale, details=details_text, prev_hash=prev, hash=digest,
    ))
    return digest


def append_many(conn: Connection, rows: list[dict[str, Any]]) -> dict[str, str]:
    """Bulk append for imports of new records: ``rows`` of (record_id, action, actor,
    timestamp, rationale) in chain order per record. Returns each record's chain head."""
    heads: dict[str, str] = {}
    positions: dict[str, int] = {}
    out = []
    for row in rows:
        rid = row["record_id"]
        position = positions.get(rid, 0)
        prev = heads.get(rid, GENESIS)
        stamp = row["timestamp"]
        digest = entry_hash(prev, rid, position, row["action"], row["actor"], stamp, row["rationale"], None)
        out.append({"record_id": rid, "position": position, "action": row["action"], "actor": row["actor"],
                    "timestamp": stamp, "ts": to_epoch(parse_time(stamp)), "rationale": row["rationale"],
                    "details": None, "prev_hash": prev, "hash": digest})
        heads[rid] = digest
        positions[rid] = position + 1
    if out:
        conn.execute(audit_entries.insert(), out)
    return heads


def _row_to_audit(r) -> AuditRow:
    entry = AuditEntry(action=r.action, actor=r.actor, timestamp=parse_time(r.timestamp), rationale=r.rationale)
    return AuditRow(r.seq, r.record_id, r.position, entry, json.loads(r.details) if r.details else None)


def log_of(conn: Connection, record_id: str) -> list[AuditRow]:
    q = select(audit_entries).where(audit_entries.c.record_id == record_id).order_by(audit_entries.c.position)
    return [_row_to_audit(r) for r in conn.execute(q)]


def logs_of(conn: Connection, record_ids: list[str]) -> dict[str, list[AuditEntry]]:
    out: dict[str, list[AuditEntry]] = {rid: [] for rid in record_ids}
    for start in range(0, len(record_ids), 900):
        chunk = record_ids[start:start + 900]
        q = (select(audit_entries.c.record_id, audit_entries.c.action, audit_entries.c.actor,
                    audit_entries.c.timestamp, audit_entries.c.rationale)
             .where(audit_entries.c.record_id.in_(chunk))
             .order_by(audit_entries.c.record_id, audit_entries.c.position))
        for r in conn.execute(q):
            out[r.record_id].append(AuditEntry.model_construct(
                action=AuditAction(r.action), actor=r.actor, timestamp=parse_time(r.timestamp), rationale=r.rationale))
    return out


def query(conn: Connection, actor: str | None = None, action: str | None = None, record_id: str | None = None,
          since: datetime | None = None, until: datetime | None = None, limit: int = 1000, offset: int = 0
          ) -> tuple[int, list[AuditRow]]:
    """Entries across the store, newest first, filtered in SQL; returns (total matching, page)."""
    conditions = []
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


def verify(conn: Connection) -> list[Problem]:
    """Walk every chain; report edited, deleted, reordered, inserted or truncated entries."""
    heads: dict[str, str | None] = dict(conn.execute(select(records.c.id, records.c.audit_head)).all())
    heads.update(dict(conn.execute(select(archive.c.id, archive.c.audit_head)).all()))
    problems: list[Problem] = []
    q = select(audit_entries).order_by(audit_entries.c.record_id, audit_entries.c.position)
    current: str | None = None
    prev = GENESIS
    expected_position = 0
    seen: set[str] = set()

    def close(record_id: str, last_hash: str) -> None:
        head = heads.get(record_id)
        if head is None:
            problems.append(Problem(record_id, None, "entries exist for a record with no chain head"))
        elif head != last_hash:
            problems.append(Problem(record_id, expected_position, "chain ends before its head: entries missing at the end (truncated)"))

    for r in conn.execute(q):
        if r.record_id != current:
            if current is not None:
                close(current, prev)
            current, prev, expected_position = r.record_id, GENESIS, 0
            seen.add(current)
        if r.position != expected_position:
            problems.append(Problem(r.record_id, expected_position,
                                    f"position {expected_position} is missing (next stored is {r.position}): entry deleted"))
            expected_position = r.position
        if r.prev_hash != prev:
            problems.append(Problem(r.record_id, r.position, "does not link to the entry before it (deleted, inserted or reordered)"))
        digest = entry_hash(r.prev_hash, r.record_id, r.position, r.action, r.actor, r.timestamp, r.rationale, r.details)
        if digest != r.hash:
            problems.append(Problem(r.record_id, r.position, "content does not match its hash (edited)"))
        prev = r.hash
        expected_position += 1
    if current is not None:
        close(current, prev)
    for record_id, head in heads.items():
        if head is not None and record_id not in seen:
            problems.append(Problem(record_id, 0, "has a chain head but no entries (history deleted)"))
    return problems
