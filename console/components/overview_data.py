"""What the overview counts, cached per store state and minute (``st.cache_data``): one place for
the page and for the console's prewarm, which fills it while the server starts, so the first
page after a start finds its numbers counted (about 0.35 s of the engine's work at 1M).

Each function takes the engine as ``_m`` (not part of the cache key: the store's URL and change
counter are) rather than asking ``state.membrane()``, which reads the store URL from the command
line: the prewarm runs while Streamlit rewrites it."""

from __future__ import annotations

from datetime import datetime

import streamlit as st

from membrane_engine import Membrane
from membrane_engine.lookups import audit_activity, sample_loaded_at
from membrane_engine.metrics import store_breakdown


def store_key(m: Membrane) -> tuple[str, int]:
    """The store and its change counter: any write gives the cached numbers a new key."""
    return m.url, m.columns.current().seq


def minute_of(when: datetime) -> datetime:
    """"Now" is keyed by the minute, so an idle page is not counted again on every rerun."""
    return when.replace(second=0, microsecond=0)


@st.cache_data(show_spinner=False, max_entries=64)
def metrics(_m: Membrane, url: str, seq: int, key_iso: str, now: bool) -> dict:
    # Keyed by the minute but computed at the moment itself: an entry written seconds ago is
    # counted (the change counter refreshes the key on every write).
    return _m.metrics(as_of=None if now else datetime.fromisoformat(key_iso))


@st.cache_data(show_spinner=False, max_entries=64)
def breakdown(_m: Membrane, url: str, seq: int, key_iso: str, now: bool) -> dict:
    return store_breakdown(_m.columns.current(), _m.now() if now else datetime.fromisoformat(key_iso))


@st.cache_data(show_spinner=False, max_entries=64)
def activity(_m: Membrane, url: str, seq: int, audit_total: int, key_iso: str, now: bool
             ) -> list[tuple[float, str, int]]:
    # Keyed by the audit total as well, so any new entry refreshes it; entries up to the instant.
    return audit_activity(_m, bucket_seconds=86400.0,
                          until=None if now else datetime.fromisoformat(key_iso))


@st.cache_data(show_spinner=False, max_entries=8)
def sample_loaded(_m: Membrane, url: str) -> float | None:
    return sample_loaded_at(_m)


def count_now(m: Membrane) -> None:
    """Fill the caches for the overview as it opens (no instant chosen), this minute."""
    url, seq = store_key(m)
    key = minute_of(m.now()).isoformat()
    total = metrics(m, url, seq, key, True)["total_audit_entries"]
    breakdown(m, url, seq, key, True)
    activity(m, url, seq, total, key, True)
    sample_loaded(m, url)
