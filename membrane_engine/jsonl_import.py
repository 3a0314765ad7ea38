"""A large JSON Lines import on every core: worker processes parse and prepare chunks of lines
(``imports.prepare``: validation, rows, audit chains), the calling process writes them as they
come back (``Membrane.import_prepared``), all in one transaction.

Validation is most of an import's CPU (pydantic and building the rows, about 70 µs a record
here), and it needs nothing from the store, so it is what runs in parallel; the writes stay in one process, in one
transaction, as in ``import_records``. Workers are started with ``spawn`` (no ``fork``: the
caller may be a threaded server), which costs about a second, so small files are not worth it.
The refusals are ``import_records``'s, with lines and records numbered in the whole file.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from datetime import datetime
from itertools import islice
from pathlib import Path
from typing import Any

import orjson

from .errors import ValidationError
from .imports import PreparedImport, _loads, gc_paused, prepare

CHUNK_LINES = 10_000  # lines per worker task: big enough to amortize pickling, small for an even spread


def _parse(line: bytes, name: str, number: int) -> Any:
    """One line as JSON, strictly: orjson for the common case; anything it refuses goes through
    the sequential reader's own parser, so the accepted values and the errors are the same."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(f"{name} line {number}: not UTF-8 text (byte {exc.object[exc.start]:#04x} "
                                  f"at column {exc.start + 1})", [(f"line {number}", "not UTF-8")]) from None
        return _loads(text, name, f" line {number}")


def prepare_lines(lines: list[bytes], first_line: int, first_index: int, name: str, now: datetime,
                  actor: str) -> PreparedImport | tuple[str, list[tuple[str, str]]]:
    """Lines ``first_line``.. of the file (1-based), whose first record is record
    ``first_index`` of the import, prepared; or (message, problems) when a line is not JSON
    (returned, not raised: an exception's extra fields do not survive pickling)."""
    with gc_paused():
        items = []
        try:
            for offset, line in enumerate(lines):
                if line.strip():
                    items.append(_parse(line, name, first_line + offset))
        except ValidationError as exc:
            return str(exc), exc.problems
        return prepare(items, now, actor, first_index=first_index)


def _chunks(path: Path) -> Iterator[tuple[list[bytes], int, int]]:
    """(lines, first line number, first record index) per CHUNK_LINES lines of the file."""
    line_number = 1
    record_index = 0
    with path.open("rb") as f:
        while True:
            lines = list(islice(f, CHUNK_LINES))
            if not lines:
                return
            yield lines, line_number, record_index
            line_number += len(lines)
            record_index += sum(1 for line in lines if line.strip())


def count_records(path: Path) -> int:
    """How many records (non-blank lines) the file holds."""
    count = 0
    with path.open("rb") as f:
        for line in f:
            if line.strip():
                count += 1
    return count


def prepared_parts(path: Path, now: datetime, actor: str, workers: int) -> Iterator[PreparedImport]:
    """The file's chunks prepared by ``workers`` processes, in file order, at most
    ``2 * workers`` chunks ahead of the writer. A line that is not JSON raises ValidationError
    when its chunk comes up (the writer's transaction then rolls back)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        pending: deque[Future] = deque()
        chunks = _chunks(path)
        try:
            for lines, first_line, first_index in chunks:
                pending.append(pool.submit(prepare_lines, lines, first_line, first_index, path.name, now, actor))
                if len(pending) >= 2 * workers:
                    yield _result(pending.popleft())
            while pending:
                yield _result(pending.popleft())
        finally:
            for future in pending:
                future.cancel()


def _result(future: Future) -> PreparedImport:
    part = future.result()
    if isinstance(part, tuple):
        message, problems = part
        raise ValidationError(message, problems)
    return part
