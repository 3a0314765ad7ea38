"""A per-process column cache of the store's scalar fields, as numpy arrays.

S(t) depends on the evaluation instant, so no SQL index can order records by it. Instead the
scalar columns of every record live here in numpy arrays, and gating, salience and ranking
run as vectorized passes over them. The cache stays current through the ``changes`` log: before
each query it reads the newest change number (one indexed lookup) and reloads only the rows
written since, by this process or any other.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

import numpy as np

from .salience import DecayColumns
from .schema import LAYER_RANK
from .store import SCALAR_COLUMNS, Store

TYPE_CODES = dict(LAYER_RANK)  # type name -> code; the code is also its canonical layer rank
TYPE_NAMES = sorted(TYPE_CODES, key=TYPE_CODES.get)
POLICY_CODES = {"auto_prune": 0, "manual_only": 1, "never": 2}
_FULL_RELOAD_FRACTION = 0.2


@dataclass
class Snapshot:
    """Immutable view of the columns at one change number; queries read one snapshot."""

    seq: int
    ids: np.ndarray  # object array of str
    alive: np.ndarray
    type_code: np.ndarray
    sens_level: np.ndarray
    scope_code: np.ndarray
    scope_names: list[str]
    confidence: np.ndarray
    created_at: np.ndarray
    decay: DecayColumns
    policy: np.ndarray
    last_reinforced_at: np.ndarray
    success_signal: np.ndarray
    row_of: dict[str, int]

    def __len__(self) -> int:
        return int(self.alive.sum())


def _build(rows: list[tuple], seq: int) -> Snapshot:
    n = len(rows)
    cols = list(zip(*rows)) if rows else [()] * len(SCALAR_COLUMNS)
    c = dict(zip(SCALAR_COLUMNS, cols))
    ids = np.array(c["id"], dtype=object)
    scopes = list(c["scope"])
    scope_names = sorted(set(scopes) | {""})
    scope_index = {s: i for i, s in enumerate(scope_names)}
    custom = {i: tuple(map(tuple, json.loads(p))) for i, p in enumerate(c["decay_points"]) if p}
    f = lambda name: np.array(c[name], dtype=float) if n else np.empty(0)  # noqa: E731
    lri = np.array([np.nan if v is None else v for v in c["last_reinforced_at"]], dtype=float) if n else np.empty(0)
    decay = DecayColumns(
        anchor_salience=f("anchor_salience"), anchor_at=f("anchor_at"), created_at=f("created_at"),
        curve=np.array(c["curve"], dtype=np.int8) if n else np.empty(0, dtype=np.int8),
        half_life=f("half_life"), min_salience=f("min_salience"), max_age=f("max_age"),
        pinned=np.array(c["pinned"], dtype=bool) if n else np.empty(0, dtype=bool),
        custom_points=custom,
    )
    return Snapshot(
        seq=seq, ids=ids, alive=np.ones(n, dtype=bool),
        type_code=np.array([TYPE_CODES[t] for t in c["type"]], dtype=np.int8) if n else np.empty(0, dtype=np.int8),
        sens_level=np.array(c["sens_level"], dtype=np.int8) if n else np.empty(0, dtype=np.int8),
        scope_code=np.array([scope_index[s] for s in scopes], dtype=np.int32) if n else np.empty(0, dtype=np.int32),
        scope_names=scope_names, confidence=f("confidence"), created_at=f("created_at"), decay=decay,
        policy=np.array([POLICY_CODES[p] for p in c["deletion_policy"]], dtype=np.int8) if n else np.empty(0, dtype=np.int8),
        last_reinforced_at=lri, success_signal=f("success_signal"),
        row_of={rid: i for i, rid in enumerate(c["id"])},
    )


def _patched(old: Snapshot, changed_rows: list[tuple], gone: set[str], seq: int) -> Snapshot:
    """A new snapshot with changed rows replaced or appended and removed ones marked dead."""
    fresh = _build(changed_rows, seq)
    # Merge scope vocabularies, recoding the fresh rows into the old one extended.
    scope_names = list(old.scope_names)
    index = {s: i for i, s in enumerate(scope_names)}
    for s in fresh.scope_names:
        if s not in index:
            index[s] = len(scope_names)
            scope_names.append(s)
    fresh_scope = np.array([index[fresh.scope_names[k]] for k in fresh.scope_code], dtype=np.int32)

    replace_at, replace_from, append_from = [], [], []
    for j, rid in enumerate(fresh.ids):
        i = old.row_of.get(rid)
        if i is None:
            append_from.append(j)
        else:
            replace_at.append(i)
            replace_from.append(j)
    ra = np.array(replace_at, dtype=np.int64)
    rf = np.array(replace_from, dtype=np.int64)
    af = np.array(append_from, dtype=np.int64)

    def merge(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = a.copy()
        if len(ra):
            out[ra] = b[rf]
        return np.concatenate([out, b[af]]) if len(af) else out

    alive = merge(old.alive, fresh.alive)
    for rid in gone:
        i = old.row_of.get(rid)
        if i is not None:
            alive[i] = False
    n_old = len(old.ids)
    custom = {i: p for i, p in old.decay.custom_points.items() if i not in set(replace_at)}
    for j, p in fresh.decay.custom_points.items():
        target = replace_at[replace_from.index(j)] if j in replace_from else n_old + append_from.index(j)
        custom[target] = p
    od, fd = old.decay, fresh.decay
    decay = DecayColumns(
        merge(od.anchor_salience, fd.anchor_salience), merge(od.anchor_at, fd.anchor_at),
        merge(od.created_at, fd.created_at), merge(od.curve, fd.curve), merge(od.half_life, fd.half_life),
        merge(od.min_salience, fd.min_salience), merge(od.max_age, fd.max_age), merge(od.pinned, fd.pinned), custom,
    )
    ids = merge(old.ids, fresh.ids)
    row_of = dict(old.row_of)
    for k, j in enumerate(append_from):
        row_of[fresh.ids[j]] = n_old + k
    return Snapshot(
        seq=seq, ids=ids, alive=alive, type_code=merge(old.type_code, fresh.type_code),
        sens_level=merge(old.sens_level, fresh.sens_level), scope_code=merge(old.scope_code, fresh_scope),
        scope_names=scope_names, confidence=merge(old.confidence, fresh.confidence),
        created_at=merge(old.created_at, fresh.created_at), decay=decay, policy=merge(old.policy, fresh.policy),
        last_reinforced_at=merge(old.last_reinforced_at, fresh.last_reinforced_at),
        success_signal=merge(old.success_signal, fresh.success_signal), row_of=row_of,
    )


class ColumnCache:
    """Hands out a current Snapshot; thread-safe, shared by every query of one Membrane."""

    def __init__(self, store: Store):
        self._store = store
        self._snapshot: Snapshot | None = None
        self._lock = threading.Lock()

    def current(self) -> Snapshot:
        with self._store.read() as conn:
            seq = self._store.change_counter(conn)
            snap = self._snapshot
            if snap is not None and snap.seq == seq:
                return snap
            with self._lock:
                snap = self._snapshot
                if snap is not None and snap.seq >= seq:
                    return snap
                if snap is None:
                    new = _build(self._store.scalar_rows(conn), seq)
                else:
                    changed = self._store.changed_since(conn, snap.seq)
                    if len(changed) > _FULL_RELOAD_FRACTION * max(len(snap.ids), 1000):
                        new = _build(self._store.scalar_rows(conn), seq)
                    else:
                        rows = self._store.scalar_rows(conn, sorted(changed))
                        present = {r[0] for r in rows}
                        new = _patched(snap, rows, changed - present, seq)
                self._snapshot = new
                return new

    def invalidate(self) -> None:
        with self._lock:
            self._snapshot = None
