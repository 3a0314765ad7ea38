"""The signed-in operator on every page, and their clearance (SPEC 10).

Rule for page authors: a page's first call is ``signed_in()``; it stops the page with a message
when nobody is signed in. Every read of records then goes through the engine with
``operator.clearance`` (``clearance=`` arguments, ``Membrane.view``): the engine does the gating,
a page never decides what a clearance may see.
"""

from __future__ import annotations

import streamlit as st

from console import auth
from membrane_engine.operators import Operator
from membrane_engine.trust import TrustContext

from .safe import md


def signed_in() -> Operator:
    """The signed-in operator; without one the page says so and stops."""
    operator = auth.current()
    if operator is None:
        st.info("Sign in to use the console: every page shows records through the signed-in operator's "
                "clearance.", icon=":material/lock:")
        st.stop()
    return operator  # type: ignore[return-value]


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
