"""The operator tables' rows (SPEC 10): operators, sign-in tokens and the operator log, read and
written inside the caller's transaction. What the rows mean (password hashing, token minting,
role checks, the log's hash chain and MACs) is ``accounts.operators`` and ``audit.row_seal``'s:
this module only speaks SQL for them.

Rows come back as SQLAlchemy rows (attribute access by column name); ``values`` are plain dicts
of column values.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection, Row

from membrane_engine.storage.store import operator_events, operator_tokens, operators

# ----------------------------------------------------------------------------- operators


def operator_rows(conn: Connection) -> list[Row]:
    """Every operator row, by name."""
    return conn.execute(select(operators).order_by(operators.c.name)).all()


def operator_count(conn: Connection) -> int:
    return conn.execute(select(func.count()).select_from(operators)).scalar_one()


def operator_row(conn: Connection, name: str) -> Row | None:
    return conn.execute(select(operators).where(operators.c.name == name)).first()


def operator_by_email(conn: Connection, email: str) -> Row | None:
    """The row whose e-mail is ``email`` (lower-cased by the caller), compared case-insensitively."""
    return conn.execute(select(operators).where(func.lower(operators.c.email) == email)).first()


def operator_exists(conn: Connection, name: str) -> bool:
    return conn.execute(select(operators.c.name).where(operators.c.name == name)).first() is not None


def any_password(conn: Connection) -> bool:
    return conn.execute(select(func.count()).select_from(operators)
                        .where(operators.c.password_hash.is_not(None))).scalar_one() > 0


def email_owner(conn: Connection, email: str, other_than: str) -> str | None:
    """The name of an operator other than ``other_than`` whose e-mail is ``email``, or None."""
    return conn.execute(select(operators.c.name).where((func.lower(operators.c.email) == email)
                                                       & (operators.c.name != other_than))).scalar()


def names_with_role(conn: Connection, role: str) -> list[str]:
    return list(conn.execute(select(operators.c.name).where(operators.c.role == role)).scalars())


def insert_operator(conn: Connection, values: dict[str, Any]) -> None:
    conn.execute(insert(operators).values(**values))


def update_operator(conn: Connection, name: str, values: dict[str, Any]) -> None:
    conn.execute(update(operators).where(operators.c.name == name).values(**values))


def delete_operator(conn: Connection, name: str) -> None:
    conn.execute(delete(operators).where(operators.c.name == name))


# ----------------------------------------------------------------------------- tokens


def insert_token(conn: Connection, values: dict[str, Any]) -> None:
    conn.execute(insert(operator_tokens).values(**values))


def _live(token_hash: str, kind: str, now: float):
    return ((operator_tokens.c.token_hash == token_hash) & (operator_tokens.c.kind == kind)
            & (operator_tokens.c.expires_at > now) & operator_tokens.c.used_at.is_(None))


def live_token(conn: Connection, token_hash: str, kind: str, now: float) -> Row | None:
    """The token row of ``kind`` with this hash that has not expired by ``now`` and was not used."""
    return conn.execute(select(operator_tokens).where(_live(token_hash, kind, now))).first()


def use_token(conn: Connection, token_hash: str, kind: str, now: float, mac: str) -> bool:
    """Mark the live token used at ``now`` (with its new MAC) in the statement that checks it is
    still live: of two redeemers of one token, one gets True."""
    return conn.execute(update(operator_tokens).where(_live(token_hash, kind, now))
                        .values(used_at=now, mac=mac)).rowcount == 1


def token_values(row: Row) -> dict[str, Any]:
    """A token row's columns as a dict (to seal a changed copy of it)."""
    return dict(row._mapping)


def token_rows(conn: Connection, kind: str | None = None) -> list[Row]:
    """Every token row (of ``kind``), by token hash."""
    q = select(operator_tokens).order_by(operator_tokens.c.token_hash)
    return conn.execute(q if kind is None else q.where(operator_tokens.c.kind == kind)).all()


# The deletions return the rows they removed, so the caller can log which sessions ended.

def delete_expired_tokens(conn: Connection, now: float) -> list[Row]:
    return conn.execute(delete(operator_tokens).where(operator_tokens.c.expires_at < now)
                        .returning(*operator_tokens.c)).all()


def delete_token(conn: Connection, token_hash: str) -> list[Row]:
    return conn.execute(delete(operator_tokens).where(operator_tokens.c.token_hash == token_hash)
                        .returning(*operator_tokens.c)).all()


def delete_operator_tokens(conn: Connection, name: str, kind: str | None = None) -> list[Row]:
    """Delete operator ``name``'s tokens (of ``kind``: every kind when None)."""
    where = operator_tokens.c.operator == name
    if kind is not None:
        where = where & (operator_tokens.c.kind == kind)
    return conn.execute(delete(operator_tokens).where(where).returning(*operator_tokens.c)).all()


# ----------------------------------------------------------------------------- the operator log


def event_rows(conn: Connection, operator: str | None = None) -> list[Row]:
    """The operator log's entries (about ``operator``), by seq."""
    q = select(operator_events).order_by(operator_events.c.seq)
    return conn.execute(q if operator is None else q.where(operator_events.c.operator == operator)).all()


def lock_event_log(conn: Connection) -> None:
    """Inside a write transaction, before reading the log's newest entry to link to it: on
    PostgreSQL no other writer can append until this transaction ends (SQLite's BEGIN IMMEDIATE
    already holds the database's one write lock)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("LOCK TABLE operator_events IN EXCLUSIVE MODE")


def has_event(conn: Connection, actions: Iterable[str]) -> bool:
    """Does the log hold an entry with one of ``actions``?"""
    return conn.execute(select(operator_events.c.seq).where(operator_events.c.action.in_(list(actions)))
                        .limit(1)).first() is not None


def insert_event(conn: Connection, values: dict[str, Any]) -> None:
    conn.execute(insert(operator_events).values(**values))
