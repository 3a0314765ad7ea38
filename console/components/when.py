"""Durations in words ("3 d 4 h", "in 2 h 5 min"). Picking an instant: components/time_picker.py."""

from __future__ import annotations


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
