"""Picking an instant (date + time, UTC) in a page."""

from __future__ import annotations

from datetime import datetime, time, timezone

import streamlit as st

UTC = timezone.utc


def instant_input(label: str, key: str, default: datetime, help: str | None = None) -> datetime:
    """A date above a time, read as UTC; returns an aware datetime. (Side by side, in a page's
    form column, the date was cut at 1024 px.)"""
    default = default.astimezone(UTC)
    if f"{key}_date" not in st.session_state:
        st.session_state[f"{key}_date"] = default.date()
        st.session_state[f"{key}_time"] = default.time().replace(second=0, microsecond=0, tzinfo=None)
    day = st.date_input(f"{label} (UTC date)", key=f"{key}_date", help=help)
    moment = st.time_input(f"{label} (UTC time)", key=f"{key}_time", step=900)
    return datetime.combine(day, moment or time(0, 0), tzinfo=UTC)


def human_duration(seconds: float) -> str:
    """'3 d 4 h', '45 min', 'now' style durations (negative values read as 'ago')."""
    sign = "" if seconds >= 0 else "-"
    s = abs(float(seconds))
    if s < 60:
        return "now" if s < 1 else f"{sign}{s:.0f} s"
    minutes = s / 60
    if minutes < 60:
        return f"{sign}{minutes:.0f} min"
    hours = minutes / 60
    if hours < 48:
        return f"{sign}{int(hours)} h {int(minutes % 60)} min"
    days = hours / 24
    if days < 365:
        return f"{sign}{int(days)} d {int(hours % 24)} h"
    return f"{sign}{days / 365.25:.1f} years"


def relative(seconds: float) -> str:
    """'in 3 d 4 h' for the future, '2 h 5 min ago' for the past."""
    if abs(seconds) < 1:
        return "now"
    text = human_duration(abs(seconds))
    return f"in {text}" if seconds > 0 else f"{text} ago"
