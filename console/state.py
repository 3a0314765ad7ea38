"""The console's one engine (a cached Membrane per store URL). Who is signed in: console/auth.py."""

from __future__ import annotations

import argparse
import os
import sys

import streamlit as st

from sqlalchemy.engine import make_url

from membrane_engine import Membrane
from membrane_engine.errors import MembraneError
from membrane_engine.storage.store import default_url

from console.components.guard import show_error


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
    """The shared Membrane. Stops the page with a clear message if the store cannot be opened
    (locked, read-only, gone, unreachable, refused: the engine's StoreUnavailableError text)."""
    url = store_url()
    try:
        return _open(url)
    except MembraneError as exc:
        show_error(exc, "The memory store cannot be opened")
        st.stop()
    raise AssertionError("unreachable")


def _without_password(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL at all: show it as given (there is no password to hide)
        return url


def display_url() -> str:
    """The store's URL for the sidebar (password hidden). Never reports an error itself: the
    page, which calls membrane(), shows it where the operator is looking."""
    url = store_url() or default_url()
    try:
        return _open(store_url()).url
    except MembraneError:
        return _without_password(url)

