"""A per-process column cache of the store's scalar fields, as numpy arrays.

S(t) depends on the evaluation instant, so no SQL index can order records by it. Instead the
scalar columns of every record live here in numpy arrays, and gating, salience and ranking
run as vectorized passes over them. The cache stays current through the ``changes`` log: before
each query it asks for the changes after its own (one indexed lookup, usually empty) and
reloads only the rows written since, by this process or any other.

Snapshots are immutable to whoever holds them, and a new one shares everything it can with the
one before, so keeping the cache current costs about what changed, not the size of the store:
- each column lives in a buffer with spare capacity; a snapshot sees ``buffer[:n]``. Records
  added since are written past the old snapshots' ``n`` (which they never read), so appending
  copies nothing.
- a change to existing rows is written into the buffers in place when the snapshot it replaces
  is held by nobody but the cache (no query running, no caller keeping it, no view or slice of
  those buffers alive: ``ColumnCache._unshared`` compares reference counts). Otherwise only the
  columns whose values changed are copied (a reinforce touches the anchor and
  last_reinforced_at, not the other dozen columns) and every other column is shared with the
  previous snapshot. Nothing a snapshot that anyone holds can read is ever written.
- ``row_of`` (id -> row) is one dict shared by all snapshots (rows are only ever added, never
  moved), seen through a ``RowIndex`` that hides rows beyond the snapshot's ``n``. It is built
  on its first use, not with the columns: at a million rows that is a noticeable part of a
  start, which the pages that only count and chart over the columns (the first page after a
  start) never need.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from membrane_engine.rules.salience import CustomCurves, DecayColumns, decay_path
from membrane_engine.rules.trust import TrustContext, level_verdicts, scopes_admitted
from membrane_engine.model.records import LAYER_RANK
from membrane_engine.storage import snapshot_file
from membrane_engine.storage.store import POLICY_CODES, SCALAR_COLUMNS, Store  # noqa: F401 (POLICY_CODES re-exported)

T = TypeVar("T")

TYPE_CODES = dict(LAYER_RANK)  # type name -> code; the code is also its canonical layer rank
TYPE_NAMES = sorted(TYPE_CODES, key=TYPE_CODES.get)
_FULL_RELOAD_FRACTION = 0.2
_GROWTH = 1.25  # spare capacity on (re)allocation, so appends rarely copy

# Column name -> dtype, in one place (Snapshot fields; decay columns live in snapshot.decay).
_DTYPES: dict[str, type | str] = {
    "ids": object, "alive": bool, "type_code": np.int8, "sens_level": np.int8, "scope_code": np.int32,
    "confidence": float, "created_at": float, "anchor_salience": float, "anchor_at": float,
    "curve": np.int8, "half_life": float, "min_salience": float, "max_age": float, "pinned": bool,
    "policy": np.int8, "last_reinforced_at": float, "success_signal": float, "runs": float,
    "success_rate": float,
    "gate": np.int32, "path": np.int8, "tagset": np.int32,
}
# ``tagset``: the record's tag set (its tags column, as stored) as a code of ``TagSets``, so tag
# counts and the tag filter are numpy over the codes (``tag_counts``, ``with_tags``).
# ``gate``: what the trust gate looks at (layer, sensitivity level, scope) as one code, so a
# request gates every row with a single lookup in a small table (``gate_table``); 0 marks a row
# that is not alive. Scope codes only ever grow, so a row's code never changes with the vocabulary.
_LEVEL_SLOTS = 7  # sensitivity level + 1, clipped: unknown (-1) .. a hidden end (see trust.level_verdicts)
DEAD = 0
_COL = {name: k for k, name in enumerate(SCALAR_COLUMNS)}


class RowIndex(Mapping):
    """id -> row for one snapshot: a view of the dict all snapshots share, limited to the rows
    that existed when the snapshot was taken."""

    __slots__ = ("_cols", "_n")

    def __init__(self, cols: "_Columns", n: int):
        self._cols = cols
        self._n = n

    @property
    def _rows(self) -> dict[str, int]:
        return self._cols.row_of

    @property
    def load(self) -> dict[str, int]:
        """The dict every snapshot of one load of the cache shares: the same object until the
        cache loads the store anew (row numbers stay valid that long)."""
        return self._cols.row_of

    def get(self, key, default=None):
        i = self._rows.get(key)
        return i if i is not None and i < self._n else default

    def __getitem__(self, key) -> int:
        i = self._rows.get(key)
        if i is None or i >= self._n:
            raise KeyError(key)
        return i

    def __contains__(self, key) -> bool:
        i = self._rows.get(key)
        return i is not None and i < self._n

    def __iter__(self) -> Iterator[str]:
        n = self._n
        return (k for k, i in list(self._rows.items()) if i < n)

    def __len__(self) -> int:
        return self._n


class TagSets:
    """The distinct values of the records' tags column (tag sets) -> codes, and the tags each set
    holds. Append-only and shared by every snapshot of one load, as ``row_of`` is: a snapshot's
    rows carry only codes that existed when it was taken (``Snapshot.tag_sets_n``). A set counts
    each of its tags once; a value that is not a JSON list of strings holds none."""

    def __init__(self, texts: list[str] | None = None):
        self.texts: list[str] = []
        self.index: dict[str, int] = {}
        self.tags: list[str] = []  # every tag seen, in order of first sight
        self.tag_index: dict[str, int] = {}
        self._pair_set: list[int] = []  # (set, tag) pairs, in set order, for the first _paired sets
        self._pair_tag: list[int] = []
        self._paired = 0
        self._arrays: tuple[int, np.ndarray, np.ndarray] | None = None
        self._lock = threading.Lock()
        if texts:
            self.codes(texts)

    @classmethod
    def of(cls, texts: list[str]) -> "TagSets":
        """Sets whose codes are the positions in ``texts`` (distinct strings)."""
        out = cls()
        out.texts = list(texts)
        out.index = {t: i for i, t in enumerate(out.texts)}
        if len(out.index) != len(out.texts) or not all(isinstance(t, str) for t in out.texts):
            raise ValueError("tag sets must be distinct strings")
        return out

    def codes(self, texts: list) -> np.ndarray:
        """The code of each value (new ones are added)."""
        index = self.index
        new = set(texts).difference(index)
        if new:
            with self._lock:
                for text in sorted(new, key=str):
                    if text not in index:
                        self.texts.append(text)  # before the index: a reader never meets a code past texts
                        index[text] = len(self.texts) - 1
        return np.fromiter(map(index.__getitem__, texts), dtype=np.int32, count=len(texts))

    def pairs(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(set code, tag code) of every tag of the first ``k`` sets, ordered by set."""
        with self._lock:
            while self._paired < k:
                code = self._paired
                try:
                    parsed = json.loads(self.texts[code])
                except (TypeError, ValueError):
                    parsed = None
                for tag in dict.fromkeys(parsed if isinstance(parsed, list) else ()):
                    if not isinstance(tag, str):
                        continue
                    t = self.tag_index.get(tag)
                    if t is None:
                        self.tags.append(tag)
                        t = self.tag_index[tag] = len(self.tags) - 1
                    self._pair_set.append(code)
                    self._pair_tag.append(t)
                self._paired += 1
            if self._arrays is None or self._arrays[0] != self._paired:
                self._arrays = (self._paired, np.array(self._pair_set, dtype=np.int32),
                                np.array(self._pair_tag, dtype=np.int32))
            _, sets, tags = self._arrays
        m = int(np.searchsorted(sets, k))
        return sets[:m], tags[:m]


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
    row_of: Mapping  # RowIndex: id -> row
    gate: np.ndarray  # gate code per row (see ``gate_table``); DEAD when not alive
    # Runs behind the success signal (competence: successes + failures; plan: executions); NaN
    # when the record has no performance / metrics object (SPEC 7 metrics).
    runs: np.ndarray | None = None
    # A competence record's stored performance.success_rate; NaN without a performance object.
    success_rate: np.ndarray | None = None
    tagset: np.ndarray | None = None  # tag-set code per row (TagSets)
    tag_sets: TagSets | None = None
    tag_sets_n: int = 0  # codes below this are the ones this snapshot's rows may carry

    def __len__(self) -> int:
        return int(np.count_nonzero(self.alive))


class _Columns:
    """The buffers behind the newest snapshot (only the cache, under its lock, touches these)."""

    def __init__(self, buffers: dict[str, np.ndarray], n: int, scope_names: list[str],
                 custom: dict[int, tuple[tuple[float, float], ...]], row_of: dict[str, int] | None = None,
                 tag_sets: TagSets | None = None):
        """``row_of``: id -> row of the ``n`` rows, or None to build it from their ids when first
        asked for (``row_of``)."""
        self.buffers = buffers
        self.tag_sets = tag_sets if tag_sets is not None else TagSets()
        self.n = n
        self.scope_names = scope_names
        self.scope_index = {s: i for i, s in enumerate(scope_names)}
        self.custom = custom
        self._row_of = row_of
        self._rows_from = n  # rows whose ids the dict is built from; later ones are added to it
        self._row_lock = threading.Lock()
        self.views: dict[str, np.ndarray] = {}
        self._curves: tuple[dict, CustomCurves] | None = None

    @property
    def row_of(self) -> dict[str, int]:
        """id -> row, shared by every snapshot of this load (rows are only ever added)."""
        rows = self._row_of
        if rows is None:
            with self._row_lock:
                if self._row_of is None:
                    ids = self.buffers["ids"][:self._rows_from].tolist()
                    built = dict(zip(ids, range(len(ids))))
                    if len(built) != len(ids):  # a snapshot file's ids are checked here, on first use
                        raise ValueError("the column cache holds an id twice")
                    self._row_of = built
                rows = self._row_of
        return rows

    def curves(self) -> CustomCurves:
        """``custom`` as arrays, converted again only when ``custom`` was replaced (a write to a
        custom-curve row, which is rare)."""
        if self._curves is None or self._curves[0] is not self.custom:
            self._curves = (self.custom, CustomCurves.of(self.custom))
        return self._curves[1]

    @property
    def capacity(self) -> int:
        return len(self.buffers["ids"])

    def snapshot(self, seq: int) -> Snapshot:
        """A snapshot of the first ``n`` rows; ``views`` keeps its view of each buffer (the cache
        compares their reference counts to know whether anyone else holds them)."""
        n = self.n
        v = {name: buf[:n] for name, buf in self.buffers.items()}
        self.views = v
        decay = DecayColumns(
            anchor_salience=v["anchor_salience"], anchor_at=v["anchor_at"], created_at=v["created_at"],
            curve=v["curve"], half_life=v["half_life"], min_salience=v["min_salience"], max_age=v["max_age"],
            pinned=v["pinned"], custom_points=self.curves(), path=v["path"],
        )
        return Snapshot(
            seq=seq, ids=v["ids"], alive=v["alive"], type_code=v["type_code"], sens_level=v["sens_level"],
            scope_code=v["scope_code"], scope_names=self.scope_names, confidence=v["confidence"],
            created_at=v["created_at"], decay=decay, policy=v["policy"],
            last_reinforced_at=v["last_reinforced_at"], success_signal=v["success_signal"],
            row_of=RowIndex(self, n), runs=v["runs"], success_rate=v["success_rate"], gate=v["gate"],
            tagset=v["tagset"], tag_sets=self.tag_sets, tag_sets_n=len(self.tag_sets.texts),
        )


def _floats(col: np.ndarray) -> np.ndarray:
    try:
        return col.astype(float)
    except TypeError:  # None (unset) -> NaN
        return np.array(col.tolist(), dtype=float)


def _decode(rows: list[tuple], scope_index: dict[str, int], scope_names: list[str],
            tag_sets: TagSets) -> dict[str, np.ndarray]:
    """Column arrays of a chunk of SCALAR_COLUMNS tuples (new scopes and tag sets are added to
    their vocabularies)."""
    n = len(rows)
    if n == 0:
        return {name: np.empty(0, dtype=dtype) for name, dtype in _DTYPES.items()}
    table = np.empty((n, len(SCALAR_COLUMNS)), dtype=object)  # one C-level pass over the tuples
    table[:] = rows

    def col(name: str) -> np.ndarray:
        return table[:, _COL[name]]

    scopes = col("scope").tolist()
    for s in set(scopes):
        if s not in scope_index:
            scope_index[s] = len(scope_names)
            scope_names.append(s)
    packed = col("packed").astype(np.int64)  # store.PACKED_CODES
    type_code = (packed & 7).astype(np.int8)
    if len(type_code) and (type_code.max() >= len(TYPE_NAMES) or (packed < 0).any()):
        raise ValueError("the store holds a record of an unknown type or deletion policy")
    out = {
        "ids": col("id").copy(),
        "alive": np.ones(n, dtype=bool),
        "type_code": type_code,
        "sens_level": ((packed >> 9) - 1).astype(np.int8),
        "scope_code": np.array([scope_index[s] for s in scopes], dtype=np.int32),
        "curve": ((packed >> 3) & 7).astype(np.int8),
        "pinned": ((packed >> 6) & 1).astype(bool),
        "policy": ((packed >> 7) & 3).astype(np.int8),
    }
    out["gate"] = gate_codes(out["type_code"], out["sens_level"], out["scope_code"])
    for name in ("confidence", "created_at", "anchor_salience", "anchor_at", "half_life", "min_salience",
                 "max_age", "last_reinforced_at", "success_signal", "runs", "success_rate"):
        out[name] = _floats(col(name))
    out["path"] = decay_path(out["curve"], out["pinned"], out["max_age"])
    out["tagset"] = tag_sets.codes(col("tags").tolist())
    return out


def gate_codes(type_code: np.ndarray, sens_level: np.ndarray, scope_code: np.ndarray) -> np.ndarray:
    """The gate code of live rows: 1 + (scope, level slot, layer) in mixed radix."""
    level_slot = np.clip(sens_level.astype(np.int32) + 1, 0, _LEVEL_SLOTS - 1)
    return 1 + (scope_code.astype(np.int32) * _LEVEL_SLOTS + level_slot) * len(TYPE_NAMES) + type_code


def gate_table(snap: "Snapshot", trust: TrustContext, type_ok: np.ndarray) -> np.ndarray:
    """VERDICT_CODES by gate code for one trust context and the requested layers (``type_ok``, a
    flag per type code): the trust rule (trust.level_verdicts, trust.scopes_admitted) laid out
    over every (scope, level, layer), hidden for DEAD."""
    by_level = level_verdicts(trust)
    scope_ok = scopes_admitted(snap.scope_names, trust).astype(np.int8)
    table = scope_ok[:, None, None] * by_level[None, :, None] * type_ok.astype(np.int8)[None, None, :]
    return np.concatenate(([0], table.ravel())).astype(np.int8)


def tag_counts(snap: Snapshot, rows: np.ndarray) -> dict[str, int]:
    """Every tag carried by the rows ``rows`` (a boolean mask) selects, with how many of them
    carry it: rows counted per tag set, then per tag over the sets' members."""
    k = snap.tag_sets_n
    if snap.tag_sets is None or not k:
        return {}
    per_set = np.bincount(snap.tagset[rows], minlength=k)
    sets, tags = snap.tag_sets.pairs(k)
    per_tag = np.bincount(tags, weights=per_set[sets], minlength=len(snap.tag_sets.tags))
    names = snap.tag_sets.tags
    return {names[t]: int(per_tag[t]) for t in np.nonzero(per_tag)[0].tolist()}


def with_tags(snap: Snapshot, wanted: list[str]) -> np.ndarray:
    """A boolean per row: the record carries every tag of ``wanted`` (exactly, case and all)."""
    k = snap.tag_sets_n
    ok = np.ones(k, dtype=bool)
    if snap.tag_sets is not None and k:
        sets, tags = snap.tag_sets.pairs(k)
        for tag in dict.fromkeys(wanted):
            code = snap.tag_sets.tag_index.get(tag)
            has = np.zeros(k, dtype=bool)
            if code is not None:
                has[sets[tags == code]] = True
            ok &= has
    if snap.tagset is None or not k:
        return np.zeros(len(snap.ids), dtype=bool) if wanted else np.ones(len(snap.ids), dtype=bool)
    return ok[snap.tagset]


def _custom_of(rows: list[tuple], offset: int) -> dict[int, tuple[tuple[float, float], ...]]:
    k = _COL["decay_points"]
    return {offset + i: tuple(map(tuple, json.loads(r[k]))) for i, r in enumerate(rows) if r[k]}


def _load(store: Store, conn) -> _Columns:
    """Every record, chunk by chunk from the driver, into buffers with spare capacity, rows
    ordered by gate code: a request's visible rows then come in long runs, so finding them and
    gathering their columns stream through memory instead of branching at random (bench/README.md
    has the gain). Rows added later go after these; nothing depends on row order."""
    scope_names = [""]
    scope_index = {"": 0}
    tag_sets = TagSets()
    parts: list[dict[str, np.ndarray]] = []
    custom: dict[int, tuple[tuple[float, float], ...]] = {}
    n = 0
    for rows in store.scalar_chunks(conn):
        custom.update(_custom_of(rows, n))
        parts.append(_decode(rows, scope_index, scope_names, tag_sets))
        n += len(rows)
    gate = np.concatenate([part["gate"] for part in parts]) if parts else np.empty(0, dtype=np.int32)
    order = np.argsort(gate, kind="stable")
    capacity = max(16, int(n * _GROWTH))
    buffers = {}
    for name, dtype in _DTYPES.items():
        buf = np.empty(capacity, dtype=dtype)
        if parts:
            np.take(np.concatenate([part[name] for part in parts]), order, out=buf[:n])
        buffers[name] = buf
    if custom:
        position = np.empty(n, dtype=np.int64)
        position[order] = np.arange(n)
        custom = {int(position[row]): points for row, points in custom.items()}
    return _Columns(buffers, n, scope_names, custom, None, tag_sets)


@dataclass
class _Patch:
    """What a refresh does to the columns (``_patch``), before anything is written (``_write``)."""

    fresh: dict[str, np.ndarray]  # decoded rows
    fresh_custom: dict[int, tuple[tuple[float, float], ...]]
    replace_at: list[int]  # existing rows that change ...
    replace_from: list[int]  # ... to these fresh rows
    append_from: list[int]  # fresh rows that are new records
    gone_at: list[int]  # existing rows removed
    scope_names: list[str]
    scope_index: dict[str, int]
    changed: set[str]  # columns whose values change in existing rows
    grow: bool  # the appended rows do not fit: every buffer is reallocated


def _patch(cols: _Columns, rows: list[tuple], gone: set[str]) -> _Patch:
    """The change that brings ``cols`` to the state after ``rows`` (changed or new records,
    SCALAR_COLUMNS tuples) were written and ``gone`` were removed; reads ``cols`` only."""
    scope_names = list(cols.scope_names)
    scope_index = dict(cols.scope_index)
    fresh = _decode(rows, scope_index, scope_names, cols.tag_sets)
    replace_at: list[int] = []
    replace_from: list[int] = []
    append_from: list[int] = []
    for j, rid in enumerate(fresh["ids"]):
        i = cols.row_of.get(rid)
        if i is None:
            append_from.append(j)
        else:
            replace_at.append(i)
            replace_from.append(j)
    gone_at = [cols.row_of[rid] for rid in gone if rid in cols.row_of]
    ra = np.array(replace_at, dtype=np.int64)
    rf = np.array(replace_from, dtype=np.int64)
    changed: set[str] = set()
    for name, buf in cols.buffers.items():
        if name == "alive":
            hit = (len(ra) and not buf[ra].all()) or (gone_at and buf[gone_at].any())
        elif name == "gate":
            hit = (len(ra) and _differs(buf[ra], fresh[name][rf])) or (gone_at and (buf[gone_at] != DEAD).any())
        else:
            hit = len(ra) and _differs(buf[ra], fresh[name][rf])
        if hit:
            changed.add(name)
    return _Patch(fresh, _custom_of(rows, 0), replace_at, replace_from, append_from, gone_at, scope_names,
                  scope_index, changed, cols.n + len(append_from) > cols.capacity)


def _differs(old: np.ndarray, new: np.ndarray) -> bool:
    """Some value differs (NaN equals NaN). A few rows (the usual refresh) are compared as Python
    scalars: a dozen numpy calls per column would cost more than the rest of the refresh."""
    if len(old) <= 64:
        return any(a != b and (a == a or b == b) for a, b in zip(old.tolist(), new.tolist()))
    return not (np.array_equal(old, new, equal_nan=True) if old.dtype.kind == "f" else np.array_equal(old, new))


def _write(cols: _Columns, p: _Patch, in_place: bool) -> None:
    """Apply ``p`` to ``cols``. New rows go past every published snapshot's end (no copy). Changed
    columns are copied first (copy-on-write: snapshots handed out keep their values) unless
    ``in_place``, which the caller may only pass when no snapshot that reads these buffers can
    be reached by anyone else (``ColumnCache._unshared``)."""
    n = cols.n
    ra = np.array(p.replace_at, dtype=np.int64)
    rf = np.array(p.replace_from, dtype=np.int64)
    af = np.array(p.append_from, dtype=np.int64)
    k = len(af)
    buffers = dict(cols.buffers)
    if p.grow:  # the one case that copies every column; the new buffers are nobody else's
        capacity = int((n + k) * _GROWTH) + 16
        for name, buf in buffers.items():
            grown = np.empty(capacity, dtype=buf.dtype)
            grown[:n] = buf[:n]
            buffers[name] = grown
        in_place = True
    for name, buf in buffers.items():
        new_values = p.fresh[name]
        if name in p.changed:
            if not in_place:
                buf = buf.copy()
                buffers[name] = buf
            if name == "alive":
                if len(ra):
                    buf[ra] = True
                if p.gone_at:
                    buf[p.gone_at] = False
            else:
                buf[ra] = new_values[rf]
                if name == "gate" and p.gone_at:
                    buf[p.gone_at] = DEAD
        if k:
            buf[n:n + k] = new_values[af]  # past every published snapshot's end
    # Custom decay points: copied only when a custom row changes or arrives.
    custom = cols.custom
    touched = set(p.replace_at) | set(p.gone_at)
    if p.fresh_custom or any(i in custom for i in touched):
        custom = {i: q for i, q in custom.items() if i not in touched}
        for j, q in p.fresh_custom.items():
            custom[p.replace_at[p.replace_from.index(j)] if j in p.replace_from else n + p.append_from.index(j)] = q
    row_of = cols.row_of
    for offset, j in enumerate(p.append_from):
        row_of[p.fresh["ids"][j]] = n + offset  # invisible to older snapshots (RowIndex bounds)
    cols.buffers = buffers
    cols.n = n + k
    if len(p.scope_names) != len(cols.scope_names):
        cols.scope_names = p.scope_names
        cols.scope_index = p.scope_index
    cols.custom = custom


class ColumnCache:
    """Hands out a current Snapshot; thread-safe, shared by every query of one Membrane.

    A refresh after a small write costs about the rows written, not the store's size: when the
    snapshot it replaces is held by nobody but the cache (its reference counts are what the
    cache's own references make them, the check numpy's ``resize(refcheck=True)`` makes), the
    changed rows are written into the buffers in place. A snapshot that someone still holds (a
    query running in another thread, a caller keeping it) is never written: the changed columns
    are copied instead. Snapshots are handed out and replaced under ``_swap``, so none can be
    picked up between the check and the write."""

    def __init__(self, store: Store, snapshots: Path | None | object = ...):
        """``snapshots``: the directory of this store's persisted snapshot (``snapshot_file``);
        by default ``snapshot_dir(store)``; None: none is read or written."""
        self._store = store
        self._snapshot_dir: Path | None = snapshot_dir(store) if snapshots is ... else snapshots  # type: ignore[assignment]
        self.snapshot_min_rows = SNAPSHOT_MIN_ROWS  # smaller loads are not worth a file
        self.snapshot_status = "none"  # what the first load made of the persisted snapshot (logs, tests)
        self.snapshot_saved = "none"  # how writing one went last
        self._saver: threading.Thread | None = None
        self._snapshot: Snapshot | None = None
        self._columns: _Columns | None = None
        self._lock = threading.RLock()  # one refresh at a time
        self._loads = 0  # full loads so far
        self._swap = threading.Lock()  # handing out and replacing the snapshot

    def current(self) -> Snapshot:
        """The snapshot at the newest change. Checking costs one statement outside any
        transaction (the newest change's number), and a second only after changes (those after
        the snapshot's, with the changed rows' columns; see ``Store.changes_with_rows``); a full
        load of the store runs in a read transaction. On a server, the store's probe asks the
        first question (``probe.ChangeProbe``)."""
        snap = self._probed()
        if snap is not None:
            return snap
        snap, loads = self._store.peeking(self._catch_up)
        if snap is not None:
            return snap
        with self._lock:
            if self._loads != loads:  # another thread loaded the store meanwhile
                return self.current()
            with self._store.read() as conn:
                return self._reload(conn)

    def answer(self, compute: Callable[[Snapshot], T]) -> T:
        """``compute(snapshot at the newest change)``, for answers that cost less than a round
        trip (an explain, a record's trust decision). On a server ``compute`` runs on the
        snapshot in hand while the probe's question travels; what it returned or raised stands
        when the answer says nothing changed since that snapshot, and otherwise ``compute`` runs
        again on the snapshot brought up to date. So it sees every write committed before the
        call, as after ``current()``. ``compute`` only reads; it may run twice."""
        probe = self._store.probe
        with self._swap:
            snap = self._snapshot
        if probe is None or snap is None or not probe.send():
            del snap  # a reference of our own would make the snapshot look shared
            return compute(self.current())
        error: Exception | None = None
        try:
            try:
                value = compute(snap)
            except Exception as exc:
                value, error = None, exc
        finally:
            newest = probe.receive()
        if newest is not None and newest <= snap.seq:
            if error is not None:
                raise error
            return value
        del snap, value, error
        return compute(self.current())

    def _probed(self) -> Snapshot | None:
        """The snapshot in hand, when the store's probe says nothing changed since it."""
        probe = self._store.probe
        if probe is None:
            return None
        with self._swap:
            snap = self._snapshot
        if snap is None:
            return None
        newest = probe.newest()
        return snap if newest is not None and newest <= snap.seq else None

    def _catch_up(self, conn) -> tuple[Snapshot | None, int]:
        """The snapshot brought up to date on ``conn``, or None (with the number of full loads so
        far) when the store must be loaded in full. Only reads: ``peeking`` may run it twice."""
        with self._swap:
            snap = self._snapshot
        if snap is None:
            seen, log = None, None
        else:
            seen, log = snap.seq, self._store.changes_with_rows(conn, snap.seq, self._reload_above())
            if log == []:
                return snap, self._loads
        del snap  # a reference of our own would make the snapshot look shared
        with self._lock:
            loads = self._loads
            return self._refresh(conn, seen, log), loads

    def written(self, log: list[tuple[int, str, tuple]]) -> None:
        """Take the change log entries a write of this process has just committed, with the rows
        as the write left them (``Store.write_updates``), when they are the very next changes
        after the snapshot's: the next check then finds nothing new, instead of reading back what
        this process wrote. Anything else (a change by someone else in between, a gap left by a
        rolled-back write) is left to that check."""
        if not log or any(b[0] != a[0] + 1 for a, b in zip(log, log[1:])):
            return
        with self._lock:
            with self._swap:
                seq = self._snapshot.seq if self._snapshot is not None else None
            if seq is not None and seq == log[0][0] - 1:
                self._refresh(None, seq, log)

    def _reload_above(self) -> int:
        """How many changes make a full reload cheaper than applying them."""
        cols = self._columns
        return int(_FULL_RELOAD_FRACTION * max(cols.n if cols is not None else 0, 1000))

    def _refresh(self, conn, seen: int | None, log: list[tuple[int, str, tuple | None]] | None) -> Snapshot | None:
        """The snapshot brought up to date (under ``_lock``) from ``log``, the changes after
        ``seen`` the caller read (read again when another thread has refreshed the snapshot
        meanwhile); None when the store must be loaded in full (nothing loaded yet, or too much
        changed)."""
        cols = self._columns
        seq = self._snapshot.seq if self._snapshot is not None else None
        if seq is None or cols is None:
            return None
        if seq != seen:
            log = self._store.changes_with_rows(conn, seq, self._reload_above())
        if log is None:
            return None
        if not log:
            return self._handout()
        latest = {rid: row for _, rid, row in log}  # each row is the record as it is now
        rows = [row for row in latest.values() if row is not None]
        patch = _patch(cols, rows, {rid for rid, row in latest.items() if row is None})
        new_seq = log[-1][0]
        with self._swap:
            if not patch.grow and self._unshared(patch.changed):
                _write(cols, patch, in_place=True)
                return self._publish(cols, new_seq)
        _write(cols, patch, in_place=False)
        with self._swap:
            return self._publish(cols, new_seq)

    def _reload(self, conn) -> Snapshot:
        identity = None
        if self._snapshot_dir is not None and self._store is not None:
            identity = self._store.snapshot_identity(conn)
            if self._loads == 0:
                snap = self._from_file(conn, *identity)
                if snap is not None:
                    return snap
        seq = self._store.change_counter(conn)
        cols = _load(self._store, conn)
        with self._swap:
            self._loads += 1
            snap = self._publish(cols, seq)
        if identity is not None:
            self._persist(conn, *identity)
        return snap

    # persisted snapshots (snapshot_file) ------------------------------------------

    def _snapshot_path(self, store_id: str | None) -> Path | None:
        if self._snapshot_dir is None or not store_id or not _SAFE_ID.fullmatch(store_id):
            return None
        return self._snapshot_dir / f"{store_id}.columns"

    def _from_file(self, conn, store_id: str | None, key: bytes | None) -> Snapshot | None:
        """The store's persisted snapshot brought up to date with the change log (published, under
        ``_lock``), or None when there is none or it may not be used (``snapshot_status`` says
        why); the caller then loads the store in full."""
        path = self._snapshot_path(store_id)
        if path is None or not key:
            return None
        try:
            header, data = snapshot_file.header_of(path)
            try:
                seq = int(header["seq"])
                n = int(header["n"])
            except (KeyError, TypeError, ValueError):
                raise snapshot_file.SnapshotRejected("malformed header") from None
            if header.get("store_id") != store_id:
                raise snapshot_file.SnapshotRejected("of another store")
            counter = self._store.change_counter(conn)
            if seq > counter:
                raise snapshot_file.SnapshotRejected(f"at change {seq}, ahead of the store's {counter}")
            if self._store.change_at(conn, seq) != header.get("seq_record"):
                raise snapshot_file.SnapshotRejected(f"the store's change {seq} is not the one it was made at")
            log = self._store.changes_with_rows(conn, seq, int(_FULL_RELOAD_FRACTION * max(n, 1000)))
            if log is None:
                raise snapshot_file.SnapshotRejected(f"too far behind the store (change {seq} of {counter})")
            columns, ids = snapshot_file.verified(header, data, key, _PERSISTED)
            del data
            cols = _columns_from(header, columns, ids)
        except snapshot_file.SnapshotRejected as exc:
            self.snapshot_status = f"ignored: {exc}"
            return None
        except (ValueError, KeyError, TypeError, OSError, MemoryError) as exc:
            self.snapshot_status = f"ignored: unreadable ({type(exc).__name__}: {exc})"
            return None
        with self._swap:
            self._loads += 1
            self._publish(cols, seq)
        snap = self._refresh(conn, seq, log)
        self.snapshot_status = f"used: change {seq}, {len(log)} changes applied"
        if len(log) > max(1000, n // 100):  # far enough behind to be worth writing anew
            self._persist(conn, store_id, key)
        return snap

    def _persist(self, conn, store_id: str | None, key: bytes | None) -> None:
        """Write the current snapshot to disk in a thread of its own (its holder's references
        make the cache copy what it changes meanwhile, so it reads a consistent snapshot)."""
        path = self._snapshot_path(store_id)
        with self._swap:
            snap, cols = self._snapshot, self._columns
            if path is None or not key or snap is None or cols is None or cols.n < self.snapshot_min_rows:
                return
            views, custom = dict(cols.views), cols.custom
        header = {"kind": "membrane column snapshot", "store_id": store_id, "seq": snap.seq,
                  "seq_record": self._store.change_at(conn, snap.seq), "n": int(len(snap.ids)),
                  "scope_names": list(snap.scope_names), "tag_sets": snap.tag_sets.texts[:snap.tag_sets_n],
                  "custom": [[int(row), [list(p) for p in points]] for row, points in sorted(custom.items())]}

        def save() -> None:
            try:
                columns = {name: views[name] for name in _PERSISTED}
                size = snapshot_file.write(path, key, header, columns, views["ids"].tolist())
                self.snapshot_saved = f"written: change {header['seq']}, {size:,} bytes"
            except (OSError, ValueError) as exc:
                self.snapshot_saved = f"not written: {exc}"

        self._saver = threading.Thread(target=save, name="membrane-column-snapshot", daemon=True)
        self._saver.start()

    def index_ids(self) -> None:
        """Build the id -> row index of the current load now (it is otherwise built by the first
        look-up by id; ``Membrane.warm`` and the console's prewarm call this)."""
        self.current()
        with self._swap:
            cols = self._columns
        if cols is not None:
            cols.row_of  # noqa: B018  (the property builds it)

    @property
    def snapshot_dir(self) -> Path | None:
        """The directory of this store's persisted snapshot (None: none is kept)."""
        return self._snapshot_dir

    def wait_for_snapshot(self, timeout: float | None = None) -> None:
        """Until the snapshot being written (if any) is on disk."""
        saver = self._saver
        if saver is not None:
            saver.join(timeout)

    def _handout(self) -> Snapshot:
        with self._swap:
            return self._snapshot  # type: ignore[return-value]

    def _publish(self, cols: _Columns, seq: int) -> Snapshot:
        """Make a snapshot of ``cols`` the current one (under ``_swap``)."""
        self._columns = cols
        self._snapshot = cols.snapshot(seq)
        return self._snapshot

    def _unshared(self, names: set[str]) -> bool:
        """Nobody but the cache can reach the current snapshot or the buffers of ``names`` (under
        ``_swap``, so nobody can pick the snapshot up meanwhile): its reference counts, and those
        of these buffers and their views, are the ones the cache's own references make
        (``_OWN_REFS``, measured on a cache nobody else knows). Any other holder, even of a
        single view or a slice of a buffer, adds a reference."""
        if self._snapshot is None or self._columns is None or not _REFCOUNTS_TELL:
            return False
        return _ref_counts(self, names) == _own_refs(names)

    def invalidate(self) -> None:
        with self._lock, self._swap:
            self._snapshot = None
            self._columns = None


# What a snapshot file holds per row: every column but those recomputed on reading (the gate
# code and the decay path follow from the others) and the ids (stored as text).
_PERSISTED = {name: np.dtype(dtype) for name, dtype in _DTYPES.items() if name not in ("ids", "gate", "path")}
_SAFE_ID = re.compile(r"[A-Za-z0-9-]{1,64}")
SNAPSHOT_ENV = "MEMBRANE_COLUMN_SNAPSHOTS"  # "off": no snapshot is read or written
SNAPSHOT_MIN_ROWS = 50_000


def snapshot_dir(store: Store) -> Path | None:
    """Where a store's persisted column snapshot lives: a SQLite file's in ``<file>-columns/``
    beside it, a server's in ``$MEMBRANE_HOME/column-snapshots/`` (else ~/.membrane), named by
    the store's id; None for an in-memory store, or when $MEMBRANE_COLUMN_SNAPSHOTS is off."""
    if os.environ.get(SNAPSHOT_ENV, "").strip().lower() in ("off", "0", "no", "false"):
        return None
    if store.is_sqlite:
        path = store._file_path
        return None if path is None else path.with_name(path.name + "-columns")
    home = os.environ.get("MEMBRANE_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".membrane") / "column-snapshots"


def _columns_from(header: dict, columns: dict[str, np.ndarray], ids: list[str]) -> _Columns:
    """Buffers (with spare capacity) of a verified snapshot file's columns, its codes checked
    against its vocabularies; ValueError when anything does not fit."""
    n = len(ids)
    scope_names = header["scope_names"]
    if (not isinstance(scope_names, list) or not scope_names or scope_names[0] != ""
            or not all(isinstance(x, str) for x in scope_names) or len(set(scope_names)) != len(scope_names)):
        raise ValueError("malformed scope names")
    tag_sets = TagSets.of(header["tag_sets"])
    checks = (("scope_code", len(scope_names)), ("tagset", len(tag_sets.texts)), ("type_code", len(TYPE_NAMES)),
              ("curve", 8), ("policy", len(POLICY_CODES)), ("sens_level", _LEVEL_SLOTS - 1))
    for name, bound in checks:
        col = columns[name]
        if n and (int(col.min()) < (-1 if name == "sens_level" else 0) or int(col.max()) >= bound):
            raise ValueError(f"{name} codes out of range")
    custom = {}
    for row, points in header["custom"]:
        if not 0 <= int(row) < n:
            raise ValueError("custom curve of no row")
        custom[int(row)] = tuple((float(t), float(v)) for t, v in points)
    capacity = max(16, int(n * _GROWTH))
    buffers = {name: np.empty(capacity, dtype=dtype) for name, dtype in _DTYPES.items()}
    for name, col in columns.items():
        buffers[name][:n] = col
    buffers["ids"][:n] = ids
    v = {name: buf[:n] for name, buf in buffers.items()}
    v["gate"][:] = np.where(v["alive"], gate_codes(v["type_code"], v["sens_level"], v["scope_code"]), DEAD)
    v["path"][:] = decay_path(v["curve"], v["pinned"], v["max_age"])
    return _Columns(buffers, n, scope_names, custom, None, tag_sets)


def _ref_counts(cache: ColumnCache, names: set[str]) -> dict[str, int]:
    """Reference counts of the cache's snapshot, its decay columns and, per name, the buffer and
    the snapshot's view of it (the same code measures ``_OWN_REFS``, so the counts compare)."""
    snap = cache._snapshot
    cols = cache._columns
    out = {"snapshot": sys.getrefcount(snap), "decay": sys.getrefcount(snap.decay)}
    for name in names:
        out[name] = sys.getrefcount(cols.buffers[name])
        out["view:" + name] = sys.getrefcount(cols.views[name])
    return out


_OWN_REFS: dict[str, int] = {}
# Reference counts tell who holds an object only on CPython with its GIL (a free-threaded build
# counts references per thread, other interpreters have none): elsewhere the cache always copies.
_REFCOUNTS_TELL = (sys.implementation.name == "cpython" and hasattr(sys, "getrefcount")
                   and getattr(sys, "_is_gil_enabled", lambda: True)())


def _own_refs(names: set[str]) -> dict[str, int]:
    """``_ref_counts`` of a cache whose snapshot nobody else holds: one made here, on one row."""
    if not _OWN_REFS:
        buffers = {name: np.zeros(1, dtype=dtype) for name, dtype in _DTYPES.items()}
        cache = ColumnCache(None, snapshots=None)  # type: ignore[arg-type]
        cache._publish(_Columns(buffers, 1, [""], {}, {}), 0)
        _OWN_REFS.update(_ref_counts(cache, set(_DTYPES)))
    out = {"snapshot": _OWN_REFS["snapshot"], "decay": _OWN_REFS["decay"]}
    for name in names:
        out[name] = _OWN_REFS[name]
        out["view:" + name] = _OWN_REFS["view:" + name]
    return out
