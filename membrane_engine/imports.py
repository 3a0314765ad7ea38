"""Reading Membrane JSON files and preparing an import: validate everything first, write later."""

from __future__ import annotations

import gc
import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterator, Sequence

from sqlalchemy.engine import Connection

from .errors import AlreadyExistsError, ValidationError
from . import audit
from .audit import extra_of
from .salience import anchor_of
from .schema import MAX_RECORD_BYTES, MemoryRecord, format_time, to_epoch, validate_record  # noqa: F401 (MAX_RECORD_BYTES re-exported)
from .store import Store, record_values

# MAX_RECORD_BYTES (8 MiB of one record's JSON) is checked by validate_record (schema.check_json).
MAX_REPORTED = 200


def read_file(path: Any) -> list[Any]:
    """Records from a ``.json`` array (or single object) or a ``.jsonl`` file; a file that does
    not parse is refused with the line and column where it breaks."""
    path = read_file_checks(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{path.name}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start})",
                              [("path", "not UTF-8")]) from None
    except OSError as exc:
        raise ValidationError(f"path {str(path)!r} cannot be read ({exc.strerror or exc})", [("path", str(path))]) from None
    return parse_text(text, jsonl=path.suffix.lower() == ".jsonl", name=path.name)


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


def _refuse_constant(name: str) -> Any:
    # Python's json reads NaN and +-Infinity; JSON (and Membrane) does not.
    raise ValueError(f"{name} is not valid JSON")


def _loads(text: str, name: str, where: str) -> Any:
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        at = f"line {exc.lineno} column {exc.colno}" if not where else f"column {exc.colno}"
        raise ValidationError(f"{name}{where}: not valid JSON ({exc.msg}; {at})",
                              [(f"line {exc.lineno}" if not where else where.strip(), exc.msg)]) from None
    except ValueError as exc:
        raise ValidationError(f"{name}{where}: {exc}", [(where.strip() or "file", str(exc))]) from None
    except RecursionError:
        raise ValidationError(f"{name}{where}: JSON nested too deeply", [(where.strip() or "file", "nested too deeply")]) from None


def parse_text(text: str, jsonl: bool = False, name: str = "input") -> list[Any]:
    if jsonl:
        items = []
        # Lines end at "\n" only: str.splitlines() would also split inside records at U+2028,
        # U+2029, U+0085 and other separators that JSON strings may hold unescaped.
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            items.append(_loads(line, name, f" line {number}"))
        return items
    data = _loads(text, name, "")
    if isinstance(data, dict):
        return [data]
    if not isinstance(data, list):
        raise ValidationError(f"{name}: expected a JSON array of records (got {type(data).__name__})",
                              [("file", "not an array")])
    return data


def _index_of(location: str) -> int:
    """The record index a problem location starts with ("record 7: id" -> 7)."""
    try:
        return int(location.split(":", 1)[0].split()[1])
    except (IndexError, ValueError):
        return -1


@dataclass
class PreparedImport:
    """An import validated and turned into rows before the store is asked anything (what
    ``prepare`` returns). Plain data, so it can be made in another process while this one
    writes: ``bench/generate.py`` prepares chunks in side processes."""
    problems: list[tuple[str, str]] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)  # of the valid records, in input order
    index_of: dict[str, int] = field(default_factory=dict)  # id -> its item's index
    in_import: set[str] = field(default_factory=set)  # every item's id, valid or not
    relations: list[tuple[str, int, str]] = field(default_factory=list)  # (record id, k, target id)
    rows: list[tuple] = field(default_factory=list)  # store.ROW_COLUMNS order, audit head set
    audit: list[tuple] = field(default_factory=list)  # audit rows (audit.ENTRY_COLUMNS), chained


PROGRESS_EVERY = 1000


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a bulk import. An import allocates millions of
    small objects and keeps many alive (parsed items, models, rows), so the collector runs again
    and again over a growing heap, each time finding nothing to free (records hold no reference
    cycles): with it on, preparing a record cost 2.2x as much CPU, parsing a JSON line 3.8x.
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
            json_checked: Sequence[bool] = ()) -> PreparedImport:
    """Validate every item (collecting every problem) and build the rows and audit chains of
    the valid ones, calling ``progress(done, total)`` as items are validated. Nothing here
    reads the store: ``check_and_write`` does that. ``first_index``: the index of ``items[0]``
    in the whole import, when it comes in parts (problems name records by that index).
    ``json_checked[i]``: item i's JSON was checked by its reader (``schema.validate_record``)."""
    with gc_paused():
        return _prepare(items, now, actor, progress, first_index, json_checked)


def _prepare(items: list[Any], now: datetime, actor: str, progress: Callable[[int, int], None] | None,
             first_index: int, json_checked: Sequence[bool]) -> PreparedImport:
    out = PreparedImport()
    records: list[MemoryRecord] = []
    seen = out.index_of
    total = len(items)
    for offset, item in enumerate(items):
        index = first_index + offset
        if progress is not None and offset % PROGRESS_EVERY == 0:
            progress(offset, total)
        try:
            # size, strict JSON (unless its reader checked), then the fields
            record = validate_record(item, json_checked=bool(json_checked) and json_checked[offset])
        except ValidationError as exc:
            for loc, msg in exc.problems or [("record", str(exc))]:
                out.problems.append((f"record {index}: {loc}", msg))
            continue
        except RecursionError:
            out.problems.append((f"record {index}", "JSON nested too deeply"))
            continue
        if record.redacted:
            out.problems.append((f"record {index}: redacted", "a redacted view cannot be imported (it has no payload)"))
            continue
        if record.id in seen:
            out.problems.append((f"record {index}: id", f"duplicate id {record.id!r} (also record {seen[record.id]})"))
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
    if out.problems:
        out.relations = [(r.id, k, rel.target_id) for r in records for k, rel in enumerate(r.relations)
                         if rel.target_id not in out.in_import]
        return out  # refused whatever the store says; relations are still checked, for the report
    key = audit.signing_key()
    own = ([("create", actor, format_time(now), to_epoch(now), "imported without an audit log", None)])
    for r in records:
        s_a, a = anchor_of(r)
        entries = [(e.action._value_, e.actor, format_time(e.timestamp), to_epoch(e.timestamp), e.rationale,
                    audit.extra_text(extra_of(e))) for e in r.audit_log] or own
        chain, head = audit.new_chain(r.id, entries, key)
        out.audit.extend(chain)
        out.rows.append(record_values(r, s_a, a, head, validated=True))
        for k, rel in enumerate(r.relations):
            if rel.target_id not in out.in_import:
                out.relations.append((r.id, k, rel.target_id))
    return out


class WrittenIds:
    """What an import in parts has written so far, when the store held no record (live or
    archived) at its start: then an id is taken, or a relation target exists, exactly when an
    earlier part wrote it, and this set answers without asking the store (two lookups per
    record: 15 s of a profiled 1M import's writing process). For a store that held records,
    ``ids`` is None and the store is asked (it sees the earlier parts, in the same transaction)."""

    def __init__(self, store: Store, conn: Connection):
        self.store, self.conn = store, conn
        self.ids: set[str] | None = set() if store.is_empty(conn) else None

    def existing(self, ids: list[str], include_archive: bool = True) -> set[str]:
        if self.ids is None:
            return self.store.existing_ids(self.conn, ids, include_archive=include_archive) if ids else set()
        return self.ids.intersection(ids)

    def add(self, ids: list[str]) -> None:
        if self.ids is not None:
            self.ids.update(ids)


def check_and_write(prepared: PreparedImport, store: Store, conn: Connection, written: WrittenIds | None = None) -> int:
    """The store's half of an import, inside the caller's write transaction (and its
    ``Store.bulk`` settings, for a large one): relation targets
    must exist (in the store or the same import), ids must be new; then every row goes in.
    Refuses with ValidationError listing every problem (prepare's as well), or
    AlreadyExistsError, before anything is written. Returns how many records were written.
    ``written``: the import's ``WrittenIds``, kept by the caller across parts."""
    written = written if written is not None else WrittenIds(store, conn)
    problems = list(prepared.problems)
    targets = list({target for _, _, target in prepared.relations})
    found = written.existing(targets, include_archive=False)
    for rid, k, target in prepared.relations:
        if target not in found:
            problems.append((f"record {prepared.index_of[rid]}: relations.{k}.target_id",
                             f"target {target!r} is neither in the store nor in this import"))
    problems.sort(key=lambda p: _index_of(p[0]))
    if not problems:
        existing = written.existing(prepared.ids)
        if existing:
            first = sorted(existing)[0]
            raise AlreadyExistsError(first if len(existing) == 1 else
                                     f"{first} (and {len(existing) - 1} more)")
    if problems:
        shown = problems[:MAX_REPORTED]
        more = f"; and {len(problems) - MAX_REPORTED} more" if len(problems) > MAX_REPORTED else ""
        summary = "; ".join(f"{loc}: {msg}" for loc, msg in shown)
        raise ValidationError(f"import refused, nothing was written: {summary}{more}", problems)
    audit.insert_entries(conn, prepared.audit)
    store.insert_values(conn, prepared.rows)
    written.add(prepared.ids)
    return len(prepared.rows)
