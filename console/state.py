"""The console's one engine (a cached Membrane per store URL) and per-session operator state."""

from __future__ import annotations

import argparse
import os
import sys

import streamlit as st

from membrane_engine import Membrane
from membrane_engine.errors import MembraneError, StoreUnavailableError
from membrane_engine.store import default_url


def store_url() -> str:
    """`--db URL` after `streamlit run console/app.py --`, else MEMBRANE_DB_URL, else the default file."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--db")
    known, _ = parser.parse_known_args(sys.argv[1:])
    return known.db or os.environ.get("MEMBRANE_DB_URL") or ""


@st.cache_resource(show_spinner="Opening the memory store…")
def _open(url: str) -> Membrane:
    return Membrane.open(url or None)


def membrane() -> Membrane:
    """The shared Membrane. Stops the page with a clear message if the store cannot be opened."""
    url = store_url()
    try:
        return _open(url)
    except StoreUnavailableError as exc:
        st.error(f"The memory store cannot be opened: {exc}")
        st.stop()
    except MembraneError as exc:
        st.error(f"The memory store cannot be opened: {exc}")
        st.stop()
    raise AssertionError("unreachable")


def display_url() -> str:
    url = store_url() or default_url()
    try:
        return membrane().url
    except Exception:  # shown in the sidebar only; the page itself reports the real error
        return url


OPERATOR_KEY = "operator_name"


def operator() -> str:
    """The operator's name for this session (asked once, kept for the session)."""
    return st.session_state.get(OPERATOR_KEY, "")
