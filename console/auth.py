"""Who is signed in to this console session (SPEC 10).

The session's operator lives in server-side session state only (never sent to the browser).
Pages ask ``current()``; writes ask ``authorize(action)`` at the moment of writing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import streamlit as st

from membrane_engine.operators import Operator, permits

SESSION_KEY = "_membrane_signed_in"


@dataclass(frozen=True)
class Session:
    operator: Operator
    expires_at: datetime


def sign_in_session(operator: Operator, expires_at: datetime) -> None:
    st.session_state[SESSION_KEY] = Session(operator, expires_at)


def sign_out_session() -> None:
    st.session_state.pop(SESSION_KEY, None)


def current() -> Operator | None:
    """The signed-in operator, or None (never signed in, signed out, or the session expired)."""
    session = st.session_state.get(SESSION_KEY)
    if not isinstance(session, Session):
        return None
    if session.expires_at <= datetime.now(timezone.utc):
        sign_out_session()
        return None
    return session.operator


def authorize(action: str) -> Operator:
    """The signed-in operator if they may do ``action``; else the page stops with the reason."""
    operator = current()
    allowed, reason = permits(operator, action)
    if not allowed:
        st.error(f"Not allowed: {reason}.")
        st.stop()
    return operator  # type: ignore[return-value]
