"""Every AppTest of the console starts signed in (SPEC 10): an admin with full clearance in the
session, as app.py's gate would leave it. A test that needs someone else sets
``at.session_state[auth.SESSION_KEY] = auth.Session(operator, expires)`` itself (``sign_in``)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from streamlit.testing.v1 import AppTest

from console import auth
from membrane_engine.operators import Operator, Role

ADMIN = Operator(name="test-admin", role=Role.ADMIN, max_sensitivity="hyper")


def sign_in(at: AppTest, operator: Operator | None, hours: float = 1.0) -> AppTest:
    """Put ``operator`` (None: nobody) in ``at``'s session, as a sign-in would."""
    if operator is None:
        at.session_state[auth.SESSION_KEY] = None
    else:
        at.session_state[auth.SESSION_KEY] = auth.Session(
            operator, datetime.now(timezone.utc) + timedelta(hours=hours))
    return at


@pytest.fixture(autouse=True)
def signed_in_as_admin(monkeypatch: pytest.MonkeyPatch):
    made = AppTest.from_file.__func__

    def from_file(cls, *args, **kwargs):
        return sign_in(made(cls, *args, **kwargs), ADMIN)

    monkeypatch.setattr(AppTest, "from_file", classmethod(from_file))
