"""Layered retrieval, SPEC 4: gate by trust, filter by S(as_of), select, sort, limit.

Everything up to the final page runs over the column cache; only the records returned (and
the selector's candidates) are read from the store as documents.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from membrane_engine.rules.chain import RETRACT_MARK, entries_by_record
from membrane_engine.storage.columns import TYPE_CODES, TYPE_NAMES, ColumnCache, Snapshot, gate_table
from membrane_engine.errors import AccessDeniedError, NilTrustError, NotFoundError, ValidationError
from membrane_engine.rules.salience import salience_at, salience_rows, take
from membrane_engine.model.records import (
    CANONICAL_LAYER_ORDER,
    MAX_TASK_LENGTH,
    SELECTOR_TYPES,
    MemoryRecord,
    MemoryType,
    Sensitivity,
    as_utc,
    check_floor,
    check_id,
    check_instant,
    check_string,
    format_time,
    refused,
    to_epoch,
)
from membrane_engine.rules.history import RESTORED_VERSION, SUPERSEDED_MARK
from membrane_engine.rules.ranking import Embedder, query_vector
from membrane_engine.rules.selector import (
    DEFAULT_THRESHOLD,
    CandidateScores,
    SelectionResult,
    Signals,
    composite,
    rank,
    recency_signal,
)
from membrane_engine.storage.revisions import maybe_revised
from membrane_engine.storage.store import Store
from membrane_engine.storage.vectors import VectorIndex
from membrane_engine.rules.trust import (
    VERDICT_CODES,
    Decision,
    TrustContext,
    Verdict,
    as_trust,
    decide,
    gate_as_read,
    verdict_as_read,
    verdicts,
)

MAX_LIMIT = 10_000  # the largest limit a request may ask for, and what limit 0 ("no limit") returns at most
FULL = VERDICT_CODES[Verdict.FULL]
REDACTED = VERDICT_CODES[Verdict.REDACTED]


def records_returned(matching: int, limit: int, cap: int | None = MAX_LIMIT) -> int:
    """How many records a retrieve returns when ``matching`` records pass gating and the
    salience filter: the first ``limit`` of them, and with limit 0 (no limit of the caller's)
    the first ``cap`` (every one when ``cap`` is None). The cap keeps one request on a store of
    millions from reading and validating every record it can see (bench/README.md); the counts
    and the selector still see every record."""
    return min(matching, limit or cap or matching)


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
    withheld: int = 0  # of those, records an operator's clearance keeps out of the list (clearance.simulate)

    # Of the records that pass gating and the salience filter (before the limit), how many this
    # context gets in full although retracted or superseded (``revision_flag``): a retract
    # leaves a record in the store at salience 0, so with min_salience 0 it still reaches an
    # agent, in full (as Membrane). Only counted when ``counts`` is asked.
    revised: dict[str, int] = field(default_factory=lambda: {"retracted": 0, "superseded": 0})


def revision_flag(record: MemoryRecord) -> str | None:
    """"superseded", "retracted" or None for a record as returned. A semantic record says so in
    its revision (status retracted; ``superseded_by`` set); another type keeps only its audit
    log: the last retract or supersede entry not followed by a restored version."""
    payload = record.payload
    if payload is not None and getattr(payload, "kind", None) == "semantic":
        revision = payload.revision
        if revision is None or revision.status is None or revision.status.value != "retracted":
            return None
        return "superseded" if revision.superseded_by else "retracted"
    flag = None
    for entry in record.audit_log:
        action = getattr(entry.action, "value", entry.action)
        if action == "delete" and entry.rationale.startswith(RETRACT_MARK):
            flag = flag or "retracted"  # a supersede writes no retract entry; keep what it said
        elif action == "revise" and entry.rationale.startswith(SUPERSEDED_MARK):
            flag = "superseded"
        elif action == "revise" and entry.rationale.startswith(RESTORED_VERSION):
            flag = None
    return flag


def revision_reason(record: MemoryRecord) -> tuple[str, str] | None:
    """The explain reason (sentence, rule) for a retracted or superseded record, else None."""
    flag = revision_flag(record)
    if flag is None:
        return None
    payload = record.payload
    by = getattr(getattr(payload, "revision", None), "superseded_by", None)
    what = f"superseded by {by}" if flag == "superseded" and by else flag
    return (f"{what}: kept at salience 0 and still returned unless min_salience is above 0; "
            "an agent should not rely on it", flag)


def validate_request(req: RetrieveRequest) -> tuple[TrustContext, list[MemoryType], float, int, datetime]:
    if req is None or getattr(req, "trust", None) is None:
        raise NilTrustError()
    trust = as_trust(req.trust)
    check_string(req.task_descriptor, "task_descriptor", MAX_TASK_LENGTH)
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


# ``selection.selected`` holds the SELECTED_MAX best candidates (all of them when there are no
# more, which is SPEC 5 exactly); ``scores`` always names every candidate. A large store can
# have tens of thousands of competence and plan candidates, and each selected one is a full
# record read from the store: ranking them all is cheap, materializing them all is not.
SELECTED_MAX = 50


def materialize(store: Store, ids: list[str], saliences: dict[str, float]) -> dict[str, MemoryRecord]:
    """Full records for ``ids`` with ``salience = S(as_of)`` and their audit logs."""
    texts, entries = store.peeking(lambda conn: store.records_with_logs(conn, ids))
    logs = entries_by_record(list(texts), entries)
    out: dict[str, MemoryRecord] = {}
    for rid, text in texts.items():
        # The stored doc was written from a validated record with an empty audit log; pydantic
        # validates its JSON text directly (no intermediate dicts), then S(as_of) and the log go in.
        try:
            record = MemoryRecord.model_validate_json(text)
        except PydanticValidationError:  # e.g. a NaN inside a free-form field, which only json reads
            record = MemoryRecord.model_validate(json.loads(text))
        record.salience = saliences[rid]
        record.audit_log = logs.get(rid, [])
        out[rid] = record
    return out


def read_gated(store: Store, ids: list[str], saliences: dict[str, float], trust: TrustContext) -> dict[str, MemoryRecord]:
    """The records of ``ids`` as ``trust`` may have them, judged on the labels each was read with
    (``trust.gate_as_read``): full, redacted, or left out (hidden now, or gone). Every read that
    returns content under a trust context goes through here (SPEC 4, "the gate decides on what
    it returns"): which ids to read may come from the column cache, what is handed out never
    does. Re-checking the records read costs one comparison each; nothing else is read."""
    out: dict[str, MemoryRecord] = {}
    for rid, record in materialize(store, ids, saliences).items():
        view = gate_as_read(record, trust)
        if view is not None:
            out[rid] = view
    return out


_IS_SELECTOR_TYPE = np.zeros(len(TYPE_NAMES), dtype=bool)  # type code -> goes to the selector
_IS_SELECTOR_TYPE[[TYPE_CODES[t] for t in SELECTOR_TYPES]] = True


def run(store: Store, cache: ColumnCache, req: RetrieveRequest, threshold: float = DEFAULT_THRESHOLD,
        embedder: Embedder | None = None, counts: bool = True, cap: int | None = MAX_LIMIT,
        vectors: VectorIndex | None = None, within: TrustContext | None = None) -> Simulation:
    """SPEC 4 over the column cache. ``counts``: also count full / redacted / hidden / below
    min_salience per layer (the simulator's question; a plain retrieve does not ask it); with
    ``within`` (an operator's clearance, SPEC 10 "One door") only over the records it sees, so
    no count is broken down over records beyond it.
    ``cap``: how many records limit 0 returns at most (``records_returned``); None for every
    one (``retrieve_by_type``, which SPEC 4 leaves without a limit). ``embedder`` and
    ``vectors``: the ranking provider and the records' vectors (SPEC 9); without them the
    order is selection promotion and salience."""
    trust, types, min_salience, limit, as_of = validate_request(req)
    t = to_epoch(as_of)
    snap = cache.current()
    wanted = [t_ for t_ in CANONICAL_LAYER_ORDER if not types or t_ in types]
    type_ok = np.zeros(len(TYPE_NAMES), dtype=bool)
    type_ok[[TYPE_CODES[t_.value] for t_ in wanted]] = True

    # Gate every row with one table lookup (layer, sensitivity, scope and liveness are folded
    # into its gate code), then work on the visible rows only.
    verdict_all = np.take(gate_table(snap, trust, type_ok), snap.gate)
    vis = np.flatnonzero(verdict_all != 0)
    s_vis = salience_rows(snap.decay, vis, t)
    if min_salience > 0:
        passes = np.flatnonzero(s_vis >= min_salience)
        keep, s = vis[passes], s_vis[passes]
    else:
        keep, s = vis, s_vis
    v = verdict_all[keep]
    tc = snap.type_code
    tk = tc[keep]
    if counts and within is not None:
        universe = verdicts(snap.sens_level, snap.scope_code, snap.scope_names, as_trust(within, "clearance")) > 0
        seen = universe[keep]
        layer_counts = _layer_counts(snap, wanted, vis[universe[vis]], tk[seen], v[seen], universe)
    else:
        layer_counts = _layer_counts(snap, wanted, vis, tk, v) if counts else {}
    limit = records_returned(len(keep), limit, cap)

    query = query_vector(embedder, req.task_descriptor) if vectors is not None else None
    selection, selected_ids, selected_s, _, chosen_at = _select(
        snap, keep, s, v, tk, as_of, threshold, query, vectors)

    order = page_order(snap, keep, s, v, limit, req.task_descriptor, chosen_at, query, vectors)
    page_ids = [str(x) for x in snap.ids[keep[order]]]
    page_s = dict(zip(page_ids, s[order].tolist()))

    # The snapshot chose the page; what each record of it (and of the selector's choice) comes
    # back as is decided on the labels read with its content (``read_gated``). One that those
    # labels now hide, or that was removed meanwhile, is left out and not replaced: the page is
    # the snapshot's first ``limit`` records less those, so a relabel racing the request can
    # make it shorter, never wider (the next request's snapshot has the new labels).
    read = read_gated(store, list(dict.fromkeys(page_ids + selected_ids)), {**selected_s, **page_s}, trust)
    records = [read[rid] for rid in page_ids if rid in read]
    if selection is not None:  # scores stay as the snapshot computed them: numbers, not content
        selection.selected = [read[rid] for rid in selected_ids if rid in read]
        selection.signals = [sig for sig in selection.signals if sig.record_id in read]
    revised = _revised(store, snap, keep[(s <= 0.0) & (v == FULL)], trust, within) if counts else None
    return Simulation(RetrieveResponse(records=records, selection=selection), layer_counts, int(len(keep)),
                      **({"revised": revised} if revised is not None else {}))


def _revised(store: Store, snap: Snapshot, rows: np.ndarray, trust: TrustContext,
             within: TrustContext | None) -> dict[str, int]:
    """Retracted and superseded records among ``rows`` (records the context gets in full at
    salience 0, where a retract anchors them), as read; with ``within``, only those it sees in
    full (a revision is content). Narrowed in SQL first (a semantic record's status column; the
    audit entries of the others), so only those are read."""
    out = {"retracted": 0, "superseded": 0}
    if within is not None and len(rows):
        rows = rows[verdicts(snap.sens_level[rows], snap.scope_code[rows], snap.scope_names,
                             as_trust(within, "clearance")) == FULL]
    flagged = maybe_revised(store, [str(x) for x in snap.ids[rows]])
    for record in read_gated(store, flagged, dict.fromkeys(flagged, 0.0), trust).values():
        if within is not None and verdict_as_read(record.sensitivity, record.scope, within) is not Verdict.FULL:
            continue
        flag = revision_flag(record)
        if flag is not None:
            out[flag] += 1
    return out


HYBRID_RANK_WEIGHT = 0.7  # Membrane's rankByVector: 0.7 * rank score + 0.3 * salience
HYBRID_SALIENCE_WEIGHT = 0.3


def page_order(snap: Snapshot, keep: np.ndarray, s: np.ndarray, v: np.ndarray, limit: int, task: str,
               chosen_at: np.ndarray, query: np.ndarray | None, vectors: VectorIndex | None) -> np.ndarray:
    """Positions in ``keep`` of the first ``limit`` records, in SPEC 4 step 5's order:
    - a query vector: the selector's chosen candidates first (selector order), then the
      records with a vector by Membrane's hybrid score ``0.7 * (1 - rank / n) + 0.3 * S``
      (rank by cosine among those n records), then the rest by salience;
    - else a task descriptor and chosen candidates: those first, then the rest by salience;
    - else by salience.
    "By salience": S desc, canonical layer, newer created_at, id asc. Redacted records rank
    by salience only: nothing of their content shapes the order. **(deviation)** Membrane
    ranks every stored vector, hidden records' included; here the rank is among the records
    the context may see in full, so the order never depends on what it may not see."""
    promoted = chosen_at if (query is not None or task) else np.empty(0, dtype=np.int64)
    rest = np.ones(len(keep), dtype=bool)
    rest[promoted] = False
    head = promoted[:limit]
    room = limit - len(head)
    if room <= 0:
        return head
    if query is not None and vectors is not None:
        eligible = np.flatnonzero(rest & (v == FULL))
        cos, has = vectors.cosines(snap, keep[eligible], query)
        eligible, cos = eligible[has], cos[has]
        n = len(eligible)
        if n:
            # rank by cosine, ties in store order (Membrane's vector search states no tie
            # rule; comparing ids as strings would cost more than the rest at a million rows)
            at, hybrid = _hybrid_scores(cos, s[eligible], room)
            ranked = eligible[at[_salience_order(snap, keep, s, eligible[at], room, key=hybrid)]]
            head = np.concatenate([head, ranked])
            rest[eligible] = False
            room = limit - len(head)
            if room <= 0:
                return head
    others = np.flatnonzero(rest)
    return np.concatenate([head, others[_salience_order(snap, keep, s, others, room)]]).astype(np.int64)


def _hybrid_scores(cos: np.ndarray, sal: np.ndarray, room: int) -> tuple[np.ndarray, np.ndarray]:
    """Membrane's hybrid score ``0.7 * (1 - rank / n) + 0.3 * S`` (rank by cosine among the n
    records, ties in store order) of enough records to hold the best ``room``: (their positions,
    their scores). Sorting every cosine would cost more than the rest of the request; only the
    best by cosine are sorted, as many as it takes for the ``room``-th best score among them to
    beat any score a record outside could reach (its rank is at least their number, its S at
    most the largest S outside), so the best ``room`` and their order are those of the full
    sort."""
    n = len(cos)
    m = max(8 * room, n // 16)
    while m < n // 2:
        kth = np.partition(cos, n - m)[n - m]  # the m-th largest cosine
        top = np.flatnonzero(cos >= kth)  # every record ranked before one outside (ties included)
        outside = cos < kth
        if len(top) >= room and outside.any():
            hybrid = _hybrid(cos, sal, top, n)
            best = np.partition(hybrid, len(top) - room)[len(top) - room]
            bound = HYBRID_RANK_WEIGHT * (1.0 - len(top) / n) + HYBRID_SALIENCE_WEIGHT * float(sal[outside].max())
            if best > bound:
                return top, hybrid
        m *= 4
    every = np.arange(n)
    return every, _hybrid(cos, sal, every, n)


def _hybrid(cos: np.ndarray, sal: np.ndarray, at: np.ndarray, n: int) -> np.ndarray:
    """The hybrid scores of ``at`` (positions in store order, ascending), which hold every
    record with a larger cosine than any of them, among n records."""
    by_cos = np.argsort(-cos[at], kind="stable")  # ties in store order: ``at`` ascends
    rank_score = np.empty(len(at), dtype=np.float64)
    rank_score[by_cos] = 1.0 - np.arange(len(at)) / n if n > 1 else 1.0
    return HYBRID_RANK_WEIGHT * rank_score + HYBRID_SALIENCE_WEIGHT * sal[at]


def _salience_order(snap: Snapshot, keep: np.ndarray, s: np.ndarray, at: np.ndarray, limit: int,
                    key: np.ndarray | None = None) -> np.ndarray:
    """Positions in ``at`` of its first ``limit`` entries by ``key`` (default S) descending,
    ties: canonical layer, newer created_at, id asc. With a limit, only the entries that can
    make the page (key at or above the limit-th value, ties included) are fully sorted."""
    key = s[at] if key is None else key
    if len(at) > limit:
        kth = np.partition(-key, limit - 1)[limit - 1]
        candidates = np.flatnonzero(-key <= kth)
    else:
        candidates = np.arange(len(at))
    rows_c = keep[at[candidates]]
    return candidates[np.lexsort((
        snap.ids[rows_c].astype(str),
        -snap.created_at[rows_c],
        snap.type_code[rows_c],
        -key[candidates],
    ))][:limit]


def _layer_counts(snap: Snapshot, wanted: list[MemoryType], vis: np.ndarray, tk: np.ndarray,
                  v: np.ndarray, universe: np.ndarray | None = None) -> dict[str, LayerCounts]:
    """Per-layer counts from a few bincounts (hidden = live - visible); with ``universe``, of
    the rows it marks only."""
    n_types = len(TYPE_NAMES)
    live_n = (_alive_by_type(snap) if universe is None
              else np.bincount(snap.type_code[snap.alive & universe], minlength=n_types))
    visible_n = np.bincount(snap.type_code[vis], minlength=n_types)
    passed = np.bincount(tk.astype(np.int64) * 3 + v, minlength=n_types * 3).reshape(n_types, 3)
    out: dict[str, LayerCounts] = {}
    for t_ in wanted:
        code = TYPE_CODES[t_.value]
        full, redacted = int(passed[code, FULL]), int(passed[code, REDACTED])
        out[t_.value] = LayerCounts(full=full, redacted=redacted, hidden=int(live_n[code] - visible_n[code]),
                                    below_min_salience=int(visible_n[code]) - full - redacted)
    return out


def _alive_by_type(snap: Snapshot) -> np.ndarray:
    """Live records per type code (the same for every request on a snapshot, so kept on it)."""
    memo = snap.__dict__.setdefault("_memo", {})
    counts = memo.get("alive_by_type")
    if counts is None:
        counts = memo["alive_by_type"] = np.bincount(snap.type_code[snap.alive], minlength=len(TYPE_NAMES))
    return counts


def _select(snap: Snapshot, keep: np.ndarray, s: np.ndarray, v: np.ndarray, tk: np.ndarray,
            as_of: datetime, threshold: float, query: np.ndarray | None, vectors: VectorIndex | None
            ) -> tuple[SelectionResult | None, list[str], dict[str, float], set[str], np.ndarray]:
    """The selector over the competence and plan candidates among ``keep``: every candidate is
    scored (``scores``), the best SELECTED_MAX are ranked into ``selected`` (ids returned here,
    records materialized by the caller along with the page; their positions in ``keep`` last).
    With a query vector, a candidate's applicability is ``(cos + 1) / 2`` when it has a
    vector (SPEC 5); a redacted candidate scores 0.5 flat whatever its vector."""
    at = np.flatnonzero(np.take(_IS_SELECTOR_TYPE, tk))
    if not len(at):
        return None, [], {}, set(), np.empty(0, dtype=np.int64)
    rows = keep[at]
    redacted = v[at] == REDACTED
    applicability = snap.confidence[rows]
    if query is not None and vectors is not None:
        cos, has = vectors.cosines(snap, rows, query)
        applicability = np.where(has & ~redacted, (cos.astype(np.float64) + 1.0) / 2.0, applicability)
    recency = recency_signal(snap.last_reinforced_at[rows], to_epoch(as_of))
    applicability, success, recency, score = composite(applicability, snap.success_signal[rows], recency, redacted)
    n = len(rows)
    k = min(n, max(SELECTED_MAX, 2))
    if n > k:  # rank only the candidates that can be among the best k (ties at the k-th included)
        kth = np.partition(-score, k - 1)[k - 1]
        top = np.flatnonzero(-score <= kth)
    else:
        top = np.arange(n)
    sub_order, confidence, needs_more = rank(snap.ids[rows[top]], score[top], threshold)
    order = top[sub_order][:SELECTED_MAX]
    signals = [Signals(str(snap.ids[rows[i]]), float(applicability[i]), float(success[i]), float(recency[i]),
                       float(score[i]), bool(redacted[i])) for i in order.tolist()]
    result = SelectionResult.model_construct(
        selected=[], confidence=confidence, needs_more=needs_more, scores=CandidateScores(snap.ids, rows, score, order),
        threshold=threshold, signals=signals)
    chosen = [sig.record_id for sig in signals]
    saliences = {sig.record_id: float(s[at[i]]) for sig, i in zip(signals, order.tolist())}
    return result, chosen, saliences, {sig.record_id for sig in signals if sig.redacted}, at[order]


# --------------------------------------------------------------------------- by id, by type, explain


def _row_facts(snap: Snapshot, record_id: str) -> int:
    i = snap.row_of.get(record_id)
    if i is None or not snap.alive[i]:
        raise NotFoundError(record_id)
    return i


def decision_for(snap: Snapshot, i: int, trust: TrustContext) -> Decision:
    return decide(_sensitivity_name(snap, i), snap.scope_names[snap.scope_code[i]], trust)


def _sensitivity_name(snap: Snapshot, i: int) -> str:
    level = int(snap.sens_level[i])
    return list(Sensitivity)[level].value if 0 <= level < 5 else "unknown"


def retrieve_by_id(store: Store, cache: ColumnCache, record_id: str, trust: TrustContext | None,
                   as_of: datetime | None = None) -> MemoryRecord:
    trust = as_trust(trust)
    record_id = check_id(record_id)
    as_of = check_instant(as_of) if as_of is not None else None
    when = to_epoch(as_utc(as_of) if as_of else datetime.now().astimezone())

    def read(snap: Snapshot) -> MemoryRecord | None:
        i = _row_facts(snap, record_id)
        _allow(record_id, decision_for(snap, i, trust))
        s = float(salience_at(take(snap.decay, np.array([i])), when)[0])
        return materialize(store, [record_id], {record_id: s}).get(record_id)

    record = cache.answer(read)
    if record is None:  # gone between the snapshot and the read
        raise NotFoundError(record_id)
    # The record as read may be newer than the snapshot that was asked (a reclassify committed
    # in between): what goes out is what its own labels allow.
    _allow(record_id, decide(record.sensitivity, record.scope, trust))
    return record


def _allow(record_id: str, decision: Decision) -> None:
    # The reasons name the record's sensitivity and scope, which a context that may not see the
    # record must not learn (SPEC 4); ``explain`` is the operator's tool for them.
    if decision.verdict is not Verdict.FULL:
        raise AccessDeniedError(f"access to record {record_id!r} denied: the trust context does not allow it")


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
    as_of = as_utc(check_instant(as_of)) if as_of is not None else None
    min_salience = check_floor(min_salience)
    explanation = cache.answer(lambda snap: explanation_of(snap, record_id, trust, as_of, min_salience))
    if explanation.verdict is Verdict.FULL:
        # Only a context that gets the content is told what it says of itself (a revision status,
        # an audit log): read from the record as it is returned.
        record = read_gated(cache._store, [record_id], {record_id: 0.0}, trust).get(record_id)
        reason = revision_reason(record) if record is not None and not record.redacted else None
        if reason is not None:
            explanation.reasons.append(reason[0])
            explanation.rules.append(reason[1])
    return explanation


def explanation_of(snap: Snapshot, record_id: str, trust: TrustContext, as_of: datetime | None,
                   min_salience: float) -> Explanation:
    i = _row_facts(snap, record_id)
    decision = decision_for(snap, i, trust)
    reasons = [r.sentence for r in decision.reasons]
    rules = [r.rule for r in decision.reasons]
    salience = None
    if as_of is not None:
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


# --------------------------------------------------------------------------- the selector's confidence, term by term


@dataclass(frozen=True)
class ConfidenceTerms:
    """SPEC 5's confidence of a selection with the values it is computed from: ``(best - second)
    / best`` with two or more candidates (0 when best <= 0), ``min(best, 1)`` with one, 0 with none;
    ``needs_more`` is ``confidence < threshold``. Scores are numbers, not content: the terms are
    the requested context's even when a clearance lists fewer candidates."""

    candidates: int
    best: float | None
    second: float | None
    confidence: float
    threshold: float
    needs_more: bool

    @property
    def margin(self) -> float:
        """How far the confidence is above (positive) or below (negative) the threshold."""
        return self.confidence - self.threshold

    @property
    def lead(self) -> float | None:
        """The best score's lead over the second's, or None with fewer than two candidates."""
        return None if self.best is None or self.second is None else self.best - self.second


def confidence_terms(selection: SelectionResult | None, threshold: float | None = None) -> ConfidenceTerms:
    """The terms of ``selection``'s confidence, and needs_more at ``threshold`` (default the
    selection's own: the confidence does not depend on it)."""
    if threshold is None:
        threshold = float(selection.threshold) if selection is not None else DEFAULT_THRESHOLD
    else:
        threshold = check_floor(threshold, "threshold")
    if selection is None or not len(selection.scores):
        return ConfidenceTerms(0, None, None, 0.0, threshold, True)
    # ``scores`` iterates the ranked candidates first (select, CandidateScores).
    top = [float(selection.scores[rid]) for rid, _ in zip(selection.scores, range(2))]
    confidence = float(selection.confidence)
    return ConfidenceTerms(len(selection.scores), top[0], top[1] if len(top) > 1 else None, confidence, threshold,
                           confidence < threshold)
