"""The audit log as stored (SPEC 6): a record's content digest, read from its row's columns.

The chains' hashes are ``rules.chain``'s; this module holds what depends on the tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from hashlib import sha256
from typing import Any

from sqlalchemy import Boolean, Float, Integer, SmallInteger, and_, func, select

from membrane_engine.model.records import AuditAction
from membrane_engine.rules.chain import RETRACT_MARK, content_bytes
from membrane_engine.storage.store import ROW_COLUMNS, Store, audit_entries, records

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
