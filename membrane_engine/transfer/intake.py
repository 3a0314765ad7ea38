"""Imports as the facade offers them (SPEC 8), over an engine context: records in Membrane's
JSON shape, a ``.json`` or ``.jsonl`` file, or parts prepared elsewhere, all or nothing, the
importer named in each record's audit log (``import_writer`` writes, ``imports`` validates).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from membrane_engine.context import EngineContext
from membrane_engine.errors import ValidationError
from membrane_engine.model.records import MAX_ACTOR_LENGTH, MemoryRecord, check_text, check_whole
from membrane_engine.transfer.import_writer import import_items, write_parts
from membrane_engine.transfer.imports import PreparedImport, read_file_checks
from membrane_engine.transfer.json_items import FileItems
from membrane_engine.transfer import jsonl_import

MAX_WORKERS = 256  # import processes; more would only wait for the one writer


def _check_progress(progress: Any) -> None:
    if progress is not None and not callable(progress):
        raise ValidationError(f"progress must be a function (got {progress!r:.80})", [("progress", "not callable")])


def check_actor(actor: Any) -> str:
    """The actor an import's audit entries name: stored in a column of its own."""
    if not isinstance(actor, str) or not actor.strip():
        raise ValidationError(f"actor must be a non-empty string (got {actor!r})", [("actor", repr(actor))])
    return check_text(actor, "actor", MAX_ACTOR_LENGTH)  # the rule curation's actors follow too


def import_records(ctx: EngineContext, items: Iterable[dict[str, Any] | MemoryRecord], actor: str = "import",
                   progress: Callable[[int, int], None] | None = None) -> int:
    """Import records in Membrane's JSON shape, all or nothing. Refuses with a
    ValidationError listing every invalid record (index and field), or AlreadyExistsError
    when an id is already in the store. Returns how many were imported."""
    if isinstance(items, (dict, str, bytes, MemoryRecord)) or not hasattr(items, "__iter__"):
        raise ValidationError(f"items must be a list (or other iterable) of records (got {type(items).__name__})",
                              [("items", type(items).__name__)])
    actor = check_actor(actor)
    _check_progress(progress)
    # Validated and turned into rows part by part; a small import is validated in full
    # before the write lock is taken (import_writer.ImportWriter, buffered).
    total = len(items) if hasattr(items, "__len__") else None
    # The records' ranking vectors (SPEC 9) are computed as they are prepared and written in
    # the same transaction (imports.prepare); a failing provider leaves them for later.
    return import_items(ctx.store, ((item, None, False) for item in items), ctx.now(), actor, total=total,
                        progress=progress, embedder=ctx.embedder)


def import_prepared(ctx: EngineContext, parts: PreparedImport | Iterable[PreparedImport], expected: int | None = None,
                    progress: Callable[[int], None] | None = None) -> int:
    """The write half of ``import_records``, for what ``imports.prepare`` made (possibly in
    other processes): one part, or an iterable of parts written as they arrive, all in one
    transaction, all or nothing, with import_records's refusals. ``expected``: how many records
    the parts hold in all; ``progress(written)`` after each part. Returns how many records were
    written."""
    if isinstance(parts, PreparedImport):
        parts, expected = [parts], len(parts.rows)
    return write_parts(ctx.store, parts, expected=expected, progress=progress)


def import_file(ctx: EngineContext, path: str | Path, actor: str = "import",
                progress: Callable[[int, int], None] | None = None, workers: int = 1) -> int:
    """Import a ``.json`` or ``.jsonl`` file, all or nothing, as ``import_records``.
    ``workers`` > 1 validates a ``.jsonl`` file's records in that many processes while this
    one writes (``jsonl_import``); ``progress(done, total)`` then counts records written."""
    workers = check_whole(workers, "workers", 1, MAX_WORKERS)
    _check_progress(progress)
    path = read_file_checks(path)
    actor = check_actor(actor)
    if workers == 1 or path.suffix.lower() != ".jsonl":
        source = FileItems(path)  # read one record at a time: memory bounded by a part, not the file
        return import_items(ctx.store, source, ctx.now(), actor, estimate=source.estimate, progress=progress,
                            embedder=ctx.embedder)

    chunks = jsonl_import.chunks(path)
    total = sum(chunk.records for chunk in chunks)
    parts = jsonl_import.prepared_parts(path, ctx.now(), actor, workers, chunks, embedder=ctx.embedder)
    report = (lambda written: progress(written, total)) if progress is not None else None
    return import_prepared(ctx, parts, expected=total, progress=report)


__all__ = ["MAX_WORKERS", "check_actor", "import_file", "import_prepared", "import_records"]
