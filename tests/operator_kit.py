"""Signed-in test sessions (SPEC 10): every console page stops when nobody is signed in, so page
tests put an operator into the session state the way console/auth.py keeps one.

``signed(at)`` signs an AppTest session in as ``ROOT`` (admin, hyper, every scope: sees what the
pages showed before operators existed); ``signed(at, operator)`` as anyone else.
"""

from __future__ import annotations

from datetime import datetime, timezone

from membrane_engine.operators import Operator, Role

ROOT = Operator(name="root", role=Role.ADMIN, max_sensitivity="hyper")
FAR_FUTURE = datetime(2999, 1, 1, tzinfo=timezone.utc)


def operator(name: str, max_sensitivity: str, scopes=(), role: Role | str = Role.VIEWER) -> Operator:
    return Operator(name=name, role=Role(role), max_sensitivity=max_sensitivity, scopes=list(scopes))


def signed(at, who: Operator = ROOT):
    """``at`` (an AppTest, before or between runs) with ``who`` signed in; returns ``at``."""
    from console import auth

    at.session_state[auth.SESSION_KEY] = auth.Session(who, FAR_FUTURE)
    return at
