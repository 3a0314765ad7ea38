"""The overview's chart-like tables (console/components/glance.py)."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pandas as pd

from console.components.glance import BLUES, counts_over_time, heat, tint


def day(d: int) -> float:
    return datetime(2026, 11, d, tzinfo=timezone.utc).timestamp()


def test_counts_over_time_fills_the_days_between() -> None:
    activity = [(day(1), "create", 3), (day(1), "reinforce", 1), (day(4), "reinforce", 2)]
    first, last, width, series = counts_over_time(activity)
    assert (first, last, width) == (date(2026, 11, 1), date(2026, 11, 4), 1)
    assert series == {"create": [3, 0, 0, 0], "reinforce": [1, 0, 0, 2]}


def test_counts_over_time_joins_days_into_at_most_the_bars_asked() -> None:
    activity = [(day(1), "revise", 1), (day(2), "revise", 1), (day(3), "revise", 5), (day(7), "delete", 4)]
    first, last, width, series = counts_over_time(activity, bars=3)
    assert width == 3  # seven days in bars of three: 1-3, 4-6, 7
    assert series == {"revise": [7, 0, 0], "delete": [0, 0, 4]}
    assert sum(map(sum, series.values())) == 11


def test_tint_darkens_with_the_count() -> None:
    assert tint(0, 10) == "" and tint(5, 0) == ""
    assert BLUES[1] in tint(1, 1000) and "color: #1f2937" in tint(1, 1000)
    assert BLUES[-1] in tint(1000, 1000) and "color: white" in tint(1000, 1000)
    steps = [BLUES.index(tint(n, 100).split(";")[0].split(": ")[1]) for n in (1, 30, 60, 100)]
    assert steps == sorted(steps) and len(set(steps)) == 4


def test_heat_tints_only_the_counted_columns() -> None:
    frame = pd.DataFrame({"type": ["semantic", "episodic"], "low": [10, 0], "high": [2, 1]})
    styles = heat(frame, ["low", "high"])._compute().ctx
    assert (0, 0) not in styles  # the type column keeps its look
    assert BLUES[-1] in styles[(0, 1)][0][1] and (1, 1) not in styles  # 10 of 10; 0: no tint
