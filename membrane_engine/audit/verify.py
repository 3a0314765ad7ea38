"""Checking the audit trail (SPEC 6): ``verify`` walks every record's chain, the store-wide
sequence and each record's stored content against what its last entry recorded, and compares
the store with a ``checkpoint`` the operator kept elsewhere.

Every problem names the record (or the store-wide position) and says what is wrong in an
operator's words; ``Problem.kind`` groups them (``KINDS`` explains each group).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from membrane_engine.audit import row_seal
from membrane_engine.rules.chain import (
    GENESIS,
    STORE_SUBJECT,
    KeyState,
    archived_digest,
    canonical,
    digest,
    scheme,
    signing_key,
)
from membrane_engine.storage import audit_log as log
from membrane_engine.storage.audit_log import legacy_digest, live_digest
from membrane_engine.storage.store import StoreConnection
from membrane_engine.errors import AuditKeyError, ValidationError
from membrane_engine.model.records import AuditEntry, format_time, parse_time, to_epoch

_ENTRY_FIELDS = frozenset(AuditEntry.model_fields)
CHECKPOINT_KIND = "membrane-audit-checkpoint"

# What each kind of problem means, for pages and the command line.
KINDS: dict[str, str] = {
    "edited": "an audit entry's stored text no longer matches its hash: the history was edited in the database",
    "missing": "entries of a record's history are gone, out of order or doubled",
    "head": "the record's chain head does not seal its newest entry: entries were cut off the end or the head "
            "was altered",
    "content": "the record's stored content (document, labels or anchor) differs from what its last audit entry "
               "recorded: it was changed in the database, outside the engine",
    "moved": "the record was moved between the archive and the live store outside the engine",
    "erased": "places in the store-wide sequence are empty: entries, possibly a whole record with its history, "
              "were erased",
    "chain": "the store-wide chain is broken: an entry was rewritten, inserted or removed",
    "rollback": "the store no longer extends the checkpoint: it was rolled back to an older copy, truncated or "
                "rewritten since the checkpoint was taken",
    "key": "the audit key setting does not fit: keyed entries cannot be checked, or were recomputed without the key",
    "checkpoint": "the checkpoint itself cannot be trusted as given (another store, a bad signature)",
    "orphan": "audit entries or a chain head belong to no record",
    "archive": "an archived record's copy of its audit log differs from the chain",
    "operators": "an operator, an operator log entry or a sign-in token was added, changed or deleted in the "
                 "database, outside the engine: such a row signs no one in (a live session's row deleted signed "
                 "its operator out)",
    "access": "the access log (who looked) was changed in the database: entries were edited, inserted or deleted",
}


@dataclass(frozen=True)
class Problem:
    """One finding of ``verify``: ``record_id`` (None for the store-wide sequence, "" for the
    store's own log), ``position`` in that record's chain (None: the chain as a whole),
    ``store_position`` in the store-wide sequence when known, ``kind`` (see ``KINDS``)."""

    record_id: str | None
    position: int | None
    problem: str
    kind: str = "missing"
    store_position: int | None = None

    def __str__(self) -> str:
        if self.record_id is None:
            where = "store" if self.store_position is None else f"store-wide position {self.store_position}"
            return f"{where}: {self.problem}"
        subject = "the store's own log" if self.record_id == STORE_SUBJECT else f"record {self.record_id}"
        where = f"entry {self.position}" if self.position is not None else "chain"
        return f"{subject}, {where}: {self.problem}"

    @property
    def meaning(self) -> str:
        return KINDS.get(self.kind, "")


# ----------------------------------------------------------------------------- checkpoints


def _signed_fields(cp: dict[str, Any]) -> bytes:
    return canonical([CHECKPOINT_KIND, cp["store_id"], cp["position"], cp["head"], cp["taken_at"], cp["keyed"]])


def checkpoint(conn: StoreConnection, now: datetime) -> dict[str, Any]:
    """The store-wide sequence as it is now: its newest position and chain value, the store's id
    and the time, HMAC-signed under MEMBRANE_AUDIT_KEY when set (AuditKeyError when that key is
    not the store's). JSON-serialisable; the operator keeps it away from the database."""
    key = signing_key()
    keyed = KeyState.parse(log.meta_value(conn, "audit_key"))
    if key and keyed is not None and not keyed.fits(key):
        raise AuditKeyError("MEMBRANE_AUDIT_KEY is not the key this store's audit log is written with; "
                            "a checkpoint signed with it would not verify")
    position, head = log.store_chain_end(conn)
    cp: dict[str, Any] = {"kind": CHECKPOINT_KIND, "version": 1, "store_id": log.meta_value(conn, "store_id"),
                          "position": position, "entries": position + 1, "head": head,
                          "taken_at": format_time(now), "keyed": keyed is not None}
    if key:
        cp["signature"] = digest(_signed_fields(cp), key)
    return cp


def parse_checkpoint(data: Any) -> dict[str, Any]:
    """A checkpoint as ``checkpoint`` made it (a dict, or its JSON text); ValidationError naming
    the field otherwise."""
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise ValidationError(f"checkpoint: not valid JSON ({exc})", [("checkpoint", "not JSON")]) from None
    if not isinstance(data, dict):
        raise ValidationError(f"checkpoint must be a JSON object (got {type(data).__name__})",
                              [("checkpoint", "not an object")])
    if data.get("kind") != CHECKPOINT_KIND:
        raise ValidationError(f"checkpoint.kind must be {CHECKPOINT_KIND!r} (got {data.get('kind')!r})",
                              [("checkpoint.kind", repr(data.get("kind")))])
    checks = {"position": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= -1,
              "head": lambda v: isinstance(v, str) and 0 < len(v) <= 200,
              "taken_at": lambda v: isinstance(v, str) and len(v) <= 64,
              "store_id": lambda v: v is None or (isinstance(v, str) and len(v) <= 200),
              "keyed": lambda v: isinstance(v, bool),
              "signature": lambda v: v is None or (isinstance(v, str) and len(v) <= 200)}
    for name, ok in checks.items():
        if name not in data and name != "signature":
            raise ValidationError(f"checkpoint.{name} is missing", [(f"checkpoint.{name}", "missing")])
        if not ok(data.get(name)):
            raise ValidationError(f"checkpoint.{name}: not a valid value (got {data.get(name)!r:.80})",
                                  [(f"checkpoint.{name}", "invalid")])
    try:
        parse_time(data["taken_at"])
    except ValueError:
        raise ValidationError(f"checkpoint.taken_at: not a time (got {data['taken_at']!r})",
                              [("checkpoint.taken_at", "not a time")]) from None
    return data


def _against_checkpoint(cp: dict[str, Any], store_id: str | None, keyed: KeyState | None, key: bytes | None,
                        tail: int, seen: str | None) -> list[Problem]:
    out: list[Problem] = []
    taken = cp["taken_at"]
    if cp["store_id"] and store_id and cp["store_id"] != store_id:
        out.append(Problem(None, None, f"the checkpoint is of another store (store id {cp['store_id']}; this "
                                       f"store's is {store_id})", "checkpoint"))
    signature = cp.get("signature")
    if signature:
        if not key:
            out.append(Problem(None, None, "the checkpoint is signed, and without MEMBRANE_AUDIT_KEY its signature "
                                           "cannot be checked", "key"))
        elif not hmac.compare_digest(signature, digest(_signed_fields(cp), key)):
            out.append(Problem(None, None, "the checkpoint's signature does not match: the file was edited, or "
                                           "signed with another key", "checkpoint"))
    if cp["keyed"] and keyed is None:
        out.append(Problem(None, None, f"the store was keyed when the checkpoint was taken ({taken}) and no longer "
                                       "says so: its audit key row was removed", "key"))
    position = cp["position"]
    if position < 0:
        return out
    if tail < position:
        out.append(Problem(None, None, f"the store's audit log ends at store-wide position {tail}, before the "
                                       f"checkpoint's position {position} (taken {taken}): the entries after {tail} "
                                       "were erased, or the store was rolled back to an older copy", "rollback",
                           position))
    elif seen is None:
        out.append(Problem(None, None, f"the entry the checkpoint ends with (store-wide position {position}, taken "
                                       f"{taken}) is gone: erased", "rollback", position))
    elif not hmac.compare_digest(seen, cp["head"]):
        out.append(Problem(None, None, f"the entry at store-wide position {position} is not the one the checkpoint "
                                       f"saw (taken {taken}): the history up to the checkpoint was rewritten, or the "
                                       "store replaced with another copy", "rollback", position))
    return out


# ----------------------------------------------------------------------------- verification


class _Hashes:
    """Checks stored hashes under the store's key setting: which entries must be keyed
    (``KeyState``), and the key this process may check them with (None: cannot)."""

    def __init__(self, keyed: KeyState | None, key: bytes | None):
        self.keyed = keyed
        self.key = key if (key and (keyed is None or keyed.fits(key))) else None
        self.unverifiable = 0
        self.keyed_unexpected = 0
        self._start = None if keyed is None else keyed.start

    def check(self, stored: str, content: bytes, store_position: int | None) -> str | None:
        """None when ``stored`` is the right hash of ``content``; else "edited" or "forged"
        (plain sha256 where a keyed hash belongs). Keyed hashes this process cannot check are
        counted, not reported one by one."""
        must_be_keyed = self._start is not None and (
            store_position >= self._start if store_position is not None else self.keyed.legacy_keyed)  # type: ignore[union-attr]
        if stored.startswith("hmac-sha256:"):
            if not must_be_keyed:
                self.keyed_unexpected += 1
            if self.key is None:
                self.unverifiable += 1
                return None
            expected = hmac.new(self.key, content, hashlib.sha256).hexdigest()
            return None if hmac.compare_digest(stored[12:], expected) else "edited"
        if must_be_keyed:
            return "forged"
        return None if stored[7:] == hashlib.sha256(content).hexdigest() and stored.startswith("sha256:") else "edited"


def _content_of(conn: StoreConnection) -> tuple[dict[str, tuple[str, str | None, str | None]], dict[str, str], list[Problem]]:
    """{id: (where: live | archived | subject, chain head, content digest)}, the archived
    records' JSON text, and problems of records both live and archived. Streams the rows."""
    heads: dict[str, tuple[str, str | None, str | None]] = {}
    problems: list[Problem] = []
    for chunk in log.record_contents(conn):
        for row in chunk:
            heads[row[0]] = ("live", row[1], live_digest(row[2:]))
    archived_docs: dict[str, str] = {}
    for rid, head, doc in log.archived_contents(conn):
        if rid in heads:
            problems.append(Problem(rid, None, "is both in the live store and in the archive: copied outside the "
                                               "engine", "moved"))
        heads[rid] = ("archived", head, archived_digest(rid, doc))
        archived_docs[rid] = doc
    for subject, head in log.subject_heads(conn):
        heads.setdefault(subject, ("subject", head, None))
    return heads, archived_docs, problems


@dataclass
class _Chain:
    """What the walk of one record's chain keeps."""

    record_id: str
    expected: int = 0
    prev: str = GENESIS
    last_position: int = -1
    last_seq: int | None = None
    last_store_position: int | None = None
    last_digest: str | None = None
    last_archives: bool = False
    last: Any = None  # the newest entry (an _Entry)

    @property
    def last_said(self) -> str:
        r = self.last
        return f"entry {r.position}, {r.action} by {r.actor} at {r.timestamp}"
    forged_reported: bool = False


@dataclass(frozen=True, slots=True)
class _Entry:
    seq: int
    record_id: str
    position: int
    action: str
    actor: str
    timestamp: str
    ts: float
    rationale: str
    details: str | None
    extra: str | None
    prev_hash: str
    hash: str
    digest: str | None
    store_position: int | None


def _entries(conn: StoreConnection) -> Iterator[_Entry]:
    """Every audit entry, by record and position (``audit_log.ENTRY_READ``), streamed."""
    for chunk in log.entries_in_chain_order(conn):
        for row in chunk:
            yield _Entry(*row)


def _epoch(stamp: str) -> float:
    """An entry's timestamp text (``format_time``'s "...Z") as seconds since 1970."""
    try:
        moment = datetime.fromisoformat(stamp)  # Python 3.11 reads the "Z"; older ones refuse it
    except ValueError:
        return to_epoch(parse_time(stamp))
    return moment.timestamp() if moment.tzinfo is not None else to_epoch(parse_time(stamp))


def _archives(action: str, details: str | None) -> bool:
    """The entry moved its record to the archive (delete and prune write ``archived: true``)."""
    if action != "delete" or not details:
        return False
    try:
        return json.loads(details).get("archived") is True
    except (ValueError, AttributeError):
        return False


def verify(conn: StoreConnection, cp: dict[str, Any] | None = None) -> list[Problem]:
    """Walk every chain and the store-wide sequence; check each record's stored content against
    its last entry; compare with checkpoint ``cp`` (as ``parse_checkpoint`` returns it). Problems
    come sorted: the store's first, then by record id and position. Reads one consistent
    snapshot (``audit_log.one_snapshot``), so writers committing meanwhile cause no false reports."""
    log.one_snapshot(conn)
    key = signing_key()
    keyed = KeyState.parse(log.meta_value(conn, "audit_key"))
    store_id = log.meta_value(conn, "store_id")
    hashes = _Hashes(keyed, key)
    problems: list[Problem] = []
    if keyed is not None and key is None:
        problems.append(Problem(None, None, "this store's audit log is keyed: without MEMBRANE_AUDIT_KEY its keyed "
                                            "entries cannot be verified (set the key and verify again)", "key"))
    elif keyed is not None and hashes.key is None:
        problems.append(Problem(None, None, "MEMBRANE_AUDIT_KEY is not the key this store's audit log is written with "
                                            "(or its key row was altered): its keyed entries cannot be verified", "key"))

    heads, archived_docs, found = _content_of(conn)
    problems.extend(found)
    chains: dict[str, list[tuple[str, str, str, str, dict[str, Any] | None]]] = {rid: [] for rid in archived_docs}
    with_entries: set[str] = set()
    legacy = {"count": 0, "upgrade": None}

    def close(c: _Chain | None) -> None:
        if c is None:
            return
        rid = c.record_id
        if rid not in heads:
            problems.append(Problem(rid, None, "entries exist for a record that is neither in the store nor in the "
                                               "archive", "orphan"))
            return
        where, head, content = heads[rid]
        seal_digest = content
        if where != "subject" and c.last_digest is not None and c.last_digest != content:
            seal_digest = c.last_digest  # reported here; the head is then checked against what was recorded
            if where == "live" and c.last_archives:
                problems.append(Problem(rid, c.last_position, f"is in the live store, but its last entry ({c.last_said}) "
                                                              "moved it to the archive: brought back outside the engine",
                                        "moved"))
            elif where == "archived" and not c.last_archives:
                problems.append(Problem(rid, c.last_position, f"is in the archive, but its last entry ({c.last_said}) "
                                                              "left it in the live store: archived outside the engine",
                                        "moved"))
            else:
                problems.append(Problem(rid, c.last_position, f"stored content (document, labels or anchor) differs "
                                                              f"from what its last entry ({c.last_said}) recorded: "
                                                              "changed in the database, outside the engine", "content"))
        if head is None:
            problems.append(Problem(rid, None, "record has entries but no chain head", "head"))
            return
        verdict = hashes.check(head, canonical(["head", rid, c.last_position, c.prev, seal_digest]),
                               c.last_store_position)
        if verdict == "forged":
            problems.append(Problem(rid, None, "chain head is sealed with plain sha256 but the store is keyed "
                                               "(MEMBRANE_AUDIT_KEY): recomputed without the key (forged)", "key"))
        elif verdict is not None:
            cause = ("entries missing at the end (truncated), the head altered, or the record's content changed "
                     "outside the engine" if c.last_digest is None and where != "subject" else
                     "entries missing at the end (truncated) or the head altered")
            problems.append(Problem(rid, c.expected, f"chain head does not seal the last stored entry (position "
                                                     f"{c.last_position}): {cause}", "head"))

    current: _Chain | None = None
    for r in _entries(conn):
        rid = r.record_id
        if current is None or rid != current.record_id:
            close(current)
            current = _Chain(rid)
            with_entries.add(rid)
        c = current
        if r.position != c.expected:
            if r.position > c.expected:
                missing = (f"position {c.expected} is missing" if r.position == c.expected + 1 else
                           f"positions {c.expected}..{r.position - 1} are missing")
                problems.append(Problem(rid, c.expected, f"{missing} (next stored is {r.position}): entry deleted",
                                        "missing", r.store_position))
            else:
                problems.append(Problem(rid, r.position, f"position {r.position} appears again: entry inserted",
                                        "missing", r.store_position))
        elif r.prev_hash != c.prev:
            problems.append(Problem(rid, r.position, "does not link to the entry before it (deleted, inserted or "
                                                     "reordered)", "missing", r.store_position))
        if c.last_seq is not None and r.seq < c.last_seq:
            problems.append(Problem(rid, r.position, "stored before the entry that precedes it in the chain "
                                                     "(reordered)", "missing", r.store_position))
        if r.store_position is None:
            legacy["count"] += 1
            fields = [r.prev_hash, rid, r.position, r.action, r.actor, r.timestamp, r.rationale, r.details]
            if r.extra is not None:
                fields.append(r.extra)
        else:
            fields = [r.prev_hash, rid, r.position, r.action, r.actor, r.timestamp, r.rationale, r.details, r.extra,
                      r.digest]
        verdict = hashes.check(r.hash, canonical(fields), r.store_position)
        if verdict == "edited":
            problems.append(Problem(rid, r.position, "content does not match its hash (edited or moved)", "edited",
                                    r.store_position))
        elif verdict == "forged" and not c.forged_reported:
            c.forged_reported = True
            problems.append(Problem(rid, r.position, f"hash is {scheme(r.hash) or 'unkeyed'} but the store is keyed "
                                                     "(MEMBRANE_AUDIT_KEY): recomputed without the key (forged)", "key",
                                    r.store_position))
        try:
            ts_ok = abs(_epoch(r.timestamp) - r.ts) < 1e-3
        except (ValueError, TypeError):
            ts_ok = False
        if not ts_ok:
            problems.append(Problem(rid, r.position, "time index (ts) does not match the entry's timestamp (edited)",
                                    "edited", r.store_position))
        if rid in chains:
            try:
                extra = json.loads(r.extra) if r.extra else {}
            except ValueError:
                extra = None  # unreadable: the hash check above reports the edit
            chains[rid].append((r.action, r.actor, r.timestamp, r.rationale, extra))
        if rid == STORE_SUBJECT and r.position == 0 and r.details and r.store_position is not None:
            try:
                legacy["upgrade"] = json.loads(r.details).get("legacy")
            except (ValueError, AttributeError):
                pass
        c.prev, c.last_position, c.last_seq = r.hash, r.position, r.seq
        c.last_store_position, c.last_digest = r.store_position, r.digest
        c.last_archives = _archives(r.action, r.details)
        c.last = r
        c.expected = max(c.expected, r.position) + 1
    close(current)

    for rid, (where, head, _) in heads.items():
        if rid in with_entries:
            continue
        if head is not None:
            problems.append(Problem(rid, 0, "has a chain head but no entries (history deleted)", "missing"))
        else:
            problems.append(Problem(rid, None, "has no audit history and no chain head", "missing"))

    for rid, doc_text in archived_docs.items():
        try:
            logged = json.loads(doc_text).get("audit_log") or []
            copy = [(e["action"], e["actor"], format_time(parse_time(e["timestamp"])), e["rationale"],
                     {k: v for k, v in e.items() if k not in _ENTRY_FIELDS}) for e in logged]
            chain = [(a, b, format_time(parse_time(t)), d, x) for a, b, t, d, x in chains.get(rid, [])]
        except (ValueError, TypeError, KeyError, AttributeError):
            problems.append(Problem(rid, None, "archived record's JSON is unreadable", "archive"))
            continue
        if copy != chain:  # the copy ends with the entry that archived the record, as the chain does
            problems.append(Problem(rid, None, "archived copy of the audit log differs from the chain", "archive"))

    tail, seen = _walk_store_chain(conn, hashes, problems, cp["position"] if cp else None)
    problems.extend(_legacy_problems(conn, legacy["count"], legacy["upgrade"]))
    if hashes.keyed_unexpected and keyed is None:
        problems.append(Problem(None, None, f"{hashes.keyed_unexpected} entries are HMAC-sealed but the store does not "
                                            "say it is keyed: its audit key row was removed", "key"))
    elif keyed is None and key is not None and tail >= 0:
        problems.append(Problem(None, None, "MEMBRANE_AUDIT_KEY is set but this store's audit log is not keyed: its "
                                            "entries are plain sha256, which anyone who can write the database can "
                                            "recompute", "key"))
    if cp is not None:
        problems.extend(_against_checkpoint(cp, store_id, keyed, key, tail, seen))
    problems.extend(_row_problems(conn))
    problems.sort(key=lambda p: (p.record_id is not None, p.record_id or "",
                                 -1 if p.position is None else p.position,
                                 -1 if p.store_position is None else p.store_position))
    return problems


def _row_problems(conn: StoreConnection) -> list[Problem]:
    """The operator tables and the access log (row_seal.py), each problem naming the table and
    the row."""
    return [Problem(None, None, f"{table} {where}: {text}", "access" if table == "access_log" else "operators")
            for table, where, text in row_seal.problems(conn)]


def _said(record_id: str) -> str:
    return "the store's own log" if record_id == STORE_SUBJECT else f"record {record_id}"


def _walk_store_chain(conn: StoreConnection, hashes: _Hashes, problems: list[Problem], wanted: int | None
                      ) -> tuple[int, str | None]:
    """Walk the store-wide sequence in order; report holes and broken links. Returns the newest
    position (-1: none) and the chain value at position ``wanted`` (None: not there)."""
    expected, prev, seen = 0, GENESIS, None
    forged = False
    for chunk in log.store_sequence(conn):
        for sp, rid, position, hash_, store_hash in chunk:
            if sp != expected:
                span = "this place is" if sp == expected + 1 else f"places {expected}..{sp - 1} are"
                problems.append(Problem(None, None, f"{span} empty (the next one stored holds {_said(rid)}, entry "
                                                    f"{position}): entries erased, such as a whole record with its "
                                                    "history", "erased", expected))
            else:
                verdict = hashes.check(store_hash, canonical(["store", sp, prev, hash_]), sp)
                if verdict == "forged" and not forged:
                    forged = True
                    problems.append(Problem(None, None, "the store-wide chain is sealed with plain sha256 from "
                                                        f"here ({_said(rid)}, entry {position}) but the store is keyed: "
                                                        "recomputed without the key (forged)", "key", sp))
                elif verdict == "edited":
                    problems.append(Problem(None, None, f"the store-wide chain breaks here ({_said(rid)}, entry "
                                                        f"{position}): this entry, or the one before it, was "
                                                        "rewritten, inserted or removed", "chain", sp))
            prev, expected = store_hash, sp + 1
            if sp == wanted:
                seen = store_hash
    return expected - 1, seen


def _legacy_problems(conn: StoreConnection, count: int, recorded: dict[str, Any] | None) -> list[Problem]:
    """Entries written before schema 2 (no store-wide position) must be exactly those the
    upgrade entry (the store's own log, entry 0) bound by count and digest."""
    if not count and recorded is None:
        return []
    if recorded is None:
        return [Problem(None, None, f"{count} entries have no store-wide position, and the store's upgrade entry that "
                                    "would account for them is missing: entries inserted outside the engine", "chain")]
    digest, total = legacy_digest(conn)
    if total != recorded.get("entries") or digest != recorded.get("digest"):
        return [Problem(None, None, f"the entries written before the upgrade differ from those the upgrade recorded "
                                    f"({recorded.get('entries')} then, {total} now): history from before the upgrade "
                                    "was edited, erased or added to", "erased")]
    return []
