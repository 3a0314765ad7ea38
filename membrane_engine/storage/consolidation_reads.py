"""The reads consolidation makes (SPEC 12), in SQL: the fields its consolidators look at, taken
out of the stored documents by the database, so that a run over a hundred thousand episodes
streams their payloads in chunks and never builds a model of each record.

Which rows count (alive, created by the run's instant, seen by a clearance) is decided over the
column cache by the caller; these functions only read.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy.engine import Connection

from membrane_engine.storage.store import driver_cursor, placeholder, stream_rows


def _field(conn: Connection, path: str, text: bool = True) -> str:
    """SQL for one field of the stored document (``path``: keys from the document's root).
    ``text``: a string field as its value; otherwise the JSON text of an object or list."""
    if conn.dialect.name == "sqlite":
        return f"json_extract(doc, '$.{'.'.join(path.split('/'))}')"
    keys = path.split("/")
    head = "".join(f"->'{k}'" for k in keys[:-1])
    if text:
        return f"((doc::json){head}->>'{keys[-1]}')"
    return f"((doc::json){head}->'{keys[-1]}')::text"


def episode_payloads(conn: Connection, size: int = 2000) -> Iterator[list[tuple[str, str, str | None]]]:
    """(id, tags column, payload as JSON text) of every live episodic record, oldest first (then
    by id), in chunks: what the semantic, competence and plan graph consolidators read."""
    statement = (f"SELECT id, tags, {_field(conn, 'payload', text=False)} FROM records "
                 "WHERE type = 'episodic' ORDER BY created_at, id")
    yield from stream_rows(conn, statement, size)


def _rows(conn: Connection, statement: str, params: list) -> list[tuple]:
    with driver_cursor(conn) as cursor:
        if params:
            cursor.execute(statement, params)
        else:  # no parameters: psycopg then reads '%' as itself, not as a placeholder's start
            cursor.execute(statement)
        return [tuple(r) for r in cursor.fetchall()]


def semantic_subjects(conn: Connection, predicate: str) -> list[tuple[str, str | None, str | None]]:
    """(id, subject, revision status) of the live semantic records whose predicate is
    ``predicate``: the facts the semantic consolidator may reinforce."""
    mark = placeholder(conn)
    return _rows(conn, f"SELECT id, {_field(conn, 'payload/subject')}, status FROM records "
                       f"WHERE type = 'semantic' AND {_field(conn, 'payload/predicate')} = {mark}", [predicate])


def skill_names(conn: Connection, prefix: str) -> list[tuple[str, str]]:
    """(id, skill name) of the live competence records whose skill name starts with ``prefix``."""
    mark = placeholder(conn)
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return _rows(conn, f"SELECT id, {_field(conn, 'payload/skill_name')} FROM records WHERE type = 'competence' "
                       f"AND {_field(conn, 'payload/skill_name')} LIKE {mark} ESCAPE '\\'", [escaped + "%"])


def plan_relations(conn: Connection) -> list[tuple[str, str | None]]:
    """(id, relations as JSON text) of the live plan graph records that have a ``derived_from``
    relation: the episodes plans were already extracted from."""
    return _rows(conn, f"SELECT id, {_field(conn, 'relations', text=False)} FROM records "
                       "WHERE type = 'plan_graph' AND doc LIKE '%\"derived\\_from\"%' ESCAPE '\\'", [])


__all__ = ["episode_payloads", "plan_relations", "semantic_subjects", "skill_names"]
