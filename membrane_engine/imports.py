"""Reading Membrane JSON files and preparing an import: validate everything first, write later."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy.engine import Connection

from .errors import AlreadyExistsError, ValidationError
from .salience import anchor_of
from .schema import MemoryRecord, format_time, to_epoch, validate_record
from .store import Store, record_row

MAX_RECORD_BYTES = 8 * 1024 * 1024  # one record's JSON; larger ones are refused, not stored
MAX_REPORTED = 200


def read_file(path: Path) -> list[Any]:
    """Records from a ``.json`` array (or single object) or a ``.jsonl`` file; a file that does
    not parse is refused with the line and column where it breaks."""
    if not path.exists():
        raise ValidationError(f"file {str(path)!r} does not exist", [("path", str(path))])
    text = path.read_text(encoding="utf-8")
    return parse_text(text, jsonl=path.suffix.lower() == ".jsonl", name=path.name)


def parse_text(text: str, jsonl: bool = False, name: str = "input") -> list[Any]:
    if jsonl:
        items = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValidationError(f"{name} line {number}: not valid JSON ({exc.msg} at column {exc.colno})",
                                      [(f"line {number}", exc.msg)]) from None
        return items
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{name}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})",
                              [(f"line {exc.lineno}", exc.msg)]) from None
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


def _json_size(item: dict[str, Any]) -> int:
    """Bytes of an item's JSON (compact UTF-8; orjson, else the json module for what orjson
    cannot write, such as integers beyond 64 bits)."""
    try:
        return len(orjson.dumps(item, default=str, option=orjson.OPT_NON_STR_KEYS))
    except (TypeError, ValueError):
        return len(json.dumps(item, default=str, separators=(",", ":"), ensure_ascii=False).encode())


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
            if isinstance(item, dict):
                size = _json_size(item)
                if size > MAX_RECORD_BYTES:
                    raise ValidationError(f"record is {size} bytes; the limit is {MAX_RECORD_BYTES}",
                                          [("record", f"{size} bytes")])
            record = validate_record(item)
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
                              "rationale": e.rationale})
        else:
            audit_append({"record_id": r.id, "action": "create", "actor": actor, "timestamp": stamp_now,
                          "ts": ts_now, "rationale": "imported without an audit log"})
        end_append(len(prepared.audit))
    return prepared
