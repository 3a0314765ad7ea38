"""Salience over time, SPEC 2: S(t) in closed form from each record's anchor.

One implementation, vectorized over records and over time grids; the per-record function is a
thin wrapper so the rule lives in exactly one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np

from .schema import MemoryRecord, to_epoch

CURVE_CODES = {"exponential": 0, "linear": 1, "custom": 2}
PRUNE_THRESHOLD = 0.001  # SPEC 6: prune takes records whose S(as_of) is below this


@dataclass(frozen=True)
class DecayColumns:
    """What S(t) needs, one entry per record (epoch seconds for instants)."""

    anchor_salience: np.ndarray
    anchor_at: np.ndarray
    created_at: np.ndarray
    curve: np.ndarray  # CURVE_CODES
    half_life: np.ndarray
    min_salience: np.ndarray
    max_age: np.ndarray
    pinned: np.ndarray
    # Custom profiles: row index -> points; rows without an entry decay exponentially.
    custom_points: dict[int, tuple[tuple[float, float], ...]]

    def __len__(self) -> int:
        return len(self.anchor_salience)


def _custom_factor(points: tuple[tuple[float, float], ...], delta: np.ndarray) -> np.ndarray:
    xs = np.array([p[0] for p in points], dtype=float)
    ys = np.array([p[1] for p in points], dtype=float)
    return np.interp(delta, xs, ys)  # clamps: flat after the last point


def salience_at(cols: DecayColumns, t: float | np.ndarray) -> np.ndarray:
    """S(t) for every record. ``t`` is epoch seconds: a scalar, or an array that broadcasts
    against the records (e.g. shape (T, 1) for a time grid gives a (T, N) result)."""
    t = np.asarray(t, dtype=float)
    s_a = cols.anchor_salience
    delta = np.maximum(0.0, t - cols.anchor_at)
    h = cols.half_life
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        factor = np.where(
            cols.curve == 1,
            np.maximum(0.0, 1.0 - delta / (2.0 * h)),
            np.exp2(-delta / h),
        )
    if cols.custom_points:
        factor = np.array(factor, dtype=float, copy=True)
        factor_b = np.broadcast_to(factor, np.broadcast_shapes(factor.shape, s_a.shape)).copy()
        delta_b = np.broadcast_to(delta, factor_b.shape)
        # One interpolation per distinct profile (stores share a handful), not one per record.
        groups: dict[tuple[tuple[float, float], ...], list[int]] = {}
        for row, points in cols.custom_points.items():
            groups.setdefault(points, []).append(row)
        for points, rows in groups.items():
            at = np.array(rows, dtype=np.int64)
            factor_b[..., at] = _custom_factor(points, delta_b[..., at])
        factor = factor_b
    decayed = np.maximum(s_a * factor, cols.min_salience)
    expired = (cols.max_age > 0) & ((t - cols.created_at) >= cols.max_age)
    value = np.where(s_a <= cols.min_salience, s_a, decayed)
    value = np.where(expired, 0.0, value)
    return np.where(cols.pinned, s_a, value)


def columns_of(records: list[MemoryRecord], anchors: list[tuple[float, float]] | None = None) -> DecayColumns:
    """Decay columns for in-memory records. ``anchors`` gives (S_a, a) per record; by default the
    anchor is read from the record's lifecycle, else (salience, updated_at) as on import."""
    n = len(records)
    cols = {k: np.empty(n) for k in ("s", "a", "c", "h", "m", "x")}
    curve = np.empty(n, dtype=np.int8)
    pinned = np.empty(n, dtype=bool)
    custom: dict[int, tuple[tuple[float, float], ...]] = {}
    for i, r in enumerate(records):
        decay = r.lifecycle.decay
        s_a, a = anchors[i] if anchors else anchor_of(r)
        cols["s"][i], cols["a"][i] = s_a, a
        cols["c"][i] = to_epoch(r.created_at)
        cols["h"][i] = decay.half_life_seconds
        cols["m"][i] = decay.min_salience
        cols["x"][i] = decay.max_age_seconds
        curve[i] = CURVE_CODES[decay.curve.value]
        pinned[i] = r.lifecycle.pinned
        if curve[i] == 2 and decay.points:
            custom[i] = tuple((float(x), float(y)) for x, y in decay.points)
    return DecayColumns(cols["s"], cols["a"], cols["c"], curve, cols["h"], cols["m"], cols["x"], pinned, custom)


def anchor_of(record: MemoryRecord) -> tuple[float, float]:
    """(S_a, a) of a record as read from JSON: the extension fields when both are present,
    else (salience, updated_at) (SPEC 2)."""
    lc = record.lifecycle
    if lc.anchor_salience is not None and lc.anchor_at is not None:
        return lc.anchor_salience, to_epoch(lc.anchor_at)
    return record.salience, to_epoch(record.updated_at)


def salience_of(record: MemoryRecord, when: datetime, anchor: tuple[float, float] | None = None) -> float:
    """S(when) of one record."""
    cols = columns_of([record], [anchor] if anchor else None)
    return float(salience_at(cols, to_epoch(when))[0])


def time_below(record: MemoryRecord, threshold: float, start: datetime, horizon_seconds: float,
               steps: int = 2048, anchor: tuple[float, float] | None = None) -> float | None:
    """Epoch seconds of the first instant in [start, start + horizon] at which S(t) < threshold,
    found on a grid and refined by bisection; None when it stays at or above it."""
    cols = columns_of([record], [anchor] if anchor else None)
    t0 = to_epoch(start)
    grid = t0 + np.linspace(0.0, horizon_seconds, steps)
    values = salience_at(cols, grid[:, None])[:, 0]
    below = np.nonzero(values < threshold)[0]
    if len(below) == 0:
        return None
    i = int(below[0])
    if i == 0:
        return t0
    lo, hi = grid[i - 1], grid[i]
    for _ in range(50):
        mid = (lo + hi) / 2
        if salience_at(cols, mid)[0] < threshold:
            hi = mid
        else:
            lo = mid
    return float(hi)


def take(cols: DecayColumns, rows: np.ndarray) -> DecayColumns:
    """The decay columns of a subset of records (``rows``: ascending indices into ``cols``,
    repeats allowed)."""
    custom: dict[int, tuple[tuple[float, float], ...]] = {}
    if cols.custom_points:
        points = cols.custom_points
        keys = np.fromiter(points.keys(), dtype=np.int64, count=len(points))
        lo = np.searchsorted(rows, keys, side="left")
        hi = np.searchsorted(rows, keys, side="right")
        taken = np.flatnonzero(hi > lo)
        if len(taken) and np.all(hi[taken] - lo[taken] == 1):  # the usual case: no repeated rows
            custom = dict(zip(lo[taken].tolist(), [points[k] for k in keys[taken].tolist()]))
        else:
            for key, start, stop in zip(keys[taken].tolist(), lo[taken].tolist(), hi[taken].tolist()):
                for k in range(start, stop):  # every position of the row (repeats too)
                    custom[k] = points[key]
    return DecayColumns(
        cols.anchor_salience[rows], cols.anchor_at[rows], cols.created_at[rows], cols.curve[rows],
        cols.half_life[rows], cols.min_salience[rows], cols.max_age[rows], cols.pinned[rows], custom,
    )
