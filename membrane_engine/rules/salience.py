"""Salience over time, SPEC 2: S(t) in closed form from each record's anchor.

One implementation, vectorized over records and over time grids; the per-record function is a
thin wrapper so the rule lives in exactly one place.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from membrane_engine.model.records import MemoryRecord, to_epoch

CURVE_CODES = {"exponential": 0, "linear": 1, "custom": 2}
PRUNE_THRESHOLD = 0.001  # SPEC 6: prune takes records whose S(as_of) is below this


Points = tuple[tuple[float, float], ...]


class CustomCurves(Mapping):
    """The custom decay profiles of a set of records: row -> points, held as arrays (the rows,
    sorted, and a profile number per row) so S(t) interpolates once per distinct profile and a
    subset is taken by ``searchsorted``, without a Python loop over the rows. Stores share a
    handful of profiles among thousands of rows."""

    __slots__ = ("rows", "profile", "profiles")

    def __init__(self, rows: np.ndarray, profile: np.ndarray, profiles: tuple[Points, ...]):
        self.rows = rows  # int64, strictly ascending (``take`` renumbers to distinct positions)
        self.profile = profile  # index into ``profiles``, aligned with ``rows``
        self.profiles = profiles

    @classmethod
    def of(cls, points_by_row: Mapping[int, Points]) -> "CustomCurves":
        if isinstance(points_by_row, CustomCurves):
            return points_by_row
        if not points_by_row:
            return EMPTY_CURVES
        items = sorted(points_by_row.items())
        numbers: dict[Points, int] = {}
        profile = np.fromiter((numbers.setdefault(p, len(numbers)) for _, p in items), dtype=np.int64, count=len(items))
        rows = np.fromiter((r for r, _ in items), dtype=np.int64, count=len(items))
        return cls(rows, profile, tuple(numbers))

    def take(self, rows: np.ndarray) -> "CustomCurves":
        """The curves of ``rows`` (ascending indices, repeats allowed), renumbered to positions in
        ``rows``."""
        if not len(self.rows) or not len(rows):
            return EMPTY_CURVES
        if len(rows) * 16 < len(self.rows):
            # A few rows (an explain, a page) out of many custom ones (1% of a 1M store): look
            # the rows up among the curves, not every curve among the rows.
            at = np.minimum(np.searchsorted(self.rows, rows), len(self.rows) - 1)
            positions = np.flatnonzero(self.rows[at] == rows)
            if not len(positions):
                return EMPTY_CURVES
            return CustomCurves(positions, self.profile[at[positions]], self.profiles)
        lo = np.searchsorted(rows, self.rows, side="left")
        hi = np.searchsorted(rows, self.rows, side="right")
        count = hi - lo
        hit = count > 0
        if not hit.any():
            return EMPTY_CURVES
        if count.max() == 1:  # the usual case: no repeated rows
            return CustomCurves(lo[hit], self.profile[hit], self.profiles)
        positions = np.concatenate([np.arange(a, b) for a, b in zip(lo[hit].tolist(), hi[hit].tolist())])
        return CustomCurves(positions, np.repeat(self.profile[hit], count[hit]), self.profiles)

    def groups(self) -> Iterator[tuple[Points, np.ndarray]]:
        """(points, rows) per distinct profile."""
        for k, points in enumerate(self.profiles):
            rows = self.rows[self.profile == k]
            if len(rows):
                yield points, rows

    def __getitem__(self, row: int) -> Points:
        i = int(np.searchsorted(self.rows, row))
        if i < len(self.rows) and self.rows[i] == row:
            return self.profiles[int(self.profile[i])]
        raise KeyError(row)

    def __iter__(self) -> Iterator[int]:
        return iter(self.rows.tolist())

    def __len__(self) -> int:
        return len(self.rows)


EMPTY_CURVES = CustomCurves(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), ())


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
    # Custom profiles: row -> points (a CustomCurves; a plain dict is converted); rows without
    # an entry decay exponentially.
    custom_points: CustomCurves
    # Optional: ``decay_path`` of each row, kept by the column cache (see ``salience_rows``).
    path: np.ndarray | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.custom_points, CustomCurves):
            object.__setattr__(self, "custom_points", CustomCurves.of(self.custom_points or {}))

    def __len__(self) -> int:
        return len(self.anchor_salience)


# How ``salience_rows`` evaluates a row (the column cache keeps one per row).
PATH_EXPONENTIAL, PATH_LINEAR, PATH_GENERAL = 0, 1, 2


def decay_path(curve: np.ndarray, pinned: np.ndarray, max_age: np.ndarray) -> np.ndarray:
    """PATH_EXPONENTIAL / PATH_LINEAR for unpinned rows of those curves without a maximum age
    (nearly every row), PATH_GENERAL for the rest (pinned, max age, custom curves)."""
    general = pinned | (max_age != 0) | ((curve != CURVE_CODES["exponential"]) & (curve != CURVE_CODES["linear"]))
    return np.where(general, PATH_GENERAL, np.where(curve == CURVE_CODES["linear"], PATH_LINEAR, PATH_EXPONENTIAL)
                    ).astype(np.int8)


def salience_rows(cols: DecayColumns, rows: np.ndarray, t: float) -> np.ndarray:
    """S(t) of ``rows`` (ascending indices into ``cols``) at one instant: the same values as
    ``salience_at(take(cols, rows), t)``, bit for bit, for less work. Exponential and linear
    rows that are neither pinned nor aged out (``cols.path``) need four columns and no masking
    by pinned or max age: on them those steps of ``salience_at`` are the identity. Only the
    few PATH_GENERAL rows go through the general formula."""
    if cols.path is None:
        return salience_at(take(cols, rows), t)
    t = float(t)
    path = cols.path[rows]
    s_a = cols.anchor_salience[rows]
    floor = cols.min_salience[rows]
    h = cols.half_life[rows]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        delta = np.maximum(0.0, t - cols.anchor_at[rows])
        factor = np.exp2(-delta / h)
        linear = np.flatnonzero(path == PATH_LINEAR)
        if len(linear):
            factor[linear] = np.maximum(0.0, 1.0 - delta[linear] / (2.0 * h[linear]))
        out = np.where(s_a <= floor, s_a, np.maximum(s_a * factor, floor))
    general = np.flatnonzero(path == PATH_GENERAL)
    if len(general):
        out[general] = salience_at(take(cols, rows[general]), t)
    return out


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
        for points, at in cols.custom_points.groups():
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
    return DecayColumns(
        cols.anchor_salience[rows], cols.anchor_at[rows], cols.created_at[rows], cols.curve[rows],
        cols.half_life[rows], cols.min_salience[rows], cols.max_age[rows], cols.pinned[rows], cols.custom_points.take(rows),
        None if cols.path is None else cols.path[rows],
    )
