"""Two yardsticks for retrieval: the naive reference and the bare numpy floor.

- ``naive_retrieve``: SPEC 4 the obvious way, as Membrane itself does it: for each layer, load
  every record of that type from the store, parse it, gate it, compute S(as_of), filter; run the
  selector over every competence / plan candidate; sort; cut to the limit. No cache, no columns.
  It is the correctness reference (tests/scale) and the "before" of the speed-up.
- ``numpy_floor``: the least work any implementation over the column cache must do: gate and
  filter by vectorized masks, S(t) of the gated rows with the engine's formula, and a top-k by
  partition. No tie-breaking beyond S, no selector, no counts, no records materialized. The
  fast path is measured against it (what its extra work costs).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import select as sql_select

from membrane_engine import Membrane, MemoryRecord, RetrieveRequest, RetrieveResponse
from membrane_engine.storage.audit_log import logs_of
from membrane_engine.storage.columns import TYPE_CODES, Snapshot
from membrane_engine.retrieval.layered import MAX_LIMIT, validate_request
from membrane_engine.rules.salience import salience_at, salience_of, take
from membrane_engine.model.records import CANONICAL_LAYER_ORDER, LAYER_RANK, SELECTOR_TYPES, to_epoch
from membrane_engine.rules.selector import DEFAULT_THRESHOLD, select
from membrane_engine.storage.store import records
from membrane_engine.rules.trust import Verdict, decide, redact


def naive_retrieve(m: Membrane, req: RetrieveRequest, threshold: float = DEFAULT_THRESHOLD) -> RetrieveResponse:
    """Retrieval without the column cache: every record of every wanted layer is read and parsed."""
    if req is not None and req.as_of is None:
        req = req.model_copy(update={"as_of": m.now()})
    trust, types, min_salience, limit, as_of = validate_request(req)
    passing: list[tuple[tuple, MemoryRecord, bool]] = []
    with m.store.read() as conn:
        for layer in CANONICAL_LAYER_ORDER:
            if types and layer not in types:
                continue
            q = (sql_select(records.c.doc, records.c.anchor_salience, records.c.anchor_at)
                 .where(records.c.type == layer.value))
            for row in conn.execute(q):
                doc = json.loads(row.doc)
                doc["audit_log"] = []
                record = MemoryRecord.model_validate(doc)
                verdict = decide(record.sensitivity, record.scope, trust).verdict
                if verdict is Verdict.HIDDEN:
                    continue
                s = salience_of(record, as_of, (row.anchor_salience, row.anchor_at))
                if min_salience > 0 and s < min_salience:
                    continue
                record.salience = s
                key = (-s, LAYER_RANK[layer.value], -to_epoch(record.created_at), record.id)
                passing.append((key, record, verdict is Verdict.REDACTED))
        passing.sort(key=lambda p: p[0])
        page = passing[:limit or MAX_LIMIT]  # limit 0: no limit of the caller's, the 10,000 cap
        logs = logs_of(conn, [r.id for _, r, red in page if not red])
    for _, record, red in page:
        if not red:
            record.audit_log = logs.get(record.id, [])
    candidates = [redact(r) if red else r for _, r, red in passing if r.type.value in SELECTOR_TYPES]
    selection = select(candidates, as_of, threshold) if candidates else None
    out = [redact(r) if red else r for _, r, red in page]
    return RetrieveResponse(records=out, selection=selection)


def numpy_floor(snap: Snapshot, req: RetrieveRequest) -> tuple[np.ndarray, np.ndarray]:
    """(row indices, S) of the top ``limit`` records by S(as_of): gating, the salience filter
    and a partial sort, nothing else."""
    trust, types, min_salience, limit, as_of = validate_request(req)
    t = to_epoch(as_of)
    type_ok = np.zeros(len(TYPE_CODES), dtype=bool)
    type_ok[[TYPE_CODES[x.value] for x in (types or CANONICAL_LAYER_ORDER)]] = True
    if trust.scopes:
        allowed = set(trust.scopes) | {""}
        scope_ok = np.array([s in allowed for s in snap.scope_names], dtype=bool)
    else:
        scope_ok = np.ones(len(snap.scope_names), dtype=bool)
    level = snap.sens_level
    mask = snap.alive & type_ok[snap.type_code] & scope_ok[snap.scope_code] & (level >= 0) & (level <= trust.max_level + 1)
    rows = np.flatnonzero(mask)
    s = salience_at(take(snap.decay, rows), t)
    if min_salience > 0:
        keep = s >= min_salience
        rows, s = rows[keep], s[keep]
    limit = limit or MAX_LIMIT
    if len(s) > limit:
        top = np.argpartition(-s, limit - 1)[:limit]
        rows, s = rows[top], s[top]
    order = np.argsort(-s, kind="stable")
    return rows[order], s[order]


def same_response(fast: RetrieveResponse, ref: RetrieveResponse, tol: float = 1e-9) -> list[str]:
    """Differences between two responses (empty when they agree). Saliences are compared within
    ``tol`` (vectorized and one-at-a-time S(t) may differ in the last bit), and records whose S
    are that close count as tied, ordered by the SPEC's tie-break (layer, newer first, id)."""
    problems: list[str] = []

    def keyed(rs: list[MemoryRecord]) -> list[tuple]:
        return [(round(-r.salience / tol), LAYER_RANK[r.type.value], -to_epoch(r.created_at), r.id) for r in rs]

    a, b = keyed(fast.records), keyed(ref.records)
    if [k[3] for k in a] != [k[3] for k in b]:
        if sorted(a) != sorted(b) or len(a) != len(b):
            problems.append(f"records differ: {[k[3] for k in a][:10]} vs {[k[3] for k in b][:10]}")
        elif a != sorted(a):
            problems.append("fast path records out of order")
    for x, y in zip(sorted(fast.records, key=lambda r: r.id), sorted(ref.records, key=lambda r: r.id)):
        if x.id == y.id:
            if abs(x.salience - y.salience) > tol:
                problems.append(f"{x.id}: salience {x.salience} vs {y.salience}")
            dx, dy = x.model_dump(mode="json"), y.model_dump(mode="json")
            dx.pop("salience"), dy.pop("salience")
            if dx != dy:
                problems.append(f"{x.id}: record differs")
    fs, rs = fast.selection, ref.selection
    if (fs is None) != (rs is None):
        problems.append(f"selection {'missing' if fs is None else 'unexpected'}")
    elif fs is not None and rs is not None:
        if fs.scores.keys() != rs.scores.keys():
            problems.append("selection scores name different candidates")
        elif any(abs(fs.scores[k] - rs.scores[k]) > tol for k in rs.scores):
            problems.append("selection scores differ")
        if abs(fs.confidence - rs.confidence) > tol or fs.needs_more != rs.needs_more:
            problems.append(f"selection confidence {fs.confidence} vs {rs.confidence}")
        want = [r.id for r in rs.selected][:len(fs.selected)]
        if [r.id for r in fs.selected] != want:
            problems.append("selection order differs")
    return problems


def request(trust: Any, as_of: datetime, limit: int = 20, min_salience: float = 0.2,
            memory_types: list[str] | None = None) -> RetrieveRequest:
    return RetrieveRequest(trust=trust, memory_types=memory_types or [], min_salience=min_salience,
                           limit=limit, as_of=as_of)
