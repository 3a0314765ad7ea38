"""The store's half of an import that comes in parts (``imports.prepare`` per part, in this process
or on workers): one transaction, all or nothing, in memory bounded by a part rather than by the
import.

Parts are checked against each other as they arrive (an id already in the import is a
duplicate; a relation target that is not in the import yet waits for a later part or the
store) and written as they come, so nothing but their ids stays behind. Once the import has a
problem nothing more is written (the transaction, if open, is rolled back at once, so other
writers wait no longer) and the rest is only validated and counted: the refusal lists the first
MAX_PROBLEMS problems and says how many there were in all. Once that many are kept, the ids of
later records are no longer remembered (a file of millions of junk records with ids would
otherwise hold them all), so duplicates among them and their relation targets go uncounted.

``buffered``: parts are held until BUFFER_RECORDS records or BUFFER_BYTES (``held_bytes``) are
waiting before the write transaction is opened, so a small import (or one refused early) is
validated in full before the store's write lock is taken, as ``import_records`` always was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from typing import Any

from membrane_engine.errors import AlreadyExistsError, ValidationError
from membrane_engine.rules.chain import NEW_ENTRY_COLUMNS
from membrane_engine.transfer.imports import (
    MAX_PROBLEMS,
    PreparedImport,
    gc_paused,
    index_of_location,
    prepare,
    refusal,
)
from membrane_engine.transfer.json_items import Item
from membrane_engine.storage.audit_log import insert_entries
from membrane_engine.storage.store import ROW_COLUMNS, Store, StoreConnection

# Held before the transaction opens: at most as many records as make an import a bulk one
# (store.BULK_ROWS), and at most BUFFER_BYTES of them, so what an import holds does not grow
# with the size or number of its records (the console's uploads are imported in this process).
BUFFER_RECORDS = 5_000
BUFFER_BYTES = 24 << 20
# What a prepared row (a record's or an audit entry's, with the record's vector) holds besides
# its texts: the tuple, ids, timestamps, codes and hashes (bench/README.md, "Import").
ROW_BYTES = 768
_DOC = ROW_COLUMNS.index("doc")
_AUDIT_TEXTS = tuple(NEW_ENTRY_COLUMNS.index(name) for name in ("rationale", "extra"))


def held_bytes(part: PreparedImport) -> int:
    """About what ``part`` holds in memory: its documents, its audit entries' texts (which the
    document leaves out, and which may be most of a record) and ROW_BYTES a row."""
    texts = sum(len(row[_DOC]) for row in part.rows)
    texts += sum(len(entry[k] or "") for entry in part.audit for k in _AUDIT_TEXTS)
    return texts + ROW_BYTES * (len(part.rows) + len(part.audit))


def _also(index: int) -> str:
    return f"also record {index}" if index >= 0 else "also an earlier record"


class _Refused(Exception):
    """Rolls the write transaction back (never leaves this module)."""


class ImportWriter:
    def __init__(self, store: Store, expected: int | None = None, buffered: bool = False,
                 estimate: Callable[[int], int] | None = None, progress: Callable[[int], None] | None = None):
        self.store, self.expected, self.buffered = store, expected, buffered
        self.estimate, self.progress = estimate, progress
        self.problems: list[tuple[str, str]] = []  # the first MAX_PROBLEMS, by record index
        self.total = 0  # problems in all
        self.first: dict[str, int] = {}  # id -> index of the first item with it (-1: an invalid item)
        self.tracking = True  # ids still remembered (see the module's note)
        self.pending: dict[str, list[tuple[int, int]]] = {}  # target -> [(record index, k)] not found yet
        self.waiting: list[tuple[PreparedImport, list[str]]] = []  # parts held, with their new targets
        self.waiting_rows = self.waiting_bytes = 0
        self.taken: list[str] = []  # ids already in the store
        self.taken_count = 0
        self.seen = self.written = 0
        self.store_was_empty: bool | None = None
        self._tx: ExitStack | None = None
        self.conn: StoreConnection | None = None

    # the parts --------------------------------------------------------------------

    def add(self, part: PreparedImport) -> None:
        self.seen += part.count
        duplicates = [(f"record {part.index_of[rid]}: id", f"duplicate id {rid!r} ({_also(self.first[rid])})")
                      for rid in part.ids if rid in self.first]
        if duplicates:
            own = sorted(part.problems + duplicates, key=lambda p: index_of_location(p[0]))
            self._note(own, part.problem_total + len(duplicates))
        else:
            self._note(part.problems, part.problem_total)
        new_targets: list[str] = []
        if self.tracking:
            for rid, k, target in part.relations:
                if target in self.first:
                    continue
                places = self.pending.get(target)
                if places is None:
                    places = self.pending[target] = []
                    new_targets.append(target)
                places.append((part.index_of[rid], k))
        if self.pending:  # targets of earlier parts that this part brings
            for target in [t for t in self.pending if t in part.in_import]:
                del self.pending[target]
        if self.tracking:
            for rid in part.in_import:
                self.first.setdefault(rid, part.index_of.get(rid, -1))
            self.tracking = self.total < MAX_PROBLEMS
        if self.total or self.taken_count:
            self._stop()
            return
        if self.buffered and self.conn is None:
            self.waiting.append((part, new_targets))
            self.waiting_rows += len(part.rows)
            self.waiting_bytes += held_bytes(part)
            if self.waiting_rows >= BUFFER_RECORDS or self.waiting_bytes >= BUFFER_BYTES:
                self._flush(self._expected(self.seen))
            return
        if self.conn is None:
            self._open(self.expected or len(part.rows))
        self._write(part, new_targets)

    def finish(self) -> int:
        """Write what waits, check the relation targets still missing against the store, and
        commit; or refuse (ValidationError, else AlreadyExistsError) having written nothing.
        Returns how many records were written."""
        try:
            if not (self.total or self.taken_count) and self.waiting:
                self._flush(self.expected or self.waiting_rows)
            if self.pending:
                with self._statements():
                    self._targets_in_store(list(self.pending))
            places = sorted((index, k, target) for target, found in self.pending.items() for index, k in found)
            if places:  # relation problems are found last, but belong among the others by record
                self.total += len(places)
                missing = [(f"record {index}: relations.{k}.target_id",
                            f"target {target!r} is neither in the store nor in this import")
                           for index, k, target in places[:MAX_PROBLEMS]]
                self.problems = sorted(self.problems + missing, key=lambda p: index_of_location(p[0]))[:MAX_PROBLEMS]
            if self.total:
                raise ValidationError(refusal(self.problems, self.total), self.problems, total=self.total)
            if self.taken_count:
                first = sorted(self.taken)[0]
                raise AlreadyExistsError(first if self.taken_count == 1 else f"{first} (and {self.taken_count - 1} more)")
            if self._tx is not None:
                tx, self._tx = self._tx, None
                tx.close()  # commits
            self.store.after_bulk(self.written)
            return self.written
        finally:
            self._stop()

    def close(self) -> None:
        """Roll back whatever was written (an import stopped by an error of its own)."""
        self._stop()

    # inside ----------------------------------------------------------------------------

    def _note(self, problems: list[tuple[str, str]], total: int) -> None:
        """Count ``total`` problems and keep the first of ``problems`` (in record order, after
        every problem kept so far) while fewer than MAX_PROBLEMS are kept."""
        self.total += total
        room = MAX_PROBLEMS - len(self.problems)
        if room > 0:
            self.problems.extend(problems[:room])

    def _expected(self, done: int) -> int:
        if self.expected:
            return self.expected
        return self.estimate(done) if self.estimate is not None else done

    def _open(self, expected: int) -> None:
        tx = ExitStack()
        self.conn = tx.enter_context(self.store.bulk_write(expected))
        self._tx = tx
        if self.store_was_empty is None:
            with self._statements():
                self.store_was_empty = self.store.is_empty(self.conn)

    @contextmanager
    def _statements(self) -> Iterator[None]:
        """Statements in the open transaction: an error ends it as an error inside
        ``Store.write`` would (rolled back, a driver's error raised as the store's own)."""
        try:
            yield
        except BaseException as exc:
            tx, self._tx, self.conn = self._tx, None, None
            if tx is not None:
                tx.__exit__(type(exc), exc, exc.__traceback__)
            raise

    def _flush(self, expected: int) -> None:
        self._open(expected)
        waiting, self.waiting = self.waiting, []
        self.waiting_rows = self.waiting_bytes = 0
        for part, new_targets in waiting:
            if self.taken_count:
                break
            self._write(part, new_targets)

    def _write(self, part: PreparedImport, new_targets: list[str]) -> None:
        """One part into the open transaction: refused (and the transaction rolled back) when
        an id is already in the store."""
        with self._statements():
            if not self.store_was_empty:
                taken = self.store.existing_ids(self.conn, part.ids) if part.ids else set()
                if taken:
                    self.taken.extend(sorted(taken)[:10])
                    self.taken_count += len(taken)
                    self._stop()
                    return
                self._targets_in_store([t for t in new_targets if t in self.pending])
            insert_entries(self.conn, part.audit)
            self.store.insert_values(self.conn, part.rows)
            if part.vectors:  # SPEC 9: the records' ranking vectors, in the import's transaction
                self.store.insert_vectors(self.conn, part.vectors)
        self.written += len(part.rows)
        if self.progress is not None:
            self.progress(self.written)

    def _targets_in_store(self, targets: list[str]) -> None:
        if not targets or self.store_was_empty:
            return
        if self.conn is not None:
            found = self.store.existing_ids(self.conn, targets, include_archive=False)
        else:
            with self.store.read() as conn:
                found = self.store.existing_ids(conn, targets, include_archive=False)
        for target in found:
            self.pending.pop(target, None)

    def _stop(self) -> None:
        """Nothing more is written: the transaction (if open) rolled back, waiting parts dropped."""
        self.waiting, self.waiting_rows, self.waiting_bytes = [], 0, 0
        tx, self._tx, self.conn = self._tx, None, None
        if tx is not None:
            try:
                tx.__exit__(_Refused, _Refused(), None)
            except _Refused:
                pass
        self.written = 0


def write_parts(store: Store, parts: Iterable[PreparedImport], **options: Any) -> int:
    """Every part through an ImportWriter (``options``: its own), then ``finish``."""
    writer = ImportWriter(store, **options)
    try:
        with gc_paused():  # unpickling parts from workers allocates as much as preparing them
            for part in parts:
                writer.add(part)
            return writer.finish()
    finally:
        writer.close()


PART_ITEMS = 2000  # items prepared at a time by ``import_items``


def import_items(store: Store, items: Iterable[Item], now: datetime, actor: str, total: int | None = None,
                 estimate: Callable[[int], int] | None = None,
                 progress: Callable[[int, int], None] | None = None, embedder: Any = None) -> int:
    """An import in this process from items read one at a time (``json_items.Item``s): prepared
    PART_ITEMS at a time and written through a buffered ImportWriter, so at most a part of
    parsed items and BUFFER_RECORDS of rows are in memory at once. ``total``: how many items
    there are, when known (else ``estimate(done)`` guesses); ``progress(done, total)`` after
    each part. ``embedder``: the ranking provider whose vectors are written with the records
    (``imports.prepare``). Returns how many records were written."""
    writer = ImportWriter(store, expected=total, buffered=True, estimate=estimate)
    done = 0

    def prepare_part(values: list[Any], texts: list[Any], checked: list[bool]) -> None:
        nonlocal done
        keep = MAX_PROBLEMS - len(writer.problems)  # none once the refusal's list is full: only counted
        writer.add(prepare(values, now, actor, first_index=done, json_checked=checked, texts=texts, keep=keep,
                           embedder=embedder))
        done += len(values)
        if progress is not None:
            progress(done, total if total is not None else (estimate(done) if estimate else done))

    try:
        with gc_paused():
            values: list[Any] = []
            texts: list[Any] = []
            checked: list[bool] = []
            for value, text, ok in items:
                values.append(value)
                texts.append(text)
                checked.append(ok)
                if len(values) == PART_ITEMS:
                    prepare_part(values, texts, checked)
                    values, texts, checked = [], [], []
            if values:
                prepare_part(values, texts, checked)
            if progress is not None and done == 0:
                progress(0, 0)
            return writer.finish()
    finally:
        writer.close()
