"""Retrieval as the facade offers it (SPEC 4, 5, 8 and 9), over an engine context: a request
checked and given the engine's "now", then run on the column cache (``layered``, ``graph``).
Also the store facts the column cache answers alone: S(t) of stored records, counts, ids, scopes.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np

from membrane_engine.context import EngineContext
from membrane_engine.errors import NilTrustError, NotFoundError, ValidationError
from membrane_engine.model.records import (
    MemoryRecord,
    MemoryType,
    as_utc,
    check_flag,
    check_ids,
    check_instant,
    check_id,
    check_whole,
    to_epoch,
)
from membrane_engine.retrieval import graph, layered
from membrane_engine.retrieval.graph import RetrieveGraphRequest, RetrieveGraphResponse
from membrane_engine.retrieval.layered import (
    MAX_LIMIT,
    Explanation,
    RetrieveRequest,
    RetrieveResponse,
    Simulation,
)
from membrane_engine.rules.salience import salience_at as salience_of_rows
from membrane_engine.rules.salience import take
from membrane_engine.rules.trust import TrustContext, Verdict, as_trust, verdicts
from membrane_engine.storage.record_queries import referencing_ids
from membrane_engine.transfer.sample import SAMPLE_MARKER


def warm(ctx: EngineContext) -> None:
    """Load what the first requests would otherwise wait for: the column cache and its id
    index, every stored ranking vector (one scan) and the entity names graph roots are matched
    by (one scan)."""
    snap = ctx.columns.current()
    ctx.columns.index_ids()
    if ctx.vectors is not None:
        ctx.vectors.load(snap)
    ctx.entity_terms.load(snap)


def run(ctx: EngineContext, request: RetrieveRequest, counts: bool, cap: int | None,
        within: TrustContext | None = None) -> Simulation:
    """SPEC 4 for a request as a caller sent it (a RetrieveRequest or its dict), "now" being
    the context's clock when it names no instant."""
    if request is None:
        raise NilTrustError()
    if isinstance(request, dict):
        request = RetrieveRequest(**request)
    if not isinstance(request, RetrieveRequest):
        shown = repr(request) if len(repr(request)) <= 80 else repr(request)[:77] + "..."
        raise ValidationError(f"request must be a RetrieveRequest (got {shown})", [("request", "not a RetrieveRequest")])
    if request.as_of is None:  # "now" is this engine's clock, as for get() and metrics()
        request = request.model_copy(update={"as_of": ctx.now()})
    return layered.run(ctx.store, ctx.columns, request, ctx.selector_threshold, ctx.embedder, counts=counts, cap=cap,
                       vectors=ctx.vectors, within=within)


def simulate(ctx: EngineContext, request: RetrieveRequest, counts: bool = True) -> Simulation:
    """Retrieval plus per-layer counts of full / redacted / hidden (``counts=False`` leaves
    them out), the records capped at MAX_LIMIT."""
    return run(ctx, request, check_flag(counts, "counts"), MAX_LIMIT)


def retrieve(ctx: EngineContext, request: RetrieveRequest) -> RetrieveResponse:
    return simulate(ctx, request, counts=False).response


def retrieve_graph(ctx: EngineContext, request: RetrieveGraphRequest) -> RetrieveGraphResponse:
    """Ranked roots expanded over their relations, every node gated (SPEC 9)."""
    if request is None:
        raise NilTrustError()
    if isinstance(request, dict):
        request = RetrieveGraphRequest(**request)
    if not isinstance(request, RetrieveGraphRequest):
        raise ValidationError(f"request must be a RetrieveGraphRequest (got {type(request).__name__})",
                              [("request", "not a RetrieveGraphRequest")])
    if request.as_of is None:
        request = request.model_copy(update={"as_of": ctx.now()})
    return graph.retrieve_graph(ctx.store, ctx.columns, request, ctx.entity_terms, ctx.selector_threshold,
                                ctx.embedder, ctx.vectors)


def neighbourhood(ctx: EngineContext, record_id: str, trust: TrustContext, max_hops: int = 2, node_limit: int = 40,
                  as_of: datetime | None = None) -> RetrieveGraphResponse:
    """The records linked to one record, both ways, as ``trust`` may see them (the record
    explorer's neighbourhood view)."""
    record_id = check_id(record_id)
    trust = as_trust(trust)
    max_hops = check_whole(max_hops, "max_hops", 0, graph.MAX_HOPS)
    node_limit = check_whole(node_limit, "node_limit", 1, MAX_LIMIT)  # also bounds the incoming links read
    when = as_utc(check_instant(as_of)) if as_of is not None else ctx.now()
    incoming = referencing_ids(ctx.store, record_id, node_limit)
    return graph.neighbourhood(ctx.store, ctx.columns, record_id, trust, incoming, when, max_hops=max_hops,
                               node_limit=node_limit)


def retrieve_by_id(ctx: EngineContext, record_id: str, trust: TrustContext | None,
                   as_of: datetime | None = None) -> MemoryRecord:
    return layered.retrieve_by_id(ctx.store, ctx.columns, record_id, trust, as_of if as_of is not None else ctx.now())


def retrieve_by_type(ctx: EngineContext, memory_type: MemoryType | str, trust: TrustContext | None,
                     as_of: datetime | None = None) -> list[MemoryRecord]:
    trust = as_trust(trust)
    as_of = check_instant(as_of) if as_of is not None else None
    if isinstance(memory_type, (list, tuple, set, dict)):
        raise ValidationError(f"memory_type must be one memory type (got {memory_type!r})",
                              [("memory_type", "not a memory type")])
    req = RetrieveRequest(trust=trust, memory_types=[memory_type], as_of=as_of)
    return run(ctx, req, counts=False, cap=None).response.records  # SPEC 4: no limit, not even the cap


def explain(ctx: EngineContext, record_id: str, trust: TrustContext | None, as_of: datetime | None = None,
            min_salience: float = 0.0) -> Explanation:
    return layered.explain(ctx.columns, record_id, trust, as_of, min_salience)


def explain_many(ctx: EngineContext, record_ids: list[str], trust: TrustContext | None) -> dict[str, Verdict]:
    """Verdicts for many records at once (what-if tables); ids not in the store are left out."""
    trust = as_trust(trust)
    record_ids = check_ids(record_ids, "record_ids")
    snap = ctx.columns.current()
    rows = np.array([snap.row_of[r] for r in record_ids if r in snap.row_of], dtype=np.int64)
    codes = verdicts(snap.sens_level[rows], snap.scope_code[rows], snap.scope_names, trust)
    names = {0: Verdict.HIDDEN, 1: Verdict.REDACTED, 2: Verdict.FULL}
    return {str(snap.ids[i]): names[int(c)] for i, c in zip(rows, codes)}


# S(t) of stored records ------------------------------------------------------------------


def salience_at(ctx: EngineContext, record_id: str, when: datetime) -> float:
    """S(when) of SPEC 2 for a live record."""
    record_id = check_id(record_id)
    when = check_instant(when, "when")
    snap = ctx.columns.current()
    i = snap.row_of.get(record_id)
    if i is None or not snap.alive[i]:
        raise NotFoundError(record_id)
    return float(salience_of_rows(take(snap.decay, np.array([i])), to_epoch(as_utc(when)))[0])


def salience_curves(ctx: EngineContext, record_ids: list[str], times: list[datetime]) -> dict[str, list[float]]:
    """S(t) of several records over a time grid in one vectorized pass (decay charts)."""
    record_ids = check_ids(record_ids, "record_ids")
    if isinstance(times, (str, bytes, dict)) or not hasattr(times, "__iter__"):
        raise ValidationError(f"times must be a list of datetimes (got {times!r})", [("times", "not a list")])
    times = [check_instant(t, "times") for t in times]
    snap = ctx.columns.current()
    record_ids = list(dict.fromkeys(record_ids))  # a repeated id would break take()'s row mapping
    rows = []
    for rid in record_ids:
        i = snap.row_of.get(rid)
        if i is None or not snap.alive[i]:
            raise NotFoundError(rid)
        rows.append(i)
    order = np.argsort(rows)
    sorted_rows = np.array(rows, dtype=np.int64)[order]
    grid = np.array([to_epoch(as_utc(t)) for t in times])[:, None]
    values = salience_of_rows(take(snap.decay, sorted_rows), grid)
    column_of = {int(j): k for k, j in enumerate(order)}
    # Keys in the caller's order.
    return {rid: values[:, column_of[j]].tolist() for j, rid in enumerate(record_ids)}


# what the store holds ----------------------------------------------------------------------


def count(ctx: EngineContext) -> int:
    return len(ctx.columns.current())


def scopes(ctx: EngineContext) -> list[str]:
    """The scopes records in the store carry ("" for unscoped excluded)."""
    snap = ctx.columns.current()
    used = np.unique(snap.scope_code[snap.alive])
    return sorted(snap.scope_names[i] for i in used if snap.scope_names[i])


def ids(ctx: EngineContext) -> list[str]:
    snap = ctx.columns.current()
    return sorted(str(x) for x in snap.ids[snap.alive])


def holds_sample(ctx: EngineContext) -> bool:
    """Whether this store holds the bundled sample (a record only the sample has), for the
    sample's own policy file to be offered."""
    return SAMPLE_MARKER in ctx.columns.current().row_of


__all__ = ["count", "explain", "explain_many", "holds_sample", "ids", "neighbourhood", "retrieve", "retrieve_by_id",
           "retrieve_by_type", "retrieve_graph", "run", "salience_at", "salience_curves", "scopes", "simulate", "warm"]
