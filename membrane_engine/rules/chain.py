"""The audit trail's hash chains as pure functions (SPEC 6): what each hash, chain value and
chain head covers, and how entries are chained, with no database in sight.

Each entry's hash covers its content (action, actor, timestamp, rationale, the ``details``
of before/after values and, for an imported entry that has them, its unknown ``extra`` JSON
fields, SPEC 1), its record id and position, the previous entry's hash and the ``digest`` of
the record's stored content after the change (``storage.audit_log.live_digest``: every column of
its row; ``archived_digest``: its archived JSON). Each record keeps its chain head: a seal over
the record id, the newest entry's position and hash and the content digest. Every entry also
takes the next place in one store-wide sequence, whose chain value (``store_link``) covers the
one before it and the entry's hash.

With ``MEMBRANE_AUDIT_KEY`` set, hashes, chain values, heads and checkpoints are HMAC-SHA256
under that key (``digest``); ``KeyState`` is how a store remembers that it is keyed.

Writing the chains to the database is ``storage.audit_log``'s; checking them is ``audit.verify``'s.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from hashlib import sha256
from typing import Any

import orjson

from membrane_engine.errors import ValidationError
from membrane_engine.model.records import (
    AuditAction,
    AuditEntry,
    check_instant,
    check_text,
    format_time,
    parse_time,
    to_epoch,
)

GENESIS = "0" * 64
STORE_SUBJECT = ""  # the store itself as an audit subject (no record has an empty id)

# A retract is written as Membrane's ``delete`` (the record stays) with this rationale prefix;
# the console names it "retract" (``history.kind_of``, ``activity.action_counts``).
RETRACT_MARK = "retracted:"

MAX_QUERY_LIMIT = 100_000  # entries in one page: the console reads larger exports in pages

ENTRY_COLUMNS = ("record_id", "position", "action", "actor", "timestamp", "ts", "rationale", "details",
                 "extra", "prev_hash", "hash", "digest", "store_position", "store_hash")
NEW_ENTRY_COLUMNS = ENTRY_COLUMNS[:-2]  # what new_chain makes: place adds the store-wide columns


def signing_key() -> bytes | None:
    """The HMAC key of audit hashes (MEMBRANE_AUDIT_KEY), None for plain sha256."""
    key = os.environ.get("MEMBRANE_AUDIT_KEY")
    return key.encode() if key else None


def canonical(fields: list[Any]) -> bytes:
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


def digest(content: bytes, key: bytes | None | bool = False) -> str:
    """sha256 of ``content`` (HMAC under ``MEMBRANE_AUDIT_KEY`` when set; ``key`` passes a key
    already read, or None for none)."""
    if key is False:
        key = signing_key()
    if key:
        return "hmac-sha256:" + hmac.new(key, content, hashlib.sha256).hexdigest()
    return "sha256:" + sha256(content).hexdigest()


def scheme(hashed: str) -> str:
    """The scheme a stored hash names ("sha256", "hmac-sha256"; "" when it names none)."""
    return hashed.split(":", 1)[0] if ":" in hashed else ""


def entry_hash(prev_hash: str, record_id: str, position: int, action: str, actor: str,
               timestamp: str, rationale: str, details: str | None, extra: str | None = None) -> str:
    """The hash of an entry written before schema 2 (no content digest, no store position)."""
    fields = [prev_hash, record_id, position, action, actor, timestamp, rationale, details]
    if extra is not None:  # entries without extra fields hash as they always have
        fields.append(extra)
    return digest(canonical(fields))


def entry_hash_v2(prev_hash: str, record_id: str, position: int, action: str, actor: str, timestamp: str,
                  rationale: str, details: str | None, extra: str | None, content_digest: str | None,
                  key: bytes | None | bool = False) -> str:
    """The hash of an entry: its content, place in the record's chain, the previous entry's hash
    and the record's content digest after the change (None on history an import brought). Ten
    fields, so no entry of the older form (eight or nine) hashes alike."""
    return digest(canonical([prev_hash, record_id, position, action, actor, timestamp, rationale, details,
                             extra, content_digest]), key)


def store_link(prev_store_hash: str, store_position: int, hash_: str, key: bytes | None | bool = False) -> str:
    """The store-wide chain value through the entry at ``store_position`` (whose hash is ``hash_``)."""
    return digest(canonical(["store", store_position, prev_store_hash, hash_]), key)


def head_seal_v1(record_id: str, position: int, last_hash: str, key: bytes | None | bool = False) -> str:
    """A chain head as written before schema 2 (without the content digest)."""
    return digest(canonical(["head", record_id, position, last_hash]), key)


def head_seal(record_id: str, position: int, last_hash: str, content_digest: str | None,
              key: bytes | None | bool = False) -> str:
    """The chain head a record stores: a seal over its newest entry's position and hash and the
    digest of its stored content (None for subjects that are not records)."""
    return digest(canonical(["head", record_id, position, last_hash, content_digest]), key)


def content_bytes(fields: list[Any]) -> bytes:
    """What a content digest covers: ``fields`` as compact JSON (orjson's bytes; json's, keeping
    a lone surrogate, when orjson refuses one)."""
    try:
        return orjson.dumps(fields)
    except TypeError:  # a lone surrogate (refused on the way in, but verify reads what is there)
        return json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")


def archived_digest(record_id: str, doc_text: str) -> str:
    """sha256 (hex) of an archived record's stored content: its id and JSON text as archived."""
    return sha256(content_bytes(["archived", record_id, doc_text])).hexdigest()


def new_chain(record_id: str, entries: list[tuple[str, str, str, float, str, str | None]],
              key: bytes | None, content_digest: str | None = None) -> tuple[list[tuple], str]:
    """The audit rows (``NEW_ENTRY_COLUMNS`` order: ``ENTRY_COLUMNS`` but the store-wide ones,
    which ``place`` adds when they are written) and chain head of a record that has no entries
    yet, from its ``entries`` of (action, actor, timestamp text, ts, rationale, extra text) in
    chain order; the last one binds ``content_digest`` (the record's content as it is written),
    hashed as ``entry_hash_v2`` and ``head_seal`` would, under ``key`` (from ``signing_key()``,
    read once by the caller)."""
    rows = []
    prev = GENESIS
    last = len(entries) - 1
    for position, (action, actor, stamp, ts, rationale, extra) in enumerate(entries):
        bound = content_digest if position == last else None
        hashed = digest(canonical([prev, record_id, position, action, actor, stamp, rationale, None, extra, bound]),
                        key)
        rows.append((record_id, position, action, actor, stamp, ts, rationale, None, extra, prev, hashed, bound))
        prev = hashed
    return rows, head_seal(record_id, last, prev, content_digest, key)


def chain(entries: list[dict[str, Any]], last: dict[str, tuple[int, str]],
          digests: dict[str, str | None] | None = None) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The audit_entries rows (every column but ``seq`` and the store-wide ones, which ``place``
    adds) of ``entries`` (dicts of record_id, action, actor, timestamp (datetime), rationale,
    details and optionally extra) appended, in list order per record, after each record's chain
    end in ``last`` ({record_id: (newest position, its hash)}; absent: no entries yet), and the
    new chain head of every record touched. The last entry of each record binds
    ``digests[record_id]`` (None: not a record's content, or unknown)."""
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


# ----------------------------------------------------------------------------- entries as read


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


def with_extra(entry: AuditEntry, text: str | None) -> AuditEntry:
    """``entry`` carrying the stored extra fields (set directly: any key, even one pydantic
    would read as an argument, stays a field of the entry)."""
    if text:
        extra = json.loads(text)
        if isinstance(extra, dict) and extra:
            object.__setattr__(entry, "__pydantic_extra__", {**(entry.__pydantic_extra__ or {}), **extra})
    return entry


def audit_row(seq: int, record_id: str, position: int, action: str, actor: str, timestamp: str, rationale: str,
              details: str | None, extra: str | None) -> AuditRow:
    """An ``AuditRow`` from an audit_entries row's stored values."""
    entry = AuditEntry(action=action, actor=actor, timestamp=parse_time(timestamp), rationale=rationale)
    entry = with_extra(entry, extra)
    return AuditRow(seq, record_id, position, entry, json.loads(details) if details else None)


def entries_by_record(record_ids: list[str], rows: Iterable[tuple]) -> dict[str, list[AuditEntry]]:
    """Audit logs from rows of (record_id, [position,] action, actor, timestamp, rationale,
    extra), oldest first per record; every id of ``record_ids`` gets a (maybe empty) list."""
    out: dict[str, list[AuditEntry]] = {rid: [] for rid in record_ids}
    for row in rows:
        record_id, action, actor, timestamp, rationale, extra = row[0], *row[-5:]
        out[record_id].append(with_extra(AuditEntry.model_construct(
            action=AuditAction(action), actor=actor, timestamp=parse_time(timestamp), rationale=rationale), extra))
    return out


def checked_filters(actor: Any, action: Any, record_id: Any, since: Any, until: Any
                    ) -> tuple[str | None, AuditAction | None, str | None, datetime | None, datetime | None]:
    """The audit filters (exact actor / action / record id, inclusive time bounds) as SQL
    compares them, each refused with a ValidationError naming it when it is not what it says (an
    unknown action, a time that is not a datetime, ...)."""
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


# ----------------------------------------------------------------------------- the store's key


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
        return digest(canonical(["membrane-audit-key", start, legacy_keyed]), key)

    def fits(self, key: bytes) -> bool:
        return hmac.compare_digest(self.check, self.seal(key, self.start, self.legacy_keyed))

    def text(self) -> str:
        return json.dumps({"scheme": "hmac-sha256", "from": self.start, "legacy_keyed": self.legacy_keyed,
                           "check": self.check})

    def keyed_at(self, store_position: int | None) -> bool:
        """Whether the entry at ``store_position`` (None: written before schema 2) must be keyed."""
        return self.legacy_keyed if store_position is None else store_position >= self.start
