"""Audit entries per hour and action over the whole log, kept per process: counted in full once
(one GROUP BY over every entry: 1.5-3 s of CPU at 3M entries), then at each call only the
entries after the last one counted, a range of the primary key. Exact for the reason
``metrics.ActionCounts`` is: entries are only ever appended, never changed or deleted, and one
writer at a time appends them, so their sequence numbers are in commit order.

``lookups.audit_activity`` answers an unfiltered activity chart from it for any bucket that is a
whole number of hours (hour, day, week: epoch-aligned buckets are unions of hours).
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from typing import TYPE_CHECKING

from sqlalchemy import Integer, cast, func, select

from .storage.store import Store, audit_entries

if TYPE_CHECKING:  # pragma: no cover
    from .membrane import Membrane

HOUR = 3600


class AuditActivity:
    def __init__(self, store: Store):
        self._store = store
        self._seq = 0
        self._hours: dict[tuple[int, str], int] = {}
        self._lock = threading.Lock()

    def _after(self, conn, seq: int) -> list[tuple[int, str, int, int]]:
        scaled = audit_entries.c.ts / HOUR
        hour = cast(scaled, Integer) if self._store.is_sqlite else func.floor(scaled)
        q = (select(hour, audit_entries.c.action, func.count(), func.max(audit_entries.c.seq))
             .group_by(hour, audit_entries.c.action))
        if seq:
            q = q.where(audit_entries.c.seq > seq)
        return [(int(h), str(a), int(n), int(s)) for h, a, n, s in conn.execute(q)]

    def hours(self) -> dict[tuple[int, str], int]:
        """(hour since the epoch, action) -> entries, as of now."""
        with self._lock:
            with self._store.read() as conn:
                rows = self._after(conn, self._seq)
            for hour, action, count, newest in rows:
                self._hours[(hour, action)] = self._hours.get((hour, action), 0) + count
                self._seq = max(self._seq, newest)
            return dict(self._hours)

    def buckets(self, bucket_seconds: float) -> list[tuple[float, str, int]]:
        """``[(bucket start in epoch seconds, action, entries)]`` ordered by time then action, for
        buckets of a whole number of hours."""
        per = int(bucket_seconds) // HOUR
        if per < 1 or per * HOUR != bucket_seconds:
            raise ValueError("bucket_seconds must be a whole number of hours")
        out: Counter[tuple[int, str]] = Counter()
        for (hour, action), count in self.hours().items():
            out[(hour // per, action)] += count
        return [(float(b * per * HOUR), action, n) for (b, action), n in sorted(out.items())]


_OF: "weakref.WeakKeyDictionary[Membrane, AuditActivity]" = weakref.WeakKeyDictionary()
_OF_LOCK = threading.Lock()


def activity_of(membrane: "Membrane") -> AuditActivity:
    """The Membrane's counter (made at its first use)."""
    with _OF_LOCK:
        counter = _OF.get(membrane)
        if counter is None:
            counter = _OF[membrane] = AuditActivity(membrane.store)
        return counter
