"""Store metrics, SPEC 7 (Membrane's GetMetrics), over the column cache plus the audit log's
counts by action (``storage.audit_stats``)."""

from __future__ import annotations

import math
import threading
from datetime import datetime
from typing import Any

import numpy as np

from membrane_engine.storage.columns import TYPE_CODES, TYPE_NAMES, Snapshot
from membrane_engine.rules.salience import salience_at, take
from membrane_engine.context import EngineContext
from membrane_engine.model.records import check_instant, to_epoch
from membrane_engine.storage.audit_stats import actions_written_after
from membrane_engine.storage.store import Store
from membrane_engine.model.records import Sensitivity

BUCKETS = ("0.0-0.2", "0.2-0.4", "0.4-0.6", "0.6-0.8", "0.8-1.0")
DAY = 86400.0


def finite_mean(values: np.ndarray) -> float:
    """The mean of finite values, finite itself: a sum of large values (salience has no upper
    bound; 1e308 is a valid one) overflows to inf, so when it does the values are scaled by
    their largest first. The usual case costs one sum, as ``mean`` does."""
    if not len(values):
        return 0.0
    with np.errstate(over="ignore"):
        mean = float(values.mean())
    if math.isfinite(mean):
        return mean
    top = float(np.abs(values).max())
    return float((values / top).mean()) * top


def salience_buckets(values: np.ndarray) -> dict[str, int]:
    """Lower bound inclusive; everything >= 0.8 (above 1 included) in the last bucket."""
    # Clipped first: a huge value divided by 0.2 is inf, which has no integer bucket.
    index = np.clip(np.floor(np.minimum(values, 1.0) / 0.2 + 1e-12).astype(np.int64), 0, 4)
    counts = np.bincount(index, minlength=5)
    return {name: int(c) for name, c in zip(BUCKETS, counts)}


KEPT_INSTANTS = 8  # past instants whose later entries ActionCounts keeps counted


class Counted(dict):
    """Audit entries by action, the sequence number of the newest entry counted, and the
    ActionCounts that counted them."""
    seq: int = 0
    source: "ActionCounts | None" = None


class ActionCounts:
    """Audit entries by action, kept per process and brought up to date at each call by counting
    only the entries after the last one counted (a range of the primary key). That stays exact
    because entries are only ever appended, never changed or deleted, and one writer at a time
    appends them, so their sequence numbers are in commit order: no entry can appear later below
    one already counted. A store of millions of entries is counted in full once."""
    def __init__(self, store: Store):
        self._store = store
        self._seq = 0
        self._counts: dict[str, int] = {}
        self._after: dict[float, tuple[int, dict[str, int]]] = {}  # instant -> (through seq, counts), oldest first
        self._lock = threading.Lock()

    def current(self) -> Counted:
        with self._lock:
            rows = self._store.peeking(lambda conn: self._store.audit_actions_after(conn, self._seq))
            for action, count, newest in rows:
                self._counts[action] = self._counts.get(action, 0) + int(count)
                self._seq = max(self._seq, int(newest))
            out = Counted(self._counts)
            out.seq = self._seq
            out.source = self
            return out

    def written_after(self, t: float, through_seq: int) -> dict[str, int]:
        """``actions_written_after(t, through_seq)``, kept for the last few instants asked: on
        the same grounds as ``current``, the entries after ``t`` among the first ``through_seq``
        are those counted for an earlier ``through_seq`` plus the ones after it. An overview
        held at a past instant, with a store imported after it, would otherwise count a million
        entries at every run."""
        with self._lock:
            kept = self._after.pop(t, None)
            if kept is not None and kept[0] <= through_seq:
                since, counts = kept
                more = actions_written_after(self._store, t, through_seq, after_seq=since) if since < through_seq else {}
                counts = {a: counts.get(a, 0) + more.get(a, 0) for a in counts.keys() | more.keys()}
            else:
                counts = actions_written_after(self._store, t, through_seq)
            if kept is None or kept[0] <= through_seq:
                self._after[t] = (through_seq, counts)
                while len(self._after) > KEPT_INSTANTS:
                    self._after.pop(next(iter(self._after)))
            return dict(counts)


def actions_at(store: Store, t: float, current: dict[str, int]) -> dict[str, int]:
    """Audit entries by action written at or before epoch ``t``: the ``current`` counts less
    those written after ``t`` (of the entries ``current`` counted, when it says how far)."""
    seq = getattr(current, "seq", None) or None
    source = getattr(current, "source", None)
    later = source.written_after(t, seq) if source is not None and seq else actions_written_after(store, t, seq)
    out = {a: n - later.get(a, 0) for a, n in current.items()}
    return {a: n for a, n in out.items() if n > 0}


def existing_rows(snap: Snapshot, t: float) -> np.ndarray:
    """Rows of the live records that existed at epoch ``t`` (created at or before it)."""
    return np.nonzero(snap.alive & (snap.created_at <= t))[0]


def compute_metrics(store: Store, snap: Snapshot, as_of: datetime,
                    action_counts: dict[str, int] | None = None, seen: np.ndarray | None = None,
                    full: np.ndarray | None = None, actions_then: dict[str, int] | None = None) -> dict[str, Any]:
    """SPEC 7 at ``as_of``: over the live records created at or before ``as_of`` and the audit
    entries written by then (an instant in the past counts nothing that came later).
    ``action_counts``: audit entries by action now (``ActionCounts``); counted here in full when
    not given. For an operator's clearance (SPEC 10, "One door"): ``seen`` marks the rows it
    sees (their labels, salience and confidence count), ``full`` the rows it sees in full (only
    those count for what a redacted view withholds: pinned, success rates, plan runs), and
    ``actions_then`` the entries by action of the records it sees, at ``as_of``."""
    t = to_epoch(as_of)
    rows = existing_rows(snap, t)
    if seen is not None:
        rows = rows[seen[rows]]
    in_full = full[rows] if full is not None else np.ones(len(rows), dtype=bool)
    total = len(rows)
    s = salience_at(take(snap.decay, rows), t) if total else np.empty(0)
    type_codes = snap.type_code[rows]
    by_type = {name: int(np.count_nonzero(type_codes == TYPE_CODES[name])) for name in TYPE_NAMES}
    created = snap.created_at[rows]
    if actions_then is not None:
        action_counts = actions_then
    else:
        if action_counts is None:
            action_counts = ActionCounts(store).current()
        action_counts = actions_at(store, t, action_counts)
    runs = snap.runs[rows]
    rates = snap.success_rate[rows]
    comp = (type_codes == TYPE_CODES["competence"]) & ~np.isnan(rates) & in_full  # those with a performance object
    plan = (type_codes == TYPE_CODES["plan_graph"]) & ~np.isnan(runs) & in_full
    # The stored success_rate, averaged as Membrane's GetMetrics does (not the selector's signal).
    competence = finite_mean(rates[comp]) if comp.any() else None
    plans = finite_mean(runs[plan]) if plan.any() else None
    audit_total = int(sum(action_counts.values()))

    def share(*actions: str) -> float:
        return sum(action_counts.get(a, 0) for a in actions) / audit_total if audit_total else 0.0

    return {
        "total_records": total,
        "records_by_type": by_type,
        "avg_salience": finite_mean(s),
        "avg_confidence": float(snap.confidence[rows].mean()) if total else 0.0,
        "salience_distribution": salience_buckets(s) if total else {b: 0 for b in BUCKETS},
        "active_records": int(np.count_nonzero(s > 0)),
        "pinned_records": int(np.count_nonzero(snap.decay.pinned[rows] & in_full)),
        "total_audit_entries": audit_total,
        "memory_growth_rate": float(np.count_nonzero((created > t - DAY) & (created <= t)) / total) if total else 0.0,
        "retrieval_usefulness": share("reinforce"),
        "competence_success_rate": float(competence) if competence is not None else 0.0,
        "plan_reuse_frequency": float(plans) if plans is not None else 0.0,
        "revision_rate": share("revise", "fork", "merge"),
    }


# --------------------------------------------------------------------------- console aggregates
# Breakdowns for the console's overview, over the column cache (never a full read of the
# records). Audit activity per day is lookups.audit_activity.


def store_metrics(ctx: EngineContext, as_of: datetime | None = None) -> dict[str, Any]:
    """SPEC 7 over the whole store at ``as_of`` (default: the context's now), the audit entries
    by action taken from the context's counter."""
    as_of = check_instant(as_of) if as_of is not None else None
    return compute_metrics(ctx.store, ctx.columns.current(), as_of=as_of or ctx.now(),
                           action_counts=ctx.action_counts.current())


def store_breakdown(snap: Snapshot, as_of: datetime, seen: np.ndarray | None = None) -> dict[str, Any]:
    """Counts by type x sensitivity and by scope over the live records created at or before
    ``as_of`` (with ``seen``, of the rows it marks: those an operator's clearance sees)."""
    rows = existing_rows(snap, to_epoch(as_of))
    if seen is not None:
        rows = rows[seen[rows]]
    sens_names = [s.value for s in Sensitivity]
    width = len(sens_names) + 1  # the last column: an unknown level
    levels = snap.sens_level[rows].astype(np.int64)
    cells = snap.type_code[rows].astype(np.int64) * width + np.where((levels >= 0) & (levels < len(sens_names)),
                                                                      levels, len(sens_names))
    grid = np.bincount(cells, minlength=len(TYPE_NAMES) * width).reshape(len(TYPE_NAMES), width)
    by_type_sensitivity = {
        name: {s: int(grid[code, j]) for j, s in enumerate(sens_names)}
        for name, code in ((n, TYPE_CODES[n]) for n in TYPE_NAMES)
    }
    scope_counts = np.bincount(snap.scope_code[rows], minlength=len(snap.scope_names)) if len(rows) else []
    by_scope = {snap.scope_names[i]: int(c) for i, c in enumerate(scope_counts) if c}
    return {
        "total": int(len(rows)),
        "by_type_sensitivity": by_type_sensitivity,
        "unknown_sensitivity": int(grid[:, -1].sum()),
        "by_scope": dict(sorted(by_scope.items(), key=lambda kv: (-kv[1], kv[0]))),
    }

