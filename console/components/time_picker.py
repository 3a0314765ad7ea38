"""The console's one time picker, and how an instant is written in a page's URL.

Every instant a page asks for (the overview's, the explorer's, the simulator's and the graph's
"as of", the selector's, the decay window's start, the prune preview's instant, a record's
history at any instant) is one date-and-time field read as UTC, to the minute:

- ``instant_picker(key, label, now_if_empty=True)``: may be left empty, meaning now (None);
- ``instant_picker(key, label, default=..., now_if_empty=False)``: always an instant, starting
  at ``default``.

A page restores a picker from its URL with ``set_instant`` before drawing it, and writes it back
with ``to_param``; ``from_param`` reads the parameter (``Param.AS_OF``) and says what is wrong
with a bad one. The audit log's "since" and "until" filter by whole days: ``day_picker``.
"""

from __future__ import annotations

from datetime import datetime, time, timezone

import streamlit as st

from membrane_engine import format_time, parse_time

UTC = timezone.utc
STEP = 60  # seconds between the times the field's list offers (any minute can be typed)
DATE_FORMAT = "YYYY-MM-DD"  # ISO 8601, as the URL and every table write an instant


def _naive_utc(value: datetime) -> datetime:
    """What the widget holds: the instant in UTC without its zone (the field shows no zone)."""
    return value.astimezone(UTC).replace(tzinfo=None)


def to_minute(value: datetime) -> datetime:
    """``value`` without its seconds: what the field can show."""
    return value.replace(second=0, microsecond=0)


def set_instant(key: str, value: datetime | None) -> None:
    """Put ``value`` (None: empty, now) into picker ``key`` before it is drawn: a page restoring
    its state from the URL."""
    st.session_state[key] = _naive_utc(value) if value is not None else None


def instant_picker(key: str, label: str = "As of", *, default: datetime | None = None, now_if_empty: bool = True,
                   help: str | None = None, disabled: bool = False) -> datetime | None:
    """The instant picked, as an aware UTC datetime; None when the field is left empty (only
    with ``now_if_empty``). ``default`` fills the field the first time it is drawn in a session
    (a picker that cannot be empty starts at it, to the minute)."""
    if key not in st.session_state:
        set_instant(key, default if now_if_empty or default is None else to_minute(default))
    if now_if_empty:
        help = ((help or "") + " Leave empty for now.").strip()
    value = st.datetime_input(f"{label} (UTC)", key=key, format=DATE_FORMAT, step=STEP, help=help,
                              required=not now_if_empty, disabled=disabled)
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def day_picker(key: str, label: str, *, until: bool = False) -> datetime | None:
    """A whole day in UTC, or None (left empty): its first instant, or with ``until`` its last."""
    day = st.date_input(f"{label} (UTC)", value=None, key=key, format=DATE_FORMAT)
    if day is None:
        return None
    return datetime.combine(day, time.max if until else time.min, tzinfo=UTC)


def to_param(value: datetime) -> str:
    """An instant as a URL parameter: ISO 8601 in UTC ("2026-11-20T12:00:00Z")."""
    return format_time(value.astimezone(UTC))


def from_param(name: str, text: str) -> tuple[datetime | None, str | None]:
    """The instant of URL parameter ``name`` (None when empty), or None and what is wrong with it."""
    if not text:
        return None, None
    try:
        return parse_time(text), None
    except ValueError:
        return None, f"{name} {text!r} is not an ISO 8601 time"


__all__ = ["UTC", "instant_picker", "set_instant", "day_picker", "to_param", "from_param", "to_minute"]
