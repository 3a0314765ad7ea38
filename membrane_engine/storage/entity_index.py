"""The entity term index (SPEC 12, capture's entity resolution): every live entity record's
normalised canonical name and aliases, with its scope and sensitivity level, in a table of its
own, indexed by (term, scope) on both databases (Membrane's ``entity_terms``).

The index is derived from the records, never written by the code that writes records: it
follows the ``changes`` log, which every write of a record appends to (imports, curation,
capture, erasure alike). ``entity_terms_mark`` holds the last change it has taken in;
``catch_up`` (inside a write transaction, so under the writers' lock) takes in the changes after
it: the terms of each changed record are dropped and, if it is still a live entity, written
anew. A read outside a write transaction (``find(..., current=False)``, a capture's preview)
reads the table for the records unchanged since the mark and the changed ones from the records
themselves, so it never writes and never answers from a stale row.

A store made before the index existed gets its tables on open (``on_open``) and is indexed at
its first capture.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import orjson
from sqlalchemy import BigInteger, Column, Index, PrimaryKeyConstraint, SmallInteger, String, Table, func, select
from sqlalchemy.engine import Connection

from membrane_engine.rules.entity_terms import term_key
from membrane_engine.storage.store import changes, insert_tuples, metadata, records

# More pending changes than this: the index is built again from the entity records (one scan of
# the type index) rather than change by change (a million-record import is a million changes,
# of which a few are entities).
REBUILD_ABOVE = 20_000
CHUNK = 900  # ids per IN list (SQLite's default limit on host parameters is 999)

entity_terms = Table(
    "entity_terms",
    metadata,
    Column("record_id", String(128), nullable=False),
    Column("term", String(300), nullable=False),  # rules.entity_terms.term_key
    Column("kind", String(16), nullable=False),  # "canonical" or "alias"
    Column("scope", String(256), nullable=False, default=""),
    Column("sens_level", SmallInteger, nullable=False),
    PrimaryKeyConstraint("record_id", "term", name="pk_entity_terms"),
    Index("ix_entity_terms_lookup", "term", "scope"),
)
# The last change the index has taken in (one row; none: never built). A table of its own, not
# a ``meta`` key: ``meta`` holds what identifies the store, this is a cache's bookmark.
entity_terms_mark = Table(
    "entity_terms_mark",
    metadata,
    Column("id", SmallInteger, primary_key=True),
    Column("seq", BigInteger, nullable=False),
)


# ----------------------------------------------------------------------------- reading entities


def _entity_rows(conn: Connection, ids: Sequence[str] | None) -> list[tuple[str, str, int, Any, Any]]:
    """(id, scope, sensitivity level, canonical name, aliases as JSON text) of the live entity
    records (of ``ids``, or all): the database reads the two fields out of each document."""
    if conn.dialect.name == "sqlite":
        name = func.json_extract(records.c.doc, "$.payload.canonical_name")
        aliases = func.json_extract(records.c.doc, "$.payload.aliases")
    else:
        doc = records.c.doc.cast(_json_type())
        name = doc["payload"]["canonical_name"].astext
        aliases = doc["payload"]["aliases"].astext
    q = select(records.c.id, records.c.scope, records.c.sens_level, name, aliases).where(records.c.type == "entity")
    if ids is None:
        return [tuple(r) for r in conn.execute(q)]
    out: list[tuple[str, str, int, Any, Any]] = []
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), CHUNK):
        out.extend(tuple(r) for r in conn.execute(q.where(records.c.id.in_(unique[start:start + CHUNK]))))
    return out


def _json_type() -> Any:
    from sqlalchemy.dialects.postgresql import JSONB

    return JSONB


def _alias_values(aliases: Any) -> list[str]:
    """Alias strings from the stored ``aliases`` (JSON text of strings or ``{value, ...}``
    objects, as ``EntityPayload.alias_values`` reads them)."""
    if aliases is None:
        return []
    if isinstance(aliases, (str, bytes)):
        try:
            aliases = orjson.loads(aliases)
        except orjson.JSONDecodeError:
            return []
    if not isinstance(aliases, list):
        return []
    out = []
    for item in aliases:
        value = item.get("value") if isinstance(item, dict) else item
        if isinstance(value, str) and value.strip():
            out.append(value)
    return out


def terms_of(rid: str, scope: str, level: int, name: Any, aliases: Any) -> list[tuple[str, str, str, str, int]]:
    """The index rows of one entity: (record id, term key, kind, scope, level), canonical first,
    each key once."""
    rows: list[tuple[str, str, str, str, int]] = []
    seen: set[str] = set()
    for kind, value in [("canonical", name)] + [("alias", a) for a in _alias_values(aliases)]:
        if not isinstance(value, str):
            continue
        key = term_key(value)
        if key and key not in seen:
            seen.add(key)
            rows.append((rid, key, kind, scope or "", int(level)))
    return rows


# ----------------------------------------------------------------------------- keeping it


def _newest_change(conn: Connection) -> int:
    return int(conn.execute(select(func.coalesce(func.max(changes.c.seq), 0))).scalar())


def watermark(conn: Connection) -> int | None:
    value = conn.execute(select(entity_terms_mark.c.seq).where(entity_terms_mark.c.id == 1)).scalar()
    return None if value is None else int(value)


def _set_watermark(conn: Connection, seq: int, existed: bool) -> None:
    if existed:
        conn.execute(entity_terms_mark.update().where(entity_terms_mark.c.id == 1).values(seq=seq))
    else:
        conn.execute(entity_terms_mark.insert().values(id=1, seq=seq))


def _write_terms(conn: Connection, rows: list[tuple[str, str, int, Any, Any]]) -> None:
    terms = [t for row in rows for t in terms_of(*row)]
    insert_tuples(conn, entity_terms, ("record_id", "term", "kind", "scope", "sens_level"), terms)


def rebuild(conn: Connection) -> None:
    """The index built anew from every live entity record, inside the caller's write transaction."""
    mark = watermark(conn)
    newest = _newest_change(conn)
    conn.execute(entity_terms.delete())
    _write_terms(conn, _entity_rows(conn, None))
    _set_watermark(conn, newest, mark is not None)


def on_open(conn: Connection) -> None:
    """On opening a store (``Store.create``, in its write transaction): the tables, for a store
    made before they existed. They are filled by the first ``catch_up`` (a capture's), which
    without a mark builds the index from the records: opening writes no row, so a read-only
    store still opens and a reader never changes what it opens."""
    entity_terms.create(conn, checkfirst=True)
    entity_terms_mark.create(conn, checkfirst=True)


def _state(conn: Connection) -> tuple[int | None, int]:
    """(the watermark, the newest change) in one statement."""
    mark = select(entity_terms_mark.c.seq).where(entity_terms_mark.c.id == 1).scalar_subquery()
    newest = select(func.coalesce(func.max(changes.c.seq), 0)).scalar_subquery()
    found, last = conn.execute(select(mark, newest)).one()
    return (None if found is None else int(found)), int(last)


def catch_up(conn: Connection) -> None:
    """Take in every change after the watermark, inside the caller's write transaction (which
    holds the writers' lock, so no change can slip in between)."""
    mark, newest = _state(conn)
    if mark is None or newest - mark > REBUILD_ABOVE:
        rebuild(conn)
        return
    if newest <= mark:
        return
    changed = list(conn.execute(select(changes.c.record_id).where(changes.c.seq > mark).distinct()).scalars())
    forget(conn, changed)
    _write_terms(conn, _entity_rows(conn, changed))
    _set_watermark(conn, newest, True)


def took_in(conn: Connection, entities: Sequence[tuple[str, str, int, Any, Any]]) -> None:
    """After a write whose every change the caller knows, made right after ``catch_up`` in the
    same transaction: the new entities' terms ((id, scope, level, canonical name, aliases)), and
    the watermark moved past the write, so the next ``catch_up`` has nothing to read. (A capture:
    it creates records and adds relations, which change no name.)"""
    _write_terms(conn, list(entities))
    _set_watermark(conn, _newest_change(conn), True)


def forget(conn: Connection, ids: Sequence[str]) -> None:
    """Drop the terms of ``ids`` at once (an erasure that must leave no name behind need not wait
    for the next ``catch_up``)."""
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), CHUNK):
        conn.execute(entity_terms.delete().where(entity_terms.c.record_id.in_(unique[start:start + CHUNK])))


# ----------------------------------------------------------------------------- asking it


def find(conn: Connection, keys: Iterable[str], scopes: Sequence[str], current: bool = True
         ) -> list[tuple[str, str, str, int]]:
    """(record id, term key, scope, sensitivity level) of every entity one of whose terms has
    one of ``keys`` (``term_key`` values) and whose scope is one of ``scopes``.

    ``current``: the caller has run ``catch_up`` in this write transaction. Otherwise (a read
    transaction) the records changed since the watermark are read from the records table
    instead of the index."""
    wanted = [k for k in dict.fromkeys(keys) if k]
    scope_list = list(dict.fromkeys(scopes))
    if not wanted or not scope_list:
        return []
    pending: set[str] | None = None
    rebuilt: list[tuple[str, str, int, Any, Any]] | None = None
    if not current:
        mark = watermark(conn)
        newest = _newest_change(conn)
        if mark is None or newest - mark > REBUILD_ABOVE:
            rebuilt = _entity_rows(conn, None)
        elif newest > mark:
            pending = set(conn.execute(select(changes.c.record_id).where(changes.c.seq > mark).distinct()).scalars())
    found: list[tuple[str, str, str, int]] = []
    if rebuilt is None:
        q = (select(entity_terms.c.record_id, entity_terms.c.term, entity_terms.c.scope, entity_terms.c.sens_level)
             .where(entity_terms.c.term.in_(wanted), entity_terms.c.scope.in_(scope_list)))
        found = [(r[0], r[1], r[2], int(r[3])) for r in conn.execute(q) if not pending or r[0] not in pending]
    overlay = rebuilt if rebuilt is not None else (_entity_rows(conn, sorted(pending)) if pending else [])
    keyset, scopeset = set(wanted), set(scope_list)
    for row in overlay:
        for rid, key, _kind, scope, level in terms_of(*row):
            if key in keyset and scope in scopeset:
                found.append((rid, key, scope, level))
    return found


__all__ = ["REBUILD_ABOVE", "catch_up", "entity_terms", "entity_terms_mark", "find", "forget", "on_open", "took_in", "rebuild", "terms_of",
           "watermark"]
