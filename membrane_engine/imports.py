"""Reading Membrane JSON files and preparing an import: validate everything first, write later."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Connection

from .errors import AlreadyExistsError, ValidationError
from .audit import extra_of
from .salience import anchor_of
from .schema import MAX_RECORD_BYTES, MemoryRecord, format_time, to_epoch, validate_record  # noqa: F401 (MAX_RECORD_BYTES re-exported)
from .store import Store, record_row

# MAX_RECORD_BYTES (8 MiB of one record's JSON) is checked by validate_record (schema.check_json).
MAX_REPORTED = 200


def read_file(path: Any) -> list[Any]:
    """Records from a ``.json`` array (or single object) or a ``.jsonl`` file; a file that does
    not parse is refused with the line and column where it breaks."""
    if not isinstance(path, (str, Path)) or str(path) == "":
        raise ValidationError(f"path must be a file path (got {path!r})", [("path", repr(path))])
    path = Path(path)
    if not path.exists():
        raise ValidationError(f"file {str(path)!r} does not exist", [("path", str(path))])
    if not path.is_file():
        raise ValidationError(f"path {str(path)!r} is not a file", [("path", str(path))])
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{path.name}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start})",
                              [("path", "not UTF-8")]) from None
    except OSError as exc:
        raise ValidationError(f"path {str(path)!r} cannot be read ({exc.strerror or exc})", [("path", str(path))]) from None
    return parse_text(text, jsonl=path.suffix.lower() == ".jsonl", name=path.name)


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
    records: list[MemoryRecord] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    audit: list[dict[str, Any]] = field(default_factory=list)
    # audit_end[i]: end of row i's entries in ``audit`` (they are in row order), so a batch of
    # rows finds its entries by slicing.
    audit_end: list[int] = field(default_factory=list)


def prepare_import(items: list[Any], store: Store, conn: Connection, now: datetime, actor: str) -> PreparedImport:
    """Validate every item (collecting every problem), check ids and relation targets against
    the store, and build the rows. Nothing is written here."""
    problems: list[tuple[str, str]] = []
    records: list[MemoryRecord] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        try:
            record = validate_record(item)  # size, strict JSON, then the fields
        except ValidationError as exc:
            for loc, msg in exc.problems or [("record", str(exc))]:
                problems.append((f"record {index}: {loc}", msg))
            continue
        except RecursionError:
            problems.append((f"record {index}", "JSON nested too deeply"))
            continue
        if record.redacted:
            problems.append((f"record {index}: redacted", "a redacted view cannot be imported (it has no payload)"))
            continue
        if record.id in seen:
            problems.append((f"record {index}: id", f"duplicate id {record.id!r} (also record {seen[record.id]})"))
            continue
        seen[record.id] = index
        records.append(record)
    # Relation targets are checked for every valid record even when others failed, so one
    # refusal reports every bad record. A target that is an (invalid) item of this import
    # counts as "in the same import": that item is reported on its own.
    in_import = set(seen) | {item.get("id") for item in items
                             if isinstance(item, dict) and isinstance(item.get("id"), str)}
    targets = {rel.target_id for r in records for rel in r.relations} - in_import
    found = store.existing_ids(conn, list(targets), include_archive=False) if targets else set()
    for r in records:
        for k, rel in enumerate(r.relations):
            if rel.target_id not in in_import and rel.target_id not in found:
                problems.append((f"record {seen[r.id]}: relations.{k}.target_id",
                                 f"target {rel.target_id!r} is neither in the store nor in this import"))
    problems.sort(key=lambda p: _index_of(p[0]))
    if not problems:
        existing = store.existing_ids(conn, list(seen))
        if existing:
            first = sorted(existing)[0]
            raise AlreadyExistsError(first if len(existing) == 1 else
                                     f"{first} (and {len(existing) - 1} more)")
    if problems:
        shown = problems[:MAX_REPORTED]
        more = f"; and {len(problems) - MAX_REPORTED} more" if len(problems) > MAX_REPORTED else ""
        summary = "; ".join(f"{loc}: {msg}" for loc, msg in shown)
        raise ValidationError(f"import refused, nothing was written: {summary}{more}", problems)

    prepared = PreparedImport(records=records)
    stamp_now = format_time(now)
    ts_now = to_epoch(now)
    rows_append, audit_append, end_append = prepared.rows.append, prepared.audit.append, prepared.audit_end.append
    for r in records:
        s_a, a = anchor_of(r)
        rows_append(record_row(r, s_a, a, None, validated=True))
        if r.audit_log:
            for e in r.audit_log:
                audit_append({"record_id": r.id, "action": e.action.value, "actor": e.actor,
                              "timestamp": format_time(e.timestamp), "ts": to_epoch(e.timestamp),
                              "rationale": e.rationale, "extra": extra_of(e)})
        else:
            audit_append({"record_id": r.id, "action": "create", "actor": actor, "timestamp": stamp_now,
                          "ts": ts_now, "rationale": "imported without an audit log"})
        end_append(len(prepared.audit))
    return prepared
