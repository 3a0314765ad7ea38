"""Exports as the facade offers them (SPEC 8), over an engine context: records as Membrane JSON
with ``salience = S(as_of)`` and the anchor extension fields, to an iterator or to a ``.json``
(an array) or ``.jsonl`` file. With a trust context, only what it may see: hidden records are
left out and redacted ones are written as their metadata-only view.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from membrane_engine.context import EngineContext
from membrane_engine.errors import ValidationError
from membrane_engine.model.records import (
    UTC,
    MemoryRecord,
    check_ids,
    check_instant,
    check_whole,
    format_time,
    to_epoch,
)
from membrane_engine.rules.salience import salience_at, take
from membrane_engine.rules.trust import TrustContext, Verdict, as_trust, redact, verdict_as_read, verdicts
from membrane_engine.storage.audit_log import logs_of
from membrane_engine.transfer import private_files

MAX_EXPORT_BATCH = 100_000  # records read per round trip by iter_export


def iter_export(ctx: EngineContext, ids: Iterable[str] | None = None, trust: TrustContext | None = None,
                as_of: datetime | None = None, batch: int = 2000) -> Iterator[dict[str, Any]]:
    """Records as Membrane JSON with ``salience = S(as_of)`` and the anchor extension fields.
    With ``trust``, only what that context may see: hidden records are left out and
    redacted ones are written as their metadata-only view."""
    # Arguments are checked now, not when the first record is asked for.
    ids = check_ids(ids) if ids is not None else None
    trust = as_trust(trust) if trust is not None else None
    when = check_instant(as_of) if as_of is not None else ctx.now()
    batch = check_whole(batch, "batch", 1, MAX_EXPORT_BATCH)
    return documents(ctx, ids, trust, when, batch)


def documents(ctx: EngineContext, ids: list[str] | None, trust: TrustContext | None, when: datetime,
              batch: int) -> Iterator[dict[str, Any]]:
    """``iter_export``'s records, its arguments checked: the live records of ``ids`` (None:
    every one) by id, read ``batch`` at a time."""
    snap = ctx.columns.current()
    if ids is None:
        rows = np.nonzero(snap.alive)[0]
    else:
        rows = np.array(sorted({snap.row_of[i] for i in ids if i in snap.row_of and snap.alive[snap.row_of[i]]}), dtype=np.int64)
    rows = rows[np.argsort(snap.ids[rows].astype(str), kind="stable")] if len(rows) else rows
    saliences = salience_at(take(snap.decay, np.sort(rows)), to_epoch(when)) if len(rows) else np.empty(0)
    s_of = dict(zip((str(x) for x in snap.ids[np.sort(rows)]), saliences))
    shown = None
    if trust is not None:
        shown = dict(zip((str(x) for x in snap.ids[rows]),
                         verdicts(snap.sens_level[rows], snap.scope_code[rows], snap.scope_names, trust)))
    ordered = [str(x) for x in snap.ids[rows]]
    if shown is not None:
        ordered = [rid for rid in ordered if shown[rid] > 0]
    for start in range(0, len(ordered), batch):
        chunk = ordered[start:start + batch]
        with ctx.store.read() as conn:
            stored = ctx.store.fetch(conn, chunk)
            logs = logs_of(conn, list(stored))
        for rid in chunk:
            row = stored.get(rid)
            if row is None:
                continue
            doc = row.doc
            doc["salience"] = float(s_of[rid])
            doc.setdefault("lifecycle", {})["anchor_salience"] = row.anchor_salience
            doc["lifecycle"]["anchor_at"] = format_time(datetime.fromtimestamp(row.anchor_at, UTC))
            doc["audit_log"] = [e.model_dump(mode="json") for e in logs.get(rid, [])]
            if trust is None:
                yield doc
                continue
            # The choice above is the snapshot's, made before the batch was read; what is
            # written is decided on the labels stored with this content (SPEC 4), as
            # trust.gate_as_read decides, without validating the documents written in full.
            verdict = verdict_as_read(doc.get("sensitivity"), doc.get("scope"), trust)
            if verdict is Verdict.FULL:
                yield doc
            elif verdict is Verdict.REDACTED:
                yield redact(MemoryRecord.model_validate(doc)).to_json_dict()


def export_file(ctx: EngineContext, path: str | Path, ids: Iterable[str] | None = None,
                trust: TrustContext | None = None, as_of: datetime | None = None) -> int:
    """Write records to ``.json`` (an array) or ``.jsonl``, as ``iter_export``; returns how many.
    The file appears under its name only once complete."""
    if not isinstance(path, (str, Path)) or str(path) == "":
        raise ValidationError(f"path must be a file path (got {path!r})", [("path", repr(path))])
    path = Path(path)
    if path.is_dir():
        raise ValidationError(f"path {str(path)!r} is a directory, not a file", [("path", str(path))])
    if not path.parent.is_dir():
        raise ValidationError(f"path {str(path)!r}: the directory {str(path.parent)!r} does not exist",
                              [("path", str(path))])
    docs = iter_export(ctx, ids, trust, as_of)  # checks the arguments before a file is made
    count = 0
    tmp = path.with_name(path.name + ".partial")
    # The partial file holds records in full: the owner's only, and removed if this process
    # is stopped half-way (SIGTERM, SIGINT) as on an error (private_files).
    private_files.install_cleanup()
    private_files.track(tmp)
    try:
        with os.fdopen(private_files.create_private(tmp), "w", encoding="utf-8") as out:
            jsonl = path.suffix.lower() == ".jsonl"
            if not jsonl:
                out.write("[\n")
            for doc in docs:
                if not jsonl and count:
                    out.write(",\n")
                out.write(json.dumps(doc, ensure_ascii=False))
                if jsonl:
                    out.write("\n")
                count += 1
            if not jsonl:
                out.write("\n]\n")
        if path.exists():  # an export file written again keeps the mode its owner gave it
            shutil.copymode(path, tmp)
        else:  # a new one is the user's file, made as their umask makes files, once complete
            os.chmod(tmp, private_files.umask_mode())
        tmp.replace(path)  # a failed export never leaves a half-written file under the real name
    except OSError as exc:
        raise ValidationError(f"cannot write {str(path)!r}: {exc.strerror or exc}", [("path", str(path))]) from None
    finally:
        tmp.unlink(missing_ok=True)
        private_files.untrack(tmp)
    return count


__all__ = ["MAX_EXPORT_BATCH", "documents", "export_file", "iter_export"]
