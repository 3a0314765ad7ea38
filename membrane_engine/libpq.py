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
