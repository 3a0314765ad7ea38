"""The console's one engine (a cached Membrane per store URL). Who is signed in: console/auth.py."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from urllib.parse import urlencode, urlparse

import streamlit as st

from sqlalchemy.engine import make_url

from membrane_engine import Membrane
from membrane_engine.errors import MembraneError
from membrane_engine import default_url

from console import keys
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


# Script runs of this server process, for the console's prewarm: it loads what only ranked pages
# need once the first page is drawn, not against it (at a million records, loaded beside that
# page, it took half of the server's CPU and kept the browser from drawing).
FIRST_RUN_DONE = threading.Event()  # a script run (a page or the sign-in page) has finished
_last_run_end = 0.0  # time.monotonic() when the last one finished


def script_ran() -> None:
    global _last_run_end
    _last_run_end = time.monotonic()
    FIRST_RUN_DONE.set()


def wait_until_quiet(quiet: float, timeout: float) -> bool:
    """Until a page has been drawn and no script run has finished for ``quiet`` seconds (the
    browser drawing what the last run sent), or ``timeout`` seconds in all; whether it got quiet."""
    deadline = time.monotonic() + timeout
    if not FIRST_RUN_DONE.wait(timeout):
        return False
    while (left := quiet - (time.monotonic() - _last_run_end)) > 0:
        if time.monotonic() + left > deadline:
            return False
        time.sleep(min(left, 0.25))
    return True


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



# --------------------------------------------------------------------------- page state in the URL
# Each page keeps its state in its URL (st.query_params), so a link, a reload and the browser's
# Back / Forward bring it back; the simulated trust context is one for the whole session, shared
# by the simulator, what-if (context A) and the selector.

TRUST_FIELDS = keys.TRUST_FIELDS
_SHARED_TRUST = keys.SHARED_TRUST
_LAST = keys.PageQuery.LAST


def trust_widgets(key: str) -> tuple[str, ...]:
    """The widget keys of the trust context form ``key`` (for page_query's ``widgets``)."""
    return tuple(f"{key}_{field}" for field in (*TRUST_FIELDS, "preset"))


def shared_trust_query(prefix: str = "") -> dict[str, str]:
    """The session's trust context as URL parameters under ``prefix`` (empty before any page set one)."""
    return {prefix + k: v for k, v in (st.session_state.get(_SHARED_TRUST) or {}).items()}


def share_trust(query: dict[str, str], prefix: str = "") -> None:
    """Make the trust context in ``query`` (its fields under ``prefix``) the session's."""
    values = {k: query[prefix + k] for k in TRUST_FIELDS if prefix + k in query}
    if values:
        st.session_state[_SHARED_TRUST] = values


_ARRIVED_AT = keys.PageQuery.ARRIVED_AT
_HELD = keys.PageQuery.HELD
_BARE_STATE = keys.PageQuery.BARE_STATE
_RUNNING = keys.PageQuery.RUNNING
_WIDGETS = keys.PageQuery.WIDGETS
_LEFT = keys.PageQuery.LEFT
_CAME_FROM = keys.PageQuery.CAME_FROM


def _widget_values(page: str) -> dict:
    prefixes = st.session_state.get(_WIDGETS + page) or ()
    return {k: st.session_state[k] for k in list(st.session_state.keys()) if k.startswith(prefixes)}


def page_query(page: str, trust_prefix: str | None = "", widgets: tuple[str, ...] = ()) -> dict[str, str] | None:
    """What ``page`` should fill its widgets from on this run, or None when they already hold
    its state. A URL with parameters (a link, a reload, Back / Forward) gives them; a bare
    address (the navigation) gives the page as it was last left. Either way, when the URL names
    no trust context the session's shared one is used (under ``trust_prefix``; None: the page
    has none).

    ``widgets`` are the key prefixes of the page's widgets. A run in which one of them changed
    is the operator's: the widgets win over the URL, which may still be the one from before the
    previous change (the browser applies a rewritten address after it has sent the next rerun),
    and Back / Forward, which change the URL, change no widget."""
    url = st.query_params.to_dict()
    previous = st.session_state.get(_RUNNING)
    arrived = previous != page  # from another page (its widgets are gone)
    st.session_state[_CAME_FROM + page] = previous if arrived else None
    st.session_state[_RUNNING] = page
    st.session_state[_WIDGETS + page] = tuple(widgets)
    last = st.session_state.get(_LAST + page)
    if not arrived and widgets and _widget_values(page) != st.session_state.get(_LEFT + page):
        return None
    if not arrived and ((last is not None and url == last) or url == st.session_state.get(_ARRIVED_AT + page)):
        return None
    # The address the page was restored from stays as it is until the operator changes
    # something: rewritten at once, it would add a browser history entry, and Back would land
    # on the same page.
    st.session_state[_ARRIVED_AT + page] = url
    st.session_state[_HELD + page] = "pending"
    if url:
        seed = dict(url)
    elif not arrived and st.session_state.get(_BARE_STATE + page) is not None:
        return dict(st.session_state[_BARE_STATE + page])  # Back to the bare address: as it showed then
    else:
        seed = dict(last or {})
    if trust_prefix is not None and not any(trust_prefix + k in url for k in TRUST_FIELDS):
        seed.update(shared_trust_query(trust_prefix))
    if not url:
        st.session_state[_BARE_STATE + page] = dict(seed)
    return seed


def keep_page_query(page: str, query: dict[str, str], trust_prefix: str | None = "") -> None:
    """Write ``page``'s state into its URL once it differs from the state the page was restored
    to (each change a new browser history entry), and share its trust context (under
    ``trust_prefix``) with the other pages."""
    st.session_state[_LAST + page] = dict(query)
    st.session_state[_LEFT + page] = _widget_values(page)
    if trust_prefix is not None:
        share_trust(query, trust_prefix)
    held = st.session_state.get(_HELD + page)
    if held == "pending":  # the state the page was just restored to
        st.session_state[_HELD + page] = dict(query)
        # The URL holds the page's whole state at all times, so a reload or a copied link brings
        # it back: also after the sidebar's navigation (a bare address) or a partial link.
        if st.query_params.to_dict() != query:
            if st.session_state.get(_CAME_FROM + page):
                _address_after_navigation(query)
            else:
                st.query_params.from_dict(query)
        return
    if held != query:
        st.session_state[_HELD + page] = None
        st.session_state[_ARRIVED_AT + page] = None
    if st.query_params.to_dict() != query:
        st.query_params.from_dict(query)


_REPLACE_ADDRESS = """<script>(() => {
  const path = %s, query = %s;
  let tries = 0;
  const write = () => {
    if (location.pathname === path) {
      if (location.search !== query) history.replaceState(history.state, "", path + query);
    } else if (++tries < 200) setTimeout(write, 50);
  };
  write();
})();</script>"""


def _address_after_navigation(query: dict[str, str]) -> None:
    """Put ``query`` into the address of a page the sidebar has just opened, in place.

    Streamlit's own write (st.query_params) would be filed under the previous page's path: the
    browser moves to the new path only once the run has finished, and that write comes during
    the run; a second history entry with the previous page's path and this page's state would
    follow. So the browser replaces the new page's bare address itself once it has moved there
    (one history entry, as before), and the next run's st.query_params finds it already there."""
    # The page's own address as the browser asked for it (the run's context), not yet its location.
    path = urlparse(st.context.url or "").path or "/"
    search = "?" + urlencode(query) if query else ""
    def js(value: str) -> str:  # a JS string literal that cannot end the script element
        return json.dumps(value).replace("</", "<\\/")

    st.html(_REPLACE_ADDRESS % (js(path), js(search)), unsafe_allow_javascript=True, width="content")


def ignored_parameter(name: str, value: str, expected: str) -> str:
    """The warning for a link parameter a page does not use: ``name``, ``value`` and what it takes."""
    return f"ignored link parameter {name}={value!r}: expected {expected}"


def unknown_parameters(query: dict[str, str], known: tuple[str, ...] | set[str]) -> list[str]:
    """Warnings for the parameters of ``query`` that the page has no use for."""
    return [f"ignored link parameter {k}={v!r}: not a parameter of this page" for k, v in query.items()
            if k not in known]
