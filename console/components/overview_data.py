"""What the overview counts, through the signed-in operator's view (SPEC 10: counts over what
the clearance sees, the rest one total), cached per store state, clearance and minute
(``st.cache_data``).

Each cached function takes the view as ``_view`` (not part of the cache key) and the clearance
as ``clearance_key`` (part of it), so two operators of different clearances never share an entry.

The console's prewarm (console/cli.py) runs before anyone signs in, so it has no clearance to
key a page entry by: it counts the whole audit log into the engine's own per-process counters
(``Membrane.metrics``: entries by action), which the overview of a clearance that sees every
record then reads, instead of filling page entries nobody could be shown."""

from __future__ import annotations

from datetime import datetime
import streamlit as st

from membrane_engine import Membrane, OperatorView


def minute_of(when: datetime) -> datetime:
    """"Now" is keyed by the minute, so an idle page is not counted again on every rerun."""
    return when.replace(second=0, microsecond=0)


def store_key(view: OperatorView) -> tuple[str, int]:
    """The store and its change counter (``OperatorView.state``): any write gives the cached
    numbers a new key."""
    return view.state()


@st.cache_data(show_spinner=False, max_entries=64)
def metrics(_view: OperatorView, url: str, seq: int, clearance_key: tuple, key_iso: str, now: bool) -> dict:
    # Keyed by the minute but computed at the moment itself: an entry written seconds ago is
    # counted (the change counter refreshes the key on every write).
    return _view.metrics(None if now else datetime.fromisoformat(key_iso))


@st.cache_data(show_spinner=False, max_entries=64)
def breakdown(_view: OperatorView, url: str, seq: int, clearance_key: tuple, key_iso: str, now: bool) -> dict:
    return _view.store_breakdown(None if now else datetime.fromisoformat(key_iso))


@st.cache_data(show_spinner=False, max_entries=64)
def activity(_view: OperatorView, url: str, seq: int, clearance_key: tuple, audit_total: int, key_iso: str,
             now: bool) -> list[tuple[float, str, int]]:
    # Keyed by the audit total as well, so any new entry refreshes it; entries up to the instant.
    return _view.audit_activity(86400.0, until=None if now else datetime.fromisoformat(key_iso))


@st.cache_data(show_spinner=False, max_entries=8)
def sample_loaded(_view: OperatorView, url: str) -> float | None:
    return _view.sample_loaded_at()


def count_now(m: Membrane) -> None:
    """As the server starts: the whole audit log counted by action into the engine's counters
    (kept current per process from then on), which the first overview reads."""
    m.metrics()


__all__ = ["minute_of", "store_key", "metrics", "breakdown", "activity", "sample_loaded", "count_now"]
