"""The signed-in operator on every page, and their clearance (SPEC 10).

Rule for page authors: a page's first call is ``page_preamble`` (components/page.py), which
calls ``operator_view`` here; it stops the page with a message when nobody is signed in. Every
read and write of records then goes through that view (``Membrane.as_operator``): the engine
does the gating and the role checks, a page never decides what a clearance may see, and never
holds the ``Membrane`` itself.
"""

from __future__ import annotations

import streamlit as st

from console import auth, state
from membrane_engine import Operator, OperatorView, TrustContext
from membrane_engine.errors import NotFoundError

from .safe import md


def signed_in() -> Operator:
    """The signed-in operator; without one the page says so and stops."""
    operator = auth.current()
    if operator is None:
        st.info("Sign in to use the console: every page shows records through the signed-in operator's "
                "clearance.", icon=":material/lock:")
        st.stop()
    return operator  # type: ignore[return-value]


def operator_view(page: str) -> OperatorView:
    """The engine's view for the signed-in operator (SPEC 10, "One door"): every read and write
    of the page goes through it, and the engine holds it to the operator's role and clearance as
    stored at each call. ``page`` names the page in the access log ("page:NAME")."""
    operator = signed_in()
    try:
        return state.membrane().as_operator(operator.name, via=f"page:{page}")
    except NotFoundError:  # removed since the session began
        st.info("Your operator account no longer exists: sign in again.", icon=":material/lock:")
        st.stop()
    raise AssertionError("unreachable")


def key_of(clearance: TrustContext) -> tuple[str, tuple[str, ...]]:
    """A clearance as a cache key (a tuple; rebuilt with ``from_key``)."""
    return clearance.max_sensitivity.value, tuple(clearance.scopes)


def from_key(key: tuple[str, tuple[str, ...]]) -> TrustContext:
    return TrustContext(max_sensitivity=key[0], scopes=list(key[1]), authenticated=True)


def describe(clearance: TrustContext) -> str:
    """The clearance in words (Markdown-escaped), for captions."""
    scopes = ", ".join(md(s, 60) for s in clearance.scopes) if clearance.scopes else "every scope"
    return f"max sensitivity **{clearance.max_sensitivity.value}**, {scopes}"


def clearance_caption(operator: Operator) -> None:
    st.caption(f"Shown through your clearance ({describe(operator.clearance)}): records above it are redacted "
               "(metadata only) or absent.")


__all__ = ["signed_in", "key_of", "from_key", "describe", "clearance_caption"]
