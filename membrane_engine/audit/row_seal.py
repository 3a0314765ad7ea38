"""The operator tables and the access log under the audit key (SPEC 6, SPEC 10).

Who may sign in, and the record of who looked, live in the same database as the records: a
writer of that database who does not hold ``MEMBRANE_AUDIT_KEY`` must not be able to add an
operator, mint a session or erase an access unnoticed. So, as audit entries are:

- every row of ``operators`` and ``operator_tokens`` carries a MAC over its content (``mac``:
  HMAC-SHA256 under the key, as ``chain.digest`` makes it; plain sha256 in an unkeyed store).
  An operator's MAC also covers the hash of the newest operator event that wrote the row, so an
  older copy of the row (from before a demotion) put back does not verify either;
- ``operator_events`` and ``access_log`` are hash chains (each entry covers the one before it)
  with a sealed head in ``meta``, so a changed, inserted, deleted or cut-off entry shows.

A row whose MAC does not verify is not honoured: no sign-in, no session. In a keyed store a
row with a plain sha256 MAC (which anyone can compute) is not honoured either. The store is
keyed once ``meta`` holds ``audit_key`` (``storage.audit_log``), or once the operator tables were sealed:
the entry of the store's own audit log by ``SEAL_ACTOR``, which also says from which event and
access entry on the chains are keyed (the entries before are checked by their own scheme).
Writes take the key through ``audit_log.sequence_tail``: a process without the key (or with another one)
cannot write to a keyed store's operator tables or access log.

The first keyed process to write (or to open a keyed store holding such rows) seals them:
rows written before then whose plain MAC holds get keyed ones. That moment is the one gap: a
row forged with a plain MAC before a keyed store is first opened by this engine with its key is
sealed with the rest (as any history before a key existed is).
"""

from __future__ import annotations

import hmac
import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from collections.abc import Iterable
from typing import Any

from membrane_engine.rules.chain import GENESIS, STORE_SUBJECT, KeyState, canonical, digest, signing_key
from membrane_engine.model.records import AuditAction
from membrane_engine.rules import sessions
from membrane_engine.storage.audit_log import append_subject, first_details, meta_value, put_meta, sequence_tail
from membrane_engine.storage import accounts as account_rows
from membrane_engine.storage import sealed_rows
from membrane_engine.storage.store import StoreConnection

SEAL_ACTOR = "membrane-engine:operator-seal"
ROW_WRITING = ("add", "set", "passwd")  # the operator events that write an operator's row
EVENTS_HEAD = "operator_events_head"
ACCESS_HEAD = "access_log_head"
HMAC = "hmac-sha256:"
PLAIN = "sha256:"


@dataclass(frozen=True)
class Seal:
    """How rows are sealed in one transaction: ``key`` (None: plain sha256, or this process
    cannot check keyed MACs), ``strict`` (the store is keyed: only keyed MACs count) and from
    which operator event and access entry on the chains are keyed."""

    key: bytes | None
    strict: bool
    events_from: int = 1
    access_from: int = 1
    sealed: bool = False  # the store's own audit log says the tables were sealed

    def make(self, fields: list[Any]) -> str:
        return digest(canonical(fields), self.key)

    def holds(self, stored: str | None, fields: list[Any], keyed: bool | None = None) -> bool:
        """Does ``stored`` seal ``fields``? A plain MAC only where keyed ones are not required
        (``keyed``, by default ``strict``); a keyed one only with the key."""
        if not isinstance(stored, str):
            return False
        must = self.strict if keyed is None else keyed
        content = canonical(fields)
        if stored.startswith(HMAC):
            return self.key is not None and hmac.compare_digest(stored, digest(content, self.key))
        return not must and stored.startswith(PLAIN) and stored == digest(content, None)

    def checkable(self, stored: str | None) -> bool:
        """Can this process check ``stored`` at all (a keyed MAC needs the key)?"""
        return not (isinstance(stored, str) and stored.startswith(HMAC) and self.key is None)


# ----------------------------------------------------------------------------- what is sealed


def operator_fields(row: Any, event_hash: str) -> list[Any]:
    m = row._mapping if hasattr(row, "_mapping") else row
    return ["operator", m["name"], m["role"], m["max_sensitivity"], m["scopes"], m["email"], m["password_hash"],
            float(m["created_at"]), float(m["updated_at"]), event_hash]


def token_fields(row: Any) -> list[Any]:
    m = row._mapping if hasattr(row, "_mapping") else row
    used = m["used_at"]
    return ["operator_token", m["token_hash"], m["kind"], m["operator"], float(m["expires_at"]),
            None if used is None else float(used)]


def access_fields(prev: str, row: Any) -> list[Any]:
    m = row._mapping if hasattr(row, "_mapping") else row
    return ["access", int(m["seq"]), prev, m["record_id"], m["actor"], m["sensitivity"], m["scope"] or "",
            float(m["ts"]), m["via"] or ""]


def event_fields(prev: str, seq: int, timestamp: str, actor: str, action: str, operator: str, details: str
                 ) -> list[Any]:
    # The fields of ``chain.entry_hash`` (the record chain's), so events written before the
    # operator tables were sealed keep their hashes: the record id slot names the operator.
    return [prev, f"operator:{operator}", seq, action, actor, timestamp, details, None]


def head_fields(name: str, seq: int, hash_: str) -> list[Any]:
    return ["head", name, seq, hash_]


# ----------------------------------------------------------------------------- the seal state


def seal_entry(conn: StoreConnection) -> dict[str, Any] | None:
    """The details of the store's own audit entry that sealed the operator tables, or None."""
    details = first_details(conn, STORE_SUBJECT, SEAL_ACTOR)
    if details is None:
        return None
    try:
        sealed = json.loads(details)["operator_seal"]
        return {"events_from": int(sealed["events_from"]), "access_from": int(sealed["access_from"])}
    except (ValueError, TypeError, KeyError):
        return {"events_from": 1, "access_from": 1}  # unreadable: everything must be keyed


def reading(conn: StoreConnection) -> Seal:
    """The seal state for checking rows (sign-in, sessions, verify): never writes."""
    keyed = KeyState.parse(meta_value(conn, "audit_key"))
    key = signing_key()
    if key and keyed is not None and not keyed.fits(key):
        key = None  # another key: keyed MACs cannot be checked, so none holds
    entry = seal_entry(conn)
    if entry is None:
        return Seal(key, keyed is not None)
    return Seal(key, True, entry["events_from"], entry["access_from"], sealed=True)


def writing(conn: StoreConnection) -> Seal:
    """The seal state of a write transaction to the operator tables or the access log. Refuses
    (``AuditKeyError``, naming MEMBRANE_AUDIT_KEY) a process whose key does not fit the store's,
    as any audit write does; the first keyed writer seals the rows written before it."""
    key = sequence_tail(conn)[2]
    if key is None:
        return Seal(None, False)
    entry = seal_entry(conn)
    if entry is None:
        entry = _seal(conn, key)
    return Seal(key, True, entry["events_from"], entry["access_from"], sealed=True)


def _next_seq(conn: StoreConnection, chain: str, head_key: str) -> tuple[int, str, int]:
    """(the last seq the head names, its hash, the largest seq stored) of a chain: the head in
    ``meta`` when there is one (so an entry deleted at the end shows as a gap, not as a new
    end), else the last stored entry."""
    largest = sealed_rows.largest_seq(conn, chain)
    head = _parse_head(meta_value(conn, head_key))
    if head is not None:
        return head[0], head[1], largest
    last = sealed_rows.last_link(conn, chain)
    return (0, GENESIS, largest) if last is None or last.hash is None else (int(last.seq), last.hash, largest)


def _parse_head(text: str | None) -> tuple[int, str, str] | None:
    if text is None:
        return None
    try:
        data = json.loads(text)
        return int(data["seq"]), str(data["hash"]), str(data["check"])
    except (ValueError, TypeError, KeyError):
        return 0, "", ""


def put_head(conn: StoreConnection, seal: Seal, head_key: str, seq: int, hash_: str) -> None:
    put_meta(conn, head_key, json.dumps({"seq": seq, "hash": hash_,
                                          "check": seal.make(head_fields(head_key, seq, hash_))}))


def event_tail(conn: StoreConnection) -> tuple[int, str]:
    """(seq, prev_hash) for the next operator event, inside a write transaction."""
    seq, prev, largest = _next_seq(conn, "operator_events", EVENTS_HEAD)
    return max(seq, largest) + 1, prev


def latest_row_event(conn: StoreConnection, name: str) -> str:
    """The hash of the newest event that wrote operator ``name``'s row (GENESIS: none)."""
    return sealed_rows.latest_event_hash(conn, name, ROW_WRITING) or GENESIS


def seal_operator(conn: StoreConnection, seal: Seal, name: str) -> None:
    """(Re)write operator ``name``'s MAC, after the event that wrote the row was appended."""
    row = account_rows.operator_row(conn, name)
    if row is not None:
        account_rows.update_operator(conn, name, {"mac": seal.make(operator_fields(row, latest_row_event(conn, name)))})


def operator_holds(conn: StoreConnection, row: Any, seal: Seal | None = None) -> bool:
    """Is this operator row honoured: its MAC seals its content and the newest event that
    wrote it?"""
    seal = seal or reading(conn)
    return seal.holds(row.mac, operator_fields(row, latest_row_event(conn, row.name)))


def token_holds(row: Any, seal: Seal) -> bool:
    return seal.holds(row.mac, token_fields(row))


def append_access(conn: StoreConnection, rows: list[dict[str, Any]]) -> None:
    """Append access entries (record_id, actor, sensitivity, scope, ts, via) to the chain,
    inside the caller's write transaction."""
    seal = writing(conn)
    seq, prev, largest = _next_seq(conn, "access_log", ACCESS_HEAD)
    seq = max(seq, largest)
    out = []
    for row in rows:
        seq += 1
        full = {**row, "seq": seq, "prev_hash": prev}
        full["hash"] = prev = seal.make(access_fields(full["prev_hash"], full))
        out.append(full)
    sealed_rows.insert_access(conn, out)
    put_head(conn, seal, ACCESS_HEAD, seq, prev)


# ----------------------------------------------------------------------------- sealing


def _seal_rows(conn: StoreConnection, seal: Seal, reseal: bool) -> None:
    """Give operator and token rows without a MAC (and, with ``reseal``, those whose plain MAC
    holds) one of ``seal``; access entries written before the chain existed join it; plain
    chain heads are sealed again under ``seal``'s key."""
    plain = Seal(None, False)
    for row in sealed_rows.operator_rows_to_seal(conn, every=reseal):
        event = latest_row_event(conn, row.name)
        if row.mac is None or plain.holds(row.mac, operator_fields(row, event)):
            account_rows.update_operator(conn, row.name, {"mac": seal.make(operator_fields(row, event))})
    for row in sealed_rows.token_rows_to_seal(conn, every=reseal):
        if row.mac is None or plain.holds(row.mac, token_fields(row)):
            sealed_rows.set_token_mac(conn, row.token_hash, seal.make(token_fields(row)))
    if meta_value(conn, ACCESS_HEAD) is None:  # once: the entries written before the chain existed
        prev, seq = GENESIS, 0
        for row in sealed_rows.access_rows(conn):
            seq = int(row.seq)
            if row.hash is None:
                new = seal.make(access_fields(prev, row))
                sealed_rows.link_access(conn, seq, prev, new)
                prev = new
            else:
                prev = row.hash
        if seq:
            put_head(conn, seal, ACCESS_HEAD, seq, prev)
    if meta_value(conn, EVENTS_HEAD) is None:
        last = sealed_rows.last_link(conn, "operator_events")
        if last is not None:
            put_head(conn, seal, EVENTS_HEAD, int(last.seq), last.hash)
    if seal.key:
        for head_key in (EVENTS_HEAD, ACCESS_HEAD):
            head = _parse_head(meta_value(conn, head_key))
            if head is not None and not head[2].startswith(HMAC):
                put_head(conn, seal, head_key, head[0], head[1])


def _seal(conn: StoreConnection, key: bytes) -> dict[str, int]:
    """The first keyed write to a store's operator tables: rows written before it are sealed
    under the key, and the store's own audit log says so (from which event and access entry on
    the chains are keyed): that entry, not a row anyone could delete, is what keeps the tables
    keyed from then on."""
    _seal_rows(conn, Seal(key, True), reseal=True)
    events_from = event_tail(conn)[0]
    seq, _, largest = _next_seq(conn, "access_log", ACCESS_HEAD)
    sealed = {"events_from": events_from, "access_from": max(seq, largest) + 1}
    append_subject(conn, STORE_SUBJECT, AuditAction.REVISE, SEAL_ACTOR,
                   "operator tables and access log sealed under the audit key: operators, sessions and who looked "
                   "now carry keyed MACs", datetime.now(timezone.utc), {"operator_seal": sealed})
    return sealed


def on_open(conn: StoreConnection, migrated: bool = False) -> None:
    """At every open (``Store.create``), after the migrations. ``migrated``: the MAC columns were
    just added, so an unkeyed store's rows written before them get plain MACs now (only then: a
    row added later without one stays without, and signs no one in). A keyed store opened with
    its key, whose operator tables hold rows but were never sealed, is sealed now."""
    keyed = KeyState.parse(meta_value(conn, "audit_key"))
    if keyed is None:
        if migrated:
            _seal_rows(conn, Seal(None, False), reseal=False)
        return
    key = signing_key()
    if not key or not keyed.fits(key) or seal_entry(conn) is not None:
        return
    if sealed_rows.any_sealed_rows(conn):
        writing(conn)


# ----------------------------------------------------------------------------- verification


def _span(label, first: int, last: int) -> str:
    if first == last:
        return label(first)
    noun = label(first).rsplit(" ", 1)[0]
    nouns = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{nouns} {first} to {last}"


def _chain_problems(rows: Iterable[Any], seal: Seal, head_text: str | None, keyed_from: int, fields, name: str,
                    label) -> list[tuple[str, str]]:
    """Walk a chain (rows by seq): ``fields(prev, row)`` is what each hash covers. Returns
    (where, problem) pairs: gaps (deleted), broken links (inserted or deleted), hashes that do
    not match (edited), plain hashes where keyed ones belong (forged), and a head that does not
    name the newest entry (cut off the end, or added after it)."""
    out: list[tuple[str, str]] = []
    prev, expected, last = GENESIS, 1, (0, GENESIS)  # the engine numbers every chain from 1
    for row in rows:
        seq = int(row.seq)
        last = (seq, row.hash)
        if row.hash is None:
            out.append((label(seq), "has no hash: added outside the engine"))
            prev, expected = GENESIS, seq + 1
            continue
        if row.prev_hash != prev:
            # A number skipped with the link intact is not a deletion (a PostgreSQL sequence skips
            # the numbers of rolled-back inserts: the access log's entries before it was chained).
            if seq > expected:
                out.append((_span(label, expected, seq - 1), "deleted outside the engine"))
            out.append((label(seq), "prev_hash does not match the entry before it (deleted, inserted or "
                                    "reordered)"))
        must = seal.strict and seq >= keyed_from
        if not seal.checkable(row.hash):
            pass
        elif row.hash.startswith(PLAIN) and must:
            out.append((label(seq), "hash is plain sha256 but the store is keyed: written outside the engine"))
        elif not seal.holds(row.hash, fields(row.prev_hash, row), keyed=False):
            out.append((label(seq), "hash does not match its content (changed outside the engine)"))
        prev, expected = row.hash, seq + 1
    head = _parse_head(head_text)
    if head is None:
        if last[0] and seal.sealed:
            out.append((f"{name} head", "is missing: the newest entries cannot be checked (deleted outside the "
                                        "engine)"))
        return out
    if seal.checkable(head[2]) and not seal.holds(head[2], head_fields(
            ACCESS_HEAD if name == "access_log" else EVENTS_HEAD, head[0], head[1])):
        out.append((f"{name} head", "does not match its seal (changed outside the engine)"))
    if (head[0], head[1]) != last:
        if head[0] > last[0]:
            out.append((_span(label, last[0] + 1, head[0]), f"deleted outside the engine (the chain's head names "
                                                            f"{label(head[0])})"))
        elif head[0] < last[0]:
            out.append((_span(label, head[0] + 1, last[0]), f"after the chain's head ({label(head[0])}): added "
                                                            "outside the engine"))
        else:
            out.append((label(last[0]), "is not the entry the chain's head names: changed outside the engine"))
    return out


def event_problems(conn: StoreConnection, seal: Seal | None = None) -> list[tuple[str, str]]:
    seal = seal or reading(conn)
    rows = account_rows.event_rows(conn)
    return _chain_problems(rows, seal, meta_value(conn, EVENTS_HEAD), seal.events_from,
                           lambda prev, r: event_fields(prev, int(r.seq), r.timestamp, r.actor, r.action, r.operator,
                                                        r.details),
                           "operator_events", lambda seq: f"event {seq}")


def problems(conn: StoreConnection) -> list[tuple[str, str, str]]:
    """Every problem of the operator tables and the access log: (table, row, problem)."""
    seal = reading(conn)
    out: list[tuple[str, str, str]] = []
    events = account_rows.event_rows(conn)
    present: dict[str, bool] = {}
    for e in events:
        if e.action in ("add", "remove"):
            present[e.operator] = e.action == "add"
    rows = account_rows.operator_rows(conn)
    for row in rows:
        if not present.get(row.name):
            out.append(("operators", f"row {row.name!r}", "has no 'add' in the operator log: added outside the "
                                                          "engine"))
        elif seal.checkable(row.mac) and not operator_holds(conn, row, seal):
            out.append(("operators", f"row {row.name!r}",
                        "MAC does not match its content and last logged change: changed or added outside the engine"))
    names = {row.name for row in rows}
    for name, there in sorted(present.items()):
        if there and name not in names:
            out.append(("operators", f"row {name!r}", "deleted outside the engine (the operator log has no 'remove' "
                                                      "for it)"))
    tokens = account_rows.token_rows(conn)
    forged = set()
    for row in tokens:
        if seal.checkable(row.mac) and not token_holds(row, seal):
            forged.add(row.token_hash)
            out.append(("operator_tokens", f"{row.kind} of {row.operator!r} (token hash {row.token_hash[:12]}...)",
                        "MAC does not match its content: minted or changed outside the engine"))
    # Sessions deleted, put back or minted outside the engine, by the log's session entries.
    out += [("operator_tokens", where, text)
            for where, text in sessions.problems(events, tokens, time.time(), forged)]
    out += [("operator_events", where, text) for where, text in event_problems(conn, seal)]
    # Streamed: the access log is the one of these tables that grows with use.
    access = sealed_rows.access_stream(conn)
    out += [("access_log", where, text) for where, text in _chain_problems(
        access, seal, meta_value(conn, ACCESS_HEAD), seal.access_from, access_fields, "access_log",
        lambda seq: f"entry {seq}")]
    return out
