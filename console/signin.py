"""The three sign-in modes, apart from Streamlit's pages (the web routes, the command line and
the page gate share them):

- local accounts (default): a name and a password checked against the store's scrypt hash;
- OpenID Connect through ``st.login`` when secrets have an ``[auth]`` section: the identity
  provider's e-mail is matched to an operator's e-mail (role and clearance still from the store);
- a trusted reverse proxy's header, only when MEMBRANE_TRUSTED_PROXY_HEADER names it.

A browser session is a random token in an HttpOnly cookie; the store keeps its hash and expiry,
so signing out, a changed password, role or clearance, or a removed operator ends it at once.
"""

from __future__ import annotations

import logging
import os
import threading

from membrane_engine.operator_store import FIRST_RUN, SESSION, Operators
from membrane_engine.operators import Operator

COOKIE = "membrane_session"
SESSION_HOURS_ENV = "MEMBRANE_SESSION_HOURS"
DEFAULT_SESSION_HOURS = 12.0
PROXY_HEADER_ENV = "MEMBRANE_TRUSTED_PROXY_HEADER"
FIRST_RUN_TTL = 3600.0  # a first-run link works once, within the hour after it was printed


def session_ttl() -> float:
    """Seconds a browser session lasts (MEMBRANE_SESSION_HOURS, default 12 hours)."""
    raw = os.environ.get(SESSION_HOURS_ENV, "")
    try:
        hours = float(raw) if raw else DEFAULT_SESSION_HOURS
    except ValueError:
        raise ValueError(f"{SESSION_HOURS_ENV} must be a number of hours (got {raw!r})") from None
    if not 0 < hours <= 24 * 30:
        raise ValueError(f"{SESSION_HOURS_ENV} must be between 0 and 720 hours (got {raw!r})")
    return hours * 3600.0


def proxy_header() -> str | None:
    """The header a trusted reverse proxy puts the operator's name or e-mail in, if switched on."""
    name = os.environ.get(PROXY_HEADER_ENV, "").strip()
    return name or None


def oidc_configured() -> bool:
    """Is an ``[auth]`` section configured in Streamlit's secrets (st.login available)?"""
    try:
        import streamlit as st

        return "auth" in st.secrets
    except Exception:  # no secrets file at all
        return False


def _quiet_outside_scripts() -> None:
    # The store is opened through the console's cached engine from web routes too, which run no
    # script; Streamlit would warn about that once per call.
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(
        lambda record: not threading.current_thread().name.startswith(("AnyIO", "asyncio", "ThreadPool")))


_quiet_outside_scripts()


def operators() -> Operators:
    from console import state

    return state._open(state.store_url()).operators


def check_password(name: str, password: str) -> Operator | None:
    return operators().verify_password(name, password)


def open_session(name: str) -> tuple[str, float]:
    """A new browser session for ``name``: (token for the cookie, seconds it lasts)."""
    ttl = session_ttl()
    return operators().issue_token(name, SESSION, ttl), ttl


def redeem_first_run(token: str) -> Operator | None:
    return operators().redeem(token, FIRST_RUN)


def session_operator(token: str | None) -> tuple[Operator, float] | None:
    return operators().session(token) if token else None


def match_identity(ops: Operators, identity: str | None) -> Operator | None:
    """The operator an outside identity (an OpenID Connect e-mail, a proxy's user header) names:
    by e-mail, else (proxy headers often carry a user name) by operator name. Unknown: None."""
    if not isinstance(identity, str) or not identity.strip():
        return None
    identity = identity.strip()
    found = ops.by_email(identity)
    if found is None and "@" not in identity:
        try:
            found = ops.get(identity)
        except Exception:  # NotFoundError, or a name the store refuses
            return None
    return found
