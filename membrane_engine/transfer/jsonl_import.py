"""A large JSON Lines import on every core: worker processes read, parse and prepare chunks of
the file (``imports.prepare``: validation, rows, audit chains), the calling process writes them
as they come back (``Membrane.import_prepared``), all in one transaction.

Validation is most of an import's CPU (pydantic and building the rows), and it needs nothing
from the store, so it is what runs in parallel; the writes stay in one process, in one
transaction, as in ``import_records``. Workers are started with ``spawn`` (no ``fork``: the
caller may be a threaded server), whose start costs more than a small file gains from them.
The refusals are ``import_records``'s, with lines and records numbered in the whole file.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import pickle
import threading
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from membrane_engine.errors import ValidationError
from membrane_engine.rules.ranking import default_embedder
from membrane_engine.transfer.imports import PreparedImport, gc_paused, prepare
from membrane_engine.transfer.strict_json import parse_line

log = logging.getLogger(__name__)

CHUNK_BYTES = 16 << 20  # bytes per worker task (about 9,000 records of 1.8 KB): big enough to amortize
# a task's overhead, small enough for an even spread
CHUNK_LINES = 50_000  # lines per worker task at most: a file of tiny junk lines ("{}") would put
# millions of parsed items, hundreds of megabytes, in one task


SHORT_LINE = 64  # lines this short go to ``prepare`` with their text, to recognise repeated junk


@dataclass(frozen=True)
class Chunk:
    """Bytes ``start``..``end`` of the file: whole lines, the first of them line ``first_line``
    (1-based), holding records ``first_index``.. (``records`` of them; blank lines hold none)."""
    start: int
    end: int
    first_line: int
    first_index: int
    records: int


def chunks(path: Path) -> list[Chunk]:
    """The file cut into chunks of about CHUNK_BYTES at line ends, read once with the counting
    done by ``bytes.count``: a worker reads its own chunk, so this process handles no line."""
    out: list[Chunk] = []
    line, index, offset = 1, 0, 0
    with path.open("rb") as f:
        rest = b""
        while True:
            block = f.read(CHUNK_BYTES)
            data = rest + block if rest else block
            if not block:
                cut = len(data)  # the last line, without its line end
            else:
                cut = data.rfind(b"\n") + 1
                if cut == 0:  # one line longer than a chunk: read on
                    rest = data
                    continue
            piece, rest = data[:cut], data[cut:]
            for part in _at_most_lines(piece):
                lines, records = _count(part)
                out.append(Chunk(offset, offset + len(part), line, index, records))
                line, index, offset = line + lines, index + records, offset + len(part)
            if not block:
                return out


def _at_most_lines(piece: bytes) -> Iterator[bytes]:
    """``piece`` (whole lines) cut into runs of at most CHUNK_LINES lines (one run, usually)."""
    while piece.count(b"\n") > CHUNK_LINES:
        head = len(piece) - len(piece.split(b"\n", CHUNK_LINES)[-1])  # just after the CHUNK_LINES-th line end
        yield piece[:head]
        piece = piece[head:]
    if piece:
        yield piece


def _count(piece: bytes) -> tuple[int, int]:
    """(lines, records) in whole lines of a file: every line holds a record unless it is blank.
    When every line starts with "{" (the usual file), no line is blank; otherwise lines are
    looked at one by one."""
    lines = piece.count(b"\n") + (0 if piece.endswith(b"\n") else 1)
    if piece.startswith(b"{") and piece.count(b"\n{") >= lines - 1:
        return lines, lines
    return lines, sum(1 for text in _lines(piece) if text.strip())


def _lines(piece: bytes) -> list[bytes]:
    """The lines of whole lines of a file, without their line ends (at "\n" only, as the
    sequential reader splits)."""
    parts = piece.split(b"\n")
    return parts[:-1] if piece.endswith(b"\n") else parts


def count_records(path: Path) -> int:
    """How many records (non-blank lines) the file holds."""
    return sum(chunk.records for chunk in chunks(path))


def prepare_chunk(path: Path, chunk: Chunk, name: str, now: datetime,
                  actor: str) -> PreparedImport | tuple[str, list[tuple[str, str]]]:
    """A chunk of the file read and prepared; or (message, problems) when a line is not JSON
    (returned, not raised: an exception's extra fields do not survive pickling)."""
    with path.open("rb") as f:
        f.seek(chunk.start)
        piece = f.read(chunk.end - chunk.start)
    with gc_paused():
        items, checked, texts = [], [], []
        try:
            for offset, line in enumerate(_lines(piece)):
                if line.strip():
                    item, ok = parse_line(line, name, chunk.first_line + offset)
                    items.append(item)
                    checked.append(ok)
                    texts.append(line if len(line) <= SHORT_LINE else None)
        except ValidationError as exc:
            return str(exc), exc.problems
        return prepare(items, now, actor, first_index=chunk.first_index, json_checked=checked, texts=texts,
                       embedder=_EMBEDDER)


def prepared_parts(path: Path, now: datetime, actor: str, workers: int,
                   file_chunks: list[Chunk] | None = None, embedder: Any = None) -> Iterator[PreparedImport]:
    """The file's chunks (``file_chunks``, else ``chunks(path)``) prepared by ``workers`` processes,
    in file order, at most ``2 * workers`` chunks ahead of the writer. A line that is not JSON
    raises ValidationError when its chunk comes up (the writer's transaction then rolls back).
    Workers run with the cyclic collector off (``imports.gc_paused`` says why): what they make
    goes back to this process, and they end with the import, or soon after this process dies
    (``worker_start``). ``embedder``: the ranking provider whose vectors the workers compute as
    they prepare (``for_workers`` says how it travels; a part comes back without vectors when it
    cannot, or when the provider fails)."""
    context = multiprocessing.get_context("spawn")
    todo = chunks(path) if file_chunks is None else file_chunks
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=worker_start,
                             initargs=(os.getpid(), for_workers(embedder))) as pool:
        pending: deque[Future] = deque()
        try:
            for chunk in todo:
                pending.append(pool.submit(prepare_chunk, path, chunk, path.name, now, actor))
                if len(pending) >= 2 * workers:
                    yield _result(pending.popleft())
            while pending:
                yield _result(pending.popleft())
        finally:
            for future in pending:
                future.cancel()


ORPHAN_CHECK_S = 0.5  # how often a worker looks for its importing process


_EMBEDDER: Any = None  # a worker's ranking provider (``worker_start``)


def for_workers(embedder: Any) -> Any:
    """How ``embedder`` reaches the workers: ``"default"`` for the provider a fresh install brings
    (each worker makes its own, ``ranking.default_embedder``), the provider itself when it can be
    pickled, else None (its vectors are then made when a task first asks, in the importing
    process: ``vectors.VectorIndex``)."""
    if embedder is None:
        return None
    if embedder is default_embedder():
        return "default"
    try:
        pickle.dumps(embedder)
    except Exception:
        log.info("ranking provider %r cannot be sent to import workers: vectors are left for later", embedder)
        return None
    return embedder


def worker_start(importer: int, embedder: Any = None) -> None:
    """A worker's set-up: the cyclic collector off for its life, and a watch on the importing
    process. Killed mid-import (a stopped benchmark, a console server shut down), that process
    cannot tell its workers to stop, and they would wait for the next chunk forever, each
    holding a few hundred MB: a spawned worker holds both ends of its task queue's pipe, so it
    never reads an end of file. The watch ends the worker once its parent is no longer the
    importer (on Linux an orphan is handed to another process). ``embedder``: what
    ``for_workers`` made of the import's ranking provider."""
    global _EMBEDDER
    gc.disable()
    if isinstance(embedder, str):  # "default"
        embedder = default_embedder()
    _EMBEDDER = embedder
    threading.Thread(target=_exit_when_orphaned, args=(importer,), name="membrane-import-orphan-watch",
                     daemon=True).start()


def _exit_when_orphaned(importer: int) -> None:
    while os.getppid() == importer:
        time.sleep(ORPHAN_CHECK_S)
    os._exit(1)  # no clean-up to run: the worker wrote nothing, its results were for the importer


def _result(future: Future) -> PreparedImport:
    part = future.result()
    if isinstance(part, tuple):
        message, problems = part
        raise ValidationError(message, problems)
    return part
