"""The rows ``audit.row_seal`` seals under the audit key (SPEC 6, SPEC 10): the MACs of operator
and token rows, the links of the operator log and the access log, read and written inside the
caller's transaction. Which MAC a row gets and whether one holds is ``row_seal``'s; this module
only speaks SQL for it (the operator rows themselves are ``storage.accounts``').

Rows come back as SQLAlchemy rows (attribute access by column name).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Table, func, select
from sqlalchemy.engine import Connection, Row

from membrane_engine.storage.store import access_log, operator_events, operator_tokens, operators

# The two hash chains, by name.
CHAINS: dict[str, Table] = {"operator_events": operator_events, "access_log": access_log}


def largest_seq(conn: Connection, chain: str) -> int:
    """The largest ``seq`` stored in chain ``chain`` (0: empty)."""
    table = CHAINS[chain]
    return conn.execute(select(func.max(table.c.seq))).scalar() or 0


def last_link(conn: Connection, chain: str) -> Row | None:
    """(seq, hash) of the newest entry of chain ``chain``, or None when it is empty."""
    table = CHAINS[chain]
    return conn.execute(select(table.c.seq, table.c.hash).order_by(table.c.seq.desc()).limit(1)).first()


def latest_event_hash(conn: Connection, operator: str, actions: Iterable[str]) -> str | None:
    """The hash of the newest operator-log entry about ``operator`` with one of ``actions``."""
    return conn.execute(select(operator_events.c.hash).where(
        (operator_events.c.operator == operator) & operator_events.c.action.in_(list(actions)))
        .order_by(operator_events.c.seq.desc()).limit(1)).scalar()


def operator_rows_to_seal(conn: Connection, every: bool) -> list[Row]:
    """Operator rows: every one (``every``), else those without a MAC."""
    q = select(operators)
    return conn.execute(q if every else q.where(operators.c.mac.is_(None))).all()


def token_rows_to_seal(conn: Connection, every: bool) -> list[Row]:
    """Token rows: every one (``every``), else those without a MAC."""
    q = select(operator_tokens)
    return conn.execute(q if every else q.where(operator_tokens.c.mac.is_(None))).all()


def set_token_mac(conn: Connection, token_hash: str, mac: str) -> None:
    conn.execute(operator_tokens.update().where(operator_tokens.c.token_hash == token_hash).values(mac=mac))


def access_rows(conn: Connection) -> list[Row]:
    """Every access-log entry, by seq."""
    return conn.execute(select(access_log).order_by(access_log.c.seq)).all()


def access_stream(conn: Connection) -> Any:
    """Every access-log entry, by seq, streamed: the one of these tables that grows with use."""
    return conn.execute(select(access_log).order_by(access_log.c.seq)
                        .execution_options(stream_results=True, max_row_buffer=5000))


def link_access(conn: Connection, seq: int, prev_hash: str, hash_: str) -> None:
    """Chain the access-log entry ``seq`` (written before the log was chained)."""
    conn.execute(access_log.update().where(access_log.c.seq == seq).values(prev_hash=prev_hash, hash=hash_))


def insert_access(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Append access-log entries (every column given, chained by the caller)."""
    conn.execute(access_log.insert(), rows)


def any_sealed_rows(conn: Connection) -> bool:
    """Does any of the sealed tables (operators, tokens, the access log, the operator log) hold a row?"""
    return any(conn.execute(select(t.c[c]).limit(1)).first() is not None
               for t, c in ((operators, "name"), (operator_tokens, "token_hash"), (access_log, "seq"),
                            (operator_events, "seq")))
