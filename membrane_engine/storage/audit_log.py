"""The audit log as stored (SPEC 6): a record's content digest, read from its row's columns;
the store-wide sequence new entries are placed in; reads of the entries.

The chains' hashes are ``rules.chain``'s; this module holds what depends on the tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from hashlib import sha256
from typing import Any

from sqlalchemy import Boolean, Float, Integer, SmallInteger, and_, func, select
from sqlalchemy.engine import Connection

from membrane_engine.errors import AuditKeyError
from membrane_engine.model.records import AuditAction, AuditEntry
from membrane_engine.rules.chain import (
    ENTRY_COLUMNS,
    GENESIS,
    RETRACT_MARK,
    KeyState,
    content_bytes,
    entries_by_record,
    scheme,
    signing_key,
    store_link,
)
from membrane_engine.storage.store import (
    AUDIT_TAIL_STATE,
    ROW_COLUMNS,
    Store,
    audit_entries,
    insert_tuples,
    meta,
    records,
    rows_in,
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
