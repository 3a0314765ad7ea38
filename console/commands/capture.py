"""`membrane-console capture FILE.json`: write capture requests into a store as an agent would
(SPEC 12, Membrane's CaptureMemory).

FILE holds one request (a JSON object) or a JSON array of them, each with Membrane's fields:
source, source_kind (event, tool_output, observation, working_state), content, context,
reason_to_remember, proposed_type, summary, tags, scope, sensitivity, timestamp. All of them
are written in one transaction, in order, or none is: a bad request anywhere refuses the file.

Exit status: 0 written (or previewed), 2 a bad file or request, or a store that cannot be
opened, 1 a capture the store refused."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from membrane_engine import CaptureMemoryRequest, Membrane
from membrane_engine.errors import MembraneError, ValidationError

WRITTEN, REFUSED, BAD_INPUT = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="membrane-console capture", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", type=Path, help="a JSON file: one capture request or an array of them")
    p.add_argument("--db", help="SQLAlchemy URL of the store (default: $MEMBRANE_DB_URL, else ~/.membrane/membrane.db)")
    p.add_argument("--actor", help="the actor every audit entry names (default: Membrane's: ingestion-service for "
                                   "the primary record, the request's source for entities and facts)")
    p.add_argument("--dry-run", action="store_true",
                   help="show what each capture would write, one by one, and write nothing")
    p.add_argument("--json", action="store_true", help="print the responses as JSON")
    return p


def _fail(message: str) -> int:
    print(f"membrane-console capture: {message}", file=sys.stderr)
    return BAD_INPUT


def read_requests(path: Path) -> list[CaptureMemoryRequest]:
    """The file's requests, each validated; a ValidationError names the request, the field and
    the value of the first bad one (and how many were bad)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationError(f"cannot read {str(path)!r}: {exc}", [("file", str(path))]) from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValidationError(f"{str(path)!r} is not JSON: {exc}", [("file", "not JSON")]) from None
    items = data if isinstance(data, list) else [data]
    if not items:
        raise ValidationError(f"{str(path)!r} holds no capture request (an empty array)", [("file", "empty")])
    out, problems = [], []
    for k, item in enumerate(items):
        if not isinstance(item, dict):
            problems.append((f"request {k}", f"must be a JSON object (got {type(item).__name__})"))
            continue
        try:
            out.append(CaptureMemoryRequest(**item))
        except ValidationError as exc:
            problems += [(f"request {k}: {loc}", msg) for loc, msg in exc.problems]
    if problems:
        shown = "; ".join(f"{loc}: {msg}" for loc, msg in problems[:20])
        more = f" (and {len(problems) - 20} more)" if len(problems) > 20 else ""
        raise ValidationError(f"nothing was written: {shown}{more}", problems)
    return out


def _summary(k: int, response: Any) -> str:
    primary = response.primary_record
    where = f", scope {primary.scope!r}" if primary.scope else ""
    matched = sum(1 for m in response.mentions if not m.created)
    made = sum(1 for m in response.mentions if m.created)
    parts = [f"{primary.type.value} {primary.id} ({primary.sensitivity.value}{where})",
             f"{matched} entit{'y' if matched == 1 else 'ies'} matched, {made} created",
             f"{len(response.edges)} edge{'' if len(response.edges) == 1 else 's'}"]
    fact = response.derived_record
    if fact is not None:
        parts.append(f"fact {fact.id}")
    if response.updated_records:
        parts.append(f"{len(response.updated_records)} existing record(s) linked")
    parts.append(f"interpretation {response.interpretation_status}")
    lines = [f"capture {k}: " + "; ".join(parts)]
    for m in response.mentions:
        lines.append(f"  {m.surface!r} -> {m.entity_id} ({'new entity' if m.created else 'existing: ' + m.canonical_name})")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse has printed why (or the help)
        return BAD_INPUT if exc.code else WRITTEN
    try:
        requests = read_requests(args.file)
    except ValidationError as exc:
        return _fail(str(exc))
    try:
        m = Membrane.open(args.db or None)
    except MembraneError as exc:
        return _fail(str(exc))
    try:
        if args.dry_run:
            responses = [m.preview_capture(req, actor=args.actor) for req in requests]
        else:
            responses = m.capture_many(requests, actor=args.actor)
    except ValidationError as exc:
        return _fail(str(exc))
    except MembraneError as exc:
        print(f"membrane-console capture: refused, nothing was written: {exc}", file=sys.stderr)
        return REFUSED
    finally:
        m.close()
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in responses], indent=2, ensure_ascii=False))
        return WRITTEN
    for k, response in enumerate(responses):
        print(_summary(k, response))
    verb = "would be written (dry run: nothing was)" if args.dry_run else "written"
    print(f"{len(responses)} capture(s) {verb}")
    return WRITTEN
