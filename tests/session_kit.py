"""Signed-in console sessions for AppTest (SPEC 10): put an operator in a script's session as
console/app.py's gate leaves it after a sign-in. tests/conftest.py signs every AppTest in as
``TEST_ADMIN``; a test that needs someone else calls ``sign_in(at, operator_or_None)``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from membrane_engine.operators import Operator, Role

TEST_ADMIN = Operator(name="test-admin", role=Role.ADMIN, max_sensitivity="hyper")


def sign_in(at, operator: Operator | None, hours: float = 1.0):
    """Put ``operator`` (None: nobody) in AppTest ``at``'s session; ``hours`` until it expires."""
    from console import auth

    if operator is None:
        at.session_state[auth.SESSION_KEY] = None
    else:
        at.session_state[auth.SESSION_KEY] = auth.Session(operator, datetime.now(timezone.utc) + timedelta(hours=hours))
    return at
