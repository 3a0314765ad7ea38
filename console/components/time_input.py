"""An "as of" instant picker: empty means now; the value is taken as UTC."""

from __future__ import annotations

from datetime import datetime, timezone

import streamlit as st


def as_of_input(key: str, default: datetime | None = None, label: str = "As of (UTC)",
                help: str | None = None) -> datetime | None:
    """A datetime widget; returns an aware UTC datetime, or None for "now" (left empty).
    ``default`` fills it the first time it is drawn in a session."""
    if key not in st.session_state:
        st.session_state[key] = default.astimezone(timezone.utc).replace(tzinfo=None) if default else None
    value = st.datetime_input(label, key=key, format="YYYY-MM-DD", step=60,
                              help=(help or "") + " Leave empty for now.")
    if value is None:
        return None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
