"""Audit entries per hour and action over the whole log (a retract named "retract", not counted
among Membrane's ``delete`` entries it is written as), kept per process: counted in full once
(one GROUP BY over every entry: seconds on a large store), then at each call only the
entries after the last one counted, a range of the primary key. Exact for the reason
``metrics.ActionCounts`` is: entries are only ever appended, never changed or deleted, and one
writer at a time appends them, so their sequence numbers are in commit order.

``lookups.audit_activity`` answers an unfiltered activity chart from it for any bucket that is a
whole number of hours (hour, day, week: epoch-aligned buckets are unions of hours).

The counts are kept on disk beside the column cache's snapshot (``<store id>.activity``, the same
format, key and checks as ``storage.snapshot_file``), so the next process counts only what came
after them: used when the MAC is right, the file names this store, and the entry it was counted
up to is still in the log with the same hash; otherwise ignored and the log counted in full.
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from pathlib import Path

from membrane_engine.context import EngineContext
from membrane_engine.storage import audit_log, snapshot_file
from membrane_engine.storage.store import Store

HOUR = 3600
KIND = "audit activity v2"  # v2: retracts counted apart from deletes
SAVE_AFTER = 10_000  # entries counted since the file (or in all) that make writing it again worth it


class AuditActivity:
    def __init__(self, store: Store, directory: Path | None = None):
        self._store = store
        self._seq = 0
        self._hours: dict[tuple[int, str], int] = {}
        self._lock = threading.Lock()
        self._directory = directory
        self._tried_file = directory is None
        self._unsaved = 0  # entries counted since the file was read or written
        self.file_status = "none"  # what the first count made of the file (logs, tests)

    def _path(self, store_id: str | None) -> Path | None:
        if self._directory is None or not store_id or not store_id.replace("-", "").isalnum():
            return None
        return self._directory / f"{store_id}.activity"

    def _read_file(self, conn) -> None:
        """Start from the counts on disk when they may be used (see the module's doc)."""
        store_id, key = self._store.snapshot_identity(conn)
        path = self._path(store_id)
        if path is None or not key:
            return
        try:
            header, data = snapshot_file.header_of(path)
            snapshot_file.verified(header, data, key, {})
            if header.get("kind") != KIND:
                raise snapshot_file.SnapshotRejected(f"counted as {header.get('kind')!r}, not {KIND!r}")
            if header.get("store_id") != store_id:
                raise snapshot_file.SnapshotRejected("of another store")
            seq = int(header["seq"])
            stored = audit_log.hash_at(conn, seq)
            if stored is None or stored != header.get("seq_hash"):
                raise snapshot_file.SnapshotRejected(f"the log's entry {seq} is not the one it was counted up to")
            hours = {(int(h), str(a)): int(n) for h, a, n in header["hours"]}
        except snapshot_file.SnapshotRejected as exc:
            self.file_status = f"ignored: {exc}"
            return
        except (ValueError, KeyError, TypeError, OSError) as exc:
            self.file_status = f"ignored: unreadable ({type(exc).__name__})"
            return
        self._seq, self._hours = seq, hours
        self.file_status = f"used: up to entry {seq}"

    def _write_file(self) -> None:
        with self._store.read() as conn:
            store_id, key = self._store.snapshot_identity(conn)
            seq_hash = audit_log.hash_at(conn, self._seq)
        path = self._path(store_id)
        if path is None or not key or seq_hash is None:
            return
        header = {"kind": KIND, "store_id": store_id, "seq": self._seq, "seq_hash": seq_hash, "n": 0,
                  "hours": [[h, a, n] for (h, a), n in sorted(self._hours.items())]}
        try:
            snapshot_file.write(path, key, header, {}, [])
            self._unsaved = 0
        except (OSError, ValueError):
            pass  # an accelerator: the next process counts in full

    def _after(self, conn, seq: int) -> tuple[dict[tuple[int, str], int], int]:
        """The counts of the entries after ``seq``, and the newest entry they include."""
        newest = audit_log.newest_seq(conn)
        if newest <= seq:
            return {}, seq
        return audit_log.hour_counts(conn, seq, newest, HOUR), newest

    def hours(self) -> dict[tuple[int, str], int]:
        """(hour since the epoch, action) -> entries, as of now."""
        with self._lock:
            with self._store.read() as conn:
                if not self._tried_file:
                    self._tried_file = True
                    self._read_file(conn)
                counts, newest = self._after(conn, self._seq)
            for key, count in counts.items():
                self._hours[key] = self._hours.get(key, 0) + count
                self._unsaved += count
            self._seq = newest
            if self._unsaved >= SAVE_AFTER:
                self._write_file()
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


_OF: "weakref.WeakKeyDictionary[EngineContext, AuditActivity]" = weakref.WeakKeyDictionary()
_OF_LOCK = threading.Lock()


def activity_of(membrane: EngineContext) -> AuditActivity:
    """The Membrane's counter (made at its first use)."""
    with _OF_LOCK:
        counter = _OF.get(membrane)
        if counter is None:
            counter = _OF[membrane] = AuditActivity(membrane.store, membrane.columns.snapshot_dir)
        return counter
