"""Preparing an import: records validated and turned into rows and audit chains (``prepare``)
before the store is asked anything; ``import_writer`` writes them, ``json_items`` reads files."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from collections.abc import Callable, Iterator, Sequence

from membrane_engine.errors import ValidationError
from membrane_engine.rules.chain import extra_of, extra_text, new_chain, signing_key
from membrane_engine.rules.salience import anchor_of
from membrane_engine.model.records import (
    MAX_RECORD_BYTES,  # noqa: F401 (re-exported)
    MemoryRecord,
    format_time,
    to_epoch,
    validate_record,
)
from membrane_engine.rules.ranking import try_embed_records
from membrane_engine.storage.audit_log import live_digest
from membrane_engine.storage.store import record_values
from membrane_engine.storage.vectors import VECTOR_DTYPE
from membrane_engine.transfer.json_items import FileItems
from membrane_engine.transfer.strict_json import loads

# MAX_RECORD_BYTES (8 MiB of one record's JSON) is checked by validate_record (schema.check_json).
MAX_REPORTED = 200  # problems spelled out in a refusal's message
MAX_PROBLEMS = 1000  # problems listed in a refusal (ValidationError.problems); the rest are counted


def refusal(problems: list[tuple[str, str]], total: int) -> str:
    """The message of an import refused for ``total`` problems, the first of them ``problems``."""
    shown = problems[:MAX_REPORTED]
    summary = "; ".join(f"{loc}: {msg}" for loc, msg in shown)
    more = f"; and {total - len(shown)} more ({total} problems in all)" if total > len(shown) else ""
    return f"import refused, nothing was written: {summary}{more}"


def read_file_checks(path: Any) -> Path:
    """``path`` as a Path, refused unless it names an existing file."""
    if not isinstance(path, (str, Path)) or str(path) == "":
        raise ValidationError(f"path must be a file path (got {path!r})", [("path", repr(path))])
    path = Path(path)
    if not path.exists():
        raise ValidationError(f"file {str(path)!r} does not exist", [("path", str(path))])
    if not path.is_file():
        raise ValidationError(f"path {str(path)!r} is not a file", [("path", str(path))])
    return path


def parse_text(text: str, jsonl: bool = False, name: str = "input") -> list[Any]:
    if jsonl:
        items = []
        # Lines end at "\n" only: str.splitlines() would also split inside records at U+2028,
        # U+2029, U+0085 and other separators that JSON strings may hold unescaped.
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            items.append(loads(line, name, f" line {number}"))
        return items
    data = loads(text, name, "")
    if isinstance(data, dict):
        return [data]
    if not isinstance(data, list):
        raise ValidationError(f"{name}: expected a JSON array of records (got {type(data).__name__})",
                              [("file", "not an array")])
    return data


def index_of_location(location: str) -> int:
    """The record index a problem location starts with ("record 7: id" -> 7)."""
    try:
        return int(location.split(":", 1)[0].split()[1])
    except (IndexError, ValueError):
        return -1


MAX_EXISTING_LISTED = 50  # ids already in the store named by a preview; the rest are counted


@dataclass
class FilePreview:
    """What an import of a file would meet, read one record at a time (``preview_file``)."""
    count: int  # items in the file
    # Per item, in file order: its id, type, sensitivity and scope as the file gives them ({} for
    # an item that is not a JSON object): what ``exposure.import_exposures`` gates, and what
    # names a refused item.
    briefs: list[dict[str, Any]]
    existing: list[str]  # ids of the file already in the store (live or archived), the first MAX_EXISTING_LISTED
    existing_count: int  # all of them: any makes the import refused (``AlreadyExistsError``), nothing replaced


BRIEF_FIELDS = ("id", "type", "sensitivity", "scope")


def preview_file(store: Any, path: Any) -> FilePreview:
    """A file's records read as ``import_file`` reads them (``json_items.FileItems``: memory
    bounded by a record, not the file), with the ids the store already holds. Raises the
    reader's ValidationError where the file stops being JSON; the records themselves are
    validated by the import."""
    path = read_file_checks(path)
    briefs: list[dict[str, Any]] = []
    for value, _text, _checked in FileItems(path):
        briefs.append({k: value.get(k) for k in BRIEF_FIELDS if k in value} if isinstance(value, dict) else {})
    ids = [b["id"] for b in briefs if isinstance(b.get("id"), str) and b["id"]]
    found: set[str] = set()
    if ids:
        with store.read() as conn:
            found = store.existing_ids(conn, ids)  # as ImportWriter checks them: the archive too
    listed = [i for i in dict.fromkeys(ids) if i in found][:MAX_EXISTING_LISTED]
    return FilePreview(len(briefs), briefs, listed, len(found))


@dataclass
class PreparedImport:
    """An import validated and turned into rows before the store is asked anything (what
    ``prepare`` returns). Plain data, so it can be made in another process while this one
    writes: ``bench/generate.py`` prepares chunks in side processes."""
    problems: list[tuple[str, str]] = field(default_factory=list)  # the first MAX_PROBLEMS
    problem_total: int = 0  # problems in all
    count: int = 0  # items prepared
    ids: list[str] = field(default_factory=list)  # of the valid records, in input order
    index_of: dict[str, int] = field(default_factory=dict)  # id -> its item's index
    in_import: set[str] = field(default_factory=set)  # every item's id, valid or not
    relations: list[tuple[str, int, str]] = field(default_factory=list)  # (record id, k, target id)
    rows: list[tuple] = field(default_factory=list)  # store.ROW_COLUMNS order, audit head set
    audit: list[tuple] = field(default_factory=list)  # audit rows (chain.NEW_ENTRY_COLUMNS), chained
    # The records' ranking vectors (SPEC 9) as ``record_vectors`` rows (id, provider name, float16
    # bytes), written in the import's transaction; None when no provider was given or it failed
    # (the records then get theirs when a task first asks, ``vectors.VectorIndex``).
    vectors: list[tuple[str, str, bytes]] | None = None


PROGRESS_EVERY = 1000


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a bulk import. An import allocates millions of
    small objects and keeps many alive (parsed items, models, rows), so the collector runs again
    and again over a growing heap, each time finding nothing to free (records hold no reference
    cycles): with it on, preparing a record and parsing a JSON line cost far more CPU
    (bench/README.md).
    Reference counting still frees everything as usual; the collector is on again afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def prepare(items: list[Any], now: datetime, actor: str,
            progress: Callable[[int, int], None] | None = None, first_index: int = 0,
            json_checked: Sequence[bool] = (), texts: Sequence[str | bytes | None] = (),
            keep: int = MAX_PROBLEMS, embedder: Any = None) -> PreparedImport:
    """Validate every item (collecting every problem) and build the rows and audit chains of
    the valid ones, calling ``progress(done, total)`` as items are validated. Nothing here
    reads the store: ``import_writer.ImportWriter`` does that. ``first_index``: the index of ``items[0]``
    in the whole import, when it comes in parts (problems name records by that index).
    ``json_checked[i]``: item i's JSON was checked by its reader (``schema.validate_record``).
    ``texts[i]``: item i's JSON text when it is short (``json_items.KEY_CHARS``), else None.
    Problems: the first ``keep`` are kept, all are counted (``problem_total``).
    ``embedder``: a ranking provider (``ranking.Embedder``); the valid records' vectors are
    computed from their text (``vectors``) when nothing is refused."""
    with gc_paused():
        out, records = _prepare(items, now, actor, progress, first_index, json_checked, texts, keep)
        if embedder is not None and records and not out.problem_total:
            out.vectors = vector_rows(embedder, records)
        return out


def vector_rows(embedder: Any, records: Sequence[MemoryRecord]) -> list[tuple[str, str, bytes]] | None:
    """``record_vectors`` rows of ``records`` (id, provider name, float16 bytes), or None when the
    provider fails: as Membrane ignores its embedding service's errors, an import never fails
    for its ranking provider (``ranking.try_embed_records`` logs it)."""
    vectors = try_embed_records(embedder, records)
    if vectors is None or len(vectors) != len(records):
        return None
    half = np.ascontiguousarray(vectors, dtype=VECTOR_DTYPE)
    blob, width = half.tobytes(), half.shape[1] * VECTOR_DTYPE.itemsize
    name = str(embedder.name)
    return [(r.id, name, blob[k * width:(k + 1) * width]) for k, r in enumerate(records)]


_REFUSED: dict[str | bytes, list[tuple[str, str]]] = {}  # short JSON text -> its problems
_REFUSED_MAX = 10_000


def _problems_of(item: Any, checked: bool, text: str | bytes | None) -> list[tuple[str, str]] | MemoryRecord:
    """The record an item makes, or its problems. A short item's refusal is remembered by its
    text: a junk file repeats the same few items millions of times (``[{}, {}, ...]``), and
    validating each again costs far more than a look-up."""
    if text is not None:
        known = _REFUSED.get(text)
        if known is not None:
            return known
    try:
        # size, strict JSON (unless its reader checked), then the fields
        return validate_record(item, json_checked=checked)
    except ValidationError as exc:
        problems = exc.problems or [("record", str(exc))]
    except RecursionError:
        problems = [("", "JSON nested too deeply")]
    if text is not None and len(_REFUSED) < _REFUSED_MAX:
        _REFUSED[text] = problems
    return problems


def _future_entries(record: MemoryRecord, now: datetime) -> list[tuple[int, str]]:
    """(index, timestamp) of the record's audit entries dated after ``now``, the import's instant.
    Refused rather than clamped: a clamped entry would still claim a time the file never gave,
    and the entries are hash-chained as the file gave them. Stored, one dated 2099 would head
    the store's audit log (newest first) for as long as the store lives."""
    limit = to_epoch(now)
    return [(k, format_time(e.timestamp)) for k, e in enumerate(record.audit_log) if to_epoch(e.timestamp) > limit]


def _prepare(items: list[Any], now: datetime, actor: str, progress: Callable[[int, int], None] | None,
             first_index: int, json_checked: Sequence[bool], texts: Sequence[str | bytes | None],
             keep: int) -> tuple[PreparedImport, list[MemoryRecord]]:
    out = PreparedImport(count=len(items))
    records: list[MemoryRecord] = []
    seen = out.index_of
    total = len(items)

    def problem(index: int, loc: str, msg: str) -> None:
        out.problem_total += 1
        if len(out.problems) < keep:
            out.problems.append((f"record {index}: {loc}" if loc else f"record {index}", msg))

    for offset, item in enumerate(items):
        index = first_index + offset
        if progress is not None and offset % PROGRESS_EVERY == 0:
            progress(offset, total)
        record = _problems_of(item, bool(json_checked) and json_checked[offset], texts[offset] if texts else None)
        if not isinstance(record, MemoryRecord):
            for loc, msg in record:
                problem(index, loc, msg)
            continue
        if record.redacted:
            problem(index, "redacted", "a redacted view cannot be imported (it has no payload)")
            continue
        if record.id in seen:
            problem(index, "id", f"duplicate id {record.id!r} (also record {seen[record.id]})")
            continue
        late = _future_entries(record, now)
        if late:
            for k, stamp in late:
                problem(index, f"audit_log.{k}.timestamp",
                        f"record {record.id!r}: audit entry {k} is dated {stamp}, after this import "
                        f"({format_time(now)}); an imported history cannot come from the future")
            continue
        seen[record.id] = index
        records.append(record)
    # A relation target that is an (invalid) item of this import counts as "in the same
    # import": that item is reported on its own.
    out.in_import = set(seen) | {item.get("id") for item in items
                                 if isinstance(item, dict) and isinstance(item.get("id"), str)}
    out.ids = list(seen)
    if progress is not None:
        progress(total, total)
    if out.problem_total:
        out.relations = [(r.id, k, rel.target_id) for r in records for k, rel in enumerate(r.relations)
                         if rel.target_id not in out.in_import]
        return out, []  # refused whatever the store says; relations are still checked, for the report
    key = signing_key()
    # Every record ends with the importer's own entry (SPEC 6, "import names the importer"),
    # after the history it brought: that history is kept, and is only as good as the file.
    stamp, ts = format_time(now), to_epoch(now)
    for r in records:
        s_a, a = anchor_of(r)
        brought = [(e.action._value_, e.actor, format_time(e.timestamp), to_epoch(e.timestamp), e.rationale,
                    extra_text(extra_of(e))) for e in r.audit_log]
        said = (f"imported with {len(brought)} earlier audit entr{'y' if len(brought) == 1 else 'ies'} from the file"
                if brought else "imported without an audit log")
        values = record_values(r, s_a, a, None, validated=True)
        chain, head = new_chain(r.id, [*brought, ("create", actor, stamp, ts, said, None)], key,
                                live_digest(values[:-1]))
        out.audit.extend(chain)
        out.rows.append((*values[:-1], head))
        for k, rel in enumerate(r.relations):
            if rel.target_id not in out.in_import:
                out.relations.append((r.id, k, rel.target_id))
    return out, records
