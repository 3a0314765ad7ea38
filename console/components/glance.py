"""Tables that read as charts: counts tinted by size, bars and daily bars inside the cells.

The overview is the page a console opens on, so it draws with the table the page already
loads rather than a chart library: in Chromium, plotly's first chart on a page costs a large
part of the page's main-thread time, and each further one more (bench/README.md, "Why it is
fast").
Every number stays exact and readable in its cell."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pandas as pd

from console.components.colours import ACTION_COLORS, BLUES, BODY_TEXT, DARK_FROM, FALLBACK
from console.components.words import action_word


def tint(count: float, top: float) -> str:
    """The CSS of a cell holding ``count`` of at most ``top``: darker the larger (0: no tint)."""
    if not count or top <= 0:
        return ""
    step = min(len(BLUES) - 1, 1 + int((len(BLUES) - 1) * count / top * 0.999))
    return f"background-color: {BLUES[step]}; color: {'white' if step >= DARK_FROM else BODY_TEXT}"


def heat(frame: pd.DataFrame, columns: list[str]) -> "pd.io.formats.style.Styler":
    """``frame`` with its ``columns`` tinted by their share of the largest of them."""
    top = float(frame[columns].to_numpy().max()) if len(frame) and columns else 0.0
    return frame.style.map(lambda v: tint(v, top), subset=columns).format("{:,}", subset=columns)


def action_colors(frame: pd.DataFrame, column: str = "action") -> "pd.io.formats.style.Styler":
    """``frame`` with each action's name in its colour, the one it has on every chart."""
    return frame.style.map(lambda a: f"color: {ACTION_COLORS.get(str(a), FALLBACK)}; font-weight: 600",
                           subset=[column])


def counts_over_time(activity: list[tuple[float, str, int]], bars: int = 40) -> tuple[date, date, int, dict[str, list[int]]]:
    """(first day, last day, days per bar, each action's counts bar by bar, zeros included) of
    ``activity`` as ``audit_activity`` returns it by day, ``[(day start, action, count)]``: at
    most ``bars`` bars, each of whole days, so a bar stays wide enough to see in a cell."""
    days = [datetime.fromtimestamp(ts, timezone.utc).date() for ts, _, _ in activity]
    first, last = min(days), max(days)
    span = (last - first).days + 1
    width = -(-span // bars)
    series: dict[str, list[int]] = {}
    for day, (_, action, count) in zip(days, activity):
        series.setdefault(action_word(str(action)), [0] * -(-span // width))[(day - first).days // width] += int(count)
    return first, last, width, series
