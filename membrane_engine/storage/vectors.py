"""Records' ranking vectors as stored (SPEC 9): the ``record_vectors`` table's blob format, and
``VectorIndex``, the vectors held in memory aligned with the column cache's rows, filled from
the table and, for records without one, computed by the ranking provider (``rules.ranking``)
and written back."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from membrane_engine.model.records import MemoryRecord
from membrane_engine.rules.ranking import Embedder, try_embed_records

# Stored at half precision: a unit vector's components lose nothing that changes an order
# here (cosines move by < 1e-3), and a million records' vectors take 384 MB less to write.
VECTOR_DTYPE = np.dtype("<f2")


def to_blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=VECTOR_DTYPE).tobytes()


def from_blob(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=VECTOR_DTYPE).astype(np.float32)


# --------------------------------------------------------------------------- vectors for queries


class VectorIndex:
    """Unit vectors aligned with the column cache's rows, filled from the store's
    ``record_vectors`` table and, for rows without a stored vector (a store that predates
    vectors, a provider whose name changed, a provider that failed when they were written),
    computed from the records' text and written back. A new full load of the column cache
    (other rows) starts it anew.

    A cold start reads every stored vector in one scan (``load``; ``Membrane.warm`` does it
    with the column cache's load). Stored at half precision, held here as float32: numpy has no
    fast half-precision arithmetic, and converting on every request would cost more than the
    scan itself (a request scans the rows it ranks; both times in bench/README.md)."""

    def __init__(self, store: Any, embedder: Embedder):
        self.store = store
        self.embedder = embedder
        self._lock = threading.Lock()
        self._row_of: Any = None
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._known = np.zeros(0, dtype=bool)  # row looked up (its vector may still be zeros)
        self._has = np.zeros(0, dtype=bool)  # row has a (non-zero) vector
        self._pos = np.zeros(0, dtype=np.int64)  # row -> its vector's place in the matrix (``_align``)
        self._loaded: Any = None  # the cache load whose stored vectors were all read

    def fill(self, snap: Any) -> None:
        """Vectors for every live record of ``snap`` that has none yet."""
        self.cosines(snap, np.flatnonzero(snap.alive), np.zeros(1, dtype=np.float32))

    def load(self, snap: Any) -> None:
        """Every stored vector of ``snap``'s rows read in one scan (once per load of the column
        cache), so the first ranked request does not wait for it."""
        with self._lock:
            self._align(snap)
            if self._loaded is not cache_load(snap):
                self._load_all(snap)

    def forget(self, ids: Sequence[str]) -> None:
        """Rows of ``ids`` are read again (or computed) when next asked: their text changed."""
        with self._lock:
            row_of = self._row_of
            if row_of is None:
                return
            rows = [row_of[rid] for rid in ids if rid in row_of and row_of[rid] < len(self._known)]
            self._known[rows] = False

    def cosines(self, snap: Any, rows: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(cosine with ``query``, has a vector) for ``rows`` of ``snap``."""
        with self._lock:
            self._align(snap)
            missing = rows[~self._known[rows]]
            if len(missing):
                self._fill(snap, missing)
            if self._matrix.shape[1] != len(query):
                return np.zeros(len(rows), dtype=np.float32), np.zeros(len(rows), dtype=bool)
            return _dot_at(self._matrix, self._pos[rows], query), self._has[rows]

    def _align(self, snap: Any) -> None:
        """The index follows ``snap``'s load of the column cache (rows beyond it: unknown)."""
        if self._row_of is not cache_load(snap):  # a full reload of the cache: other rows
            self._row_of = cache_load(snap)
            self._matrix = np.zeros((0, 0), dtype=np.float32)
            self._known = np.zeros(0, dtype=bool)
            self._has = np.zeros(0, dtype=bool)
            self._pos = np.zeros(0, dtype=np.int64)
            self._loaded = None
        n = len(snap.ids)
        if len(self._known) < n:
            old = len(self._known)
            grow = n - old
            self._known = np.concatenate([self._known, np.zeros(grow, dtype=bool)])
            self._has = np.concatenate([self._has, np.zeros(grow, dtype=bool)])
            if old == 0:
                # Vectors by layer, then by gate (the cache's row order): the rows a request ranks
                # (a context's layers, scopes and levels) are then a few long runs of the matrix,
                # multiplied where they lie instead of gathered row by row.
                order = np.lexsort((snap.gate[:n], snap.type_code[:n]))
                self._pos = np.empty(n, dtype=np.int64)
                self._pos[order] = np.arange(n)
            else:  # rows added since go after
                self._pos = np.concatenate([self._pos, np.arange(old, n, dtype=np.int64)])

    def _grow(self, n: int, dim: int) -> None:
        if self._matrix.shape[1] != dim:
            self._matrix = np.zeros((n, dim), dtype=np.float32)
            self._known[:] = False
            self._has[:] = False
        elif len(self._matrix) < n:
            grown = np.zeros((max(n, int(1.25 * len(self._matrix))), dim), dtype=np.float32)
            grown[:len(self._matrix)] = self._matrix
            self._matrix = grown

    BULK_LOAD = 20_000  # more rows missing than this: read the whole table in one scan

    def _fill(self, snap: Any, rows: np.ndarray) -> None:
        if len(rows) > self.BULK_LOAD and self._loaded is not cache_load(snap):  # a cold start
            self._load_all(snap)
            rows = rows[~self._known[rows]]
            if not len(rows):
                return
        ids = [str(x) for x in snap.ids[rows]]
        stored = self.store.peeking(lambda conn: self.store.vectors_of(conn, ids, self.embedder.name))
        absent = [rid for rid in ids if rid not in stored]
        if absent:
            stored.update(self._compute(absent))
        dim = self._matrix.shape[1] or next((len(v) for v in stored.values()), 0)
        if dim:
            self._grow(len(snap.ids), dim)
            for row, rid in zip(rows.tolist(), ids):
                v = stored.get(rid)
                if v is not None and len(v) == dim:
                    self._matrix[self._pos[row]] = v
                    self._has[row] = bool(v.any())
        self._known[rows] = True

    def _load_all(self, snap: Any) -> None:
        """Every stored vector of this provider, chunk by chunk from the driver: each chunk's
        bytes joined into one buffer, read as one float16 matrix and put in place (converted to
        float32 on the way); ids are looked up in the cache's shared id -> row dict, in C."""
        n = len(snap.ids)
        rows_of = cache_load(snap)
        if not isinstance(rows_of, dict):
            rows_of = dict(snap.row_of.items())
        look_up = rows_of.get
        with self.store.read() as conn:
            for chunk in self.store.vector_chunks(conn, self.embedder.name):
                ids, blobs = zip(*chunk)
                del chunk
                dim = self._matrix.shape[1] or len(blobs[0]) // VECTOR_DTYPE.itemsize
                if not dim:
                    continue
                self._grow(n, dim)
                width = dim * VECTOR_DTYPE.itemsize
                if set(map(len, blobs)) != {width}:  # a provider's vectors share one width
                    kept = [k for k, b in enumerate(blobs) if len(b) == width]
                    ids, blobs = [ids[k] for k in kept], [blobs[k] for k in kept]
                    if not kept:
                        continue
                at = np.fromiter(map(look_up, ids, itertools.repeat(-1, len(ids))), dtype=np.int64, count=len(ids))
                half = np.frombuffer(b"".join(blobs), dtype=VECTOR_DTYPE).reshape(len(blobs), dim)
                del ids, blobs
                ok = (at >= 0) & (at < n)
                if not ok.all():
                    at, half = at[ok], half[ok]
                self._matrix[self._pos[at]] = half
                words = half.view(np.uint8).reshape(len(half), -1)
                self._has[at] = words.any(axis=1)
                self._known[at] = True
        self._loaded = cache_load(snap)

    def _compute(self, ids: list[str]) -> dict[str, np.ndarray]:
        """Vectors of stored records that have none yet, written back for the next process."""
        texts = self.store.peeking(lambda conn: self.store.docs_of(conn, ids))
        records = []
        for rid in ids:
            doc = texts.get(rid)
            if doc is None:
                continue
            try:
                records.append(MemoryRecord.model_validate_json(doc))
            except Exception:  # a record the engine cannot read has no text to rank by
                continue
        vectors = try_embed_records(self.embedder, records) if records else None
        if vectors is None:
            return {}
        out = {r.id: v for r, v in zip(records, vectors)}
        self.store.save_vectors(out, self.embedder.name)
        return out


_GAP = 256  # places between two wanted vectors up to which the ones between are multiplied too


def _matvec(m: np.ndarray, v: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``m @ v`` in numpy's own vectorized loop, on this thread: BLAS's matrix-vector product
    hands a few thousand rows to threads that spin while they wait, and on a busy machine that
    cost many times the CPU time (bench/README.md)."""
    return np.einsum("ij,j->i", m, v, out=out)


def _dot_at(matrix: np.ndarray, at: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``matrix[at] @ query``, multiplying runs of the matrix where they lie: the wanted places
    are put in order, cut where two lie more than _GAP apart, and each stretch between is one
    matrix-vector product over a view (the few unwanted vectors inside cost less than copying
    the wanted ones out, which reads memory at random)."""
    out = np.empty(len(at), dtype=np.float32)
    if not len(at):
        return out
    size = len(matrix)
    if len(at) * 64 > size:  # put in order by marking: one pass, no sort
        mark = np.zeros(size, dtype=bool)
        mark[at] = True
        ordered = np.flatnonzero(mark)
        slot = np.empty(size, dtype=np.int64)
        slot[ordered] = np.arange(len(ordered))
        back = slot[at]  # each wanted place's index in ``ordered`` (repeats share one)
    else:
        ordered, back = np.unique(at, return_inverse=True)
    values = np.empty(len(ordered), dtype=np.float32)
    cuts = np.flatnonzero(np.diff(ordered) > _GAP) + 1
    starts = np.concatenate(([0], cuts)).tolist()
    ends = np.concatenate((cuts, [len(ordered)])).tolist()
    for a, b in zip(starts, ends):
        lo, hi = int(ordered[a]), int(ordered[b - 1]) + 1
        if hi - lo == b - a:
            _matvec(matrix[lo:hi], query, values[a:b])
        else:
            values[a:b] = _matvec(matrix[lo:hi], query)[ordered[a:b] - lo]
    out[:] = values[back]
    return out


def cache_load(snap: Any) -> Any:
    """What identifies the column cache's load a snapshot belongs to (rows are stable within it)."""
    return getattr(snap.row_of, "load", snap.row_of)
