"""SPEC 2: salience over time, in closed form from each record's anchor."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from membrane_engine import Membrane
from membrane_engine.errors import NotFoundError, ValidationError
from membrane_engine.rules.salience import anchor_of, columns_of, salience_at, salience_of
from membrane_engine.model.records import to_epoch, validate_record

from tests.support.records import DAY, HOUR, T0, ago, later, rec


def s_at(m: Membrane, rid: str, seconds_after_t0: float) -> float:
    return m.salience_at(rid, later(seconds_after_t0))


# --------------------------------------------------------------------------- curves


@pytest.mark.parametrize("dt, expected", [
    (-DAY, 0.8),                 # before the anchor: Δ = 0
    (0, 0.8),
    (DAY / 2, 0.8 * 2 ** -0.5),
    (DAY, 0.4),
    (2 * DAY, 0.2),
    (10 * DAY, 0.8 * 2 ** -10),
])
def test_exponential(lite, dt, expected):
    lite.import_records([rec("e", salience=0.8, curve="exponential", half_life=DAY)])
    assert s_at(lite, "e", dt) == pytest.approx(expected, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("dt, expected", [
    (0, 1.0), (DAY / 2, 0.75), (DAY, 0.5), (1.5 * DAY, 0.25), (2 * DAY, 0.0), (3 * DAY, 0.0),
])
def test_linear_halves_at_h_and_reaches_zero_at_2h(lite, dt, expected):
    lite.import_records([rec("l", salience=1.0, curve="linear", half_life=DAY)])
    assert s_at(lite, "l", dt) == pytest.approx(expected, abs=1e-12)


def test_linear_scales_with_anchor_salience(lite):
    lite.import_records([rec("l", salience=0.6, curve="linear", half_life=1000)])
    assert s_at(lite, "l", 1000) == pytest.approx(0.3)
    assert s_at(lite, "l", 500) == pytest.approx(0.45)
    assert s_at(lite, "l", 1999) == pytest.approx(0.6 * (1 - 1999 / 2000))
    assert s_at(lite, "l", 2000) == 0.0


POINTS = [[0, 1], [3600, 0.5], [7200, 0.2]]


@pytest.mark.parametrize("dt, factor", [
    (0, 1.0), (1800, 0.75), (3600, 0.5), (5400, 0.35), (7200, 0.2), (7200 + 1, 0.2), (100 * DAY, 0.2),
])
def test_custom_points_interpolate_and_hold_flat(lite, dt, factor):
    lite.import_records([rec("c", salience=0.9, curve="custom", half_life=60, points=POINTS)])
    assert s_at(lite, "c", dt) == pytest.approx(0.9 * factor, abs=1e-12)


@pytest.mark.parametrize("dt", [0, 600, HOUR, 5 * HOUR, 3 * DAY])
def test_custom_without_points_is_exponential(lite, dt):
    lite.import_records([rec("c", salience=0.9, curve="custom", half_life=HOUR),
                         rec("e", salience=0.9, curve="exponential", half_life=HOUR)])
    assert s_at(lite, "c", dt) == pytest.approx(0.9 * 2 ** (-dt / HOUR), abs=1e-15)
    assert s_at(lite, "c", dt) == s_at(lite, "e", dt)


def test_custom_points_must_start_at_0_1_and_not_increase():
    for bad in ([[10, 1], [20, 0.5]], [[0, 1], [10, 0.5], [20, 0.7]], [[0, 1], [10, 0.5], [5, 0.2]], [[0, 1], [10, 1.5]]):
        with pytest.raises(ValidationError) as info:
            validate_record(rec("c", curve="custom", points=bad))
        assert "lifecycle.decay.points" in str(info.value)


# --------------------------------------------------------------------------- floor, pinned, max_age


def test_min_salience_floor(lite):
    lite.import_records([
        rec("f", salience=1.0, half_life=HOUR, min_salience=0.3),
        rec("lin", salience=1.0, curve="linear", half_life=HOUR, min_salience=0.3),
        rec("below", salience=0.2, half_life=HOUR, min_salience=0.3),
        rec("equal", salience=0.3, half_life=HOUR, min_salience=0.3),
        rec("zero", salience=0.0, half_life=HOUR, min_salience=0.3),
    ])
    assert s_at(lite, "f", HOUR) == pytest.approx(0.5)
    assert s_at(lite, "f", 10 * HOUR) == 0.3
    assert s_at(lite, "lin", 2 * HOUR) == 0.3
    for dt in (0, HOUR, 100 * DAY):
        # S_a <= min stays S_a: decay never raises a value
        assert s_at(lite, "below", dt) == 0.2
        assert s_at(lite, "equal", dt) == 0.3
        assert s_at(lite, "zero", dt) == 0.0


def test_pinned_holds_anchor_even_past_max_age(lite):
    lite.import_records([
        rec("p", salience=0.7, half_life=60, pinned=True, max_age=HOUR),
        rec("p-lin", salience=0.4, curve="linear", half_life=60, pinned=True),
    ])
    for dt in (-HOUR, 0, 59, HOUR, 1000 * DAY):
        assert s_at(lite, "p", dt) == 0.7
        assert s_at(lite, "p-lin", dt) == 0.4


def test_max_age_boundary(lite):
    created = T0
    lite.import_records([
        rec("m", salience=1.0, half_life=DAY, max_age=HOUR, created_at=created),
        rec("m-pinned-floor", salience=0.2, min_salience=0.5, max_age=HOUR, created_at=created),
        rec("m-anchor-later", salience=1.0, half_life=DAY, max_age=HOUR, created_at=created,
            updated_at=later(2 * HOUR)),
    ])
    assert s_at(lite, "m", HOUR - 1) == pytest.approx(2 ** (-(HOUR - 1) / DAY))
    assert s_at(lite, "m", HOUR) == 0.0       # exactly at the boundary
    assert s_at(lite, "m", HOUR + 1) == 0.0
    assert s_at(lite, "m-pinned-floor", HOUR - 1) == 0.2
    assert s_at(lite, "m-pinned-floor", HOUR) == 0.0  # max_age beats the floor
    # max_age counts from created_at, not from the anchor
    assert s_at(lite, "m-anchor-later", HOUR) == 0.0


# --------------------------------------------------------------------------- anchors


def test_anchor_from_extension_fields(mem):
    mem.import_records([rec("x", salience=0.1, updated_at=T0, anchor=(0.6, ago(DAY)), half_life=DAY)])
    assert mem.salience_at("x", T0) == pytest.approx(0.3)
    assert mem.salience_at("x", later(DAY)) == pytest.approx(0.15)
    got = mem.get("x", as_of=T0)
    assert got.salience == pytest.approx(0.3)
    assert got.lifecycle.anchor_salience == 0.6
    assert got.lifecycle.anchor_at == ago(DAY)


def test_anchor_without_extension_fields_is_salience_at_updated_at(mem):
    mem.import_records([rec("x", salience=0.8, created_at=ago(10 * DAY), updated_at=ago(DAY), half_life=DAY)])
    assert mem.salience_at("x", T0) == pytest.approx(0.4)
    got = mem.get("x", as_of=T0)
    assert got.lifecycle.anchor_salience == 0.8
    assert got.lifecycle.anchor_at == ago(DAY)


def test_half_an_anchor_falls_back_to_salience_and_updated_at(mem):
    only_s = rec("s", salience=0.8, updated_at=ago(DAY), half_life=DAY)
    only_s["lifecycle"]["anchor_salience"] = 0.2
    only_a = rec("a", salience=0.8, updated_at=ago(DAY), half_life=DAY)
    only_a["lifecycle"]["anchor_at"] = "2020-01-01T00:00:00Z"
    mem.import_records([only_s, only_a])
    assert mem.salience_at("s", T0) == pytest.approx(0.4)
    assert mem.salience_at("a", T0) == pytest.approx(0.4)


def test_export_writes_s_of_export_time_and_the_anchor(mem, tmp_path):
    mem.import_records([rec("x", salience=0.8, updated_at=ago(DAY), half_life=DAY, curve="linear")])
    out = tmp_path / "x.json"
    mem.export_file(out, as_of=later(DAY / 2))
    doc = json.loads(out.read_text())[0]
    assert doc["salience"] == pytest.approx(0.8 * (1 - 1.5 / 2))
    assert doc["lifecycle"]["anchor_salience"] == 0.8
    assert doc["lifecycle"]["anchor_at"] == "2026-05-31T12:00:00Z"
    assert doc["updated_at"] == "2026-05-31T12:00:00Z"


def test_reads_carry_s_of_as_of(lite):
    lite.import_records([rec("x", salience=0.8, half_life=DAY)])
    assert lite.get("x", as_of=later(DAY)).salience == pytest.approx(0.4)
    assert lite.get("x").salience == pytest.approx(0.8)  # the clock stands at T0


# --------------------------------------------------------------------------- Membrane.salience_at, vectorized forms


def test_salience_at_unknown_id(lite):
    with pytest.raises(NotFoundError):
        lite.salience_at("nope", T0)


MIXED = [
    rec("exp", salience=0.9, half_life=HOUR),
    rec("lin", salience=0.7, curve="linear", half_life=2 * HOUR),
    rec("cus", salience=1.0, curve="custom", half_life=HOUR, points=[[0, 1], [1800, 0.4], [9000, 0.1]]),
    rec("cus-np", salience=0.5, curve="custom", half_life=3 * HOUR),
    rec("floor", salience=0.9, half_life=HOUR, min_salience=0.25),
    rec("pin", salience=0.33, pinned=True),
    rec("age", salience=1.0, half_life=10 * HOUR, max_age=4 * HOUR),
    rec("anch", salience=0.05, anchor=(0.95, later(HOUR)), curve="linear", half_life=HOUR),
]
GRID = [ago(HOUR), T0, later(900), later(HOUR), later(2.5 * HOUR), later(4 * HOUR), later(DAY)]


def test_vectorized_grid_equals_per_record_values():
    records = [validate_record(d) for d in MIXED]
    cols = columns_of(records)
    grid = np.array([to_epoch(t) for t in GRID])[:, None]
    table = salience_at(cols, grid)
    assert table.shape == (len(GRID), len(records))
    for j, r in enumerate(records):
        for i, t in enumerate(GRID):
            assert table[i, j] == salience_of(r, t)
    # and the per-record values follow the SPEC formulas
    by_id = {r.id: r for r in records}
    assert salience_of(by_id["cus"], later(900)) == pytest.approx(1.0 - 0.6 * 0.5)
    assert salience_of(by_id["anch"], later(2.5 * HOUR)) == pytest.approx(0.95 * (1 - 1.5 / 2))
    assert anchor_of(by_id["anch"]) == (0.95, to_epoch(later(HOUR)))


def test_membrane_salience_at_and_curves_match_the_formula(mem):
    mem.import_records(MIXED)
    records = {d["id"]: validate_record(d) for d in MIXED}
    ids = [d["id"] for d in MIXED][::-1]  # any order
    curves = mem.salience_curves(ids, GRID)
    assert list(curves) == ids
    for rid in ids:
        expected = [salience_of(records[rid], t) for t in GRID]
        assert curves[rid] == pytest.approx(expected, abs=1e-15)
        assert [mem.salience_at(rid, t) for t in GRID] == pytest.approx(expected, abs=1e-15)
        for t in GRID:
            assert mem.get(rid, as_of=t).salience == pytest.approx(salience_of(records[rid], t), abs=1e-15)
    assert curves["age"][GRID.index(later(4 * HOUR))] == 0.0
    assert curves["pin"] == [0.33] * len(GRID)
    with pytest.raises(NotFoundError):
        mem.salience_curves(["exp", "ghost"], GRID)


def test_no_compounding_over_repeated_reads(lite):
    lite.import_records([rec("x", salience=1.0, half_life=DAY)])
    for _ in range(5):
        lite.get("x", as_of=later(DAY))
        lite.metrics(as_of=later(3 * DAY))
    assert lite.salience_at("x", later(DAY)) == pytest.approx(0.5)
    assert lite.salience_at("x", later(2 * DAY)) == pytest.approx(0.25)
    assert math.isclose(lite.get("x", as_of=later(2 * DAY)).salience, 0.25)


def test_curves_with_a_repeated_custom_id(lite):
    lite.import_records(MIXED)
    curves = lite.salience_curves(["cus", "exp", "cus"], GRID)
    expected = [salience_of(validate_record(MIXED[2]), t) for t in GRID]
    assert curves["cus"] == pytest.approx(expected, abs=1e-15)


# --------------------------------------------------------------------------- the fast path


def _random_columns(rng: np.random.Generator, n: int):
    from membrane_engine.rules.salience import DecayColumns, decay_path

    t0 = 1.78e9
    curve = rng.choice([0, 0, 0, 1, 2], n).astype(np.int8)
    pinned = rng.random(n) < 0.1
    floor = np.where(rng.random(n) < 0.3, rng.choice([0.05, 0.3, 0.9], n), 0.0)
    max_age = np.where(rng.random(n) < 0.1, rng.choice([60.0, 86400.0], n), 0.0)
    profiles = [((0.0, 1.0), (3600.0, 0.5), (7200.0, 0.2)), ((0.0, 1.0), (60.0, 0.0))]
    custom = {i: profiles[i % 2] for i in np.flatnonzero(curve == 2).tolist()}
    s_a = np.where(rng.random(n) < 0.1, rng.choice([0.0, 0.05, 1.0], n), rng.random(n) * 2)
    return DecayColumns(
        s_a, t0 + rng.normal(0, 3e6, n), t0 - rng.random(n) * 3e7, curve,
        rng.choice([1.0, 60.0, 3600.0, 86400.0, 3e7], n), floor, max_age, pinned, custom,
        decay_path(curve, pinned, max_age),
    )


@pytest.mark.parametrize("seed", range(5))
def test_salience_rows_is_bit_for_bit_salience_at_of_the_rows(seed):
    from membrane_engine.rules.salience import salience_rows, take

    rng = np.random.default_rng(seed)
    cols = _random_columns(rng, 5000)
    assert set(np.unique(cols.path).tolist()) == {0, 1, 2}
    rows = np.sort(rng.choice(5000, 2000, replace=False))
    for t in (1.78e9, 1.78e9 + 86400 * rng.random(), 1.7e9, 1.9e9):
        fast = salience_rows(cols, rows, t)
        slow = salience_at(take(cols, rows), t)
        assert np.array_equal(fast, slow), t  # exact: the page's order depends on ties


def test_custom_curves_take_keeps_repeated_rows_and_renumbers():
    from membrane_engine.rules.salience import CustomCurves

    a, b = ((0.0, 1.0), (10.0, 0.5)), ((0.0, 1.0), (20.0, 0.0))
    curves = CustomCurves.of({3: a, 7: b, 9: a})
    assert dict(curves) == {3: a, 7: b, 9: a} and len(curves.profiles) == 2
    assert dict(curves.take(np.array([1, 3, 3, 8, 9]))) == {1: a, 2: a, 4: a}
    assert dict(curves.take(np.array([0, 7]))) == {1: b}
    assert not curves.take(np.array([0, 1, 2]))


@settings(max_examples=300, deadline=None)
@given(custom=st.dictionaries(st.integers(0, 400), st.sampled_from([0, 1, 2]), max_size=120),
       rows=st.lists(st.integers(0, 400), max_size=12), repeat_custom=st.booleans())
def test_custom_curves_take_of_a_few_rows_is_the_general_take(custom, rows, repeat_custom):
    """take() looks a few rows up among many curves, else every curve up among the rows: the
    same curves, positions and order either way (also from curves that a take made)."""
    from membrane_engine.rules.salience import CustomCurves

    shapes = (((0.0, 1.0), (10.0, 0.5)), ((0.0, 1.0), (20.0, 0.0)), ((0.0, 0.7), (5.0, 0.1)))
    curves = CustomCurves.of({r: shapes[k] for r, k in custom.items()})
    if repeat_custom and len(curves.rows):
        curves = curves.take(np.repeat(curves.rows, 2))  # each curve twice, at positions 0,1 / 2,3 / ...
    wanted = np.array(sorted(rows), dtype=np.int64)

    def general(c: CustomCurves) -> tuple:  # the one-pass take over every curve, as written before
        if not len(c.rows) or not len(wanted):
            return (), ()
        lo = np.searchsorted(wanted, c.rows, side="left")
        hi = np.searchsorted(wanted, c.rows, side="right")
        positions = [p for a, b in zip(lo.tolist(), hi.tolist()) for p in range(a, b)]
        profile = [k for k, a, b in zip(c.profile.tolist(), lo.tolist(), hi.tolist()) for _ in range(a, b)]
        return tuple(positions), tuple(profile)

    taken = curves.take(wanted)
    assert (tuple(taken.rows.tolist()), tuple(taken.profile.tolist())) == general(curves)
