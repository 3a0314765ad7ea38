"""The newest change's number of a PostgreSQL store, asked on a connection kept for that alone.

Every answer from the column cache starts by asking the store whether anything changed since
its snapshot (``columns.ColumnCache``). On SQLite that is an in-process statement; on a server
it is a round trip, and for the small operations (an explain, a record by id) that round trip
is most of the time. The probe makes it as cheap as the driver can: one statement prepared
once on a connection of its own (no pool checkout, no autocommit toggles, no cursor), sent
through libpq directly. It can also be sent ahead (``send``) and collected later
(``receive``), so the cache works on the snapshot it has while the question travels, and
uses that work only if the answer says nothing changed.

The probe is only an accelerator: whenever it cannot answer (another thread is using it, the
driver is not psycopg 3, the connection was lost) it says None and the caller asks the usual
way, through the pool, with that path's error handling and messages. A lost connection is
reopened on a later call, not more than once per RETRY_AFTER_S."""

from __future__ import annotations

import threading
import time
from typing import Any

from membrane_engine.storage.libpq import collect, prepare

NEWEST_CHANGE = b"SELECT seq FROM changes ORDER BY seq DESC LIMIT 1"  # as Store.changes_with_rows asks
_NAME = b"membrane_newest_change"
RETRY_AFTER_S = 1.0


class ChangeProbe:
    """Asks a psycopg 3 PostgreSQL store for ``max(changes.seq)``; one question at a time."""

    def __init__(self, engine: Any):
        self._engine = engine
        self._busy = threading.Lock()
        self._fairy: Any = None  # the detached pool connection the probe owns
        self._pgconn: Any = None
        self._failed_at: float | None = None

    @staticmethod
    def supports(engine: Any) -> bool:
        return engine.dialect.name == "postgresql" and engine.dialect.driver == "psycopg"

    def newest(self) -> int | None:
        """The newest change's number now, or None when the probe cannot tell."""
        return self.receive() if self.send() else None

    def send(self) -> bool:
        """Send the question. True: the caller must ``receive`` (also after an error of its
        own), and holds the probe until then. False: nothing was sent."""
        if not self._busy.acquire(blocking=False):
            return False
        try:
            pgconn = self._connection()
            if pgconn is not None:
                pgconn.send_query_prepared(_NAME, None)
                return True
        except Exception:
            self._drop()
        self._busy.release()
        return False

    def receive(self) -> int | None:
        """The answer to the question ``send`` sent; None when it did not come."""
        try:
            result = collect(self._pgconn)
            return int(result.get_value(0, 0)) if result.ntuples else 0
        except Exception:
            self._drop()
            return None
        finally:
            self._busy.release()

    def close(self) -> None:
        """Close the probe's connection (``Store.dispose``); a later question opens another."""
        with self._busy:
            self._drop()
            self._failed_at = None

    def _connection(self) -> Any:
        if self._pgconn is not None:
            return self._pgconn
        if self._failed_at is not None and time.monotonic() - self._failed_at < RETRY_AFTER_S:
            return None
        try:
            fairy = self._engine.raw_connection()
            pgconn = fairy.driver_connection.pgconn
            fairy.detach()  # the probe's own: never handed to another caller, closed with the probe
            try:
                prepare(pgconn, set(), _NAME, NEWEST_CHANGE)
            except Exception:
                fairy.close()
                raise
        except Exception:
            self._failed_at = time.monotonic()
            return None
        self._fairy, self._pgconn, self._failed_at = fairy, pgconn, None
        return pgconn

    def _drop(self) -> None:
        fairy, self._fairy, self._pgconn = self._fairy, None, None
        self._failed_at = time.monotonic()
        if fairy is not None:
            try:
                fairy.close()
            except Exception:
                pass
