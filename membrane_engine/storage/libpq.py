"""Statements sent through libpq itself, for the few small reads where psycopg's cursor costs
more than the round trip (the column cache's probe, a record with its audit log by id).

On a loopback connection a round trip takes tens of microseconds. psycopg's cursor adds its
own work, and its wait sleeps in poll() and is woken when the answer comes, which on these
machines costs about as much again. Here a statement is prepared once per connection and its
answer is awaited by polling the socket for a short while before sleeping. Only for psycopg 3
connections on PostgreSQL, outside pipeline mode; results come back as text."""

from __future__ import annotations

import select
import time
from collections.abc import Sequence
from typing import Any

SPIN_S = 100e-6  # how long to poll for an answer before sleeping in select()


def await_answer(pgconn: Any, spin_s: float = SPIN_S) -> None:
    """Return once ``pgconn`` has its whole answer: the socket is polled for up to ``spin_s``,
    then the wait is in select() (the GIL released), never in a blocking libpq call."""
    deadline = time.perf_counter() + spin_s
    while True:
        pgconn.consume_input()
        if not pgconn.is_busy():
            return
        if time.perf_counter() > deadline:
            select.select([pgconn.socket], [], [])


def prepare(pgconn: Any, prepared: set[bytes], name: bytes, sql: bytes) -> None:
    """Prepare ``sql`` as ``name`` on ``pgconn`` unless ``prepared`` (the names this connection
    has) says it is there already."""
    if name in prepared:
        return
    from psycopg import errors
    from psycopg.pq import ExecStatus

    result = pgconn.prepare(name, sql)
    if result.status != ExecStatus.COMMAND_OK:
        error = errors.error_from_result(result)
        if not isinstance(error, errors.DuplicatePreparedStatement):  # there already, as asked
            raise error
    prepared.add(name)


def execute(pgconn: Any, prepared: set[bytes], name: bytes, sql: bytes, params: Sequence[bytes | None]) -> Any:
    """The result of ``sql`` prepared as ``name`` (once per connection: ``prepared`` holds the
    names it has) and run with ``params``. Outside a transaction only: psycopg deallocates every
    prepared statement of its connection after a ROLLBACK, DROP or ALTER it sees, and a statement
    found gone is prepared again and sent once more."""
    from psycopg import errors

    for attempt in (1, 2):
        prepare(pgconn, prepared, name, sql)
        try:
            return run_prepared(pgconn, name, params)
        except errors.InvalidSqlStatementName:
            prepared.discard(name)
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def run_prepared(pgconn: Any, name: bytes, params: Sequence[bytes | None]) -> Any:
    """Send the prepared statement ``name`` and return its result (``collect``)."""
    pgconn.send_query_prepared(name, params)
    return collect(pgconn)


def collect(pgconn: Any) -> Any:
    """The result of the statement sent on ``pgconn`` (rows as text), once it has come; a
    statement the server refused raises psycopg's error for it."""
    from psycopg import errors
    from psycopg.pq import ExecStatus

    await_answer(pgconn)
    result = pgconn.get_result()
    while pgconn.get_result() is not None:  # the end of the answer
        pass
    if result is None:
        raise errors.OperationalError("the server sent no answer")
    if result.status != ExecStatus.TUPLES_OK:
        raise errors.error_from_result(result)
    return result


def text_array(values: Sequence[str]) -> bytes:
    """``values`` as a PostgreSQL text[] literal (every element quoted, so any text is safe)."""
    quoted = ('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
    return ("{" + ",".join(quoted) + "}").encode()
