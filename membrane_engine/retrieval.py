"""Layered retrieval, SPEC 4: gate by trust, filter by S(as_of), select, sort, limit.

Everything up to the final page runs over the column cache; only the records returned (and
the selector's candidates) are read from the store as documents.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from .audit import logs_of
from .columns import TYPE_CODES, TYPE_NAMES, ColumnCache, Snapshot
from .errors import AccessDeniedError, NilTrustError, NotFoundError, ValidationError
from .salience import salience_at, take
from .schema import (
    CANONICAL_LAYER_ORDER,
    SELECTOR_TYPES,
    MemoryRecord,
    MemoryType,
    as_utc,
    check_floor,
    check_id,
    check_instant,
    format_time,
    refused,
    to_epoch,
)
from .selector import DEFAULT_THRESHOLD, EmbeddingProvider, SelectionResult, select
from .store import Store
from .trust import VERDICT_CODES, Decision, TrustContext, Verdict, as_trust, decide, redact, verdicts

MAX_LIMIT = 10_000
FULL = VERDICT_CODES[Verdict.FULL]
REDACTED = VERDICT_CODES[Verdict.REDACTED]


class RetrieveRequest(BaseModel):
    """A retrieval request. Constructing one never fails for missing trust or bad numbers:
    the call does the checking, as Membrane's service does (SPEC 4, step 1)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    trust: TrustContext | None = None
    task_descriptor: str = ""
    memory_types: list[Any] = Field(default_factory=list)
    min_salience: Any = 0.0
    limit: Any = 0
    as_of: datetime | None = None

    def __init__(self, /, **data: Any) -> None:
        # A field of the wrong type is refused with the engine's ValidationError (a MembraneError).
        try:
            super().__init__(**data)
        except PydanticValidationError as exc:
            raise refused("RetrieveRequest", exc) from None


class RetrieveResponse(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    records: list[MemoryRecord] = Field(default_factory=list)
    selection: SelectionResult | None = None


@dataclass
class LayerCounts:
    full: int = 0
    redacted: int = 0
    hidden: int = 0
    below_min_salience: int = 0


@dataclass
class Simulation:
    """Retrieval plus what an operator wants to know about it (the console's simulator)."""

    response: RetrieveResponse
    counts: dict[str, LayerCounts] = field(default_factory=dict)
    total_matching: int = 0  # records that passed gating and the salience filter, before the limit


def validate_request(req: RetrieveRequest) -> tuple[TrustContext, list[MemoryType], float, int, datetime]:
    if req is None or getattr(req, "trust", None) is None:
        raise NilTrustError()
    trust = as_trust(req.trust)
    try:
        min_salience = float(req.min_salience)
    except (TypeError, ValueError):
        raise ValidationError(f"min_salience must be a number (got {req.min_salience!r})",
                              [("min_salience", "not a number")]) from None
    if not math.isfinite(min_salience) or min_salience < 0:
        raise ValidationError(f"min_salience must be non-negative and finite (got {req.min_salience!r})",
                              [("min_salience", "out of range")])
    if isinstance(req.limit, bool) or not isinstance(req.limit, (int, np.integer)):
        raise ValidationError(f"limit must be an integer (got {req.limit!r})", [("limit", "not an integer")])
    if not 0 <= req.limit <= MAX_LIMIT:
        raise ValidationError(f"limit must be between 0 and {MAX_LIMIT} (got {req.limit})", [("limit", "out of range")])
    types: list[MemoryType] = []
    if isinstance(req.memory_types, (str, bytes, dict)) or not hasattr(req.memory_types or [], "__iter__"):
        raise ValidationError(f"memory_types must be a list of memory types (got {req.memory_types!r})",
                              [("memory_types", "not a list")])
    for value in req.memory_types or []:
        try:
            t = MemoryType(value.value if isinstance(value, MemoryType) else value)
        except ValueError:
            raise ValidationError(f"memory_types has an unknown memory type {value!r}",
                                  [("memory_types", f"unknown type {value!r}")]) from None
        if t not in types:
            types.append(t)
    as_of = check_instant(req.as_of) if req.as_of is not None else datetime.now().astimezone()
    return trust, types, min_salience, int(req.limit), as_utc(as_of)


def _materialize(store: Store, ids: list[str], saliences: dict[str, float]) -> dict[str, MemoryRecord]:
    """Full records for ``ids`` with ``salience = S(as_of)`` and their audit logs."""
    with store.read() as conn:
        rows = store.fetch(conn, ids)
        logs = logs_of(conn, list(rows))
    out: dict[str, MemoryRecord] = {}
    for rid, row in rows.items():
        doc = row.doc
        doc["salience"] = saliences[rid]
        doc["audit_log"] = []
        record = MemoryRecord.model_validate(doc)
        record.audit_log = logs.get(rid, [])
        out[rid] = record
    return out


def run(store: Store, cache: ColumnCache, req: RetrieveRequest, threshold: float = DEFAULT_THRESHOLD,
        embeddings: EmbeddingProvider | None = None) -> Simulation:
    trust, types, min_salience, limit, as_of = validate_request(req)
    t = to_epoch(as_of)
    snap = cache.current()
    wanted = [t_ for t_ in CANONICAL_LAYER_ORDER if not types or t_ in types]
    codes = np.array([TYPE_CODES[t_.value] for t_ in wanted], dtype=np.int8)

    rows = np.nonzero(snap.alive & np.isin(snap.type_code, codes))[0]
    verdict = verdicts(snap.sens_level[rows], snap.scope_code[rows], snap.scope_names, trust)
    visible = verdict > 0
    s_all = np.zeros(len(rows))
    s_all[visible] = salience_at(take(snap.decay, rows[visible]), t)
    passes = visible & ((s_all >= min_salience) if min_salience > 0 else True)

    counts: dict[str, LayerCounts] = {}
    type_rows = snap.type_code[rows]
    for t_, code in zip(wanted, codes):
        in_layer = type_rows == code
        counts[t_.value] = LayerCounts(
            full=int(np.count_nonzero(in_layer & (verdict == FULL) & passes)),
            redacted=int(np.count_nonzero(in_layer & (verdict == REDACTED) & passes)),
            hidden=int(np.count_nonzero(in_layer & ~visible)),
            below_min_salience=int(np.count_nonzero(in_layer & visible & ~passes)),
        )

    keep = rows[passes]
    s = s_all[passes]
    v = verdict[passes]
    selection, selected_ids, selected_s = _select(store, snap, keep, s, v, as_of, threshold, req.task_descriptor, embeddings)

    # Sort: S desc, canonical layer, newer created_at, id asc. With a limit, only the records
    # that can make the page (S at or above the limit-th value, ties included) are fully sorted.
    candidates = np.arange(len(keep))
    if limit and len(keep) > limit:
        kth = np.partition(-s, limit - 1)[limit - 1]
        candidates = np.nonzero(-s <= kth)[0]
    order = candidates[np.lexsort((
        snap.ids[keep[candidates]].astype(str),
        -snap.created_at[keep[candidates]],
        snap.type_code[keep[candidates]],
        -s[candidates],
    ))]
    if limit:
        order = order[:limit]
    page_ids = [str(snap.ids[keep[i]]) for i in order]
    page_s = {str(snap.ids[keep[i]]): float(s[i]) for i in order}
    page_redacted = {str(snap.ids[keep[i]]) for i in order if v[i] == REDACTED}

    records_by_id = _materialize(store, list(dict.fromkeys(page_ids + selected_ids)), {**selected_s, **page_s})
    def view(rid: str, redacted: bool) -> MemoryRecord | None:
        rec = records_by_id.get(rid)
        if rec is None:  # removed between snapshot and read: skip, never guess
            return None
        return redact(rec) if redacted else rec

    records = [r for r in (view(rid, rid in page_redacted) for rid in page_ids) if r is not None]
    if selection is not None:
        redacted_sel = {sig.record_id for sig in selection.signals if sig.redacted}
        selection.selected = [r for r in (view(rid, rid in redacted_sel) for rid in selected_ids) if r is not None]
    return Simulation(RetrieveResponse(records=records, selection=selection), counts, int(len(keep)))


def _select(store: Store, snap: Snapshot, keep: np.ndarray, s: np.ndarray, v: np.ndarray, as_of: datetime, threshold: float,
            task: str, embeddings: EmbeddingProvider | None) -> tuple[SelectionResult | None, list[str], dict[str, float]]:
    selector_codes = np.array([TYPE_CODES[t] for t in SELECTOR_TYPES], dtype=np.int8)
    is_candidate = np.isin(snap.type_code[keep], selector_codes)
    if not is_candidate.any():
        return None, [], {}
    rows = keep[is_candidate]
    ids = [str(x) for x in snap.ids[rows]]
    saliences = {rid: float(x) for rid, x in zip(ids, s[is_candidate])}
    redacted = v[is_candidate] == REDACTED
    # Placeholders carry only what the selector reads; the real records replace them later.
    stand_ins = [MemoryRecord.model_construct(id=rid, redacted=bool(red), payload=None) for rid, red in zip(ids, redacted)]
    precomputed = {
        "applicability": snap.confidence[rows], "success": snap.success_signal[rows],
        "last_reinforced": snap.last_reinforced_at[rows], "redacted": redacted,
    }
    candidates: list[MemoryRecord] = stand_ins
    if embeddings is not None and task:
        # Embedding similarity needs each candidate's content, so read the candidates in full.
        full = _materialize(store, ids, saliences)
        candidates = [redact(full[rid]) if red else full[rid] for rid, red in zip(ids, redacted)]
    result = select(candidates, as_of, threshold, task, embeddings, precomputed)
    ranked_ids = [sig.record_id for sig in result.signals]
    return result, ranked_ids, saliences


# --------------------------------------------------------------------------- by id, by type, explain


def _row_facts(snap: Snapshot, record_id: str) -> int:
    i = snap.row_of.get(record_id)
    if i is None or not snap.alive[i]:
        raise NotFoundError(record_id)
    return i


def decision_for(snap: Snapshot, i: int, trust: TrustContext) -> Decision:
    return decide(_sensitivity_name(snap, i), snap.scope_names[snap.scope_code[i]], trust)


def _sensitivity_name(snap: Snapshot, i: int) -> str:
    from .schema import Sensitivity

    level = int(snap.sens_level[i])
    return list(Sensitivity)[level].value if 0 <= level < 5 else "unknown"


def retrieve_by_id(store: Store, cache: ColumnCache, record_id: str, trust: TrustContext | None,
                   as_of: datetime | None = None) -> MemoryRecord:
    trust = as_trust(trust)
    record_id = check_id(record_id)
    as_of = check_instant(as_of) if as_of is not None else None
    snap = cache.current()
    i = _row_facts(snap, record_id)
    decision = decision_for(snap, i, trust)
    if decision.verdict is not Verdict.FULL:
        raise AccessDeniedError(f"access to record {record_id!r} denied: " + "; ".join(map(str, decision.reasons)))
    when = to_epoch(as_utc(as_of) if as_of else datetime.now().astimezone())
    s = float(salience_at(take(snap.decay, np.array([i])), when)[0])
    records = _materialize(store, [record_id], {record_id: s})
    if record_id not in records:
        raise NotFoundError(record_id)
    return records[record_id]


class Explanation(BaseModel):
    """Why a trust context gets a record in full, redacted or not at all (an operator's tool:
    names a hidden record's id, type, sensitivity and scope, never its content)."""

    id: str
    type: str
    sensitivity: str
    scope: str
    verdict: Verdict
    reasons: list[str]
    rules: list[str]
    salience: float | None = None
    as_of: datetime | None = None


def explain(cache: ColumnCache, record_id: str, trust: TrustContext | None, as_of: datetime | None = None,
            min_salience: float = 0.0) -> Explanation:
    trust = as_trust(trust)
    record_id = check_id(record_id)
    as_of = check_instant(as_of) if as_of is not None else None
    min_salience = check_floor(min_salience)
    snap = cache.current()
    i = _row_facts(snap, record_id)
    decision = decision_for(snap, i, trust)
    reasons = [r.sentence for r in decision.reasons]
    rules = [r.rule for r in decision.reasons]
    salience = None
    if as_of is not None:
        as_of = as_utc(as_of)
        salience = float(salience_at(take(snap.decay, np.array([i])), to_epoch(as_of))[0])
        day = format_time(as_of)[:10]
        if min_salience > 0 and salience < min_salience:
            reasons.append(f"salience {salience:.2f} at {day} is below min {min_salience:g}")
            rules.append("salience_below_min")
        elif min_salience > 0:
            reasons.append(f"salience {salience:.2f} at {day} meets min {min_salience:g}")
            rules.append("salience_meets_min")
        else:
            reasons.append(f"salience {salience:.2f} at {day}")
            rules.append("salience_at")
    return Explanation(
        id=record_id, type=TYPE_NAMES[int(snap.type_code[i])],
        sensitivity=_sensitivity_name(snap, i), scope=snap.scope_names[snap.scope_code[i]],
        verdict=decision.verdict, reasons=reasons, rules=rules, salience=salience, as_of=as_of,
    )
